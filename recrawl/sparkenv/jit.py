"""How much the driver JVM compiles, and its collector: a short-lived driver of a small crawl
stops at the quick compiler; any other driver of a small crawl uses the throughput collector.

A `crawler` step (an Airflow task) on a small crawl lives for tens of seconds, and HotSpot's
optimizing compiler (C2) spends much of that compiling planner code the driver will not run
long enough to pay back. `-XX:TieredStopAtLevel=1` keeps only the quick compiler (C1), and the
serial collector spares a small heap the parallel collector's threads. benchmarks/jvm_start.py
measures both side by side (docs/design-choices.md has the figures). A session that lives for
many minutes (the demo, a benchmark, the test suite's) earns C2's code back, and in local mode
the driver JVM also runs every task, so "auto" chooses quick only for a short-lived process (one
`crawler` verb: the caller says so) on a crawl known to be small, by the threshold code
generation uses (`spark.codegen_min_mb`). A crawl home the driver cannot size before its JVM
starts (s3a://) keeps the full compiler.

The collector: a driver of a small crawl with the full compiler (a session of many minutes: the
warm driver, the demo, a test session) runs the parallel collector instead of the JVM's default
G1. Its work is throughput, not pause times -- Spark's task binaries and Delta's log replays
allocate gigabytes a minute -- and over a 3-round crawl in one session the parallel collector
cut the driver's CPU time by 11 % (docs/design-choices.md). A crawl past the size threshold, or
one that cannot be sized, keeps G1, whose pauses stay short on the multi-GB heaps of large
rounds (docs/scale.md's runs were measured with it).
"""

from __future__ import annotations

import os
from pathlib import Path

from recrawl.config import Config, ConfigError, local_path

MODES = ("auto", "quick", "full")
QUICK = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
THROUGHPUT = "-XX:+UseParallelGC"
# An operator's own choice of compiler level or collector wins over ours.
_OWN = ("TieredStopAtLevel", "TieredCompilation", "UseSerialGC", "UseParallelGC", "UseG1GC",
        "UseZGC", "UseShenandoahGC", "UseEpsilonGC")


def mode(cfg: Config) -> str:
    value = str(cfg.get("spark.driver_jit")).lower()
    if value not in MODES:
        raise ConfigError(f"spark.driver_jit must be one of {', '.join(MODES)}, got {value!r}")
    return value


def local_bytes(location: str) -> int | None:
    """Bytes of the files under a local `location` (every Delta version still on disk; 0 when
    nothing is there yet, as in a new crawl home); None when it is remote (cannot be sized
    without a JVM)."""
    root = local_path(location)
    if root is None:
        return None
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += (Path(folder) / name).stat().st_size
            except OSError:  # a file vacuumed while we walk
                pass
    return total


def quick(cfg: Config, short_lived: bool) -> bool:
    """Whether this driver should stop at the quick compiler (`spark.driver_jit`);
    `short_lived`: the process is one `crawler` verb, not a session of many minutes."""
    value = mode(cfg)
    if value != "auto":
        return value == "quick"
    return short_lived and small(cfg)


def small(cfg: Config) -> bool:
    """Is the crawl known to be small: a local crawldb under `spark.codegen_min_mb`?"""
    size = local_bytes(cfg.table_path("crawldb"))
    return size is not None and size < cfg.get("spark.codegen_min_mb") * 2**20


def with_jit(options: str, cfg: Config, short_lived: bool) -> str:
    """`options` (the driver's configured JVM options) plus the quick compiler's, when chosen,
    or else the throughput collector for a small crawl -- unless the operator has set a
    compiler level or a collector there."""
    if any(flag in options for flag in _OWN):
        return options
    if quick(cfg, short_lived):
        return f"{options} {QUICK}".strip()
    if small(cfg):
        return f"{options} {THROUGHPUT}".strip()
    return options

"""inject: normalize seed URLs and MERGE the new ones into crawldb (unfetched, depth 0).

Like Nutch's Injector, re-injecting a known URL changes nothing: only URLs absent from crawldb
are inserted, and when there are none no commit is made at all.
"""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import dataclass, field
from pathlib import Path

from recrawl.config import Config
from recrawl.content.urlnorm import NormalizeRules, host_key, try_normalize
from recrawl.rules.crawldb_rules import new_url_values
from recrawl.rules.rounds import BadInput
from recrawl.store.crawldb import insert_new
from recrawl.store.schemas import CRAWLDB
from recrawl.store.tables import conform, naive_utc, read
from spark_jobs.common import norm_rules


@dataclass
class SeedFile:
    urls: list[str] = field(default_factory=list)
    invalid: list[tuple[int, str, str]] = field(default_factory=list)  # (line no, text, reason)
    lines: int = 0


def read_seeds(path: str | Path, rules: NormalizeRules) -> SeedFile:
    """Parse a seed file: one URL per line, `#` comments and blank lines allowed."""
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"seed file {p} not found")
    out, seen = SeedFile(), set()
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            out.lines += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                out.invalid.append((lineno, raw[:80].decode("utf-8", "replace"), "not UTF-8"))
                continue
            line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
            if not line:
                continue
            # Nutch seed lines may carry tab-separated metadata after the URL.
            url_text = line.split("\t", 1)[0].strip()
            url, reason = try_normalize(url_text, rules=rules)
            if url is None:
                out.invalid.append((lineno, url_text[:200], reason or "invalid"))
            elif url not in seen:
                seen.add(url)
                out.urls.append(url)
    return out


MAX_REPORTED = 20


def check_seeds(seeds: SeedFile, path: str | Path) -> None:
    """A file with lines but not one valid URL is the wrong file, not a seed list: refuse it."""
    if seeds.invalid and not seeds.urls:
        lineno, text, reason = seeds.invalid[0]
        raise BadInput(
            f"seed file {path} has no valid URL ({len(seeds.invalid)} lines rejected; line "
            f"{lineno} {text[:60]!r}: {reason}); expected one http(s) URL per line, "
            "# comments allowed"
        )


def run(spark, cfg: Config, seeds_path: str, logical: dt.datetime) -> dict[str, int]:
    seeds = read_seeds(seeds_path, norm_rules(cfg))
    check_seeds(seeds, seeds_path)
    for lineno, text, reason in seeds.invalid[:MAX_REPORTED]:
        print(f"inject: {seeds_path}:{lineno}: skipped {text!r}: {reason}", file=sys.stderr)
    if len(seeds.invalid) > MAX_REPORTED:
        print(f"inject: {seeds_path}: ... and {len(seeds.invalid) - MAX_REPORTED} more lines "
              "skipped", file=sys.stderr)
    now = naive_utc(logical)
    new_values = new_url_values(float(cfg.get("schedule.default_interval_days")))
    rows = [
        {"url": u, "host": host_key(u), "depth": 0, "discovered_at": now, "next_fetch_time": now,
         **new_values}
        for u in seeds.urls
    ]
    counts = {"lines": seeds.lines, "valid": len(seeds.urls), "invalid": len(seeds.invalid)}
    if not rows:
        counts["new"] = 0
        return counts
    src = conform(spark.createDataFrame(rows, schema=_input_schema(CRAWLDB)), "crawldb")
    existing = read(spark, cfg, "crawldb").select("url")
    new = src.join(existing, "url", "left_anti").cache()
    counts["new"] = new.count()
    counts["known"] = len(rows) - counts["new"]
    if counts["new"]:
        insert_new(spark, cfg, new)
    new.unpersist()
    return counts


def _input_schema(full):
    from pyspark.sql.types import StructType  # lazy: pyspark

    names = ("url", "host", "depth", "discovered_at", "next_fetch_time", *new_url_values(1.0))
    return StructType([f for f in full.fields if f.name in names])

"""The driver JVM's compiler level (recrawl/sparkenv/jit.py): quick for a small crawl under "auto"."""

from __future__ import annotations

import pytest

from recrawl.config import ConfigError, load_config
from recrawl.sparkenv import jit


def _cfg(home, **extra):
    return load_config(environ={}).with_overrides({"crawl.home": str(home), **extra})


def _crawldb_of(home, size: int) -> None:
    part = home / "tables" / "crawldb" / "part-0.parquet"
    part.parent.mkdir(parents=True)
    with open(part, "wb") as f:
        f.truncate(size)  # sparse: the apparent size is what a listing reports


def test_auto_is_quick_for_a_short_lived_driver_of_a_small_crawl_only(tmp_path):
    assert jit.quick(_cfg(tmp_path / "new"), short_lived=True)  # no crawldb yet
    small, big = tmp_path / "small", tmp_path / "big"
    _crawldb_of(small, 2**20 - 1)
    _crawldb_of(big, 2**20)
    assert jit.quick(_cfg(small, **{"spark.codegen_min_mb": 1}), short_lived=True)
    assert not jit.quick(_cfg(big, **{"spark.codegen_min_mb": 1}), short_lived=True)
    # a session of many minutes (demo, benchmark, tests) earns the optimizing compiler back
    assert not jit.quick(_cfg(small, **{"spark.codegen_min_mb": 1}), short_lived=False)
    assert jit.local_bytes(f"file://{big}/tables/crawldb") == 2**20


def test_a_home_that_cannot_be_sized_keeps_the_full_compiler_unless_told(tmp_path):
    assert jit.local_bytes("s3a://bucket/crawl/tables/crawldb") is None
    assert not jit.quick(_cfg("s3a://bucket/crawl"), short_lived=True)
    assert jit.quick(_cfg("s3a://bucket/crawl", **{"spark.driver_jit": "quick"}), short_lived=False)
    assert not jit.quick(_cfg(tmp_path, **{"spark.driver_jit": "full"}), short_lived=True)


def test_the_operators_own_compiler_or_collector_wins(tmp_path):
    cfg = _cfg(tmp_path / "new")
    assert jit.with_jit("", cfg, True) == jit.QUICK
    cds = "-XX:SharedArchiveFile=/a.jsa -Xshare:auto"
    assert jit.with_jit(cds, cfg, True) == f"{cds} {jit.QUICK}"
    for own in ("-XX:+UseG1GC", "-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation"):
        assert jit.with_jit(own, cfg, True) == own
    # a long session or the full compiler: the throughput collector while the crawl is small
    assert jit.with_jit(cds, cfg, False) == f"{cds} {jit.THROUGHPUT}"
    full = _cfg(tmp_path / "new", **{"spark.driver_jit": "full"})
    assert jit.with_jit(cds, full, True) == f"{cds} {jit.THROUGHPUT}"
    assert jit.with_jit("-XX:+UseG1GC", full, False) == "-XX:+UseG1GC"


def test_a_big_crawl_or_one_that_cannot_be_sized_keeps_the_default_collector(tmp_path):
    big = tmp_path / "big"
    _crawldb_of(big, 2**20)
    assert jit.with_jit("", _cfg(big, **{"spark.codegen_min_mb": 1}), False) == ""
    assert jit.with_jit("", _cfg("s3a://bucket/crawl"), False) == ""
    assert jit.with_jit("", _cfg("s3a://bucket/crawl"), True) == ""


def test_a_bad_setting_is_refused_before_a_jvm_starts(tmp_path):
    from recrawl.sparkenv.spark import check_environment

    with pytest.raises(ConfigError, match="driver_jit"):
        check_environment(_cfg(tmp_path, **{"spark.driver_jit": "fast"}))

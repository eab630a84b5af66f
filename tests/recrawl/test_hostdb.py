"""The hosts table's owner: each step writes its own columns, a new host gets the defaults, on
both MERGE writers (delta-rs for a small round on a local home, Spark's otherwise)."""

from __future__ import annotations

import datetime as dt

import pytest

from recrawl.store.hostdb import flag_traps, record_counts, record_fetch, set_ranks
from recrawl.store.tables import init_tables, read
from tests.recrawl.test_tables import WRITERS
from tests.recrawl.test_tables import _last_writer as last_writer

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 11, 2, 3, 4, 5, 123456)


def _last_writer(cfg) -> str:
    return last_writer(cfg, "hosts")


def _hosts(spark, cfg) -> dict[str, dict]:
    return {r["host"]: r.asDict() for r in read(spark, cfg, "hosts").collect()}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_each_step_writes_its_own_columns(spark, cfg, writer):
    cfg = cfg.with_overrides({"crawl.small_round_rows": WRITERS[writer]})
    init_tables(spark, cfg)
    fetch_rows = spark.createDataFrame(
        [("a", "10.0.0.1", None, 0, T0), ("b", None, T0 + dt.timedelta(hours=1), 3, T0)],
        "host string, ip string, backoff_until timestamp, consecutive_failures int, "
        "updated_at timestamp")
    record_fetch(spark, cfg, fetch_rows)
    assert _last_writer(cfg) == writer
    got = _hosts(spark, cfg)
    # a host first seen by fetch gets the counters' defaults
    assert got["a"]["pages_known"] == 0 and got["a"]["pages_fetched"] == 0
    assert got["a"]["trap"] is False and got["a"]["ip"] == "10.0.0.1"
    assert got["b"]["backoff_until"] == T0 + dt.timedelta(hours=1)
    assert got["b"]["consecutive_failures"] == 3

    flag_traps(spark, cfg, spark.createDataFrame(
        [("b", True, "near-duplicate flood")], "host string, trap boolean, trap_reason string"))
    stats = spark.createDataFrame(
        [("a", 5, 2, True, "page cap", T0), ("b", 7, 7, False, None, T0),
         ("c", 1, 0, False, None, T0)],
        "host string, pages_known long, pages_fetched long, trap boolean, trap_reason string, "
        "updated_at timestamp")
    record_counts(spark, cfg, stats)
    got = _hosts(spark, cfg)
    # counters replaced; fetch's columns untouched; dedup's trap flag and reason kept
    assert (got["a"]["pages_known"], got["a"]["pages_fetched"]) == (5, 2)
    assert got["a"]["ip"] == "10.0.0.1" and got["a"]["trap"] is True
    assert got["b"]["trap"] is True and got["b"]["trap_reason"] == "near-duplicate flood"
    assert got["b"]["consecutive_failures"] == 3
    assert got["c"]["consecutive_failures"] == 0 and got["c"]["ip"] is None

    set_ranks(spark, cfg, spark.createDataFrame(
        [("a", 0.6, "a", 2, "a", 1), ("d", 0.4, "a", 2, "d", 1)],
        "host string, host_rank double, component_root string, component_hosts long, "
        "scc_root string, scc_hosts long"))
    got = _hosts(spark, cfg)
    assert got["a"]["host_rank"] == 0.6 and got["a"]["pages_known"] == 5
    assert got["d"]["component_root"] == "a" and got["d"]["pages_known"] is None
    assert sorted(got) == ["a", "b", "c", "d"]
    assert _last_writer(cfg) == writer


def test_both_writers_leave_the_same_table(spark, tmp_path):
    from tests.conftest import make_config

    tables = {}
    for writer, cap in WRITERS.items():
        cfg = make_config(tmp_path / writer, **{"crawl.small_round_rows": cap})
        init_tables(spark, cfg)
        for day in range(3):  # updates of rows both writers inserted, day after day
            rows = spark.createDataFrame(
                [(f"h{i}", f"10.0.0.{i}", T0 + dt.timedelta(days=day), day + i, T0)
                 for i in range(day, day + 4)],
                "host string, ip string, backoff_until timestamp, consecutive_failures int, "
                "updated_at timestamp")
            record_fetch(spark, cfg, rows)
        assert _last_writer(cfg) == writer
        tables[writer] = read(spark, cfg, "hosts")
    a, b = tables["delta-rs"], tables["spark"]
    assert a.count() == 6
    assert a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0

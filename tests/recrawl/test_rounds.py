"""The `rounds` row a round's steps keep (recrawl.rounds.record_step)."""

import datetime as dt

import pytest

from recrawl.rounds import record_step
from recrawl.tables import init_tables, read

pytestmark = pytest.mark.spark

DAY = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def _row(spark, cfg, rid):
    rows = read(spark, cfg, "rounds").where(f"round_id = '{rid}'").collect()
    assert len(rows) == 1
    return rows[0]


def test_steps_add_their_counts_and_a_rerun_replaces_its_own(spark, cfg):
    init_tables(spark, cfg)
    record_step(spark, cfg, "r1", DAY, "generate", {"urls": 5, "hosts": 2})
    first = _row(spark, cfg, "r1")
    assert first.counts == {"generate.urls": 5, "generate.hosts": 2}
    assert first.steps_done == ["generate"] and first.finished_at is None
    assert first.logical_date == DAY.date() and first.started_at is not None

    record_step(spark, cfg, "r1", DAY, "fetch", {"fetched": 4})
    record_step(spark, cfg, "r1", DAY, "generate", {"urls": 7})  # a re-run: its counts replaced
    row = _row(spark, cfg, "r1")
    assert row.counts == {"generate.urls": 7, "fetch.fetched": 4}
    assert row.steps_done == ["fetch", "generate"]
    assert row.started_at == first.started_at and row.finished_at is None

    before = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    record_step(spark, cfg, "r1", DAY, "updatedb", {})  # no counts; it finishes the round
    row = _row(spark, cfg, "r1")
    assert row.counts == {"generate.urls": 7, "fetch.fetched": 4}
    assert row.steps_done == ["fetch", "generate", "updatedb"]
    # Spark hands timestamps to Python as naive local time; the tests run with TZ unset (UTC)
    assert row.finished_at >= before - dt.timedelta(seconds=1)


def test_a_round_whose_first_step_has_no_counts_and_other_rounds_untouched(spark, cfg):
    init_tables(spark, cfg)
    record_step(spark, cfg, "r1", DAY, "generate", {"urls": 1})
    record_step(spark, cfg, "r2", DAY + dt.timedelta(days=1), "generate", {})
    record_step(spark, cfg, "r2", DAY + dt.timedelta(days=1), "fetch", {"odd'key\\": 3})
    assert _row(spark, cfg, "r2").counts == {"fetch.odd'key\\": 3}
    assert _row(spark, cfg, "r1").counts == {"generate.urls": 1}
    record_step(spark, cfg, "r3", DAY, "generate", {})
    record_step(spark, cfg, "r3", DAY, "generate", {})  # an UPDATE to an empty map
    assert _row(spark, cfg, "r3").counts == {} and _row(spark, cfg, "r3").steps_done == ["generate"]
    assert read(spark, cfg, "rounds").count() == 3

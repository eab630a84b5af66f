"""The `rounds` row a round's steps keep (recrawl.store.roundsdb.record_step), written by both of
its writers: delta-rs on a local crawl home, Spark on object storage (forced here on a local
folder)."""

import datetime as dt
from pathlib import Path

import pytest

from recrawl.rules.rounds import StepRun, step_row
from recrawl.store import tables
from recrawl.store.roundsdb import record_step
from recrawl.store.tables import init_tables, read

DAY = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
NOW = dt.datetime(2026, 12, 5, 6, 0, tzinfo=dt.UTC)


@pytest.fixture(params=["delta-rs", "spark"])
def writer(request, monkeypatch):
    if request.param == "spark":  # what an s3a:// home uses
        monkeypatch.setattr(tables, "local_rows_supported", lambda cfg: False)
    return request.param


def test_step_row_rules():
    first = step_row(None, "r1", DAY, "generate", {"urls": 5}, NOW)
    assert first == {"round_id": "r1", "logical_date": DAY.date(), "started_at": NOW,
                     "finished_at": None, "counts": {"generate.urls": 5}, "steps_done": ["generate"],
                     "step_started_at": {}, "step_seconds": {}, "step_cpu_seconds": {},
                     "gates": {}, "failed_gate": None}
    later = NOW + dt.timedelta(minutes=5)
    # counts as delta-rs returns a map: (key, value) pairs
    prev = {**first, "counts": [("generate.urls", 5), ("fetch.x", 1)], "steps_done": ["generate", "fetch"]}
    again = step_row(prev, "r1", DAY + dt.timedelta(days=3), "generate", {"urls": 7}, later)
    assert again["counts"] == {"fetch.x": 1, "generate.urls": 7}
    assert again["steps_done"] == ["fetch", "generate"]
    assert again["started_at"] == NOW and again["finished_at"] is None
    assert again["logical_date"] == DAY.date()  # the row's own date is kept
    done = step_row(again, "r1", DAY, "schedule", {}, later)
    assert done["finished_at"] == later and done["counts"] == again["counts"]


def test_step_row_keeps_each_steps_timing_and_a_failed_gate_until_the_step_passes():
    gen = StepRun(NOW, 12.5, 3.25)
    row = step_row(None, "r1", DAY, "generate", {"urls": 5}, NOW, gen)
    assert row["step_started_at"] == {"generate": NOW} and row["step_seconds"] == {"generate": 12.5}
    assert row["step_cpu_seconds"] == {"generate": 3.25} and row["failed_gate"] is None
    later = NOW + dt.timedelta(minutes=1)
    bad = StepRun(later, 30.0, 1.0, {"politeness": "ok", "no_pages": "no page fetched"}, "no_pages")
    row = step_row(row, "r1", DAY, "fetch", {"urls": 3}, later, bad)
    # the failed step is not done (a re-run runs it again), its timing and gates are kept
    assert row["steps_done"] == ["generate"] and row["failed_gate"] == "fetch.no_pages"
    assert row["gates"] == {"fetch.politeness": "ok", "fetch.no_pages": "no page fetched"}
    assert row["step_seconds"] == {"generate": 12.5, "fetch": 30.0}
    # another step's run keeps the failure; the step passing on a re-run clears it
    row = step_row(row, "r1", DAY, "generate", {"urls": 5}, later, gen)
    assert row["failed_gate"] == "fetch.no_pages"
    good = StepRun(later, 20.0, 1.0, {"politeness": "ok", "no_pages": "ok"})
    row = step_row(row, "r1", DAY, "fetch", {"urls": 3}, later, good)
    assert row["failed_gate"] is None and row["steps_done"] == ["generate", "fetch"]
    assert row["gates"] == {"fetch.politeness": "ok", "fetch.no_pages": "ok"}
    assert row["step_seconds"]["fetch"] == 20.0
    # a finishing step whose gate failed does not finish the round
    failed = StepRun(later, 1.0, 1.0, {"round.pages_parsed": "none parsed"}, "round.pages_parsed")
    row = step_row(row, "r1", DAY, "schedule", {}, later, failed)
    assert row["finished_at"] is None and row["failed_gate"] == "schedule.round.pages_parsed"


def _row(spark, cfg, rid):
    rows = read(spark, cfg, "rounds").where(f"round_id = '{rid}'").collect()
    assert len(rows) == 1
    return rows[0]


@pytest.mark.spark
def test_steps_add_their_counts_and_a_rerun_replaces_its_own(spark, cfg, writer):
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

    run = StepRun(NOW, 2.5, 0.75, {"politeness": "ok", "no_pages": "no page fetched"}, "no_pages")
    written = record_step(spark, cfg, "r1", DAY, "fetch", {"fetched": 0}, run)
    row = _row(spark, cfg, "r1")
    assert written["failed_gate"] == row.failed_gate == "fetch.no_pages"
    assert row.steps_done == ["generate"] and row.step_seconds == {"fetch": 2.5}
    assert row.step_cpu_seconds == {"fetch": 0.75}
    assert row.gates == {"fetch.politeness": "ok", "fetch.no_pages": "no page fetched"}
    assert row.step_started_at["fetch"] == NOW.replace(tzinfo=None)
    record_step(spark, cfg, "r1", DAY, "fetch", {"fetched": 4}, StepRun(NOW, 3.0, 1.0, {}))
    row = _row(spark, cfg, "r1")
    assert row.failed_gate is None and row.steps_done == ["generate", "fetch"]

    before = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    record_step(spark, cfg, "r1", DAY, "updatedb", {})  # no counts; it finishes the round
    row = _row(spark, cfg, "r1")
    assert row.counts == {"generate.urls": 7, "fetch.fetched": 4}
    assert row.steps_done == ["generate", "fetch", "updatedb"]
    # Spark hands timestamps to Python as naive local time; the tests run with TZ unset (UTC)
    assert row.finished_at >= before - dt.timedelta(seconds=1)


@pytest.mark.spark
def test_a_round_whose_first_step_has_no_counts_and_other_rounds_untouched(spark, cfg, writer):
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


@pytest.mark.spark
def test_delta_rs_commits_are_the_tables_own_and_checkpointed(spark, cfg):
    # Spark reads what delta-rs wrote, history included, and its log replay stays short:
    # every 10th version gets a checkpoint, as Spark's own commits would
    init_tables(spark, cfg)
    for i in range(12):
        record_step(spark, cfg, f"r{i % 3}", DAY, "fetch", {"n": i})
    rows = {r.round_id: r.counts for r in read(spark, cfg, "rounds").collect()}
    assert rows == {"r0": {"fetch.n": 9}, "r1": {"fetch.n": 10}, "r2": {"fetch.n": 11}}
    history = spark.sql(f"DESCRIBE HISTORY delta.`{cfg.table_path('rounds')}`").collect()
    assert history[0]["version"] == 12 and "delta-rs" in (history[0]["engineInfo"] or "")
    log = Path(cfg.table_path("rounds"), "_delta_log")
    assert (log / "00000000000000000010.checkpoint.parquet").exists()

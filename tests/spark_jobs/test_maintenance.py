"""The job behind the maintenance DAG (`crawler maintenance`): WARC retention, OPTIMIZE, VACUUM."""

from __future__ import annotations

import datetime as dt

import pytest

from spark_jobs.maintenance import expired_rounds


def test_expired_rounds_are_known_rounds_older_than_the_cutoff():
    dates = {"20261001": dt.date(2026, 10, 1), "20261101": dt.date(2026, 11, 1)}
    expired, unknown = expired_rounds(["20261101", "20261001", "prio"], dates, dt.date(2026, 11, 1))
    assert expired == ["20261001"]  # the cutoff day itself is kept
    assert unknown == ["prio"]


def test_unsafe_retentions_are_refused_before_touching_anything():
    from recrawl.rules.rounds import BadInput
    from spark_jobs import maintenance

    when = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    with pytest.raises(BadInput, match="168"):
        maintenance.run(None, None, when, retain_hours=24)
    with pytest.raises(BadInput, match="at least 1 day"):
        maintenance.run(None, None, when, warc_retention_days=0)
    with pytest.raises(BadInput, match="unknown maintenance step"):
        maintenance.run(None, None, when, steps=("defrag",))


@pytest.mark.spark
def test_old_rounds_lose_their_warcs_and_rows_are_flagged_first(spark, tmp_path):
    from pyspark.sql import Row

    from app.demo import demo_config
    from recrawl.store.roundsdb import record_step
    from recrawl.store.tables import init_tables, read, replace_round
    from spark_jobs import maintenance

    cfg = demo_config(tmp_path / "home", **{"spark.shuffle_partitions": 2})
    init_tables(spark, cfg)
    for rid, day in (("20261001", dt.datetime(2026, 10, 1, tzinfo=dt.UTC)),
                     ("20261120", dt.datetime(2026, 11, 20, tzinfo=dt.UTC))):
        record_step(spark, cfg, rid, day, "fetch", {"fetched": 1})
        warc = tmp_path / "home" / "warc" / rid / f"{rid}-p0.warc.gz"
        warc.parent.mkdir(parents=True)
        warc.write_bytes(b"x")
        row = Row(round_id=rid, url=f"http://a.sim.test/{rid}", warc_file=str(warc), warc_offset=0,
                  warc_length=1, fetch_status="fetched")
        replace_round(spark.createDataFrame([row]), cfg, "fetches", rid)
        cap = Row(round_id=rid, url=row.url, fetch_date=day.date(), warc_filename=str(warc),
                  warc_record_offset=0, warc_record_length=1)
        replace_round(spark.createDataFrame([cap]), cfg, "captures", rid)
    (tmp_path / "home" / "warc" / "manual").mkdir()

    when = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    counts = maintenance.run(spark, cfg, when, warc_retention_days=30, tables=("crawldb", "fetches"))
    assert counts["warc.rounds_deleted"] == 1 and counts["warc.files_deleted"] == 1
    # the old round's fetches row and its captures (URL index) row
    assert counts["warc.rows_flagged"] == 2 and counts["warc.unknown_folders"] == 1
    assert counts["optimize.tables"] == 2 and counts["vacuum.tables"] == 2
    assert sorted(p.name for p in (tmp_path / "home" / "warc").iterdir()) == ["20261120", "manual"]
    rows = {r["round_id"]: r for r in read(spark, cfg, "fetches").collect()}
    assert rows["20261001"]["warc_file"] is None and rows["20261001"]["warc_offset"] is None
    assert rows["20261120"]["warc_file"].endswith("20261120-p0.warc.gz")
    caps = {r["round_id"]: r for r in read(spark, cfg, "captures").collect()}
    assert caps["20261001"]["warc_filename"] is None and caps["20261001"]["warc_record_length"] is None
    assert caps["20261120"]["warc_filename"] == rows["20261120"]["warc_file"]
    # idempotent: nothing left to delete or flag
    again = maintenance.run(spark, cfg, when, steps=("warc",), warc_retention_days=30)
    assert again["warc.rounds_deleted"] == 0 and again["warc.rows_flagged"] == 0

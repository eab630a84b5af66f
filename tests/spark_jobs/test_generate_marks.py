"""generate's marks: the URLs of rounds that are out (generated, not applied by updatedb, started
after the expiry), read from `rounds` by delta-rs on a local home and by Spark elsewhere."""

from __future__ import annotations

import datetime as dt

import pytest

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("reader", ["delta-rs", "spark"])
def test_live_marks_are_the_open_rounds_urls_on_both_readers(spark, cfg, monkeypatch, reader):
    import recrawl.store.tables as tables
    from recrawl.store.tables import init_tables, replace_round, replace_rows
    from spark_jobs.generate import live_marks

    init_tables(spark, cfg)
    now = dt.datetime.now(dt.UTC)
    rounds = {  # round: (started, steps done)
        "stale": (now - dt.timedelta(days=10), ["generate"]),  # out, but past the expiry
        "open": (now - dt.timedelta(hours=1), ["generate", "fetch"]),
        "applied": (now - dt.timedelta(hours=1), ["generate", "fetch", "updatedb"]),
        "unstarted": (None, ["generate"]),
        "current": (now, ["generate"]),  # the round being generated: its own URLs are free
    }
    for rid, (started, steps) in rounds.items():
        replace_rows(cfg, "rounds", "round_id", rid,
                     [{"round_id": rid, "started_at": started, "steps_done": steps}])
        rows = [(rid, f"http://h/{rid}/{i}", "h", 0) for i in range(2)]
        replace_round(spark.createDataFrame(rows, "round_id string, url string, host string, "
                                            "partition int"), cfg, "fetch_list", rid)
    if reader == "spark":
        monkeypatch.setattr(tables, "local_rows_supported", lambda _cfg: False)
    expiry = tables.naive_utc(now - dt.timedelta(days=7))
    marks = live_marks(spark, cfg, "current", expiry)
    assert sorted(r.url for r in marks.collect()) == ["http://h/open/0", "http://h/open/1"]
    # nothing out: no marks at all
    assert live_marks(spark, cfg, "open", tables.naive_utc(now + dt.timedelta(days=1))) is None

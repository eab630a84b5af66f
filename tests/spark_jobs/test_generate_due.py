"""generate's due rule: next_fetch_time before the round's logical time plus the lookahead."""

from __future__ import annotations

import datetime as dt

import pytest

from recrawl.config import ConfigError

pytestmark = pytest.mark.spark

LOGICAL = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
NOW = LOGICAL.replace(tzinfo=None)
DAY = 86400
# hours from the round's logical time to each page's next_fetch_time
OFFSETS_H = (-30, -1, 0, 6, 11, 13, 20, 48)


def _crawl(spark, cfg):
    from recrawl.store.schemas import CRAWLDB
    from recrawl.store.tables import conform, init_tables

    rows = [{
        "url": f"http://h{i % 3}.test/p{h:+d}", "host": f"http://h{i % 3}.test", "status": "fetched",
        "depth": 0, "last_fetch_time": NOW - dt.timedelta(days=1),
        "next_fetch_time": NOW + dt.timedelta(hours=h), "fetch_interval_s": DAY, "fetch_count": 1,
    } for i, h in enumerate(OFFSETS_H)]
    init_tables(spark, cfg)
    conform(spark.createDataFrame(rows, CRAWLDB), "crawldb").write.format("delta").mode(
        "append").save(cfg.table_path("crawldb"))


@pytest.mark.parametrize(("lookahead", "due_h"), [
    (0.0, (-30, -1, 0)),              # Nutch's rule: due at or before the logical time
    (0.5, (-30, -1, 0, 6, 11)),       # the default: rounded to the nearest daily round
    (0.25, (-30, -1, 0, 6)),
])
def test_due_within_the_lookahead(spark, cfg, lookahead, due_h):
    from spark_jobs import generate

    cfg = cfg.with_overrides({"generate.due_lookahead_days": lookahead})
    _crawl(spark, cfg)
    counts = generate.run(spark, cfg, "20260301", LOGICAL)
    urls = {r["url"].rsplit("/p", 1)[1] for r in spark.read.format("delta")
            .load(cfg.table_path("fetch_list")).where("round_id = '20260301'").collect()}
    assert urls == {f"{h:+d}" for h in due_h}
    assert counts["generated"] == len(due_h)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 3.0])
def test_lookahead_outside_a_period_is_refused(spark, cfg, bad):
    from spark_jobs import generate

    cfg = cfg.with_overrides({"generate.due_lookahead_days": bad})
    with pytest.raises(ConfigError, match="due_lookahead_days"):
        generate.run(spark, cfg, "20260301", LOGICAL)

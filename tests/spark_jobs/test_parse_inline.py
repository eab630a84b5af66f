"""The two parse paths on the simulated web, hostile hosts included: one fetch with
`parse.inline` stages its pages and the parse step commits them without reading a WARC; the
parse step run again reads every response back from the WARCs. pages, links and what follows
from them (duplicates, crawldb after updatedb) are equal URL by URL. The pure function both
paths call: tests/recrawl/test_pagerows.py."""

from __future__ import annotations

import datetime as dt

import pytest

from app.demo import demo_config
from recrawl.content.urlnorm import host_key_or_none
from recrawl.rules.rounds import parse_date, round_id_for

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

TABLES = {"pages": ("url",), "links": ("src_url", "dst_url"), "duplicates": ("url",),
          "crawldb": ("url",)}
# crawldb's columns updatedb sets from the wall clock, not from the parse
VOLATILE = {"updated_at"}


def _snapshot(spark, cfg, rid):
    from recrawl.store.tables import read

    out = {}
    for table, key in TABLES.items():
        df = read(spark, cfg, table)
        if "round_id" in df.columns and table != "crawldb":
            df = df.where(f"round_id = '{rid}'")
        out[table] = {tuple(r[k] for k in key): {c: v for c, v in r.asDict(recursive=True).items()
                                                 if c not in VOLATILE}
                      for r in df.collect()}
    return out


def test_inline_and_separate_parse_give_equal_tables(spark, tmp_path):
    from app.cli import run_step
    from recrawl.store.tables import init_tables
    from simweb import SimWeb
    from spark_jobs import inject
    from spark_jobs.fetch import fs_exists
    from spark_jobs.parse import inline_dir

    with SimWeb(seed=3, n_sites=3, pages_per_site=12) as web:
        cfg = demo_config(tmp_path / "home", **{
            "fetcher.time_budget_s": 20.0, "fetcher.min_delay_s": 0.1,
            "generate.max_per_host": 12, "spark.shuffle_partitions": 2,
            "progress.interval_s": 0.0,
        })
        assert cfg.get("parse.inline") is True  # the default path
        init_tables(spark, cfg)
        seeds = tmp_path / "seeds.txt"
        urls = web.seed_urls()  # the hostile hosts' home pages too
        urls += [u for h in web.hosts() if h.startswith("site") for u in web.truth.pages(h)]
        seeds.write_text("\n".join(urls) + "\n")
        start = parse_date("2026-11-01")
        inject.run(spark, cfg, str(seeds), start)
        logical = start + dt.timedelta(days=0)
        rid = round_id_for(cfg, logical)
        run_step(spark, cfg, "generate", rid, logical)
        fetched = run_step(spark, cfg, "fetch", rid, logical)
        assert fetched["pages_inline"] > 20
        assert fs_exists(spark, inline_dir(cfg, rid))
        before = run_step(spark, cfg, "parse", rid, logical)
        # every page came from the fetch: none was read back from a WARC
        assert before["parsed_inline"] == before["pages"] == fetched["pages_inline"]
        assert not fs_exists(spark, inline_dir(cfg, rid))
        for step in ("dedup", "updatedb"):
            run_step(spark, cfg, step, rid, logical)
        inline = _snapshot(spark, cfg, rid)

        after = run_step(spark, cfg, "parse", rid, logical)  # from the WARCs, as a re-parse
        assert after["parsed_inline"] == 0 and after["pages"] == before["pages"]
        for step in ("dedup", "updatedb"):
            run_step(spark, cfg, step, rid, logical)
        separate = _snapshot(spark, cfg, rid)

    assert len(inline["pages"]) > 20 and len(inline["links"]) > 50
    # each link's host keys, carried from the parse, are its URLs' host_key
    for (src, dst), row in inline["links"].items():
        assert (row["src_host"], row["dst_host"]) == (host_key_or_none(src), host_key_or_none(dst))
    for table in TABLES:
        assert set(inline[table]) == set(separate[table]), table
        differ = [k for k in inline[table] if inline[table][k] != separate[table][k]]
        assert differ == [], (table, differ[:3])

"""The signals step over a real simulated web whose sites publish honest, lying and no dates:
sources found and read politely with conditional GETs, each URL's newest date kept in crawldb,
signalled changes fetched in the round that follows, every revisit checked against its host's
signals, and a re-run that reads nothing."""

from __future__ import annotations

import datetime as dt

import pytest

from app.demo import demo_config
from recrawl.rules.rounds import STEPS, parse_date, round_id_for

pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]

START = "2026-11-01"
ROUNDS = 4


@pytest.fixture(scope="module")
def crawl(spark, tmp_path_factory):
    from app.cli import run_step
    from recrawl.store.tables import init_tables
    from simweb import SimWeb
    from simweb.response import EPOCH
    from spark_jobs import inject

    home = tmp_path_factory.mktemp("signals")
    # seed 1: of 5 sites 2 accurate, 1 none, 1 always today, 1 never updated; 2 with feeds
    web = SimWeb(seed=1, n_sites=5, pages_per_site=8, rates="web", signals="mixed", feeds=0.4)
    web.start()
    cfg = demo_config(home, **{
        "fetcher.time_budget_s": 25.0, "fetcher.min_delay_s": 0.25, "generate.top_n": 30,
        "schedule.daily_budget": 30, "spark.shuffle_partitions": 2,
    })
    init_tables(spark, cfg)
    seeds = home / "seeds.txt"
    seeds.write_text("\n".join(f"{web.base(s.name)}/" for s in web.world.sites) + "\n")
    start = parse_date(START)
    offset = (start - EPOCH).days  # simweb's dates on the crawl's logical clock
    inject.run(spark, cfg, str(seeds), start)
    rounds = []
    for i in range(ROUNDS):
        logical = start + dt.timedelta(days=i)
        web.set_day(offset + i)
        rid = round_id_for(cfg, logical)
        rounds.append((rid, logical, {s: run_step(spark, cfg, s, rid, logical) for s in STEPS}))
    yield {"cfg": cfg, "web": web, "rounds": rounds, "offset": offset}
    web.stop()


def _rows(spark, cfg, table, where="true"):
    from recrawl.store.tables import read

    return [r.asDict(recursive=True) for r in read(spark, cfg, table).where(where).collect()]


def test_sources_are_found_and_read_with_conditional_gets(spark, crawl):
    cfg, web = crawl["cfg"], crawl["web"]
    sources = {r["source_url"]: r for r in _rows(spark, cfg, "signal_sources")}
    sitemaps = {f"{web.base(s.name)}/sitemap.xml" for s in web.world.sites}
    feeds = {web.truth.feed_url(s.name) for s in web.world.sites if s.has_feed}
    assert set(sources) == sitemaps | feeds and feeds  # feeds found by parse's <link rel>
    assert {sources[u]["kind"] for u in feeds} == {"feed"}
    # the never-updated site's sitemap does not change: its later reads are 304s
    frozen = next(s.name for s in web.world.sites if s.signal_kind == "frozen")
    assert sources[f"{web.base(frozen)}/sitemap.xml"]["http_status"] == 304
    log = [e for e in web.request_log() if e["path"] in ("/sitemap.xml", "/feed.xml")]
    assert any(e["status"] == 304 for e in log)
    # a sitemap without dates is read seldom (signals.undated_read_interval_days)
    none = next(s.name for s in web.world.sites if s.signal_kind == "none")
    undated = sources[f"{web.base(none)}/sitemap.xml"]
    assert undated["dated_entries"] == 0 and undated["entries"] > 0
    assert undated["next_read_at"] - undated["read_at"] == dt.timedelta(days=7)
    # every round's reads counted in its budget
    for _, _, counts in crawl["rounds"]:
        reads = counts["signals"].get("requests", 0)
        assert counts["generate"]["signal_requests"] == reads
        assert counts["generate"]["generated"] + reads <= 30
        # untrusted hosts' sources: at most signals.max_read_share (0.1) of top_n a round
        sig = counts["signals"]
        assert sig["sources_read"] - sig["sources_read_trusted"] <= 3


def test_crawldb_keeps_each_urls_published_date(spark, crawl):
    cfg, web = crawl["cfg"], crawl["web"]
    rows = {r["url"]: r for r in _rows(spark, cfg, "crawldb", "signal_kind = 'sitemap'")}
    read_at = {r["source_url"]: r["read_at"] for r in _rows(spark, cfg, "signal_sources")}
    checked = 0
    for site in web.world.sites:
        if site.signal_kind not in ("accurate", "today"):
            continue
        # the date the sitemap gave when it was last read (reads are capped per round)
        read = read_at[f"{web.base(site.name)}/sitemap.xml"]
        day = crawl["offset"] + (read.date() - parse_date(START).date()).days
        for path in site.listed():
            url = web.truth.url(site.name, path)
            if url not in rows or site.has_feed:  # a feed's exact time may be newer
                continue
            want = web.truth.signal_date(url, day)
            assert rows[url]["signal_time"].date() == want.date(), url
            assert rows[url]["signal_precision_s"] == 86400
            checked += 1
    assert checked >= 5
    # a site's sitemap speaks for its own URLs only, and lists none of its private pages
    assert all(r["host"] in r["url"] for r in rows.values())


def test_signalled_changes_are_fetched_in_the_round_and_found_changed(spark, crawl):
    cfg, web = crawl["cfg"], crawl["web"]
    honest = {web.base(h) for h in web.truth.honest_signal_hosts()}
    chosen = _rows(spark, cfg, "fetch_list", "reason = 'signal'")
    assert chosen, "no URL was fetched for a change signal"
    fetched = {(r["round_id"], r["url"]): r for r in _rows(
        spark, cfg, "fetches", "fetch_status IN ('fetched', 'not_modified')")}
    on_honest = [r for r in chosen if r["host"] in honest]
    assert on_honest
    for r in on_honest:  # an honest signal: the page did change since our copy
        f = fetched[(r["round_id"], r["url"])]
        assert f["fetch_status"] == "fetched", r["url"]
        assert f["http_status"] == 200
    # a signal fetch follows a change published at the round's start: no day of lag
    offset, start = crawl["offset"], parse_date(START).date()
    for r in on_honest:
        day = offset + (dt.datetime.strptime(r["round_id"], "%Y%m%d").date() - start).days
        copy = offset + (r["last_fetch_time"].date() - start).days
        change = web.truth.next_change(r["url"], copy)
        assert copy < change <= day, (r["url"], copy, change, day)
    # a liar is never trusted
    kinds = {web.base(h): k for h, k in web.truth.signal_kinds().items()}
    trusted = {r["host"] for r in _rows(spark, cfg, "hosts", "signal_trusted")}
    assert not {h for h in trusted if kinds.get(h) in ("today", "frozen")}


def test_revisits_check_each_hosts_signals(spark, crawl):
    cfg, web = crawl["cfg"], crawl["web"]
    kinds = {web.base(h): k for h, k in web.truth.signal_kinds().items()}
    hosts = {r["host"]: r for r in _rows(spark, cfg, "hosts") if r["host"] in kinds}
    checks = sum(c["updatedb"].get("signal_tp", 0) + c["updatedb"].get("signal_fp", 0)
                 + c["updatedb"].get("signal_fn", 0) + c["updatedb"].get("signal_tn", 0)
                 for _, _, c in crawl["rounds"])
    assert checks > 0
    for host, r in hosts.items():
        assert r["signals_read_at"] is not None
        if kinds[host] == "today":  # signals every page, most did not change
            assert (r["signal_fp"] or 0) > (r["signal_tp"] or 0)
        if kinds[host] == "frozen":  # never signals: a change is always missed
            assert not r["signal_tp"] and not r["signal_defer"]
        if r["signal_precision"] is not None:
            tp, fp = r["signal_tp"], r["signal_fp"]
            assert r["signal_precision"] == pytest.approx((tp + 1) / (tp + fp + 2))
    # simweb's Last-Modified moves with every version; the SimHash rule calls a few per cent
    # of versions trivial, so agreement is high but not perfect, and every host is believed
    agree = sum(r["lm_agree"] or 0 for r in hosts.values())
    assert agree > 0 and agree >= 4 * sum(r["lm_disagree"] or 0 for r in hosts.values())
    assert all(r["lm_trusted"] is not False for r in hosts.values())


def test_last_modified_counts_start_with_the_first_fetch(spark, crawl):
    # recrawl.store.crawldb.lm_updates: the first fetch's Last-Modified is "a change at L, none
    # since" (one change and the copy's age); each revisit adds at most one change
    from email.utils import parsedate_to_datetime

    cfg = crawl["cfg"]
    fetches: dict[str, list[dict]] = {}
    for r in _rows(spark, cfg, "fetches", "fetch_status IN ('fetched', 'not_modified')"):
        fetches.setdefault(r["url"], []).append(r)
    pages = [r for r in _rows(spark, cfg, "crawldb", "status = 'fetched'")
             if r["lm_exposure_d"] is not None]
    assert pages
    once = 0
    for page in pages:
        seen = sorted(fetches[page["url"]], key=lambda r: r["round_id"])
        assert 1.0 <= page["lm_changes"] <= len(seen), page["url"]
        if len(seen) == 1:
            once += 1
            logical = dt.datetime.strptime(seen[0]["round_id"], "%Y%m%d")
            lm = parsedate_to_datetime(seen[0]["last_modified"]).replace(tzinfo=None)
            assert page["lm_changes"] == 1.0
            assert page["lm_exposure_d"] == pytest.approx((logical - lm).total_seconds() / 86400)
    assert once


def test_every_request_was_polite_and_allowed(crawl):
    from simweb.audit import politeness_violations, robots_violations

    web = crawl["web"]
    log = web.request_log()
    assert politeness_violations(log, 0.25, web.truth.crawl_delays()) == []
    assert robots_violations(log, web.truth) == []


def test_a_rerun_reads_nothing_and_changes_nothing(spark, crawl):
    from app.cli import run_step
    from recrawl.store.tables import read

    cfg, web = crawl["cfg"], crawl["web"]
    rid, logical, _ = crawl["rounds"][-1]
    before = read(spark, cfg, "crawldb").select("url", "signal_time").collect()
    requests = len(web.request_log())
    counts = run_step(spark, cfg, "signals", rid, logical)
    assert counts["sources_read"] == 0 and counts.get("requests", 0) == 0
    assert len(web.request_log()) == requests
    assert sorted(read(spark, cfg, "crawldb").select("url", "signal_time").collect()) == sorted(before)

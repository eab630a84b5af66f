"""The fetcher with the inline parse (`parse.inline`, recrawl.content.parsepool) on every host of the
simulated web, hostile ones included: politeness and robots hold as the server saw them, every
fetched response is parsed exactly once, and each page equals the one the parse step reads back
from the WARC at the row's offset."""

from __future__ import annotations

import pytest

from app.demo import demo_config
from fetcher import Fetcher
from recrawl.content.parsepool import ParsePool
from simweb import SimWeb, audit
from spark_jobs.parse import parse_options, parse_rows
from tests.fetcher.conftest import local_settings
from tests.fetcher.test_fetch_simweb import SETTINGS, urls_for


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inline")
    opts = parse_options(demo_config(tmp / "home"))
    with SimWeb(seed=42, n_sites=3, pages_per_site=6) as web:
        pool = ParsePool(opts, "r1", workers=2)
        try:
            out = Fetcher(local_settings(**SETTINGS), str(tmp / "warc"), "sim",
                          on_capture=pool.submit).run(urls_for(web))
            pages = pool.results()
        finally:
            pool.close()
        yield {"out": out, "pages": pages, "log": web.request_log(), "web": web, "opts": opts}


def test_parsing_alongside_keeps_politeness_and_robots(crawl):
    web = crawl["web"]
    delays = {h: min(d, 30.0) for h, d in web.truth.crawl_delays().items()}
    assert audit.politeness_violations(crawl["log"], SETTINGS["min_delay_s"], delays) == []
    assert audit.retry_after_violations(crawl["log"]) == []
    assert audit.robots_violations(crawl["log"], web.truth) == []


def test_every_fetched_response_is_parsed_once_as_from_the_warc(crawl):
    responses = [dict(r, round_id="r1") for r in crawl["out"].rows
                 if r["fetch_status"] == "fetched" and r.get("warc_type") == "response"]
    assert len(responses) > 20
    by_url = {p["url"]: p for p in crawl["pages"]}
    assert len(by_url) == len(crawl["pages"]) == len(responses)
    from_warc = {p["url"]: p for p in parse_rows(responses, crawl["opts"])}
    assert from_warc == by_url

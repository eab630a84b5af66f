"""The text extractor switch (parse.extractor), the CPU limit on extraction, the input the
extractors get, and the change rule across extractors. Small fixtures; no network, no Spark."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from recrawl.config import ConfigError, load_config
from recrawl.content import extract
from recrawl.content.cpu_limit import CpuLimitExceeded, cpu_limit
from recrawl.content.extract import EXTRACTORS, LABELS, strip_raw_text
from recrawl.content.parsing import parse_html
from recrawl.rules.crawldb_rules import meaningful_change

URL = "https://news.example/2024/05/city-budget"
PARAGRAPHS = "".join(
    f"<p>The city council approved the budget for the coming year in paragraph {i}, after a "
    "long debate about schools, roads and the new public library on the river bank.</p>"
    for i in range(8)
)
ARTICLE = f"""<!doctype html><html lang="en"><head><title>Council approves budget</title>
<meta property="article:published_time" content="2024-05-03T10:00:00Z">
<script>var state = {{"html": "<p>not text, a script's string</p>"}};</script>
<style>p {{ color: red }}</style></head><body>
<nav><a href="/">Home</a> <a href="/politics">Politics</a> <a href="/sport">Sport</a></nav>
<article><h1>Council approves budget</h1>{PARAGRAPHS}
<p><a href="/2024/05/schools">Schools</a> get most of the money.</p></article>
<footer><a href="/imprint">Imprint</a> Copyright 2024 News Example</footer></body></html>"""


# --- the switch -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXTRACTORS)
def test_each_extractor_finds_the_article_and_labels_the_text(name):
    page = parse_html(ARTICLE.encode(), "text/html; charset=utf-8", URL, extractor=name)
    assert page.error is None
    assert page.text_extractor == LABELS[name] == name
    assert "new public library on the river bank" in page.text
    assert "not text, a script's string" not in page.text
    assert page.title == "Council approves budget"
    assert {o.url for o in page.outlinks} >= {"https://news.example/politics",
                                              "https://news.example/2024/05/schools"}


def test_the_main_content_extractors_leave_the_menu_out_and_the_visible_text_keeps_it():
    texts = {n: parse_html(ARTICLE.encode(), None, URL, extractor=n).text for n in EXTRACTORS}
    assert "Politics" not in texts["trafilatura"]
    assert "Politics" not in texts["resiliparse"]
    assert "Politics" in texts["selectolax"]


def test_both_main_text_extractors_find_the_same_date_and_the_visible_text_none():
    assert parse_html(ARTICLE.encode(), None, URL).date == "2024-05-03"
    assert parse_html(ARTICLE.encode(), None, URL, extractor="trafilatura").date == "2024-05-03"
    assert parse_html(ARTICLE.encode(), None, URL, extractor="resiliparse").date == "2024-05-03"
    assert parse_html(ARTICLE.encode(), None, URL, extractor="selectolax").date is None
    undated = ARTICLE.replace('<meta property="article:published_time" content="2024-05-03T10:00:00Z">',
                              "")
    assert parse_html(undated.encode(), None, "https://news.example/budget").date is None


@pytest.mark.parametrize("name,fn", [("trafilatura", "extract_main"),
                                     ("resiliparse", "extract_resiliparse")])
def test_without_extraction_or_without_found_text_the_label_is_the_visible_texts(monkeypatch,
                                                                                name, fn):
    assert parse_html(ARTICLE.encode(), None, URL, extract_text=False).text_extractor == "selectolax"
    monkeypatch.setattr(extract, fn, lambda text, url: (None, None))
    page = parse_html(ARTICLE.encode(), None, URL, extractor=name)
    assert "Politics" in page.text and page.text_extractor == "selectolax"


def test_an_unparsed_page_has_no_label():
    page = parse_html(b"", None, URL)
    assert page.error == "empty body" and page.text_extractor is None


def test_the_config_names_the_extractor_and_refuses_an_unknown_one():
    cfg = load_config(environ={})
    assert extract.extractor(cfg) == "resiliparse" == extract.DEFAULT
    assert extract.extractor(cfg.with_overrides({"parse.extractor": "Trafilatura"})) == "trafilatura"
    with pytest.raises(ConfigError, match=r"parse\.extractor must be one of trafilatura, "
                                          r"resiliparse, selectolax, got 'boilerpipe'"):
        extract.extractor(cfg.with_overrides({"parse.extractor": "boilerpipe"}))
    assert cfg.get("parse.max_extract_ms") > 0


def test_the_labels_are_documented_values():
    assert tuple(LABELS) == EXTRACTORS
    assert len(set(LABELS.values())) == len(LABELS)


# --- the CPU limit ------------------------------------------------------------------------------


def _spin(*_args):
    while True:
        pass


@pytest.mark.parametrize("name,fn", [("trafilatura", "extract_main"),
                                     ("resiliparse", "extract_resiliparse")])
def test_an_extractor_over_the_limit_is_recorded_and_the_page_keeps_the_rest(monkeypatch, name, fn):
    monkeypatch.setattr(extract, fn, _spin)
    t0 = time.process_time()
    page = parse_html(ARTICLE.encode(), None, URL, extractor=name, max_extract_ms=50)
    assert time.process_time() - t0 < 2
    assert page.error == (f"extract: {name} over the 50 ms CPU limit; the text is the "
                          "visible text")
    assert page.title == "Council approves budget" and len(page.outlinks) == 5
    assert "river bank" in page.text and page.text_extractor == "selectolax"
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_the_limit_holds_against_an_extractor_that_catches_exceptions():
    swallowed = 0
    with pytest.raises(CpuLimitExceeded), cpu_limit(0.03) as guard:
        assert guard.armed
        while True:
            try:
                _spin_for(0.5)
            except Exception:  # what a library's own guard catches: not the limit
                swallowed += 1
    assert swallowed == 0


def _spin_for(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_the_limit_fires_again_after_a_bare_except():
    caught = 0
    with pytest.raises(CpuLimitExceeded), cpu_limit(0.03):
        while True:
            try:
                _spin_for(0.5)
            except BaseException:  # noqa: BLE001 - the worst a library can do
                caught += 1
                if caught > 1:
                    raise
    assert caught == 2


def test_a_block_within_the_limit_runs_and_the_timer_is_put_back():
    before = signal.getsignal(signal.SIGPROF)
    with cpu_limit(5) as guard:
        assert guard.armed
        total = sum(range(1000))
    assert total == 499500
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGPROF) in (before, signal.SIG_IGN)


def test_no_limit_off_the_main_thread_or_when_zero():
    armed = []

    def run():
        with cpu_limit(0.01) as guard:
            armed.append(guard.armed)
            _spin_for(0.05)  # not interrupted

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert armed == [False]
    with cpu_limit(0) as guard:
        assert not guard.armed


# --- what the extractors are given ----------------------------------------------------------------


@pytest.mark.parametrize("html,stripped", [
    ("a<script>x<y</script>b", "ab"),
    ("a<SCRIPT type=module>x</Script >b<style media=x>p{}</style>c", "abc"),
    ('a<script type="application/ld+json">{"datePublished": "2024"}</script>b',
     'a<script type="application/ld+json">{"datePublished": "2024"}</script>b'),
    ("a<!-- <script> -->b<script>x</script>c", "a<!-- <script> -->bc"),
    ("a<scripts>b</scripts>", "a<scripts>b</scripts>"),
    ("a<script>never closed <p>b</p>", "a"),
    ("a<!-- never closed <script>x</script>", "a<!-- never closed <script>x</script>"),
    ('a<script>document.write("</scr" + "ipt>")</script>b', "ab"),
])
def test_scripts_and_styles_are_cut_out_for_the_extractor(html, stripped):
    assert strip_raw_text(html) == stripped


def test_cutting_scripts_is_linear_on_hostile_input():
    for hostile in ("<script" * 200_000, "<!--" * 200_000, "<script>" + "<" * 1_000_000,
                    "<script></script>" * 100_000):
        t0 = time.process_time()
        strip_raw_text(hostile)
        assert time.process_time() - t0 < 1.0


@pytest.mark.parametrize("extractor", EXTRACTORS)
@pytest.mark.parametrize("codec,bad", [("utf-8", "\ufffe"), ("utf-8", "\x00"),
                                       ("utf-8", "\x1b"), ("cp1252", "\x00"), ("utf-16", "\x01")])
def test_xml_invalid_characters_are_removed_before_extraction(codec, bad, extractor):
    html = ARTICLE.replace("<head>", f'<head><meta charset="{codec}">')
    body = html.replace("coming year in paragraph 3", f"coming{bad} year in paragraph 3").encode(codec)
    page = parse_html(body, f"text/html; charset={codec}", URL, extractor=extractor)
    assert page.error is None
    assert "coming year in paragraph 3" in page.text and bad not in page.text


# --- change detection across extractors -------------------------------------------------------------


def _changed(new_ex, old_ex, digests=("d2", "d1"), sims=(0, 0b1111)):
    return meaningful_change("fetched", *digests, "h2", "h1", *sims, True, 3,
                             new_extractor=new_ex, old_extractor=old_ex)


def test_texts_of_different_extractors_are_not_compared():
    assert _changed("trafilatura", "trafilatura") is True
    assert _changed("resiliparse", "trafilatura") is None  # unknown: no history entry
    assert _changed("resiliparse", None) is None  # a row from before the column: trafilatura
    assert _changed("trafilatura", None) is True
    assert _changed("resiliparse", "resiliparse", sims=(0, 0b11)) is False
    assert _changed("resiliparse", "trafilatura", digests=("d1", "d1")) is False


@pytest.mark.parametrize("with_column", [True, False])
def test_the_analysts_change_counts_follow_the_same_rule(with_column):
    duckdb = pytest.importorskip("duckdb")
    from analyst.analytics import new_vs_changed_per_round

    con = duckdb.connect()
    con.execute("CREATE TABLE rounds (round_id VARCHAR, logical_date DATE)")
    con.execute("CREATE TABLE fetches (round_id VARCHAR, url VARCHAR, fetch_status VARCHAR, "
                "payload_digest VARCHAR)")
    con.execute("CREATE TABLE pages (round_id VARCHAR, url VARCHAR, content_hash VARCHAR, "
                f"simhash BIGINT{', text_extractor VARCHAR' if with_column else ''})")
    con.execute("CREATE TABLE crawldb (url VARCHAR, discovered_at TIMESTAMP)")
    # one page, four visits: the extractor switches after the second
    visits = [("r1", "trafilatura", 0), ("r2", "trafilatura", 0b1111),
              ("r3", "resiliparse", 0), ("r4", "resiliparse", 0b1111_0000)]
    for day, (rid, extractor, sim) in enumerate(visits, start=1):
        con.execute("INSERT INTO rounds VALUES (?, ?)", [rid, f"2026-01-0{day}"])
        con.execute("INSERT INTO fetches VALUES (?, 'u', 'fetched', ?)", [rid, f"d{day}"])
        row = [rid, "u", f"h{day}", sim] + ([extractor] if with_column else [])
        con.execute(f"INSERT INTO pages VALUES ({', '.join('?' * len(row))})", row)
    got = [(r["round_id"], r["new"], r["changed"], r["unchanged"])
           for r in new_vs_changed_per_round(con, trivial_distance=3)]
    if with_column:  # the first visit after the switch is unknown, then compared again
        assert got == [("r1", 1, 0, 0), ("r2", 0, 1, 0), ("r3", 0, 0, 0), ("r4", 0, 1, 0)]
    else:  # tables from before the column: every text is trafilatura's, as before
        assert got == [("r1", 1, 0, 0), ("r2", 0, 1, 0), ("r3", 0, 1, 0), ("r4", 0, 1, 0)]

"""analyst.analytics on a crawl with known answers, and `crawler report` rendered in Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html import escape as html_escape
from html.parser import HTMLParser

import pytest

from analyst import analytics, fastsql, report, report_html
from tests.chromium import chromium_or_skip
from tests.sample_crawl import (
    EXPECTED,
    FAILED_GATE,
    NOW,
    SLOW,
    STEP_SECONDS,
    XSS_TITLE,
    config_for,
    sample_home,
)


@pytest.fixture(scope="module")
def sample(spark, tmp_path_factory):
    return sample_home(spark, tmp_path_factory)


@pytest.fixture(scope="module")
def con(sample):
    c = fastsql.connect(sample)
    yield c
    c.close()


# ---------------------------------------------------------------- analytics: numbers by hand

@pytest.mark.spark
def test_new_changed_unchanged_and_discovered_per_round(con):
    got = {r["round_id"]: (r["new"], r["changed"], r["unchanged"], r["discovered"])
           for r in analytics.new_vs_changed_per_round(con)}
    assert got == EXPECTED["new_vs_changed"]


@pytest.mark.spark
def test_fetch_status_per_round_and_throughput(con):
    status = analytics.fetch_status_per_round(con)
    fetched = {r["round_id"]: r["n"] for r in status if r["fetch_status"] == "fetched"}
    assert fetched == EXPECTED["fetched_per_round"]
    thr = {r["round_id"]: r for r in analytics.throughput_per_round(con)}
    assert {k: v["attempts"] for k, v in thr.items()} == EXPECTED["attempts_per_round"]
    # round 1: 5 rows two seconds apart -> 8 s span, 4 pages fetched
    assert thr["20261101"]["seconds"] == pytest.approx(8.0)
    assert thr["20261101"]["pages_per_s"] == pytest.approx(0.5)
    assert [r["round_id"] for r in analytics.rounds_overview(con)] == list(EXPECTED["fetched_per_round"])


@pytest.mark.spark
def test_step_timing_and_gates_per_round(con):
    timing = analytics.step_timing_per_round(con)
    rids = list(EXPECTED["fetched_per_round"])
    # every step of every round, in the order the steps ran
    assert [(r["round_id"], r["step"]) for r in timing] == [
        (rid, step) for rid in rids for step in STEP_SECONDS]
    by = {(r["round_id"], r["step"]): r for r in timing}
    assert by[(rids[1], "fetch")]["seconds"] == pytest.approx(240.0)
    assert by[(rids[0], "parse")]["cpu_seconds"] == pytest.approx(3.0)
    rnd, gate, line = FAILED_GATE
    failed = by[(rids[rnd], "fetch")]
    assert failed["failed"] == gate.split(".", 1)[1] and line in failed["gates"]
    assert by[(rids[0], "fetch")]["failed"] == "" and "error_share: ok" in by[(rids[0], "fetch")]["gates"]


@pytest.mark.spark
def test_politeness_backoffs_and_hosts(con):
    rows = analytics.politeness_backoffs(con, now=NOW)
    slow = next(r for r in rows if r["host"] == SLOW)
    assert slow["retry_later"] == EXPECTED["retry_later"][SLOW] and slow["active"] is True
    assert slow["crawl_delay"] == 10.0 and slow["rounds_deferred"] == 2
    errors = next(r for r in rows if "errors" in r["host"])
    assert errors["consecutive_failures"] == 2 and errors["active"] is False
    later = analytics.politeness_backoffs(con, now=NOW.replace(day=4))
    assert next(r for r in later if r["host"] == SLOW)["active"] is False
    cap = {r["host"]: r["max_pages_per_day"] for r in analytics.politeness_capacity(con, 1.0, 30.0)}
    assert cap[SLOW] == 8640 and cap["http://a.sim.test:80"] == 86400
    hosts = analytics.top_hosts(con, top=3)
    assert [h["host"] for h in hosts] == ["http://a.sim.test:80", "http://b.sim.test:80",
                                          "http://errors.sim.test:80"]
    mix = analytics.status_mix_per_host(con)
    assert sum(r["n"] for r in mix) == sum(EXPECTED["attempts_per_round"].values())
    summary = analytics.summary(con)
    assert (summary["urls"], summary["hosts"], summary["last_round"]) == \
        (EXPECTED["urls"], EXPECTED["hosts"], "20261103")


@pytest.mark.spark
def test_duplicates_change_rates_freshness_pagerank(con):
    dups = {(r["round_id"], r["kind"]): r["n"] for r in analytics.duplicates_per_round(con)}
    assert dups == {("20261102", "exact"): 1, ("20261102", "near"): 1, ("20261103", "near"): 1}
    clusters = analytics.top_duplicate_clusters(con)
    assert clusters[0]["canonical_url"].endswith("/p1") and clusters[1]["rounds"] == 2
    dist = analytics.change_rate_distribution(con)
    assert sum(b["urls"] for b in dist) == len(analytics.change_rates(con)) == 12
    fast = [r[0] / 86400 for r in con.execute(
        "SELECT fetch_interval_s FROM crawldb WHERE change_rate >= 3").fetchall()]
    assert dist[-1] == {"bucket": "≥ 3/d", "low": 3.0, "high": None, "urls": 1,
                        "median_interval_d": pytest.approx(fast[0])}
    for b in dist:  # the interval chosen per bucket: every bucket with URLs has one
        assert (b["median_interval_d"] is None) == (b["urls"] == 0)
    fresh = {b["bucket"]: b["urls"] for b in analytics.freshness(con)}
    assert fresh["never"] == 7 and sum(fresh.values()) == EXPECTED["urls"]
    top = analytics.top_pages_by_pagerank(con, top=3)
    assert [t["url"] for t in top] == ["http://a.sim.test:80/", "http://b.sim.test:80/",
                                       "http://a.sim.test:80/1"]
    assert top[0]["inlinks"] == 5 and top[0]["title"] == "Page home"
    hosts, matrix = analytics.host_link_matrix(con)
    assert matrix[hosts.index("http://a.sim.test:80")][hosts.index("http://a.sim.test:80")] == 6


@pytest.mark.spark
def test_estimates_against_the_true_rates_per_bucket(sample, con, tmp_path):
    from scipy.stats import spearmanr

    from tests.sample_crawl import TRUE_RATES

    ref = analytics.reference_rates_file(sample.home)
    assert ref is not None and ref.endswith(analytics.REFERENCE_RATES)
    got = {b["bucket"]: (b["urls"], b["estimated_urls"], b["median_true_rate"],
                         b["median_estimated_rate"], b["median_interval_d"])
           for b in analytics.rate_vs_truth(con, ref)}
    assert list(got) == [b["bucket"] for b in analytics.change_rate_distribution(con)]
    assert got == {k: pytest.approx(v) for k, v in EXPECTED["rate_vs_truth"].items()}
    rho, n = analytics.rate_rank_correlation(con, ref)
    assert (rho, n) == (pytest.approx(EXPECTED["rate_spearman"][0]), EXPECTED["rate_spearman"][1])
    # the same as scipy's with ties (three URLs given one true rate)
    held = dict(con.execute("SELECT url, change_rate FROM crawldb WHERE status = 'fetched'").fetchall())
    tied = {u: (0.1 if i < 3 else r) for i, (u, r) in enumerate(sorted(TRUE_RATES.items()))}
    path = analytics.write_reference_rates(str(sample.home) + "-tied", tied)
    pairs = [(tied[u], held[u]) for u in tied if u in held]
    expected = spearmanr([p[0] for p in pairs], [p[1] for p in pairs]).statistic
    assert analytics.rate_rank_correlation(con, str(path)) == (pytest.approx(expected), len(pairs))
    # below three URLs there is no correlation; a home without the file has none to read
    one = analytics.write_reference_rates(str(sample.home) + "-one", {next(iter(held)): 1.0})
    assert analytics.rate_rank_correlation(con, str(one)) == (None, 1)
    assert analytics.reference_rates_file(str(sample.home) + "-none") is None
    # a URL listed twice counts once; a file that is not one is said so, and the report says
    # it in the section instead of failing
    twice = tmp_path / "twice.csv"
    twice.write_text(open(ref).read() + f"{next(iter(held))},5.0\n")
    assert analytics.rate_rank_correlation(con, str(twice))[1] == EXPECTED["rate_spearman"][1]
    assert sum(b["urls"] for b in analytics.rate_vs_truth(con, str(twice))) == 10
    bad = tmp_path / "bad.csv"
    bad.write_text("url,true_rate\nhttp://a.sim.test:80/,often\n")
    with pytest.raises(ValueError, match="not a reference-rates file"):
        analytics.rate_vs_truth(con, str(bad))
    page = report.build_report(con, reference_rates=str(bad))
    assert "not a reference-rates file" in page and 'id="table-rate-vs-truth"' not in page
    assert analytics.reference_rates_file("s3a://bucket/crawl") is None
    with pytest.raises(ValueError, match="local crawl home"):
        analytics.write_reference_rates("s3a://bucket/crawl", {})


def test_empty_crawl_home_gives_empty_answers_and_a_report(tmp_path):
    cfg = config_for(tmp_path / "empty")
    with pytest.raises(fastsql.FastPathError, match="RECRAWL_CONFIG"):
        fastsql.connect(cfg)  # a notebook without the crawl's home: said at once, in one line
    con = fastsql.connect(cfg, allow_empty=True)
    assert analytics.rounds_overview(con) == [] and analytics.summary(con) == {}
    page = report.build_report(con, home=cfg.home)
    assert page.count("No data yet.") >= 8
    # every empty chart says why and what to run, and so does every section
    charts = re.findall(r'<figure class="chart empty"[^>]*><p>(.*?)</p>', page)
    assert len(charts) >= 8 and all(len(note) > len("No data yet. ") for note in charts), charts
    sections = re.findall(r'<section id="([^"]+)">(.*?)</section>', page)
    assert len(sections) >= 10
    for sid, html in sections:
        assert "<code>crawler " in html or "No duplicates found" in html \
            or "No host pushed back" in html, sid
    assert "No PageRank scores yet: run <code>crawler pagerank</code>" in page
    assert "No change signals yet" in dict(sections)["signals"]
    assert "<code>crawler round --date DATE</code>" in page


def test_report_on_a_home_without_tables_is_a_one_line_error(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "report", "--out", str(tmp_path / "r.html")],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, RECRAWL_CRAWL__HOME=str(tmp_path / "nowhere")))
    assert out.returncode == 2 and "no Delta tables under" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "r.html").exists()



def test_bar_chart_marks_every_bar_and_escapes_labels():
    html = report.bar_chart("c", ["r1", "<r2>"], [("fetched", [3, 4]), ("gone", [1, None])])
    bars = _Bars.parse(html)["c"]
    assert [(b["data-category"], b["data-series"], b["data-value"]) for b in bars] == [
        ("r1", "fetched", "3"), ("r1", "gone", "1"), ("<r2>", "fetched", "4"), ("<r2>", "gone", "0")]
    assert "<r2>" not in html and "&lt;r2&gt;" in html
    assert "No data yet." in report.bar_chart("e", [], [])
    assert report_html.nice_max(15, integer=True) == (15, 5) and report_html.nice_max(2, True) == (2, 1)


# ---------------------------------------------------------------- the report, in a browser

class _Bars(HTMLParser):
    """Collects rect.bar attributes per enclosing figure id, and any script/src/href found."""

    def __init__(self):
        super().__init__()
        self.figure = None
        self.bars: dict[str, list[dict]] = {}
        self.scripts = 0
        self.external = []

    @classmethod
    def parse(cls, text) -> dict[str, list[dict]]:
        p = cls()
        p.feed(text)
        return p.bars

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "figure":
            self.figure = a.get("id")
        elif tag == "rect" and "bar" in a.get("class", "").split():
            self.bars.setdefault(self.figure, []).append(a)
        elif tag == "script":
            self.scripts += 1
        for key in ("src", "href"):
            if key in a and not a[key].startswith("#"):
                self.external.append((tag, key, a[key]))


def _browser(args, profile, timeout=120):
    exe = chromium_or_skip()
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def rendered(sample, tmp_path_factory):
    """`crawler report` run as a person runs it, then the page's DOM as Chromium parsed it."""
    out_dir = tmp_path_factory.mktemp("report")
    page = out_dir / "report.html"
    run = subprocess.run(
        [sys.executable, "-m", "app.cli", "report", "--out", str(page)],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, RECRAWL_CRAWL__HOME=sample.home, JAVA_HOME="/nonexistent"),
    )
    assert run.returncode == 0, run.stderr
    assert page.name in run.stdout
    dom = _browser(["--dump-dom", page.as_uri()], out_dir / "profile")
    assert dom.returncode == 0 and "</html>" in dom.stdout, dom.stderr[-2000:]
    return {"page": page, "dom": dom.stdout, "dir": out_dir}


@pytest.mark.spark
def test_report_dom_has_every_chart_with_the_data(rendered):
    parser = _Bars()
    parser.feed(rendered["dom"])
    bars = parser.bars
    for chart in ("chart-rounds", "chart-fetch-status", "chart-throughput", "chart-changes",
                  "chart-duplicates", "chart-hosts", "chart-status-mix", "chart-backoffs",
                  "chart-change-rate", "chart-freshness", "chart-fetch-reasons",
                  "chart-step-timing"):
        assert bars.get(chart), chart

    def value(chart, category, series):
        hits = [b["data-value"] for b in bars[chart]
                if b["data-category"] == category and b["data-series"] == series]
        assert len(hits) == 1, (chart, category, series, hits)
        return hits[0]

    # one bar per (round, status) pair: 3 rounds x the 8 statuses seen
    assert len(bars["chart-fetch-status"]) == 3 * 8
    for rid, n in EXPECTED["fetched_per_round"].items():
        assert value("chart-fetch-status", rid, "fetched") == str(n)
    assert value("chart-fetch-status", "20261101", "retry_later") == "1"
    for rid, (new, changed, unchanged, _) in EXPECTED["new_vs_changed"].items():
        assert [value("chart-changes", rid, s) for s in ("new", "changed", "unchanged")] == \
            [str(new), str(changed), str(unchanged)]
    assert value("chart-throughput", "20261101", "pages/s") == "0.5"
    assert value("chart-step-timing", "20261102", "fetch") == "240"
    assert FAILED_GATE[2] in rendered["dom"]  # the failed gate's line, in the timing table
    assert value("chart-backoffs", "20261102", "retry_later") == "1"
    assert [b["data-category"] for b in bars["chart-hosts"] if b["data-series"] == "fetched"] == [
        "http://a.sim.test:80", "http://b.sim.test:80", "http://errors.sim.test:80",
        "http://slow.sim.test:80", "http://xss.sim.test:80"]
    assert value("chart-duplicates", "20261102", "exact") == "1"
    for rid, ((signal, *_), _) in EXPECTED["fetch_reasons"].items():
        assert value("chart-fetch-reasons", rid, "signal") == str(signal)
    assert 'id="table-signal-trust"' in rendered["dom"]
    # the estimates against the sample's true rates: one row per bucket, and the correlation
    truth = re.search(r'<table id="table-rate-vs-truth">(.*?)</table>', rendered["dom"], re.S)
    assert truth, "no estimated-vs-true table"
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in truth.group(1).split("</tr>")[1:-1]]
    assert [c[0] for c in cells] == [html_escape(b) for b in EXPECTED["rate_vs_truth"]]
    assert [int(c[1]) for c in cells] == [v[0] for v in EXPECTED["rate_vs_truth"].values()]
    assert f"{EXPECTED['rate_spearman'][0]:.3f} over 10 URLs" in rendered["dom"]
    # self-contained and inert: no script, nothing loaded from anywhere
    assert parser.scripts == 0 and parser.external == []
    # the page title served by a hostile site is shown as text, never as markup
    assert "<script>alert" not in rendered["dom"]
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in rendered["dom"]
    assert XSS_TITLE.startswith("<script>")
    assert 'id="table-backoffs"' in rendered["dom"] and "slow.sim.test" in rendered["dom"]


@pytest.mark.spark
def test_the_report_judges_changes_with_the_crawls_trivial_distance(sample, tmp_path):
    # A crawl configured to call every SimHash move trivial recorded no change; its report must
    # say the same (it once counted with the default distance, 3, whatever the crawl used).
    cfg = sample.with_overrides({"updatedb.trivial_change_distance": 64}, "test")
    page = report.write_report(cfg, tmp_path / "report.html", now=NOW)
    bars = _Bars.parse(page.read_text())["chart-changes"]
    changed = {b["data-category"]: int(b["data-value"]) for b in bars
               if b["data-series"] == "changed"}
    unchanged = {b["data-category"]: int(b["data-value"]) for b in bars
                 if b["data-series"] == "unchanged"}
    # the sample's changes with a payload differ by SimHash; at distance 64 none counts
    for rid, (_, changed_default, unchanged_default, _) in EXPECTED["new_vs_changed"].items():
        assert changed.get(rid, 0) == 0
        assert unchanged.get(rid, 0) == unchanged_default + changed_default


@pytest.mark.spark
def test_report_screenshot_shows_the_charts(rendered):
    from PIL import Image

    shot = rendered["dir"] / "report.png"
    out = _browser(["--window-size=1200,2600", f"--screenshot={shot}", rendered["page"].as_uri()],
                   rendered["dir"] / "profile-shot")
    assert out.returncode == 0 and shot.exists(), out.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 2600)
    colors = image.getcolors(maxcolors=1 << 20)
    count = {rgb: n for n, rgb in colors}
    # solid bar fills: fetched (green), retry_later (yellow), new pages (orange)
    for hex_color in ("#009E73", "#F0E442", "#E69F00"):
        rgb = tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
        assert count.get(rgb, 0) > 400, (hex_color, count.get(rgb, 0))

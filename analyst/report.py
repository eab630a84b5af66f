"""`crawler report`: one self-contained HTML page about the crawl, charts drawn as inline SVG.

The numbers come from `analyst.analytics` over the DuckDB fast path (no JVM), the series and
colours from `analyst.charts` (the notebooks' plots use the same); the page embeds its CSS and
SVG, references nothing outside itself and runs no script, so it can be mailed, archived next
to the crawl or opened offline. Every chart is followed by its numbers as a table.

Everything that came from the web (URLs, titles, host names) is HTML-escaped: a page title is
attacker-controlled text. Bars carry `data-series` / `data-category` / `data-value` attributes
and a `<title>` tooltip, which is also how tests read the rendered charts back.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from analyst import analytics, charts, fastsql
from analyst.report_html import (  # noqa: F401 (bar_chart: the report's, for tests and users)
    CSS,
    bar_chart,
    details,
    esc,
    fmt,
    nice_max,
    section,
    table,
)
from recrawl.config import Config, default
from recrawl.rules.crawldb_rules import FETCH_STATUSES
from recrawl.rules.rounds import STEPS

# Why a section is empty and what to run (shown in place of the chart or table).
_NO_ROUND = ("No round has run yet: <code>crawler init</code>, <code>crawler inject SEEDS</code>, "
             "then <code>crawler round --date DATE</code>.")
_NO_TIMING = ("No step timing yet: steps record their timing in the rounds table as they run "
              "(tables created before that get the columns from <code>crawler init</code>).")
STEP_ORDER = STEPS  # stacked in the order a round runs them
_NO_FETCH = "No fetch yet: run a round (<code>crawler round --date DATE</code>)."
_NO_URLS = "crawldb is empty: run <code>crawler inject SEEDS</code> (after <code>crawler init</code>)."
_NO_DUPS = ("No duplicates found: no fetched page had the same or nearly the same content as "
            "another (the dedup step of each round looks for them).")
_NO_PUSHBACK = ("No host pushed back: no <code>retry_later</code> fetch (429/503 or a long "
                "Crawl-delay) and no back-off recorded.")
_NO_RATES = ("No change-rate estimate yet: the schedule step estimates a URL's rate once it has "
             "been fetched in two rounds (run more rounds).")
_NO_SIGNALS = ("No change signals yet: the <code>signals</code> step, first in every round "
               "(<code>crawler round --date DATE</code>), reads the hosts' sitemaps and feeds, "
               "and updatedb learns each host's trust as revisits check them (tables created "
               "before change signals get their columns from <code>crawler init</code>).")
_NO_REASONS = ("No fetch list with reasons yet: run a round (<code>crawler round --date "
               "DATE</code>; tables created before change signals get the column from "
               "<code>crawler init</code>).")
_NO_SCORES = ("No PageRank scores yet: run <code>crawler pagerank</code> after a round (the "
              "demo runs it last unless <code>--no-pagerank</code>; Airflow's "
              "<code>pagerank</code> DAG runs it when a round's crawldb is final).")


def build_report(con, *, title: str = "Crawl report", home: str = "", top: int = 15,
                 now: dt.datetime | None = None, min_delay_s: float | None = None,
                 max_crawl_delay_s: float | None = None, reference_rates: str | None = None,
                 future_tolerance_days: float | None = None,
                 trivial_change_distance: int | None = None) -> str:
    """The report's HTML from a fast-path connection (see analyst.fastsql.connect);
    the crawl's settings (`fetcher.min_delay_s`, `fetcher.max_crawl_delay_s`,
    `signals.future_tolerance_days`, `updatedb.trivial_change_distance`; None: defaults.toml's)
    so that the report judges as the crawl did;
    `reference_rates`: a file of known true change rates (analytics.REFERENCE_RATES), whose
    comparison with the estimates the change-rate section then shows;
    `future_tolerance_days`: signals.future_tolerance_days (a later date is no signal)."""
    now = now or dt.datetime.now(dt.UTC)
    if future_tolerance_days is None:
        future_tolerance_days = float(default("signals.future_tolerance_days"))
    a = analytics
    summ = a.summary(con)
    rounds = a.rounds_overview(con)
    status_rows = a.fetch_status_per_round(con)
    thr = a.throughput_per_round(con)
    nvc = a.new_vs_changed_per_round(con, trivial_change_distance)
    dups = a.duplicates_per_round(con)
    clusters = a.top_duplicate_clusters(con, top=min(top, 10))
    hosts = a.top_hosts(con, top=top)
    mix = a.status_mix_per_host(con, top=top)
    backoffs = a.politeness_backoffs(con, now=now)
    deferred = a.retry_later_per_round(con)
    rates = a.change_rate_distribution(con)
    fresh = a.freshness(con)
    truth = _rate_vs_truth(con, reference_rates) if reference_rates else ""
    ranks = a.top_pages_by_pagerank(con, top=top)
    capacity = a.politeness_capacity(con, min_delay_s, max_crawl_delay_s)
    trust = a.signal_trust_per_host(con, top=top, future_tolerance_days=future_tolerance_days)
    reasons = a.fetch_reasons_per_round(con)
    classes = a.freshness_by_signal_class(con, future_tolerance_days=future_tolerance_days)

    cards = [("URLs known", summ.get("urls")), ("URLs fetched", summ.get("urls_fetched")),
             ("hosts", summ.get("hosts")), ("rounds", summ.get("rounds")),
             ("pages parsed", summ.get("pages")), ("duplicates", summ.get("duplicates")),
             ("last round", summ.get("last_round")),
             ("politeness limit, pages/day", sum(r["max_pages_per_day"] for r in capacity) if capacity else None)]
    cards_html = "".join(f'<div class="card"><div class="v">{esc(fmt(v))}</div>'
                         f'<div class="k">{esc(k)}</div></div>' for k, v in cards)
    rids = [r["round_id"] for r in rounds]
    sections = []
    sections.append(section(
        "rounds", "Rounds over time",
        "URLs generated and fetched per round (a round is one logical day), and new URLs "
        "added to crawldb by its updatedb step.",
        bar_chart("chart-rounds", rids, [("generated", [r["generated"] for r in rounds]),
                                         ("fetched", [r["fetched"] for r in rounds]),
                                         ("new URLs", [r["new_urls"] for r in rounds])],
                  stacked=False, why=_NO_ROUND),
        details("numbers", table(rounds, [("round_id", "round"), ("logical_date", "logical date"),
                                           ("started_at", "started"), ("duration_s", "duration s"),
                                           ("generated", "generated"), ("fetched", "fetched"),
                                           ("not_modified", "304"), ("pages", "pages"),
                                           ("new_urls", "new URLs"), ("duplicates", "duplicates")],
                                  "table-rounds")),
    ))
    timing = a.step_timing_per_round(con)
    cats, series = charts.pivot(timing, "round_id", "step", "seconds", STEP_ORDER)
    sections.append(section(
        "step-timing", "Step timing and health gates per round",
        "Wall seconds of each step's last run in every round, stacked; the table adds when it "
        "started, the driver process's CPU seconds and the health gates checked after it "
        "(a failed gate stops the round at that step: docs/operators.md, \"Health gates\").",
        bar_chart("chart-step-timing", cats, series, unit="s", integer=False, why=_NO_TIMING),
        details("numbers", table(timing, [("round_id", "round"), ("step", "step"),
                                          ("started_at", "started"), ("seconds", "wall s"),
                                          ("cpu_seconds", "driver CPU s"), ("gates", "gates"),
                                          ("failed", "failed gate")], "table-step-timing")),
    ))
    cats, series = charts.pivot(status_rows, "round_id", "fetch_status", "n", FETCH_STATUSES)
    sections.append(section(
        "fetch-status", "Fetch statuses per round",
        "What every fetch attempt ended as. <code>retry_later</code> is a host pushing back "
        "(429/503 or a Crawl-delay above the limit); <code>skipped_budget</code> ran out of time.",
        bar_chart("chart-fetch-status", cats, series, why=_NO_FETCH),
        details("numbers", table(status_rows, [("round_id", "round"), ("fetch_status", "status"),
                                                ("n", "fetches")])),
    ))
    sections.append(section(
        "throughput", "Throughput",
        "Fetched pages per second of the fetch step (first to last <code>fetch_time</code> of "
        "the round). Politeness, not bandwidth, bounds it: see the capacity table below.",
        bar_chart("chart-throughput", [r["round_id"] for r in thr],
                  [("pages/s", [r["pages_per_s"] for r in thr])], unit=" pages/s",
                  integer=False, why=_NO_FETCH),
        details("numbers", table(thr, [("round_id", "round"), ("attempts", "attempts"),
                                        ("fetched", "fetched"), ("seconds", "seconds"),
                                        ("pages_per_s", "pages/s"),
                                        ("attempts_per_s", "attempts/s"),
                                        ("mean_duration_ms", "mean ms"), ("bytes", "bytes")])),
    ))
    sections.append(section(
        "changes", "New vs changed pages",
        "Per round: pages fetched for the first time, pages whose content changed since their "
        "last fetch, and pages unchanged (304, same payload, or a trivial SimHash change).",
        bar_chart("chart-changes", [r["round_id"] for r in nvc],
                  [("new", [r["new"] for r in nvc]), ("changed", [r["changed"] for r in nvc]),
                   ("unchanged", [r["unchanged"] for r in nvc])], why=_NO_FETCH),
        details("numbers", table(nvc, [("round_id", "round"), ("new", "new"),
                                        ("changed", "changed"), ("unchanged", "unchanged"),
                                        ("discovered", "URLs discovered")])),
    ))
    dcats, dseries = charts.pivot(dups, "round_id", "kind", "n", ("exact", "near"))
    sections.append(section(
        "duplicates", "Duplicates",
        "URLs found to duplicate another page in each round: exact (same content hash) and "
        "near (SimHash within the configured Hamming distance). Biggest clusters below.",
        bar_chart("chart-duplicates", dcats, dseries, why=_NO_DUPS),
        table(clusters, [("canonical_url", "kept URL"), ("duplicates", "duplicates"),
                         ("exact", "exact"), ("near", "near"), ("max_distance", "max distance"),
                         ("examples", "examples")], "table-clusters", why=_NO_DUPS),
    ))
    sections.append(section(
        "hosts", "Top hosts",
        f"The {top} hosts with the most known URLs, by crawldb status.",
        bar_chart("chart-hosts", [h["host"] for h in hosts],
                  [("fetched", [h["fetched"] for h in hosts]),
                   ("unfetched", [h["unfetched"] for h in hosts]),
                   ("other", [h["other"] for h in hosts])], horizontal=True, why=_NO_URLS),
        details("numbers", table(hosts, [("host", "host"), ("urls", "URLs"), ("fetched", "fetched"),
                                          ("unfetched", "unfetched"), ("other", "other"),
                                          ("host_rank", "host rank"), ("trap", "trap")])),
    ))
    mcats, mseries = charts.pivot(mix, "host", "fetch_status", "n", FETCH_STATUSES)
    sections.append(section(
        "status-mix", "Fetch status mix per host", "All rounds, the same hosts' fetch attempts.",
        bar_chart("chart-status-mix", mcats, mseries, horizontal=True, why=_NO_FETCH),
    ))
    sections.append(section(
        "politeness", "Politeness back-offs",
        "Hosts that pushed back: deferrals (<code>retry_later</code>) per round, then per host "
        "with the back-off window (wall clock; <em>active</em> at report time), consecutive "
        "failures and the robots.txt Crawl-delay.",
        bar_chart("chart-backoffs", [r["round_id"] for r in deferred],
                  [("retry_later", [r["retry_later"] for r in deferred])], why=_NO_PUSHBACK),
        table(backoffs, [("host", "host"), ("retry_later", "retry_later"),
                         ("rounds_deferred", "rounds deferred"), ("backoff_until", "back-off until"),
                         ("active", "active"), ("consecutive_failures", "consecutive failures"),
                         ("failures", "failed fetches"), ("crawl_delay", "Crawl-delay s")],
              "table-backoffs", why=_NO_PUSHBACK),
        details("politeness capacity per host (pages/day = 86400 / delay)",
                 table(capacity[:top], [("host", "host"), ("urls", "URLs"),
                                        ("crawl_delay", "Crawl-delay s"), ("delay_s", "delay s"),
                                        ("max_pages_per_day", "max pages/day")],
                       why=_NO_URLS)),
    ))
    sections.append(section(
        "change-rate", "Change rate and freshness",
        "Estimated changes per day (Poisson model) over URLs with an estimate, and the age of "
        "the stored copies at the last round's logical date.",
        "<h3>URLs by estimated change rate (changes per day)</h3>",
        bar_chart("chart-change-rate", [r["bucket"] for r in rates],
                  [("URLs", [r["urls"] for r in rates])], why=_NO_RATES),
        details("numbers: URLs and the revisit interval the schedule chose, per rate bucket",
                 table(rates, [("bucket", "estimated rate"), ("urls", "URLs"),
                               ("median_interval_d", "median revisit interval, days")],
                       "table-change-rate")),
        truth,
        "<h3>Age of the stored copy; overdue = due before the last round</h3>",
        bar_chart("chart-freshness", [r["bucket"] for r in fresh],
                  [("URLs", [r["urls"] for r in fresh]), ("overdue", [r["overdue"] for r in fresh])],
                  stacked=False, why=_NO_URLS),
    ))
    sections.append(_signals_section(trust, reasons, classes, top))
    sections.append(section(
        "pagerank", "Top pages by PageRank", "From the last <code>crawler pagerank</code> run.",
        table(ranks, [("url", "URL"), ("title", "title"), ("pagerank", "PageRank"),
                      ("inlinks", "in-links"), ("status", "status")], "table-pagerank",
              why=_NO_SCORES),
    ))
    generated = now.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return _PAGE.format(
        title=esc(title), home=esc(home), generated=esc(generated), css=CSS, cards=cards_html,
        nav="".join(f'<a href="#{sid}">{esc(name)}</a>' for sid, name in _NAV),
        sections="".join(sections),
    )


def _signals_section(trust: list[dict], reasons: list[dict], classes: list[dict],
                     top: int) -> str:
    """Change signals: why generate chose the URLs of each round, each host's signal trust,
    and the freshness proxy per signal class."""
    reason_series = [(r, [row[r] for row in reasons])
                     for r in (*analytics.FETCH_REASONS, "unknown")
                     if r != "unknown" or any(row["unknown"] for row in reasons)]
    return section(
        "signals", "Change signals",
        "Sites publish what changed: sitemap <code>&lt;lastmod&gt;</code> dates and feed "
        "entries. Each revisit of a URL a host lists checks its signal: <em>precision</em> is "
        "the share of signalled changes the page really had, <em>recall</em> the share of "
        "changes that were signalled (decayed counts, Beta(1, 1) means). A <em>trusted</em> "
        "host's signalled changes are fetched first; with <em>defer</em> its URLs fresh by "
        "their signal may wait; an untrusted host's only as a few probes per round.",
        "<h3>Fetch-list URLs per round, by why generate chose them</h3>",
        bar_chart("chart-fetch-reasons", [r["round_id"] for r in reasons], reason_series,
                  why=_NO_REASONS),
        details("numbers: fetch-list URLs by reason, and the sitemap and feed reads "
                 "(they share the round's budget)",
                 table(reasons, [("round_id", "round"), ("signal", "signal"), ("new", "new"),
                                 ("due", "due"), ("fill", "fill"), ("unknown", "unknown"),
                                 ("generated", "generated"),
                                 ("signal_requests", "signal reads")], "table-fetch-reasons")),
        f"<h3>Signal trust per host (the {top} with the most evidence); "
        "changed = the signal says changed since our copy</h3>",
        table(trust, [("host", "host"), ("kinds", "sources"), ("precision", "precision"),
                      ("recall", "recall"), ("trusted", "trusted"), ("defer", "defer"),
                      ("checks", "checks"), ("signalled_urls", "URLs with a signal"),
                      ("changed_since_fetch", "changed since fetch"),
                      ("signal_fetches", "fetched for a signal, last round")],
              "table-signal-trust", why=_NO_SIGNALS),
        details("numbers: decayed checks per host, and Last-Modified",
                 table(trust, [("host", "host"), ("sources", "sources"), ("tp", "tp"),
                               ("fp", "fp"), ("fn", "fn"), ("tn", "tn"),
                               ("lm_trusted", "Last-Modified trusted"),
                               ("signals_read_at", "sources last answered")],
                       why=_NO_SIGNALS)),
        "<h3>Held pages per signal class of their host: a freshness proxy, not freshness "
        "(that needs the web's truth)</h3>",
        table(classes, [("signal_class", "hosts' signals"), ("hosts", "hosts"),
                        ("pages", "pages held"),
                        ("changed_share", "last fetch found a change"),
                        ("mean_age_d", "mean days since fetch"),
                        ("mean_change_rate", "mean changes/day"),
                        ("stale_by_signal", "stale by their signal")],
              "table-signal-classes", why=_NO_SIGNALS),
    )


def _rate_vs_truth(con, reference: str) -> str:
    """The estimates against the reference file's true rates, per true-rate bucket."""
    head = "<h3>Estimated vs true change rate (URLs whose true rate is known)</h3>"
    try:
        buckets = analytics.rate_vs_truth(con, reference)
        rho, n = analytics.rate_rank_correlation(con, reference)
    except ValueError as e:  # a malformed file: said in its section, the report still written
        return head + f'<p class="empty">{esc(e)}</p>'
    corr = (f"Spearman rank correlation of estimated and true rates: {rho:.3f} over {n} URLs."
            if rho is not None else
            f"No rank correlation over {n} URLs with an estimate (fewer than 3, or all alike).")
    return (head +
            f'<p class="intro">True rates from <code>{esc(Path(reference).name)}</code> in the '
            "crawl home (the demos write simweb's truth there). Held copies (status fetched) "
            f"per true-rate bucket. {esc(corr)}</p>"
            + table(buckets, [("bucket", "true rate"), ("urls", "URLs held"),
                              ("estimated_urls", "with an estimate"),
                              ("median_true_rate", "median true rate"),
                              ("median_estimated_rate", "median estimate"),
                              ("median_interval_d", "median revisit interval, days")],
                    "table-rate-vs-truth"))


def write_report(cfg: Config, out: str | Path, top: int = 15, now: dt.datetime | None = None) -> Path:
    """Write the report for `cfg`'s crawl home to `out`; returns the path written."""
    fastsql.require_tables(cfg)
    con = fastsql.connect(cfg)
    try:
        page = build_report(
            con, home=cfg.home, top=top, now=now,
            min_delay_s=cfg.get("fetcher.min_delay_s"),
            max_crawl_delay_s=cfg.get("fetcher.max_crawl_delay_s"),
            reference_rates=analytics.reference_rates_file(cfg.home),
            future_tolerance_days=cfg.get("signals.future_tolerance_days"),
            trivial_change_distance=cfg.get("updatedb.trivial_change_distance"),
        )
    finally:
        con.close()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path.resolve()


_NAV = [("rounds", "Rounds"), ("fetch-status", "Fetch statuses"), ("throughput", "Throughput"),
        ("changes", "New vs changed"), ("duplicates", "Duplicates"), ("hosts", "Hosts"),
        ("politeness", "Politeness"), ("change-rate", "Change rate"), ("signals", "Change signals"),
        ("pagerank", "PageRank")]

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="recrawl crawler report">
<title>{title}</title><style>{css}</style></head>
<body><header><h1>{title}</h1>
<div class="meta">crawl home <code>{home}</code> · generated {generated}</div></header>
<nav>{nav}</nav>
<main><div class="cards" id="summary">{cards}</div>{sections}</main>
<footer>recrawl · tables read with delta-rs and DuckDB (current versions) ·
times in UTC</footer></body></html>
"""

"""`crawler report`: one self-contained HTML page about the crawl, charts drawn as inline SVG.

The numbers come from `recrawl.analytics` over the DuckDB fast path (no JVM), the series and
colours from `recrawl.charts` (the notebooks' plots use the same); the page embeds its CSS and
SVG, references nothing outside itself and runs no script, so it can be mailed, archived next
to the crawl or opened offline. Every chart is followed by its numbers as a table.

Everything that came from the web (URLs, titles, host names) is HTML-escaped: a page title is
attacker-controlled text. Bars carry `data-series` / `data-category` / `data-value` attributes
and a `<title>` tooltip, which is also how tests read the rendered charts back.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Sequence
from pathlib import Path

from recrawl import analytics, charts, fastsql
from recrawl.config import Config, default
from recrawl.crawldb_rules import FETCH_STATUSES


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _fmt(value) -> str:
    """A number for labels and tables: integers plainly, floats with 3 significant digits."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _nice_max(value: float, integer: bool = False) -> tuple[float, float]:
    """An axis maximum >= value and a tick step (1, 2 or 5 times a power of ten, at most ~5
    ticks); whole-number steps for counts."""
    if value <= 0:
        return 1.0, 1.0 if integer else 0.25
    raw = value / 4
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1.0, float(round(step)))
    return step * math.ceil(value / step - 1e-9), step


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def bar_chart(
    chart_id: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    stacked: bool = True,
    horizontal: bool = False,
    unit: str = "",
    integer: bool = True,
    width: int = 760,
    why: str = "",
) -> str:
    """An SVG bar chart (vertical or horizontal; stacked or grouped) with a legend.

    Args:
        chart_id: element id of the chart's <figure>.
        categories: one label per bar (group).
        series: (name, values) pairs; values align with `categories`, None counts as 0.
        stacked: stack the series in one bar per category (else side by side).
        horizontal: bars grow to the right, categories down the left (long labels: hosts).
        unit: appended to tooltip values.
        integer: the values are counts (whole-number axis ticks).
        why: trusted HTML shown when there is nothing to draw: why, and what to run.
    Returns:
        HTML for a <figure> holding the <svg> and its legend, or an empty-state note.
    """
    cats = [str(c) for c in categories]
    values = [[float(v or 0) for v in vals] for _, vals in series]
    if not cats or not series or not any(any(v) for v in values):
        note = f"No data yet. {why}" if why else "No data yet."
        return f'<figure class="chart empty" id="{esc(chart_id)}"><p>{note}</p></figure>'
    totals = [sum(col) for col in zip(*values, strict=True)] if stacked else \
        [max(col) for col in zip(*values, strict=True)]
    top, step = _nice_max(max(totals), integer)
    n_series = len(series)
    parts: list[str] = []
    if horizontal:
        label_w = min(260, 8 + 7 * max(len(_short(c, 36)) for c in cats))
        band = 26 if stacked or n_series == 1 else 10 + 12 * n_series
        height = 30 + band * len(cats) + 24
        plot_w = width - label_w - 70
        x0, y0 = label_w, 10

        def scale(v: float) -> float:
            return plot_w * v / top

        t = 0.0
        while t <= top + 1e-9:
            x = x0 + scale(t)
            parts.append(f'<line class="grid" x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" '
                         f'y2="{y0 + band * len(cats)}"/>')
            parts.append(f'<text class="tick" x="{x:.1f}" y="{y0 + band * len(cats) + 16}" '
                         f'text-anchor="middle">{esc(_fmt(t))}</text>')
            t += step
        for ci, cat in enumerate(cats):
            yb = y0 + ci * band
            parts.append(f'<text class="label" x="{x0 - 6}" y="{yb + band / 2 + 4:.1f}" '
                         f'text-anchor="end"><title>{esc(cat)}</title>{esc(_short(cat, 36))}</text>')
            offset = 0.0
            for si, (name, _) in enumerate(series):
                v = values[si][ci]
                if stacked:
                    x, y, h = x0 + scale(offset), yb + 4, band - 8
                    offset += v
                else:
                    h = (band - 8) / n_series
                    x, y = x0, yb + 4 + si * h
                w = scale(v)
                parts.append(_rect(name, cat, v, unit, x, y, w, h, si))
            end = x0 + scale(totals[ci] if stacked else max(values[si][ci] for si in range(n_series)))
            parts.append(f'<text class="value" x="{end + 4:.1f}" y="{yb + band / 2 + 4:.1f}">'
                         f'{esc(_fmt(totals[ci]))}</text>')
    else:
        rotate = len(cats) > 8 or max(len(c) for c in cats) > 12
        bottom = 70 if rotate else 28
        height = 190 + bottom
        plot_h = 160
        x0, y0 = 56, 14
        plot_w = width - x0 - 10
        band = plot_w / len(cats)
        bar_w = min(64.0, band * 0.7)

        def scale(v: float) -> float:
            return plot_h * v / top

        t = 0.0
        while t <= top + 1e-9:
            y = y0 + plot_h - scale(t)
            parts.append(f'<line class="grid" x1="{x0}" y1="{y:.1f}" x2="{x0 + plot_w}" y2="{y:.1f}"/>')
            parts.append(f'<text class="tick" x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">'
                         f'{esc(_fmt(t))}</text>')
            t += step
        for ci, cat in enumerate(cats):
            xc = x0 + band * ci + band / 2
            offset = 0.0
            for si, (name, _) in enumerate(series):
                v = values[si][ci]
                if stacked:
                    w, x = bar_w, xc - bar_w / 2
                    y = y0 + plot_h - scale(offset + v)
                    offset += v
                else:
                    w = bar_w / n_series
                    x = xc - bar_w / 2 + si * w
                    y = y0 + plot_h - scale(v)
                parts.append(_rect(name, cat, v, unit, x, y, w, scale(v), si))
                if not stacked and n_series > 1 and v:
                    parts.append(f'<text class="value small" x="{x + w / 2:.1f}" y="{y - 3:.1f}" '
                                 f'text-anchor="middle">{esc(_fmt(v))}</text>')
            if stacked or n_series == 1:
                yt = y0 + plot_h - scale(totals[ci])
                parts.append(f'<text class="value" x="{xc:.1f}" y="{yt - 4:.1f}" '
                             f'text-anchor="middle">{esc(_fmt(totals[ci]))}</text>')
            ly = y0 + plot_h + 16
            if rotate:
                parts.append(f'<text class="label" transform="translate({xc:.1f},{ly}) rotate(-35)" '
                             f'text-anchor="end"><title>{esc(cat)}</title>{esc(_short(cat, 22))}</text>')
            else:
                parts.append(f'<text class="label" x="{xc:.1f}" y="{ly}" text-anchor="middle">'
                             f'{esc(cat)}</text>')
        parts.append(f'<line class="axis" x1="{x0}" y1="{y0 + plot_h}" x2="{x0 + plot_w}" '
                     f'y2="{y0 + plot_h}"/>')
    legend = "".join(
        f'<li><span class="swatch" style="background:{charts.color(name, i)}"></span>{esc(name)}</li>'
        for i, (name, _) in enumerate(series)
    ) if n_series > 1 else ""
    svg = (f'<svg class="bars" viewBox="0 0 {width} {height}" width="100%" '
           f'preserveAspectRatio="xMinYMin meet" role="img">{"".join(parts)}</svg>')
    return (f'<figure class="chart" id="{esc(chart_id)}" data-bars="{len(cats) * n_series}">'
            f'{svg}{f"<ul class=legend>{legend}</ul>" if legend else ""}</figure>')


def _rect(series: str, category: str, value: float, unit: str, x, y, w, h, i: int) -> str:
    shown = _fmt(int(value) if value == int(value) else value)
    return (f'<rect class="bar" data-series="{esc(series)}" data-category="{esc(category)}" '
            f'data-value="{esc(shown)}" x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" '
            f'height="{max(h, 0):.1f}" fill="{charts.color(series, i)}"><title>{esc(category)} · '
            f'{esc(series)}: {esc(shown)}{esc(unit)}</title></rect>')


def table(records: list[dict], columns: Sequence[tuple[str, str]], table_id: str = "",
          why: str = "") -> str:
    """An HTML table of `records` showing `columns` ((key, heading) pairs); when there are none,
    "No rows." and `why` (trusted HTML: why the table is empty, and what to run)."""
    if not records:
        return f'<p class="empty">No rows. {why}</p>' if why else '<p class="empty">No rows.</p>'
    head = "".join(f"<th>{esc(h)}</th>" for _, h in columns)
    body = []
    for r in records:
        cells = []
        for key, _ in columns:
            v = r.get(key)
            cls = ' class="num"' if isinstance(v, int | float) and not isinstance(v, bool) else ""
            cells.append(f"<td{cls}>{esc(_fmt(v))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f'<table{ident}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _section(sid: str, title: str, intro: str, *body: str) -> str:
    return (f'<section id="{esc(sid)}"><h2>{esc(title)}</h2><p class="intro">{intro}</p>'
            f'{"".join(body)}</section>')


def _details(summary: str, content: str) -> str:
    return f"<details><summary>{esc(summary)}</summary>{content}</details>"


# Why a section is empty and what to run (shown in place of the chart or table).
_NO_ROUND = ("No round has run yet: <code>crawler init</code>, <code>crawler inject SEEDS</code>, "
             "then <code>crawler round --date DATE</code>.")
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
    """The report's HTML from a fast-path connection (see recrawl.fastsql.connect);
    the crawl's settings (`fetcher.min_delay_s`, `fetcher.max_crawl_delay_s`,
    `signals.future_tolerance_days`, `schedule.trivial_change_distance`; None: defaults.toml's)
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
    cards_html = "".join(f'<div class="card"><div class="v">{esc(_fmt(v))}</div>'
                         f'<div class="k">{esc(k)}</div></div>' for k, v in cards)
    rids = [r["round_id"] for r in rounds]
    sections = []
    sections.append(_section(
        "rounds", "Rounds over time",
        "URLs generated and fetched per round (a round is one logical day), and new URLs "
        "added to crawldb by its updatedb step.",
        bar_chart("chart-rounds", rids, [("generated", [r["generated"] for r in rounds]),
                                         ("fetched", [r["fetched"] for r in rounds]),
                                         ("new URLs", [r["new_urls"] for r in rounds])],
                  stacked=False, why=_NO_ROUND),
        _details("numbers", table(rounds, [("round_id", "round"), ("logical_date", "logical date"),
                                           ("started_at", "started"), ("duration_s", "duration s"),
                                           ("generated", "generated"), ("fetched", "fetched"),
                                           ("not_modified", "304"), ("pages", "pages"),
                                           ("new_urls", "new URLs"), ("duplicates", "duplicates")],
                                  "table-rounds")),
    ))
    cats, series = charts.pivot(status_rows, "round_id", "fetch_status", "n", FETCH_STATUSES)
    sections.append(_section(
        "fetch-status", "Fetch statuses per round",
        "What every fetch attempt ended as. <code>retry_later</code> is a host pushing back "
        "(429/503 or a Crawl-delay above the limit); <code>skipped_budget</code> ran out of time.",
        bar_chart("chart-fetch-status", cats, series, why=_NO_FETCH),
        _details("numbers", table(status_rows, [("round_id", "round"), ("fetch_status", "status"),
                                                ("n", "fetches")])),
    ))
    sections.append(_section(
        "throughput", "Throughput",
        "Fetched pages per second of the fetch step (first to last <code>fetch_time</code> of "
        "the round). Politeness, not bandwidth, bounds it: see the capacity table below.",
        bar_chart("chart-throughput", [r["round_id"] for r in thr],
                  [("pages/s", [r["pages_per_s"] for r in thr])], unit=" pages/s",
                  integer=False, why=_NO_FETCH),
        _details("numbers", table(thr, [("round_id", "round"), ("attempts", "attempts"),
                                        ("fetched", "fetched"), ("seconds", "seconds"),
                                        ("pages_per_s", "pages/s"),
                                        ("attempts_per_s", "attempts/s"),
                                        ("mean_duration_ms", "mean ms"), ("bytes", "bytes")])),
    ))
    sections.append(_section(
        "changes", "New vs changed pages",
        "Per round: pages fetched for the first time, pages whose content changed since their "
        "last fetch, and pages unchanged (304, same payload, or a trivial SimHash change).",
        bar_chart("chart-changes", [r["round_id"] for r in nvc],
                  [("new", [r["new"] for r in nvc]), ("changed", [r["changed"] for r in nvc]),
                   ("unchanged", [r["unchanged"] for r in nvc])], why=_NO_FETCH),
        _details("numbers", table(nvc, [("round_id", "round"), ("new", "new"),
                                        ("changed", "changed"), ("unchanged", "unchanged"),
                                        ("discovered", "URLs discovered")])),
    ))
    dcats, dseries = charts.pivot(dups, "round_id", "kind", "n", ("exact", "near"))
    sections.append(_section(
        "duplicates", "Duplicates",
        "URLs found to duplicate another page in each round: exact (same content hash) and "
        "near (SimHash within the configured Hamming distance). Biggest clusters below.",
        bar_chart("chart-duplicates", dcats, dseries, why=_NO_DUPS),
        table(clusters, [("canonical_url", "kept URL"), ("duplicates", "duplicates"),
                         ("exact", "exact"), ("near", "near"), ("max_distance", "max distance"),
                         ("examples", "examples")], "table-clusters", why=_NO_DUPS),
    ))
    sections.append(_section(
        "hosts", "Top hosts",
        f"The {top} hosts with the most known URLs, by crawldb status.",
        bar_chart("chart-hosts", [h["host"] for h in hosts],
                  [("fetched", [h["fetched"] for h in hosts]),
                   ("unfetched", [h["unfetched"] for h in hosts]),
                   ("other", [h["other"] for h in hosts])], horizontal=True, why=_NO_URLS),
        _details("numbers", table(hosts, [("host", "host"), ("urls", "URLs"), ("fetched", "fetched"),
                                          ("unfetched", "unfetched"), ("other", "other"),
                                          ("host_rank", "host rank"), ("trap", "trap")])),
    ))
    mcats, mseries = charts.pivot(mix, "host", "fetch_status", "n", FETCH_STATUSES)
    sections.append(_section(
        "status-mix", "Fetch status mix per host", "All rounds, the same hosts' fetch attempts.",
        bar_chart("chart-status-mix", mcats, mseries, horizontal=True, why=_NO_FETCH),
    ))
    sections.append(_section(
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
        _details("politeness capacity per host (pages/day = 86400 / delay)",
                 table(capacity[:top], [("host", "host"), ("urls", "URLs"),
                                        ("crawl_delay", "Crawl-delay s"), ("delay_s", "delay s"),
                                        ("max_pages_per_day", "max pages/day")],
                       why=_NO_URLS)),
    ))
    sections.append(_section(
        "change-rate", "Change rate and freshness",
        "Estimated changes per day (Poisson model) over URLs with an estimate, and the age of "
        "the stored copies at the last round's logical date.",
        "<h3>URLs by estimated change rate (changes per day)</h3>",
        bar_chart("chart-change-rate", [r["bucket"] for r in rates],
                  [("URLs", [r["urls"] for r in rates])], why=_NO_RATES),
        _details("numbers: URLs and the revisit interval the schedule chose, per rate bucket",
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
    sections.append(_section(
        "pagerank", "Top pages by PageRank", "From the last <code>crawler pagerank</code> run.",
        table(ranks, [("url", "URL"), ("title", "title"), ("pagerank", "PageRank"),
                      ("inlinks", "in-links"), ("status", "status")], "table-pagerank",
              why=_NO_SCORES),
    ))
    generated = now.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return _PAGE.format(
        title=esc(title), home=esc(home), generated=esc(generated), css=_CSS, cards=cards_html,
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
    return _section(
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
        _details("numbers: fetch-list URLs by reason, and the sitemap and feed reads "
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
        _details("numbers: decayed checks per host, and Last-Modified",
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
            trivial_change_distance=cfg.get("schedule.trivial_change_distance"),
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

_CSS = """
:root{--fg:#1d2330;--muted:#5b6475;--line:#d9dde5;--bg:#f6f7f9}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
 color:var(--fg);background:var(--bg)}
header{background:#1d2330;color:#fff;padding:18px 28px}
header h1{margin:0;font-size:22px}
header .meta{color:#c5cad6;font-size:13px;margin-top:4px}
header code{background:#2e3648;color:#fff}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);padding:8px 28px;
 z-index:1}
nav a{margin-right:16px;color:#0b5cad;text-decoration:none;font-size:13px}
main{max-width:1100px;margin:0 auto;padding:16px 28px 48px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:10px;margin:8px 0 4px}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.card .v{font-size:22px;font-weight:600}
.card .k{color:var(--muted);font-size:12px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:16px 0}
h2{font-size:17px;margin:0 0 4px}
.intro{color:var(--muted);margin:0 0 8px}
figure.chart{margin:8px 0}
figure.chart.empty p,.empty{color:var(--muted);font-style:italic}
svg.bars{display:block;max-width:100%;height:auto}
svg .grid{stroke:#eceef2;stroke-width:1}
svg .axis{stroke:#8a93a3;stroke-width:1}
svg text{font-size:11px;fill:#3a4252}
svg .tick{fill:#8a93a3}
svg .value{font-weight:600}
svg .value.small{font-size:10px;font-weight:400}
svg rect.bar:hover{opacity:.8}
ul.legend{list-style:none;padding:0;margin:4px 0 0;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px}
.swatch{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;vertical-align:-1px}
table{border-collapse:collapse;width:100%;font-size:12.5px;margin:8px 0}
th,td{border-bottom:1px solid #eceef2;padding:4px 8px;text-align:left;vertical-align:top;
 overflow-wrap:anywhere}
th{background:#f2f4f7;font-weight:600;white-space:nowrap}
h3{font-size:13px;font-weight:600;margin:12px 0 0;color:#3a4252}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
details summary{cursor:pointer;color:#0b5cad;font-size:13px;margin-top:6px}
code{background:#f2f4f7;padding:0 3px;border-radius:3px}
footer{color:var(--muted);font-size:12px;text-align:center;padding:12px}
"""

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

"""The report's HTML building blocks: inline SVG bar charts, tables, sections and the page's
CSS. Everything shown is escaped here (`esc`): a page title is attacker-controlled text. Bars
carry `data-series` / `data-category` / `data-value` attributes and a `<title>` tooltip, which
is also how tests read the rendered charts back."""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Sequence

from analyst import charts


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def fmt(value) -> str:
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


def nice_max(value: float, integer: bool = False) -> tuple[float, float]:
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
    top, step = nice_max(max(totals), integer)
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
                         f'text-anchor="middle">{esc(fmt(t))}</text>')
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
                         f'{esc(fmt(totals[ci]))}</text>')
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
                         f'{esc(fmt(t))}</text>')
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
                                 f'text-anchor="middle">{esc(fmt(v))}</text>')
            if stacked or n_series == 1:
                yt = y0 + plot_h - scale(totals[ci])
                parts.append(f'<text class="value" x="{xc:.1f}" y="{yt - 4:.1f}" '
                             f'text-anchor="middle">{esc(fmt(totals[ci]))}</text>')
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
    shown = fmt(int(value) if value == int(value) else value)
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
            cells.append(f"<td{cls}>{esc(fmt(v))}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f'<table{ident}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def section(sid: str, title: str, intro: str, *body: str) -> str:
    return (f'<section id="{esc(sid)}"><h2>{esc(title)}</h2><p class="intro">{intro}</p>'
            f'{"".join(body)}</section>')


def details(summary: str, content: str) -> str:
    return f"<details><summary>{esc(summary)}</summary>{content}</details>"


CSS = """
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

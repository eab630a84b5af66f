"""The charts of the crawl's standard questions: series, colours, and matplotlib bar charts.

`analyst.analytics` answers the questions (rows as dicts); this module draws them. `pivot` turns
long rows into a chart's categories and series, `color` gives a fetch status or series the same
colour in the HTML report's SVG (analyst.report) and in the notebooks, and `plot_bars` is the
report's bar chart in matplotlib, for notebooks.
"""

from __future__ import annotations

from collections.abc import Sequence

# matplotlib is imported inside `plot_bars`, not here: `crawler report` imports this module for
# `pivot` and `color` and draws its own SVG, and importing pyplot costs about a second (more
# than the report's whole fast path) and picks a backend.


def pivot(records: list[dict], row: str, col: str, value: str,
          col_order: Sequence[str] | None = None) -> tuple[list[str], list[tuple[str, list[float]]]]:
    """Long rows (row, col, value) -> categories in first-seen order and one series per `col`.

    Returns (categories, [(series name, values aligned with categories)]); series named in
    `col_order` come first, in that order.
    """
    cats: list[str] = []
    cols: list[str] = []
    cell: dict[tuple[str, str], float] = {}
    for r in records:
        c, s = str(r[row]), str(r[col])
        if c not in cats:
            cats.append(c)
        if s not in cols:
            cols.append(s)
        cell[(c, s)] = cell.get((c, s), 0) + (r[value] or 0)
    if col_order:
        cols = [c for c in col_order if c in cols] + [c for c in cols if c not in col_order]
    return cats, [(s, [cell.get((c, s), 0) for c in cats]) for s in cols]


def color(name: str, i: int = 0) -> str:
    """The colour of a fetch status or series name, the same in the report and the notebooks."""
    return STATUS_COLORS.get(name) or SERIES_COLORS.get(name) or PALETTE[i % len(PALETTE)]


# Okabe-Ito based, colour-blind safe; a status keeps its colour in every chart.
STATUS_COLORS = {
    "fetched": "#009E73", "not_modified": "#56B4E9", "redirect": "#CC79A7", "gone": "#999999",
    "robots_denied": "#8C564B", "http_error": "#D55E00", "timeout": "#E69F00",
    "dns_error": "#7F3C8D", "connect_error": "#B22222", "too_large": "#4D4D4D",
    "filtered_type": "#BCBD22", "retry_later": "#F0E442", "skipped_budget": "#C7C7C7",
}
SERIES_COLORS = {
    "generated": "#0072B2", "new URLs": "#E69F00", "new": "#E69F00", "changed": "#D55E00",
    "unchanged": "#56B4E9", "exact": "#CC79A7", "near": "#0072B2", "unfetched": "#C7C7C7",
    "other": "#D55E00", "URLs": "#0072B2", "pages/s": "#009E73", "overdue": "#D55E00",
    "signal": "#CC79A7", "due": "#0072B2", "fill": "#999999",
}
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"]


def plot_bars(categories: Sequence, series: Sequence[tuple[str, Sequence[float]]], *,
              stacked: bool = True, horizontal: bool = False, title: str = "", label: str = "",
              log: bool = False, ax=None):
    """A matplotlib bar chart of `series` over `categories` (the report's charts, for notebooks).

    Args:
        categories: bar labels.
        series: (name, values) pairs, e.g. from `pivot`.
        stacked: stack series (else side by side).
        horizontal: horizontal bars, first category on top.
        title, label: axes title and value-axis label.
        log: logarithmic value axis.
        ax: axes to draw on (default: a new figure).
    Returns:
        the matplotlib Axes.
    """
    import matplotlib.pyplot as plt  # lazy: heavy (matplotlib, an analytics extra)

    if ax is None:
        height = max(3.0, 0.35 * len(categories) + 1.2) if horizontal else 3.6
        _, ax = plt.subplots(figsize=(9, height))
    cats = [str(c) for c in categories]
    pos = list(range(len(cats)))
    n = max(1, len(series))
    width = 0.8 if stacked else 0.8 / n
    base = [0.0] * len(cats)
    for i, (name, values) in enumerate(series):
        vals = [float(v or 0) for v in values]
        shift = [p + (0 if stacked else (i - (n - 1) / 2) * width) for p in pos]
        kw = {"color": color(name, i), "label": name}
        if horizontal:
            ax.barh(shift, vals, height=width, left=base if stacked else None, **kw)
        else:
            ax.bar(shift, vals, width=width, bottom=base if stacked else None, **kw)
        if stacked:
            base = [b + v for b, v in zip(base, vals, strict=True)]
    if horizontal:
        ax.set_yticks(pos, cats)
        ax.invert_yaxis()
        ax.set_xlabel(label)
        if log:
            ax.set_xscale("log")
    else:
        ax.set_xticks(pos, cats, rotation=30 if len(cats) > 6 else 0, ha="right" if len(cats) > 6 else "center")
        ax.set_ylabel(label)
        if log:
            ax.set_yscale("log")
    if len(series) > 1:
        ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if all(float(v or 0).is_integer() for _, values in series for v in values):
        from matplotlib.ticker import MaxNLocator  # lazy: heavy (matplotlib)

        (ax.xaxis if horizontal else ax.yaxis).set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    ax.grid(axis="x" if horizontal else "y", alpha=0.3)
    ax.figure.tight_layout()
    return ax

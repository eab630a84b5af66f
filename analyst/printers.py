"""How `crawler sql` and `crawler status` print answers (table, csv, json): one set of
printers for the DuckDB path (analyst.fastsql) and the Spark path (app.sparksql).
"""

from __future__ import annotations

import csv
import itertools
import json
import sys
from collections.abc import Iterable, Sequence


def _cell(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, list | dict):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def format_table(columns: list[str], rows: list[list], max_width: int = 60) -> str:
    """A readable fixed-width table (long cells are cut with an ellipsis)."""
    cells = [[_cell(v) for v in r] for r in rows]
    cells = [[c if len(c) <= max_width else c[: max_width - 1] + "…" for c in r] for r in cells]
    widths = [len(c) for c in columns]
    for r in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    line = "+".join("-" * (w + 2) for w in widths)
    out = [" | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)), line]
    out += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(out)


def _plain(value):
    """Spark Rows (structs) as dicts, recursively, so both SQL engines print nested values alike."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def emit(columns: list[str], rows: Iterable[Sequence], fmt: str = "table", limit: int = 100,
         out=None) -> None:
    """Print a query answer as a table (first `limit` rows), CSV or JSON lines.

    Shared by the Spark path and the DuckDB fast path (analyst.fastsql) so that the same query
    prints the same text on both engines.
    """
    out = out or sys.stdout
    if fmt == "table":
        taken = [[_plain(v) for v in r] for r in itertools.islice(rows, limit + 1)]
        more = len(taken) > limit
        print(format_table(columns, taken[:limit]), file=out)
        print(f"({min(len(taken), limit)} row{'s' if len(taken) != 1 else ''}"
              f"{', more not shown: use --limit' if more else ''})", file=out)
    elif fmt == "csv":
        w = csv.writer(out)
        w.writerow(columns)
        for r in rows:
            w.writerow([_cell(v) if isinstance(v, list | dict) else v for v in map(_plain, r)])
    else:
        for r in rows:
            print(json.dumps(dict(zip(columns, map(_plain, r), strict=True)), default=str,
                             ensure_ascii=False), file=out)

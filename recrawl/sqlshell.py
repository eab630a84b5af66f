"""`crawler sql` and `crawler status`: Spark SQL over the registered crawl tables.

The printers (`emit`) are shared with the DuckDB fast path, recrawl.fastsql.
"""

from __future__ import annotations

import csv
import itertools
import json
import sys
from collections.abc import Iterable, Sequence

from recrawl.config import Config


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

    Shared by the Spark path and the DuckDB fast path (recrawl.fastsql) so that the same query
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


def run_sql(spark, cfg: Config, query: str, fmt: str = "table", limit: int = 100,
            out=None) -> int:
    """`crawler sql` on Spark: run every statement of `query` in order, printing each answer
    (a blank line between answers in table and csv format, as on the DuckDB path)."""
    from recrawl.fastsql import split_statements  # lazy: cycle (recrawl.fastsql imports emit from here)
    from recrawl.tables import register_tables  # lazy: pyspark (via recrawl.tables)

    statements = split_statements(query)
    if not statements:
        raise ValueError("no SQL statement given")
    out = out or sys.stdout
    register_tables(spark, cfg)
    spark.catalog.setCurrentDatabase(cfg.get("crawl.database"))
    for i, statement in enumerate(statements):
        df = spark.sql(statement)
        rows = df.limit(limit + 1).collect() if fmt == "table" else df.toLocalIterator()
        if i and fmt != "json":
            print(file=out)
        emit(df.columns, rows, fmt, limit, out=out)
    return 0


def print_status(spark, cfg: Config) -> int:
    # pyspark imports stay inside the Spark functions: the DuckDB fast path imports emit().
    from recrawl.schemas import TABLES  # lazy: pyspark (via recrawl.schemas)
    from recrawl.tables import read, table_exists  # lazy: pyspark (via recrawl.tables)

    print(f"crawl home: {cfg.home}")
    rows = []
    for name in TABLES:
        path = cfg.table_path(name)
        if not table_exists(spark, path):
            rows.append([name, "missing (run crawler init)", ""])
            continue
        df = read(spark, cfg, name, check=False)
        rows.append([name, df.count(), path])
    print(format_table(["table", "rows", "location"], rows, max_width=100))
    rounds_path = cfg.table_path("rounds")
    if table_exists(spark, rounds_path):
        last = (
            read(spark, cfg, "rounds", check=False)
            .orderBy("logical_date", "round_id", ascending=False).limit(1).collect()
        )
        if last:
            r = last[0]
            counts = ", ".join(f"{k}={v}" for k, v in sorted((r["counts"] or {}).items()))
            print(f"last round: {r['round_id']} (logical date {r['logical_date']}, "
                  f"steps {', '.join(r['steps_done'] or [])})")
            print(f"  counts: {counts}")
        else:
            print("last round: none yet")
    return 0

"""`crawler sql` and `crawler status`: Spark SQL over the registered crawl tables."""

from __future__ import annotations

import csv
import json
import sys

from recrawl.config import Config
from recrawl.schemas import TABLES
from recrawl.tables import register_tables, table_exists


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


def run_sql(spark, cfg: Config, query: str, fmt: str = "table", limit: int = 100) -> int:
    register_tables(spark, cfg)
    spark.catalog.setCurrentDatabase(cfg.get("crawl.database"))
    df = spark.sql(query)
    columns = df.columns
    if fmt == "table":
        rows = [list(r) for r in df.limit(limit + 1).collect()]
        more = len(rows) > limit
        print(format_table(columns, rows[:limit]))
        print(f"({min(len(rows), limit)} row{'s' if len(rows) != 1 else ''}"
              f"{', more not shown: use --limit' if more else ''})")
    elif fmt == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(columns)
        for r in df.toLocalIterator():
            w.writerow([_cell(v) if isinstance(v, list | dict) else v for v in r])
    else:
        for r in df.toLocalIterator():
            print(json.dumps(r.asDict(recursive=True), default=str, ensure_ascii=False))
    return 0


def print_status(spark, cfg: Config) -> int:
    print(f"crawl home: {cfg.home}")
    rows = []
    for name in TABLES:
        path = cfg.table_path(name)
        if not table_exists(spark, path):
            rows.append([name, "missing (run crawler init)", ""])
            continue
        df = spark.read.format("delta").load(path)
        rows.append([name, df.count(), path])
    print(format_table(["table", "rows", "location"], rows, max_width=100))
    rounds_path = cfg.table_path("rounds")
    if table_exists(spark, rounds_path):
        last = (
            spark.read.format("delta").load(rounds_path)
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

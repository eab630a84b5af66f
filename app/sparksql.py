"""`crawler sql --spark` and `crawler status`: Spark SQL over the registered crawl tables,
printed by the analysts' printers (analyst.printers); the DuckDB path is analyst.fastsql."""

from __future__ import annotations

import sys

from analyst.fastsql import split_statements
from analyst.printers import emit, format_table
from recrawl.config import Config


def run_sql(spark, cfg: Config, query: str, fmt: str = "table", limit: int = 100,
            out=None) -> int:
    """`crawler sql` on Spark: run every statement of `query` in order, printing each answer
    (a blank line between answers in table and csv format, as on the DuckDB path)."""
    from recrawl.store.tables import register_tables  # lazy: pyspark (via recrawl.store.tables)

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
    from recrawl.store.schemas import TABLES  # lazy: pyspark (via recrawl.store.schemas)
    from recrawl.store.tables import read, table_exists  # lazy: pyspark (via recrawl.store.tables)

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

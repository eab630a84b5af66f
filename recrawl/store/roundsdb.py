"""The `rounds` table: one row per round with each step's counts, timing and gate results
(recrawl.rules.rounds builds the row)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import replace

from recrawl.config import Config
from recrawl.rules.rounds import FINISHING_STEPS, StepRun, step_row


def record_step(
    spark, cfg: Config, round_id: str, logical: dt.datetime, step: str, counts: Mapping[str, int],
    run: StepRun | None = None,
    round_gates: Callable[[Mapping[str, int]], Mapping[str, str]] | None = None,
) -> dict:
    """Merge one step's counts (and timing and gates) into the round's row (re-running a step
    replaces its own); returns the row as written.

    `round_gates` (the round's last step): the round's health gates over the merged counts
    (gate -> "ok" or a failure line), recorded with the step's own as `round.<gate>`.

    On a local crawl home the row is read and replaced through delta-rs (recrawl.store.tables
    `replace_rows`): one commit of ~20 ms and no Spark job, where Spark's UPDATE of the row
    cost ~0.7-1.3 s of every step (docs/airflow.md). On object storage, Spark: the round's
    first step appends the row, later steps UPDATE it in place. Steps of one crawl home never
    run concurrently (the crawl lock), so the read and the write need no MERGE to stay
    consistent.
    """
    # lazy: pyspark. app/cli imports this module for its DuckDB verbs too, which must not load
    # pyspark (the schemas and the table API import its types).
    from recrawl.store import tables  # lazy: pyspark (via recrawl.store.schemas)

    now = dt.datetime.now(dt.UTC)

    def new_row(prev: Mapping | None) -> dict:
        row = step_row(prev, round_id, logical, step, counts, now, run)
        if round_gates is None or run is None or run.failed_gate is not None:
            return row
        extra = {f"round.{g}": r for g, r in round_gates(row["counts"]).items()}
        failed = next((g for g, r in extra.items() if r != "ok"), None)
        return step_row(prev, round_id, logical, step, counts, now,
                        replace(run, gates={**run.gates, **extra}, failed_gate=failed))

    if tables.local_rows_supported(cfg):
        existing = tables.rows_where(cfg, "rounds", "round_id", round_id)
        row = new_row(existing[0] if existing else None)
        tables.replace_rows(cfg, "rounds", "round_id", round_id, [row])
        return row
    from recrawl.store.schemas import ROUNDS  # lazy: pyspark (via recrawl.store.schemas)

    where = f"round_id = {tables.sql_str(round_id)}"
    existing = tables.read(spark, cfg, "rounds").where(where).collect()
    prev = existing[0].asDict() if existing else None
    row = new_row(prev)
    if prev is None:
        tables.append(spark.createDataFrame([row], ROUNDS), cfg, "rounds")
        return row
    changes = {
        "counts": _map_sql(row["counts"]),
        "steps_done": "array(" + ", ".join(tables.sql_str(s) for s in row["steps_done"]) + ")",
        "started_at": f"coalesce(started_at, {tables.ts_lit(now)})",
        "step_started_at": _map_sql(row["step_started_at"], "TIMESTAMP"),
        "step_seconds": _map_sql(row["step_seconds"], "DOUBLE"),
        "step_cpu_seconds": _map_sql(row["step_cpu_seconds"], "DOUBLE"),
        "gates": _map_sql(row["gates"], "STRING"),
        "failed_gate": "NULL" if row["failed_gate"] is None else tables.sql_str(row["failed_gate"]),
    }
    if row["finished_at"] is not None and step in FINISHING_STEPS:
        changes["finished_at"] = tables.ts_lit(now)
    tables.update_where(spark, cfg, "rounds", where, changes)
    return row


def _map_sql(values: Mapping, kind: str = "BIGINT") -> str:
    """A map<string,`kind`> literal in Spark SQL (BIGINT, DOUBLE, STRING or TIMESTAMP values)."""
    from recrawl.store.tables import sql_str, ts_lit  # lazy: pyspark (via recrawl.store.tables)

    def lit(v) -> str:
        if kind == "TIMESTAMP":
            return ts_lit(v)
        if kind == "STRING":
            return sql_str(str(v))
        return f"CAST({int(v) if kind == 'BIGINT' else float(v)!r} AS {kind})"

    keys = ", ".join(sql_str(k) for k in values)
    items = ", ".join(lit(v) for v in values.values())
    return f"CAST(map_from_arrays(array({keys}), array({items})) AS MAP<STRING, {kind}>)"

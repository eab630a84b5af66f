"""Round identity and bookkeeping: the `rounds` table with per-step counts.

A round is identified by its logical date (Airflow's data interval start); every step takes the
round id and the date, and all scheduling arithmetic uses the logical date, never the wall clock,
so backfills and tests can run days in minutes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from recrawl.config import Config

STEPS = ("signals", "generate", "fetch", "parse", "dedup", "updatedb", "schedule")


class BadInput(ValueError):
    """Invalid user input (date, round id, file); the message says what is wrong."""


def parse_date(value: str) -> dt.datetime:
    """An ISO date or datetime as an aware UTC datetime (naive values are taken as UTC)."""
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"--date {value!r} is not an ISO date (e.g. 2026-11-29)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def round_id_for(cfg: Config, logical: dt.datetime) -> str:
    return logical.strftime(cfg.get("crawl.round_id_format"))


def check_round_id(round_id: str) -> str:
    """Round ids end up in partition values and paths: keep them to a safe alphabet."""
    if not round_id or not all(c.isalnum() or c in "-_" for c in round_id) or len(round_id) > 64:
        raise BadInput(f"round id {round_id!r} must be 1-64 letters, digits, '-' or '_'")
    return round_id


FINISHING_STEPS = ("updatedb", "schedule")


@dataclass(frozen=True)
class StepRun:
    """How one run of a step went: when it started, its wall and driver-CPU seconds, and the
    health gates checked after it (`gate` -> "ok" or the failure line, recrawl.gates)."""

    started_at: dt.datetime
    seconds: float
    cpu_seconds: float
    gates: Mapping[str, str] = field(default_factory=dict)
    failed_gate: str | None = None  # the gate that failed the step (its line is in `gates`)


def _pairs(value) -> dict:
    """A map column as a dict (delta-rs returns (key, value) pairs, Spark a dict)."""
    return dict(value or {})


def _replace_step(old: Mapping, step: str, new: Mapping) -> dict:
    """`old` with the keys of `step` (`<step>.`-prefixed, or the step itself) replaced by `new`."""
    kept = {k: v for k, v in old.items() if k != step and not k.startswith(step + ".")}
    return {**kept, **new}


def step_row(prev: Mapping | None, round_id: str, logical: dt.datetime, step: str,
             counts: Mapping[str, int], now: dt.datetime, run: StepRun | None = None) -> dict:
    """The round's row after `step` reported `counts` (the one rule both writers follow).

    The step's counts are stored as `<step>.<key>`, replacing what an earlier run of the same
    step stored; the step moves to the end of `steps_done`; `started_at` is the first step's
    time; updatedb and schedule set `finished_at`. `run` adds the step's timing and gates; a
    failed gate leaves the step out of `steps_done` (a re-run runs it again) and names the
    gate in `failed_gate`, which the step's next run clears.
    """
    prev = prev or {}
    failed = run is not None and run.failed_gate is not None
    merged = _replace_step(_pairs(prev.get("counts")), step,
                           {f"{step}.{k}": int(v) for k, v in counts.items()})
    steps = [s for s in (prev.get("steps_done") or []) if s != step]
    if not failed:
        steps.append(step)
    started = prev.get("started_at") or now
    finished = now if step in FINISHING_STEPS and not failed else prev.get("finished_at")
    row = {"round_id": round_id, "logical_date": prev.get("logical_date") or logical.date(),
           "started_at": started, "finished_at": finished, "counts": merged, "steps_done": steps}
    timing = {"step_started_at": _pairs(prev.get("step_started_at")),
              "step_seconds": _pairs(prev.get("step_seconds")),
              "step_cpu_seconds": _pairs(prev.get("step_cpu_seconds")),
              "gates": _pairs(prev.get("gates"))}
    gate = prev.get("failed_gate")
    if run is not None:
        timing["step_started_at"][step] = run.started_at
        timing["step_seconds"][step] = float(run.seconds)
        timing["step_cpu_seconds"][step] = float(run.cpu_seconds)
        timing["gates"] = _replace_step(timing["gates"], step,
                                        {f"{step}.{g}": v for g, v in run.gates.items()})
        if gate and gate.startswith(step + "."):
            gate = None
        if failed:
            gate = f"{step}.{run.failed_gate}"
    return {**row, **timing, "failed_gate": gate}


def record_step(
    spark, cfg: Config, round_id: str, logical: dt.datetime, step: str, counts: Mapping[str, int],
    run: StepRun | None = None,
    round_gates: Callable[[Mapping[str, int]], Mapping[str, str]] | None = None,
) -> dict:
    """Merge one step's counts (and timing and gates) into the round's row (re-running a step
    replaces its own); returns the row as written.

    `round_gates` (the round's last step): the round's health gates over the merged counts
    (gate -> "ok" or a failure line), recorded with the step's own as `round.<gate>`.

    On a local crawl home the row is read and replaced through delta-rs (recrawl.tables
    `replace_rows`): one commit of ~20 ms and no Spark job, where Spark's UPDATE of the row
    cost ~0.7-1.3 s of every step (docs/airflow.md). On object storage, Spark: the round's
    first step appends the row, later steps UPDATE it in place. Steps of one crawl home never
    run concurrently (the crawl lock), so the read and the write need no MERGE to stay
    consistent.
    """
    # lazy: pyspark. app/cli imports this module for its DuckDB verbs too, which must not load
    # pyspark (the schemas and the table API import its types).
    from recrawl import tables  # lazy: pyspark (via recrawl.schemas)

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
    from recrawl.schemas import ROUNDS  # lazy: pyspark (via recrawl.schemas)

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
    from recrawl.tables import sql_str, ts_lit  # lazy: pyspark (via recrawl.tables)

    def lit(v) -> str:
        if kind == "TIMESTAMP":
            return ts_lit(v)
        if kind == "STRING":
            return sql_str(str(v))
        return f"CAST({int(v) if kind == 'BIGINT' else float(v)!r} AS {kind})"

    keys = ", ".join(sql_str(k) for k in values)
    items = ", ".join(lit(v) for v in values.values())
    return f"CAST(map_from_arrays(array({keys}), array({items})) AS MAP<STRING, {kind}>)"

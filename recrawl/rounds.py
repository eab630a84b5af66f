"""Round identity and bookkeeping: the `rounds` table with per-step counts.

A round is identified by its logical date (Airflow's data interval start); every step takes the
round id and the date, and all scheduling arithmetic uses the logical date, never the wall clock,
so backfills and tests can run days in minutes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

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


def step_row(prev: Mapping | None, round_id: str, logical: dt.datetime, step: str,
             counts: Mapping[str, int], now: dt.datetime) -> dict:
    """The round's row after `step` reported `counts` (the one rule both writers follow).

    The step's counts are stored as `<step>.<key>`, replacing what an earlier run of the same
    step stored; the step moves to the end of `steps_done`; `started_at` is the first step's
    time; updatedb and schedule set `finished_at`.
    """
    old = dict(prev["counts"] or {}) if prev else {}
    merged = {k: v for k, v in old.items() if not k.startswith(step + ".")}
    merged.update({f"{step}.{k}": int(v) for k, v in counts.items()})
    steps = [s for s in (prev["steps_done"] or []) if s != step] if prev else []
    steps.append(step)
    started = (prev["started_at"] if prev else None) or now
    finished = now if step in FINISHING_STEPS else (prev["finished_at"] if prev else None)
    return {"round_id": round_id, "logical_date": prev["logical_date"] if prev else logical.date(),
            "started_at": started, "finished_at": finished, "counts": merged, "steps_done": steps}


def record_step(
    spark, cfg: Config, round_id: str, logical: dt.datetime, step: str, counts: Mapping[str, int]
) -> None:
    """Merge one step's counts into the round's row (re-running a step replaces its counts).

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
    if tables.local_rows_supported(cfg):
        existing = tables.rows_where(cfg, "rounds", "round_id", round_id)
        row = step_row(existing[0] if existing else None, round_id, logical, step, counts, now)
        tables.replace_rows(cfg, "rounds", "round_id", round_id, [row])
        return
    from recrawl.schemas import ROUNDS  # lazy: pyspark (via recrawl.schemas)

    where = f"round_id = {tables.sql_str(round_id)}"
    existing = tables.read(spark, cfg, "rounds").where(where).collect()
    prev = existing[0].asDict() if existing else None
    row = step_row(prev, round_id, logical, step, counts, now)
    if prev is None:
        tables.append(spark.createDataFrame([row], ROUNDS), cfg, "rounds")
        return
    changes = {
        "counts": _map_sql(row["counts"]),
        "steps_done": "array(" + ", ".join(tables.sql_str(s) for s in row["steps_done"]) + ")",
        "started_at": f"coalesce(started_at, {tables.ts_lit(now)})",
    }
    if step in FINISHING_STEPS:
        changes["finished_at"] = tables.ts_lit(now)
    tables.update_where(spark, cfg, "rounds", where, changes)


def _map_sql(counts: Mapping[str, int]) -> str:
    """A map<string,bigint> literal in Spark SQL."""
    from recrawl.tables import sql_str  # lazy: pyspark (via recrawl.tables)

    keys = ", ".join(sql_str(k) for k in counts)
    values = ", ".join(f"CAST({int(v)} AS BIGINT)" for v in counts.values())
    return f"CAST(map_from_arrays(array({keys}), array({values})) AS MAP<STRING, BIGINT>)"

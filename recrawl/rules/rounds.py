"""Round identity and bookkeeping: the steps, round ids and the `rounds` row a step writes
(recrawl.store.roundsdb writes it to the table).

A round is identified by its logical date (Airflow's data interval start); every step takes the
round id and the date, and all scheduling arithmetic uses the logical date, never the wall clock,
so backfills and tests can run days in minutes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

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
    health gates checked after it (`gate` -> "ok" or the failure line, recrawl.rules.gates)."""

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

"""Which step and round a Spark job belongs to: its job group and description, and the stage
lines a long step logs as it advances.

`step_label` wraps one step (app/cli.run_step, the one entry point of every step) so the
Spark UI reads "fetch 20261101: ..." instead of a py4j call site; `stage` moves the label
and prints one line to stderr (the Airflow task log), so a step of many minutes says where
it is. Outside a step, `stage` only prints.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

_current: dict[str, object] = {}


def _set(spark, group: str, description: str) -> None:
    sc = spark.sparkContext
    sc.setJobGroup(group, description, interruptOnCancel=False)
    sc.setLocalProperty("spark.job.description", description)


@contextmanager
def step_label(spark, step: str, round_id: str) -> Iterator[None]:
    """Label every Spark job started inside with `step round_id` (group) and its stage."""
    label = f"{step} {round_id}"
    _current.update(spark=spark, label=label, t0=time.monotonic())
    _set(spark, label, label)
    try:
        yield
    finally:
        _current.clear()
        sc = spark.sparkContext
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)


def stage(spark, what: str) -> None:
    """The running step has reached `what`: relabel its jobs and print one line."""
    label = _current.get("label")
    if label is None:
        print(f"{what}", file=sys.stderr, flush=True)
        return
    elapsed = time.monotonic() - float(_current["t0"])  # type: ignore[arg-type]
    print(f"{label}: {what} (+{elapsed:.0f}s)", file=sys.stderr, flush=True)
    if spark is not None:
        _set(spark, str(label), f"{label}: {what}")

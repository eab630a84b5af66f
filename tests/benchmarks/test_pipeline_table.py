"""benchmarks/pipeline_freshness.py without Spark: the theory line the policies are read
against, and runs saved by --json merged into one table."""

from __future__ import annotations

import argparse
import json
import math

from benchmarks.pipeline_freshness import Day, Page, PolicyRun, load_runs, table, theory


def _args(share=0.2, min_interval=1.0):
    return argparse.Namespace(budget_share=share, min_interval=min_interval)


def test_theory_puts_the_optimum_at_or_above_fixed_and_both_in_range():
    rates = [0.003, 0.03, 0.14, 1.0, 5.0] * 4
    pages = {("h", f"/{i}"): Page(("h", f"/{i}"), r, 1 / len(rates)) for i, r in enumerate(rates)}
    line = theory(pages, budget=4, args=_args(), max_interval=30.0)
    nums = [float(x.rstrip(",;")) for x in line.replace("(", " ").replace(")", " ").split()
            if x.replace(".", "", 1).rstrip(",;").isdigit()]
    fixed, wfixed, opt, wopt = nums
    assert 0 < fixed <= opt <= 1 and 0 < wfixed <= wopt <= 1
    # fixed at the budget's interval (5 days) by the Poisson formula
    want = sum((1 - math.exp(-r * 5)) / (r * 5) for r in rates) / len(rates)
    assert abs(fixed - want) < 5e-4


def test_runs_saved_in_two_files_merge_into_one_table(tmp_path):
    def run(policy, fresh):
        days = [Day(d, fresh, fresh, 0.5, 1.0, 10, 2, 1.0) for d in range(6)]
        return {"policy": policy, "spearman": 0.5, "rated": 9, "wall_s": 6.0,
                "days": [vars(d) for d in days], "by_class": []}

    (tmp_path / "a.json").write_text(json.dumps([run("fixed", 0.5), run("optimal", 0.6)]))
    (tmp_path / "b.json").write_text(json.dumps([run("oracle", 0.7)]))
    runs = load_runs([str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert [r.policy for r in runs] == ["fixed", "optimal", "oracle"]
    assert all(isinstance(r, PolicyRun) and len(r.days) == 6 for r in runs)
    lines = table(runs, warmup=2)
    row = {ln.split()[0]: ln.split() for ln in lines if ln.split() and ln.split()[0] in
           ("fixed", "optimal", "oracle")}
    assert row["optimal"][2] == "+20.0%" and row["oracle"][2] == "+40.0%"


def test_class_freshness_is_averaged_after_warmup_and_set_against_the_chase_bound():
    from benchmarks.pipeline_freshness import class_fresh_lines

    days = [Day(d, 0.5, 0.5, 0.5, 1.0, 10, 2, 1.0,
                fresh_by_class={"1": 0.2 if d < 2 else 0.6, "0.003": 1.0}) for d in range(6)]
    (line,) = class_fresh_lines([PolicyRun("signals", days, 0.5, 9, 6.0)], warmup=2)
    # ordered by rate; days 0-1 left out; 1 change a day: (1 - e^-1) / 1 of the day at best
    assert line.index("0.003/d 1.000") < line.index("1/d 0.600 (chase 0.632)")

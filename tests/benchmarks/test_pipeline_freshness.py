"""A short pipeline freshness benchmark: the change-rate policy against fixed at equal fetches.

The real steps over simweb (benchmarks/pipeline_freshness.py) on a small web for a few days,
with a budget that lets both policies hold every page by the end. The comparison at equal
fetches is issue #16's target; it holds since the change history is kept (docs/freshness.md),
as a tie: four days on 19 pages do not separate the policies.

Marked slow (out of the default run, like the other benchmarks): 8 simulated rounds through
every step, 5 min on the idle machine (11-22 min of CI on two cores before), for a comparison
that ties. Run it with `bash scripts/test.sh -m slow tests/benchmarks/test_pipeline_freshness.py`.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.timeout(1800)  # ~3 min on two idle cores, more on a shared machine
def test_optimal_beats_fixed_at_equal_fetches(spark, tmp_path):
    from benchmarks.pipeline_freshness import parse_args, run_policy

    args = parse_args(["--days", "4", "--sites", "2", "--pages", "10", "--budget-share", "0.5",
                       "--warmup", "2", "--seed", "7"])
    runs = {p: run_policy(spark, p, args, str(tmp_path)) for p in ("fixed", "optimal")}
    avg = {p: r.averages(args.warmup) for p, r in runs.items()}
    for p, r in runs.items():
        assert [d.day for d in r.days] == list(range(4))
        assert r.days[-1].coverage == 1.0, p  # the budget allows every page to be held
        assert all(0.0 <= d.fresh <= d.coverage for d in r.days)
    fixed, optimal = avg["fixed"], avg["optimal"]
    budget = 10  # ceil(0.5 x 19 fetchable pages)
    assert fixed["fetches_per_day"] <= budget and optimal["fetches_per_day"] <= budget
    assert fixed["fetches_per_day"] >= 0.8 * budget  # fixed's 2-day interval spends it
    # Issue #16's target: at equal fetches the change-rate policy is at least as fresh as
    # fixed. Held since the change-history fix (99ef5b3) and robots-denied parking (fd0369d):
    # on 2026-12-04 both made 10 requests on day 3 and both were at 0.916 (before: optimal
    # 0.871, then an expected failure; docs/freshness.md). Four days on 19 pages tie, and so do
    # 60 days on 88 pages on plain freshness (the 60-day table in docs/freshness.md).
    assert optimal["fetches_per_day"] == pytest.approx(fixed["fetches_per_day"], rel=0.25), avg
    assert optimal["fresh"] >= fixed["fresh"], avg

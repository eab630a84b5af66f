"""A short pipeline freshness benchmark: the change-rate policy against fixed at equal fetches.

The real steps over simweb (benchmarks/pipeline_freshness.py) on a small web for a few days,
with a budget that lets both policies hold every page by the end. The comparison at equal
fetches is issue #16's target; it holds since the change history is kept (docs/freshness.md),
as a tie: four days on 19 pages do not separate the policies. What CI gets from it is a guard
on the whole path (updatedb's change detection, the estimate, schedule, generate): this test
found the change-rate policy behind fixed on day 3 (0.871 against 0.916), first leaving 70 %
of its budget unspent, then, with the budget spent, from a change history the pipeline did
not keep (docs/freshness.md, "The short run").

In the default run since 2026-12-05: 8 rounds through every step, 165 s on the idle machine
(rounds 15-18 s once a small round's commits went through delta-rs; 5 min at 28-53 s a round
before, when it was marked slow).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.spark]


@pytest.mark.timeout(1800)  # ~3 min on two idle cores, more beside CI's other workers
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

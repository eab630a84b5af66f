"""A short pipeline freshness benchmark: change signals against today's change-rate policy.

The real steps over simweb (benchmarks/pipeline_freshness.py) on a small *mixed* web for a few
days: of 5 sites, 2 publish honest sitemap dates, 1 none, 1 stamps every URL with the day,
1 never moves a date; 2 publish a feed. Both policies get the same budget and the same web
(seed); the change-rate policy runs without the signals step, as the crawler did before it.
What CI gets from it is the ordering the full benchmark measures (docs/freshness.md, "Change
signals"): reading signals is at least as fresh as not reading them and wastes fewer fetches
on unchanged pages, the lying hosts never become trusted and cost at most the probe fetches a
day, and the whole path (signals step, generate's budget rule, updatedb's checks, schedule's
estimator) runs on every submission.
"""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.spark]


@pytest.mark.timeout(2400)  # ~5 min on two idle cores, more beside CI's other workers
def test_signals_beat_the_change_rate_policy_and_liars_lose_trust(spark, tmp_path):
    from benchmarks.pipeline_freshness import parse_args, run_policy

    # 20 pages a site: on a smaller web a site's daily sitemap and feed reads (counted in the
    # budget) would be a third of its fetches; half the pages a day: both policies hold every
    # page from day 2 on, and the days after compare revisits, not discovery
    args = parse_args(["--days", "5", "--sites", "5", "--pages", "20", "--budget-share", "0.5",
                       "--warmup", "2", "--seed", "7", "--web", "mixed", "--feeds", "0.4"])
    runs = {p: run_policy(spark, p, args, str(tmp_path)) for p in ("optimal", "signals")}
    avg = {p: r.averages(args.warmup) for p, r in runs.items()}
    for p, r in runs.items():
        assert [d.day for d in r.days] == list(range(5))
        assert all(0.0 <= d.fresh <= d.coverage for d in r.days)
        assert r.days[-1].coverage >= 0.9, p
    optimal, signals = avg["optimal"], avg["signals"]
    assert signals["fresh"] >= optimal["fresh"], avg
    assert signals["unchanged_per_day"] <= optimal["unchanged_per_day"], avg
    sig = runs["signals"]
    assert sig.liars == 2
    assert all(d.trusted_liars == 0 for d in sig.days), [d.trusted_liars for d in sig.days]
    # once read, the liars cost at most the verification probes (signals.probe_per_host) a day
    assert all(d.liar_signal_fetches <= 2 * sig.liars for d in sig.days)
    assert sig.days[-1].trusted_honest >= 1
    assert sum(d.signal_reads for d in sig.days) > 0
    assert sum(d.signal_fetches for d in sig.days) > sum(d.liar_signal_fetches for d in sig.days)


def _saved(policy: str, web: str, fresh: float) -> dict:
    day = {"day": 0, "fresh": fresh, "wfresh": fresh, "age": 0.1, "coverage": 1.0,
           "requests": 1, "unchanged": 0, "wall_s": 1.0}
    return {"policy": policy, "web": web, "spearman": 0.5, "rated": 1, "days": [day],
            "by_class": []}


def test_merged_runs_of_one_policy_on_two_webs_keep_apart(tmp_path):
    # --merge of a mixed-web and an honest-web file: both hold `signals`, and the table must
    # show two rows, not one twice
    from benchmarks.pipeline_freshness import load_runs

    (tmp_path / "a.json").write_text(json.dumps([_saved("signals", "mixed", 0.7),
                                                 _saved("fixed", "mixed", 0.6)]))
    (tmp_path / "b.json").write_text(json.dumps([_saved("signals", "accurate", 0.8)]))
    runs = load_runs([str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert [(r.policy, r.days[0].fresh) for r in runs] == [
        ("signals@mixed", 0.7), ("fixed", 0.6), ("signals@accurate", 0.8)]


def test_merged_runs_of_one_policy_on_one_web_are_named_by_file(tmp_path):
    # two versions of the code on the same web: each row keeps its own figures
    from benchmarks.pipeline_freshness import load_runs

    (tmp_path / "old.json").write_text(json.dumps([_saved("signals", "mixed", 0.7)]))
    (tmp_path / "new.json").write_text(json.dumps([_saved("signals", "mixed", 0.8)]))
    runs = load_runs([str(tmp_path / "old.json"), str(tmp_path / "new.json")])
    assert [(r.policy, r.days[0].fresh) for r in runs] == [
        ("signals@old", 0.7), ("signals@new", 0.8)]

"""The scale benchmark and its synthetic crawl state still run end to end (5k URLs)."""

from __future__ import annotations

import argparse

import pytest

# slow: ~3 min on idle cores, 9 min on a shared machine; kept out of CI's default run
pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.timeout(1800)  # ~3 min on two idle cores; ~10 min when the machine is shared
def test_scale_bench_smoke(spark, tmp_path):
    from benchmarks.scale_bench import STAGES, run_bench

    args = argparse.Namespace(
        urls=5000, home=str(tmp_path / "home"), seed=3, urls_per_host=50, top_n_fraction=0.1,
        pagerank_iterations=1, master="local[*]", driver_memory="1g", stages=list(STAGES),
        reuse=False, set=["spark.shuffle_partitions=2"], json=None, crawldb_props=None,
        rewrite_floor=True,
    )
    results = {r["stage"]: r for r in run_bench(args, spark=spark)}
    assert list(results) == list(STAGES)
    for r in results.values():
        assert r["wall"] > 0 and r["floor"] > 0 and r["rows"] > 0
    assert 0 < results["generate"]["counts"]["generated"] <= 500
    assert results["dedup"]["counts"]["new_pages"] > 0
    assert results["dedup"]["counts"]["exact"] > 0  # planted copies are found
    up = results["updatedb"]["counts"]
    assert up["applied_fetched"] > 0 and up["new_urls"] > 0 and up["crawldb_urls"] > 5000
    assert results["pagerank"]["counts"]["iterations"] == 1
    # the crawldb copy is timed only before the steps that rewrite crawldb
    assert results["updatedb"]["rewrite_floor"] > 0 and results["pagerank"]["rewrite_floor"] > 0
    assert results["generate"]["rewrite_floor"] is None

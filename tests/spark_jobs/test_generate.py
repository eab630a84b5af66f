"""generate's pure parts, without Spark: the per-host cap, packing hosts into fetch
partitions, open rounds' marks, partition offsets. (The round on Spark: test_generate_*.py.)"""

from recrawl.rules.crawldb_rules import per_host_cap
from spark_jobs.generate import pack_hosts


def test_per_host_cap_follows_budget_over_delay():
    assert per_host_cap(300, 1.0, 0) == 300
    assert per_host_cap(300, 30.0, 0) == 10
    assert per_host_cap(10, 60.0, 0) == 1  # always at least one
    assert per_host_cap(300, 1.0, 7) == 7  # configured cap wins


def test_pack_hosts_balances_expected_time_not_counts():
    loads = [("slow", 100.0), ("a", 30.0), ("b", 30.0), ("c", 30.0), ("d", 10.0)]
    parts = pack_hosts(loads, 2)
    assert set(parts) == {"slow", "a", "b", "c", "d"}
    totals = {}
    for host, load in loads:
        totals[parts[host]] = totals.get(parts[host], 0) + load
    assert sorted(totals.values()) == [100.0, 100.0]
    # the slow host is alone: by count the partitions differ (1 vs 4 hosts)
    assert sum(1 for p in parts.values() if p == parts["slow"]) == 1


def test_pack_hosts_deterministic_and_handles_empty():
    loads = [(f"h{i}", float(i % 3 + 1)) for i in range(20)]
    assert pack_hosts(loads, 3) == pack_hosts(list(reversed(loads)), 3)
    assert pack_hosts([], 4) == {}


def test_open_rounds_are_generated_not_applied_and_unexpired():
    import datetime as dt

    from spark_jobs.generate import open_rounds

    # started_at is the wall clock of the round's first step, whatever its logical date
    expiry = dt.datetime(2026, 11, 20, 12, 0)
    rounds = [
        ("done", dt.datetime(2026, 11, 25), ["generate", "fetch", "updatedb"]),
        ("out", dt.datetime(2026, 11, 25), ["generate", "fetch"]),
        ("expired", dt.datetime(2026, 11, 20, 11, 59), ["generate"]),
        ("no-generate", dt.datetime(2026, 11, 25), None),
        ("no-start", None, ["generate"]),
        ("current", dt.datetime(2026, 11, 26), ["generate"]),
        ("b-out", dt.datetime(2026, 11, 20, 12, 0), ["generate"]),
    ]
    assert open_rounds(rounds, "current", expiry) == ["b-out", "out"]
    assert open_rounds([], "current", expiry) == []

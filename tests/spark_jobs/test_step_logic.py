"""Pure per-step logic of the Spark jobs, tested without Spark."""

import pytest

from recrawl.crawldb_rules import per_host_cap
from recrawl.rounds import BadInput
from recrawl.urlnorm import DEFAULT_RULES
from spark_jobs.generate import pack_hosts
from spark_jobs.inject import read_seeds
from spark_jobs.updatedb import url_shape


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


def test_read_seeds_reports_line_numbers_and_dedupes(tmp_path):
    f = tmp_path / "seeds.txt"
    f.write_bytes(
        b"# comment\n\nhttp://Example.com:80/a/../b#x\nhttp://example.com/b\n"
        b"ftp://x/\n   \njavascript:alert(1)\nhttps://b.test/\tnutch.score=1\n\xff\xfe\n"
    )
    seeds = read_seeds(f, DEFAULT_RULES)
    assert seeds.urls == ["http://example.com/b", "https://b.test/"]
    assert [(n, reason.split()[0]) for n, _, reason in seeds.invalid] == [
        (5, "unsupported"), (7, "unsupported"), (9, "not"),
    ]
    assert seeds.lines == 9


def test_read_seeds_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(BadInput, match="not found"):
        read_seeds(tmp_path / "nope.txt", DEFAULT_RULES)


def test_url_shape_collapses_calendars_and_session_ids():
    assert url_shape("http://t/cal/2026/11") == url_shape("http://t/cal/2031/02")
    assert url_shape("http://t/s?id=1&b=2") == url_shape("http://t/s?b=9&id=7")
    assert url_shape("http://t/a/b") != url_shape("http://t/a/c")


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


def test_partition_offsets_count_the_rows_before_each_partition():
    from spark_jobs.generate import partition_offsets

    # partitions may come back in any order and some may be missing (empty)
    assert partition_offsets({2: 5, 0: 3, 5: 1}) == {0: 0, 2: 3, 5: 8}
    assert partition_offsets({}) == {}

"""recrawl.rules.traps: when a host is a trap, each rule with its SQL twin on one table of cases."""

from __future__ import annotations

import duckdb
import pytest

from recrawl.rules.traps import (
    NEAR_DUP_FLOOD,
    PAGE_CAP,
    REPEATED_PATTERN,
    blocked_sql,
    host_trap_reason,
    host_trap_reason_sql,
    near_dup_flood,
    near_dup_flood_sql,
)

# (pages known, largest URL-shape group, page cap, pattern cap) -> reason
HOST_CASES = [
    (10, 3, 5000, 200, None),
    (5001, 3, 5000, 200, PAGE_CAP),
    (5000, 200, 5000, 200, None),  # at the caps: not yet
    (300, 201, 5000, 200, REPEATED_PATTERN),
    (6000, 6000, 5000, 200, PAGE_CAP),  # both: the page cap is named
]
# (new pages, of them duplicates, fraction) -> flood
FLOOD_CASES = [
    (9, 9, 0.8, False),  # too few new pages to judge
    (10, 8, 0.8, True),
    (10, 7, 0.8, False),
    (100, 80, 0.8, True),
    (0, 0, 0.8, False),
]


@pytest.mark.parametrize(("known", "shape", "page_cap", "pattern_cap", "want"), HOST_CASES)
def test_host_trap_reason(known, shape, page_cap, pattern_cap, want):
    assert host_trap_reason(known, shape, page_cap, pattern_cap) == want


@pytest.mark.parametrize(("n", "d", "frac", "want"), FLOOD_CASES)
def test_near_dup_flood(n, d, frac, want):
    assert near_dup_flood(n, d, frac) is want
    if want:
        assert NEAR_DUP_FLOOD == "near-duplicate flood"  # the reason hosts.trap_reason shows


def test_the_sql_twins_agree():
    con = duckdb.connect()
    for known, shape, page_cap, pattern_cap, want in HOST_CASES:
        got = con.execute(f"SELECT {host_trap_reason_sql('k', 's', page_cap, pattern_cap)} "
                          "FROM (SELECT ? AS k, ? AS s)", [known, shape]).fetchone()[0]
        assert got == want
    for n, d, frac, want in FLOOD_CASES:
        got = con.execute(f"SELECT {near_dup_flood_sql('n', 'd', frac)} "
                          "FROM (SELECT ? AS n, ? AS d)", [n, d]).fetchone()[0]
        assert got is want


@pytest.mark.parametrize(("trap", "status", "want"), [
    (True, "unfetched", True),   # a trap host's new URLs wait
    (True, "fetched", False),    # its known pages are still refreshed
    (False, "unfetched", False),
    (None, "unfetched", False),  # no hosts row yet
])
def test_what_a_trap_host_may_not_fetch(trap, status, want):
    got = duckdb.connect().execute(f"SELECT {blocked_sql('t', 's')} FROM (SELECT ?::BOOLEAN AS t, "
                                   "? AS s)", [trap, status]).fetchone()[0]
    assert got is want

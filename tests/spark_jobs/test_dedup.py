"""dedup job: exact groups and survivors, near pairs around the threshold, new vs stored
fingerprints, the bucket cap, the trap flag and re-runs, on a hand-built round."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from recrawl.content.fingerprint import to_signed64
from recrawl.rules.survivor import choose_survivor

pytestmark = pytest.mark.spark

ROUND = "20260301"
LOGICAL = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
SEEN = dt.datetime(2026, 2, 1)
rng = random.Random(7)
LOW33 = (1 << 33) - 1  # blocks 0-2 of 6c3 (11 + 11 + 11 bits): table 0


def fp(x: int) -> int:
    return to_signed64(x)


def flip(x: int, *bits: int) -> int:
    for b in bits:
        x ^= 1 << b
    return x


E = rng.getrandbits(64)  # exact group
N = rng.getrandbits(64)  # near group
S = rng.getrandbits(64)  # stored original
L = rng.getrandbits(64) & LOW33  # shared low bits of the capped cluster
P = L | (rng.getrandbits(31) << 33)
T = rng.getrandbits(64)  # trap host's page

# url -> (content_hash, simhash); all new in this round
NEW = {
    # exact: https beats http, then the shorter URL wins
    "https://e.test/page": ("he", E),
    "http://e.test/page": ("he", E),
    "https://e.test/page/index.html": ("he", E),
    # near: 3 bits apart (one bit per block 0, 1, 2: they share only the last table) ...
    "http://n.test/a": ("hn1", N),
    "http://n.test/bb": ("hn2", flip(N, 0, 12, 23)),
    # ... and 4 bits apart from the first (7 from the second): a candidate in table 0, no pair
    "http://n.test/ccc": ("hn3", flip(N, 34, 45, 55, 60)),
    # near a *stored* page (2 bits), which outranks it by score
    "http://s.test/copy": ("hs2", flip(S, 5, 40)),
    # capped cluster: five pages share table 0's key (cap 3); P and Q, 1 bit apart in block 5,
    # must still pair up through another table, exactly once
    "http://c.test/p": ("hp", P),
    "http://c.test/q": ("hq", flip(P, 58)),
    **{f"http://c.test/r{i}": (f"hr{i}", L | (rng.getrandbits(31) << 33)) for i in range(3)},
    "http://d.test/distinct": ("hd", rng.getrandbits(64)),
    # a flood: ten copies on one host
    **{f"http://t.test/{i}": ("ht", T) for i in range(10)},
}
STORED = {
    "http://s.test/original": ("hs1", S, 5.0),
    "http://e.test/p": ("he", E, None),  # shorter but http: loses to https://e.test/page
    "http://o.test/other": ("ho", rng.getrandbits(64), None),
}


def _host(url):
    return url.split("/", 3)[0] + "//" + url.split("/", 3)[2]


def _setup(spark, cfg):
    from recrawl.store.schemas import CRAWLDB, PAGES, TABLES
    from recrawl.store.tables import conform, create_table

    for name in ("crawldb", "pages", "duplicates", "hosts"):
        create_table(spark, cfg, TABLES[name])
    db = [
        {"url": u, "host": _host(u), "status": "unfetched", "discovered_at": SEEN}
        for u in NEW
    ] + [
        {"url": u, "host": _host(u), "status": "fetched", "discovered_at": SEEN,
         "content_hash": h, "simhash": fp(s), "score": score,
         "last_fetch_time": SEEN + dt.timedelta(days=1)}
        for u, (h, s, score) in STORED.items()
    ]
    pages = [
        {"round_id": ROUND, "url": u, "content_hash": h, "simhash": fp(s), "text_len": 100,
         "text": "x"}
        for u, (h, s) in NEW.items()
    ] + [  # no text: never a candidate
        {"round_id": ROUND, "url": "http://x.test/broken", "parse_error": "boom", "text_len": 0},
    ]
    for name, rows, schema in (("crawldb", db, CRAWLDB), ("pages", pages, PAGES)):
        conform(spark.createDataFrame(rows, schema), name).write.format("delta").mode(
            "append"
        ).save(cfg.table_path(name))


def _dups(spark, cfg):
    df = spark.read.format("delta").load(cfg.table_path("duplicates"))
    return {r["url"]: (r["canonical_url"], r["kind"], r["distance"]) for r in df.collect()}


def test_dedup_round(spark, cfg):
    from spark_jobs import dedup

    cfg = cfg.with_overrides({"dedup.max_bucket": 3})
    _setup(spark, cfg)
    counts = dedup.run(spark, cfg, ROUND, LOGICAL)
    dups = _dups(spark, cfg)

    # exact: the configured order, as the Python comparator decides it
    group = ["https://e.test/page", "http://e.test/page", "https://e.test/page/index.html",
             "http://e.test/p"]
    best = choose_survivor([{"url": u, "score": 0.0, "first_seen": SEEN} for u in group])["url"]
    assert best == "https://e.test/page"
    for u in group[1:]:
        assert dups[u] == (best, "exact", 0)
    assert best not in dups
    # near: <= 3 bits found, 4 bits not; exact duplicates are never also near ones
    assert dups["http://n.test/bb"] == ("http://n.test/a", "near", 3)
    assert "http://n.test/a" not in dups and "http://n.test/ccc" not in dups
    # a new page against a stored fingerprint
    assert dups["http://s.test/copy"] == ("http://s.test/original", "near", 2)
    # the pair inside the capped bucket is still found, through another table, once
    assert dups["http://c.test/q"] == ("http://c.test/p", "near", 1)
    assert not any(u.startswith("http://c.test/r") for u in dups)
    assert counts["capped_buckets"] == 1 and counts["capped_pages"] == 5
    assert counts["near_pairs"] == 3  # n.test, s.test, c.test: each pair once
    # the flood host: nine of ten new pages are duplicates
    assert sum(u.startswith("http://t.test/") for u in dups) == 9
    assert counts["trap_hosts"] == 1
    hosts = spark.read.format("delta").load(cfg.table_path("hosts")).collect()
    assert [(h["host"], h["trap"]) for h in hosts] == [("http://t.test", True)]
    assert counts["exact"] == 3 + 9 and counts["near"] == 3
    assert counts["new_pages"] == len(NEW)
    assert all(isinstance(v, int) for v in counts.values())

    # re-run: the same partition, not a second copy
    assert dedup.run(spark, cfg, ROUND, LOGICAL) == counts
    assert _dups(spark, cfg) == dups
    n = spark.read.format("delta").load(cfg.table_path("duplicates")).count()
    assert n == len(dups)

"""A small synthetic crawl home (three rounds, five hosts) written by Spark into the real tables.

The analytics, report, notebook and fast-path tests read it. Real rounds over simweb cost
minutes; these few hundred rows cost one `init_tables` and one append per table, and every
number the analytics should find is known by construction (EXPECTED). Built once per test
session (cached under pytest's session temp folder) however many modules ask for it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from concurrent.futures import ThreadPoolExecutor

from analyst.analytics import write_reference_rates
from recrawl.config import Config, load_config
from recrawl.content.captures import url_fields

UTC = dt.UTC
ROUNDS = [("20261101", dt.date(2026, 11, 1)), ("20261102", dt.date(2026, 11, 2)),
          ("20261103", dt.date(2026, 11, 3))]
A, B, SLOW, ERR, XSS = (f"http://{h}.sim.test:80" for h in ("a", "b", "slow", "errors", "xss"))
XSS_TITLE = "<script>alert('x')</script> & <b>co</b>"

# (round index, url, fetch_status, http_status, content version or None)
# Versions name a page's content: same version = same payload; "~" marks a trivial change
# (SimHash one bit away from the version before the "~").
FETCHES = [
    (0, A + "/", "fetched", 200, "a"), (0, B + "/", "fetched", 200, "b"),
    (0, SLOW + "/", "retry_later", 429, None), (0, ERR + "/", "fetched", 200, "e"),
    (0, XSS + "/", "fetched", 200, "x"),
    (1, A + "/", "not_modified", 304, None), (1, A + "/1", "fetched", 200, "a1"),
    (1, A + "/2", "fetched", 200, "a2"), (1, A + "/3", "fetched", 200, "a3"),
    (1, A + "/4", "redirect", 301, None), (1, B + "/", "fetched", 200, "b2"),
    (1, B + "/p1", "fetched", 200, "p1"), (1, B + "/p2", "fetched", 200, "p2"),
    (1, B + "/copy", "fetched", 200, "p1copy"), (1, B + "/near", "fetched", 200, "p2near"),
    (1, SLOW + "/", "retry_later", 503, None), (1, ERR + "/missing", "gone", 404, None),
    (1, ERR + "/broken", "http_error", 500, None), (1, ERR + "/slow", "timeout", None, None),
    (1, XSS + "/", "fetched", 200, "x"),
    (2, A + "/", "fetched", 200, "a-2"), (2, A + "/1", "not_modified", 304, None),
    (2, A + "/2", "fetched", 200, "a2"), (2, A + "/3", "fetched", 200, "a3~"),
    (2, B + "/", "fetched", 200, "b2"), (2, B + "/p1", "fetched", 200, "p1-2"),
    (2, SLOW + "/", "fetched", 200, "s"), (2, SLOW + "/s1", "robots_denied", None, None),
    (2, ERR + "/broken", "http_error", 500, None), (2, ERR + "/slow", "timeout", None, None),
    (2, XSS + "/", "not_modified", 304, None), (2, B + "/near", "fetched", 200, "p2near"),
]
# Seconds between consecutive fetch rows of a round (the fetch step's span is (n-1) * step).
FETCH_STEP_S = {0: 2.0, 1: 0.5, 2: 1.0}
DUPLICATES = [  # (round index, url, canonical_url, kind, distance)
    (1, B + "/copy", B + "/p1", "exact", 0), (1, B + "/near", B + "/p2", "near", 2),
    (2, B + "/near", B + "/p2", "near", 3),
]
# (url, discovered round index, final status, change_rate, pagerank)
CRAWLDB = [
    (A + "/", 0, "fetched", 0.5, 0.2), (A + "/1", 0, "fetched", 0.02, 0.1),
    (A + "/2", 0, "fetched", 0.05, 0.08), (A + "/3", 0, "fetched", 0.2, 0.07),
    (A + "/4", 0, "redirect_perm", None, 0.03), (A + "/5", 1, "unfetched", None, None),
    (B + "/", 0, "fetched", 1.5, 0.15), (B + "/p1", 0, "fetched", 4.0, 0.09),
    (B + "/p2", 0, "fetched", 0.005, 0.06), (B + "/copy", 0, "duplicate", 0.1, 0.04),
    (B + "/near", 0, "duplicate", 0.1, 0.04), (B + "/p3", 1, "unfetched", None, None),
    (SLOW + "/", 0, "fetched", 0.1, 0.05), (SLOW + "/s1", 0, "robots_denied", None, 0.01),
    (ERR + "/", 0, "fetched", 0.01, 0.02), (ERR + "/missing", 0, "gone", None, 0.01),
    (ERR + "/broken", 0, "unfetched", None, 0.01), (ERR + "/slow", 0, "unfetched", None, 0.01),
    (XSS + "/", 0, "fetched", 0.0, 0.02),
]
LINKS = [(A + "/", A + p) for p in ("/1", "/2", "/3", "/4")] + [
    (A + "/", B + "/"), (B + "/", B + "/p1"), (B + "/", B + "/p2"), (B + "/", A + "/"),
    (B + "/p1", B + "/copy"), (B + "/p1", B + "/near"), (XSS + "/", A + "/"),
    (ERR + "/", ERR + "/missing"), (ERR + "/", ERR + "/broken"), (ERR + "/", ERR + "/slow"),
    (A + "/1", A + "/"), (A + "/2", A + "/"), (SLOW + "/", A + "/"),
]
# Change signals (docs/tables.md). Per URL the newest signal crawldb keeps: (signal_time,
# signal_precision_s, signal_kind). The last round's logical date is 2026-11-03 00:00; A/2's
# date is two days later (a lie, beyond the one-day tolerance) and A/5 has no copy yet.
SIGNALS = {
    A + "/": (dt.datetime(2026, 11, 2, tzinfo=UTC), 86400, "sitemap"),  # ends at the fetch: no
    A + "/1": (dt.datetime(2026, 11, 3, tzinfo=UTC), 86400, "sitemap"),  # changed since fetch
    A + "/2": (dt.datetime(2026, 11, 5, tzinfo=UTC), 86400, "sitemap"),  # future: says nothing
    A + "/3": (dt.datetime(2026, 11, 3, 6, 30, tzinfo=UTC), 1, "feed"),  # changed since fetch
    A + "/5": (dt.datetime(2026, 11, 2, tzinfo=UTC), 86400, "sitemap"),  # never fetched
    B + "/": (dt.datetime(2026, 11, 1, tzinfo=UTC), 86400, "sitemap"),  # before the fetch
    B + "/p1": (dt.datetime(2026, 11, 3, 12, tzinfo=UTC), 86400, "sitemap"),  # changed
    B + "/p2": (dt.datetime(2026, 11, 2, tzinfo=UTC), 86400, "sitemap"),  # fetched 11-02: changed
}
# (source_url, host, kind, http_status, fetch_status, entries, error): A has a sitemap and a
# feed, B a sitemap; XSS's feed is not one. SLOW and ERR publish nothing.
SIGNAL_SOURCES = [
    (A + "/sitemap.xml", A, "sitemap", 304, "not_modified", 5, None),
    (A + "/feed.xml", A, "feed", 200, "fetched", 2, None),
    (B + "/sitemap.xml", B, "sitemap", 200, "fetched", 3, None),
    (XSS + "/feed.xml", XSS, "feed", 200, "fetched", None, "not a feed: no <rss> or <feed> root"),
]
# Per host: decayed checks (tp, fp, fn, tn), Last-Modified (agree, disagree) and the verdicts
# (trusted, defer, lm_trusted) under the default [signals] thresholds. A: precision
# (3 + 1) / (3 + 1 + 2) = 2/3 >= 0.6 and recall (3 + 1) / (3 + 0 + 2) = 0.8 over tp + fn = 3:
# trusted and deferring. B: precision 1.9 / 5.6, recall 1.9 / 4.8: neither.
SIGNAL_TRUST = {
    A: ((3.0, 1.0, 0.0, 2.0), (2.0, 0.0), (True, True, True)),
    B: ((0.9, 2.7, 1.9, 0.0), (0.0, 1.0), (False, False, False)),
}
# fetch_list.reason: signal and fill rows by hand; otherwise `new` for a URL without a success
# before the round (crawldb status unfetched), else `due`.
SIGNAL_FETCHES = {(2, A + "/"), (2, A + "/1"), (2, A + "/3"), (2, B + "/p1")}
FILL_FETCHES = {(1, XSS + "/"), (2, XSS + "/")}
SIGNAL_REQUESTS = (0, 3, 4)  # rounds.counts['signals.requests'] per round
NOW = dt.datetime(2026, 11, 3, 12, 0, tzinfo=UTC)  # the wall clock the back-off test uses
BACKOFF_UNTIL = dt.datetime(2026, 11, 3, 13, 30, 0, 250000, tzinfo=UTC)

# What the analytics must find in this crawl, worked out by hand from the rows above.
EXPECTED = {
    "new_vs_changed": {  # round -> (new, changed, unchanged, discovered)
        "20261101": (4, 0, 0, 17), "20261102": (7, 1, 2, 2), "20261103": (1, 2, 6, 0),
    },
    "fetched_per_round": {"20261101": 4, "20261102": 9, "20261103": 7},
    "attempts_per_round": {"20261101": 5, "20261102": 15, "20261103": 12},
    "retry_later": {SLOW: 2},
    "urls": 19,
    "hosts": 5,
    # Per true-rate bucket of TRUE_RATES, over the `fetched` URLs: (URLs, with an estimate,
    # median true rate, median estimate, median revisit interval in days)
    "rate_vs_truth": {
        "< 0.01/d": (3, 3, 0.004, 0.005, 100.0), "0.01–0.03/d": (1, 1, 0.025, 0.02, 50.0),
        "0.03–0.1/d": (1, 1, 0.06, 0.05, 20.0), "0.1–0.3/d": (2, 2, 0.165, 0.15, 7.5),
        "0.3–1/d": (1, 1, 0.4, 0.5, 2.0), "1–3/d": (1, 1, 2.0, 1.5, 57600 / 86400),
        "≥ 3/d": (1, 1, 6.0, 4.0, 0.25),
    },
    # A/3 and SLOW swap ranks (true 0.15 < 0.18, estimated 0.2 > 0.1): 1 - 6 * 2 / (10 * 99)
    "rate_spearman": (1 - 12 / 990, 10),
    # round -> fetch_list rows (signal, new, due, fill), signals.requests
    "fetch_reasons": {"20261101": ((0, 5, 0, 0), 0), "20261102": ((0, 12, 2, 1), 3),
                      "20261103": ((4, 4, 3, 1), 4)},
    # host -> (sources, kinds, precision, recall, trusted, defer, URLs with a signal, of them
    # changed since the last fetch, fetched for a signal in the last round); SLOW and ERR
    # (no source, no check) are left out
    "signal_trust": {
        A: (2, ["feed", "sitemap"], 4 / 6, 4 / 5, True, True, 5, 2, 3),
        B: (1, ["sitemap"], 1.9 / 5.6, 1.9 / 4.8, False, False, 3, 2, 1),
        XSS: (1, ["feed"], None, None, False, False, 0, 0, 0),
    },
    # class -> (hosts, held pages, share whose last fetch changed, mean days since the last
    # fetch, mean change rate, stale by their signal), held = crawldb status fetched
    "signal_classes": {
        "trusted": (1, 4, 2 / 4, 0.0, (0.5 + 0.02 + 0.05 + 0.2) / 4, 2),
        "probed-untrusted": (1, 3, 2 / 3, 1 / 3, (1.5 + 4.0 + 0.005) / 3, 2),
        "no signals": (3, 3, 0.0, 2 / 3, (0.1 + 0.01 + 0.0) / 3, 0),
    },
}
# The true change rates of the sample's URLs (a simulated web's truth, as the demos write it):
# fetched URLs, a duplicate and an unfetched URL (not held: left out) and a URL crawldb lacks.
TRUE_RATES = {
    A + "/": 0.4, A + "/1": 0.025, A + "/2": 0.06, A + "/3": 0.15, B + "/": 2.0, B + "/p1": 6.0,
    B + "/p2": 0.004, SLOW + "/": 0.18, ERR + "/": 0.008, XSS + "/": 0.0,
    B + "/copy": 0.1, A + "/5": 0.3, "http://gone.sim.test:80/x": 1.0,
}


def host_of(url: str) -> str:
    return url.split("/", 3)[0] + "//" + url.split("/", 3)[2]


def host_components() -> dict[str, tuple[str, int, str, int]]:
    """host -> (component_root, component_hosts, scc_root, scc_hosts) of the LINKS host graph,
    as the pagerank job defines them (a component is named by its smallest host)."""
    hosts = sorted({host_of(u) for u in (A, B, SLOW, ERR, XSS)})
    edges = {(host_of(s), host_of(d)) for s, d in LINKS}

    def reach(h: str, undirected: bool) -> set[str]:
        seen, todo = {h}, [h]
        while todo:
            x = todo.pop()
            for s, d in edges:
                for a, b in ((s, d), (d, s)) if undirected else ((s, d),):
                    if a == x and b not in seen:
                        seen.add(b)
                        todo.append(b)
        return seen

    out = {}
    for h in hosts:
        wcc = reach(h, True)
        scc = {g for g in reach(h, False) if h in reach(g, False)}
        out[h] = (min(wcc), len(wcc), min(scc), len(scc))
    return out


def _ts(round_index: int, seconds: float = 0.0) -> dt.datetime:
    d = ROUNDS[round_index][1]
    return dt.datetime(d.year, d.month, d.day, tzinfo=UTC) + dt.timedelta(seconds=seconds)


def _digest(version: str) -> str:
    return "sha1:" + hashlib.sha1(version.encode()).hexdigest().upper()[:32]


def _simhash(version: str) -> int:
    if version.endswith("~"):
        return _simhash(version[:-1]) ^ 1
    if version == "p2near":
        return _simhash("p2") ^ 0b11
    v = int.from_bytes(hashlib.sha1(version.encode()).digest()[:8], "big", signed=True)
    return v


def _signal_columns(url: str) -> dict:
    """A crawldb row's change-signal columns (SIGNALS; NULL for URLs without a signal)."""
    if url not in SIGNALS:
        return {}
    t, precision, kind = SIGNALS[url]
    return {"signal_time": t, "signal_precision_s": precision, "signal_kind": kind,
            "signal_read_at": _ts(2)}


def _host_trust(host: str) -> dict:
    """A hosts row's change-signal columns (SIGNAL_TRUST; NULL for hosts without checks)."""
    if host not in SIGNAL_TRUST:
        return {}
    (tp, fp, fn, tn), (agree, disagree), (trusted, defer, lm) = SIGNAL_TRUST[host]
    return {"signal_tp": tp, "signal_fp": fp, "signal_fn": fn, "signal_tn": tn,
            "signal_precision": (tp + 1) / (tp + fp + 2), "signal_recall": (tp + 1) / (tp + fn + 2),
            "signal_trusted": trusted, "signal_defer": defer, "signals_read_at": _ts(2),
            "lm_agree": agree, "lm_disagree": disagree, "lm_trusted": lm}


def config_for(home) -> Config:
    return load_config(environ={}).with_overrides(
        {"crawl.home": str(home), "spark.shuffle_partitions": 2}, "sample")


def _append(spark, cfg: Config, name: str, rows: list[dict]) -> None:
    from recrawl.store.schemas import TABLES

    schema = TABLES[name].schema
    data = [tuple(r.get(f.name) for f in schema.fields) for r in rows]
    spark.createDataFrame(data, schema).write.format("delta").mode("append").save(
        cfg.table_path(name))


def rows_by_table() -> dict[str, list[dict]]:
    """Every table's rows as dicts (aware UTC datetimes)."""
    out: dict[str, list[dict]] = {k: [] for k in (
        "fetch_list", "fetches", "pages", "duplicates", "links", "crawldb", "robots", "hosts",
        "scores", "rounds", "captures", "signal_sources")}
    position: dict[int, int] = {}
    succeeded: set[str] = set()  # URLs with a success in an earlier round
    for rnd, url, status, http, version in FETCHES:
        rid = ROUNDS[rnd][0]
        i = position[rnd] = position.get(rnd, -1) + 1
        t = _ts(rnd, 600 + i * FETCH_STEP_S[rnd]) + dt.timedelta(microseconds=123456 * (i % 2))
        host = host_of(url)
        reason = ("signal" if (rnd, url) in SIGNAL_FETCHES else "fill" if (rnd, url) in FILL_FETCHES
                  else "due" if url in succeeded else "new")
        out["fetch_list"].append({
            "round_id": rid, "url": url, "host": host, "partition": 0 if host < B else 1,
            "priority": 1.0 / (i + 1), "depth": url.count("/") - 3, "reason": reason,
        })
        if status in ("fetched", "not_modified"):  # a URL appears once per round
            succeeded.add(url)
        warc = f"/crawl/warc/{rid}/part-0.warc.gz" if http else None
        out["fetches"].append({
            "round_id": rid, "url": url, "final_url": A + "/3" if status == "redirect" else url,
            "fetch_time": t, "http_status": http, "fetch_status": status,
            "error": "read timeout" if status == "timeout" else None,
            "content_type": "text/html" if version else None,
            "content_length": 1000 + 10 * i if version else 0,
            "payload_digest": _digest(version) if version else None,
            "warc_file": warc, "warc_offset": 1000 * i if warc else None,
            "warc_length": 900 if warc else None, "etag": f'"{version}"' if version else None,
            "duration_ms": 20 + i, "redirect_chain": [url, A + "/3"] if status == "redirect" else [],
            "truncated": False, "ip": "127.0.0.1",
        })
        if status in ("fetched", "not_modified"):  # a response or a revisit record
            out["captures"].append({
                **url_fields(url), "url": url, "fetch_url": url, "fetch_time": t,
                "fetch_status": http, "crawl_status": status,
                "content_digest": _digest(version) if version else None,
                "content_mime_type": "text/html", "content_mime_detected": "text/html",
                "content_charset": "utf-8", "content_languages": "en",
                "warc_filename": warc, "warc_record_offset": 1000 * i, "warc_record_length": 900,
                "warc_record_id": f"<urn:uuid:{hashlib.sha1(f'{rid}{url}'.encode()).hexdigest()}>",
                "warc_type": "response" if version else "revisit", "fetch_date": t.date(),
                "round_id": rid,
            })
        if version:
            text = f"text of {version.rstrip('~')}" + (" (edited)" if version.endswith("~") else "")
            base = version.rstrip("~")
            out["pages"].append({
                "round_id": rid, "url": url,
                "title": XSS_TITLE if url.startswith(XSS) else f"Page {url.split('/', 3)[3] or 'home'}",
                "lang": "en", "text": text, "text_len": len(text),
                "content_hash": "ch:" + ("p1" if base == "p1copy" else version),
                "simhash": _simhash(version), "canonical_url": None, "warc_file": warc,
                "warc_offset": 1000 * i, "payload_digest": _digest(version),
                "outlink_count": sum(1 for s, _ in LINKS if s == url),
            })
    for rnd, url, canonical, kind, distance in DUPLICATES:
        out["duplicates"].append({"round_id": ROUNDS[rnd][0], "url": url, "canonical_url": canonical,
                                  "kind": kind, "distance": distance})
    for src, dst in LINKS:
        out["links"].append({"src_url": src, "dst_url": dst, "anchor": "link to " + dst[-6:],
                             "round_id": ROUNDS[1][0], "kind": "a", "src_host": host_of(src),
                             "dst_host": host_of(dst)})
    last_ok: dict[str, int] = {}
    for rnd, url, status, _, _ in FETCHES:
        if status in ("fetched", "not_modified"):
            last_ok[url] = rnd
    for url, disc, status, rate, rank in CRAWLDB:
        fetched = url in last_ok
        out["crawldb"].append({
            "url": url, "host": host_of(url), "status": status, "depth": url.count("/") - 3,
            "discovered_at": _ts(disc), "last_fetch_time": _ts(last_ok[url]) if fetched else None,
            "next_fetch_time": _ts(2, 86400 / rate) if rate else _ts(2, 86400),
            "fetch_interval_s": int(86400 / rate) if rate else 86400, "retries": 0,
            "http_status": 200 if fetched else None, "fetch_count": 1 if fetched else 0,
            "change_count": 1 if rate and rate > 0.1 else 0, "change_rate": rate, "score": rank,
            "last_changed": bool(rate and rate > 0.1) if fetched else None,
            "change_history": [{"interval_d": 1.0, "changed": bool(rate and rate > 0.1)}]
            if fetched else None,
            "parse_failures": 0, "last_round": ROUNDS[last_ok[url]][0] if fetched else None,
            **_signal_columns(url),
        })
        if rank is not None:
            out["scores"].append({"url": url, "pagerank": rank, "computed_at": _ts(2, 7200)})
    components = host_components()
    for host in (A, B, SLOW, ERR, XSS):
        out["robots"].append({
            "host": host, "fetched_at": _ts(0, 1), "http_status": 200,
            "crawl_delay": 10.0 if host == SLOW else None,
            "sitemaps": [host + "/sitemap.xml"] if host == A else [],
            "rules": "User-agent: *\nDisallow: /s1" if host == SLOW else "", "expires_at": _ts(1, 1),
        })
        out["hosts"].append({
            "host": host, "ip": "127.0.0.1", "backoff_until": BACKOFF_UNTIL if host == SLOW else None,
            "consecutive_failures": 2 if host == ERR else 0,
            "pages_known": sum(1 for c in CRAWLDB if host_of(c[0]) == host), "trap": False,
            "pages_fetched": sum(1 for u in last_ok if host_of(u) == host),
            "host_rank": round(sum(c[4] or 0 for c in CRAWLDB if host_of(c[0]) == host), 6),
            "updated_at": _ts(2, 3600),
            **dict(zip(("component_root", "component_hosts", "scc_root", "scc_hosts"),
                       components[host], strict=True)),
            **_host_trust(host),
        })
    for source, host, kind, http, fstatus, entries, error in SIGNAL_SOURCES:
        answered = error is None
        out["signal_sources"].append({
            "source_url": source, "host": host, "kind": kind,
            "etag": f'"{kind}-2"' if answered else None, "http_status": http,
            "fetch_status": fstatus, "read_at": _ts(2) if answered else None,
            "fetched_at": _ts(2, 30), "next_read_at": _ts(2, 86400), "entries": entries,
            "dated_entries": entries, "error": error, "round_id": ROUNDS[2][0],
        })
    for rnd, (rid, day) in enumerate(ROUNDS):
        f = [x for x in FETCHES if x[0] == rnd]
        counts = {
            "generate.generated": len(f), "fetch.urls": len(f),
            "fetch.fetched": sum(1 for x in f if x[2] == "fetched"),
            "fetch.not_modified": sum(1 for x in f if x[2] == "not_modified"),
            "parse.pages": sum(1 for x in f if x[4]),
            "updatedb.new_urls": EXPECTED["new_vs_changed"][rid][3],
            "dedup.exact": sum(1 for d in DUPLICATES if d[0] == rnd and d[3] == "exact"),
            "dedup.near": sum(1 for d in DUPLICATES if d[0] == rnd and d[3] == "near"),
            "signals.requests": SIGNAL_REQUESTS[rnd],
            "generate.signal_first": sum(1 for r, _ in SIGNAL_FETCHES if r == rnd),
        }
        out["rounds"].append({
            "round_id": rid, "logical_date": day, "started_at": _ts(rnd, 60),
            "finished_at": _ts(rnd, 60 + 300 * (rnd + 1)), "counts": counts,
            "steps_done": ["generate", "fetch", "parse", "dedup", "updatedb", "schedule"],
            **_step_timing(rnd),
        })
    return out


# Per-step wall seconds of every round (rounds.step_seconds); driver CPU is a tenth of it.
STEP_SECONDS = {"generate": 10.0, "fetch": 120.0, "parse": 30.0, "dedup": 20.0,
                "updatedb": 25.0, "schedule": 15.0}
# Round 2's fetch failed its error-share gate (rounds.gates / failed_gate).
FAILED_GATE = (2, "fetch.error_share", "error share 60% of 10 URLs above gates.max_error_share 50%")


def _step_timing(rnd: int) -> dict:
    started, at = {}, 60
    for step, secs in STEP_SECONDS.items():
        started[step] = _ts(rnd, at)
        at += int(secs)
    gates = {"fetch.politeness": "ok", "fetch.error_share": "ok"}
    failed = None
    if rnd == FAILED_GATE[0]:
        failed = FAILED_GATE[1]
        gates[failed] = FAILED_GATE[2]
    return {"step_started_at": started, "step_seconds": {s: v * (rnd + 1) for s, v in STEP_SECONDS.items()},
            "step_cpu_seconds": {s: v / 10 for s, v in STEP_SECONDS.items()}, "gates": gates,
            "failed_gate": failed}


def build(spark, home) -> Config:
    """Create every table with `init_tables` and append the sample rows."""
    from recrawl.store.tables import init_tables

    cfg = config_for(home)
    init_tables(spark, cfg)
    # One append per table; Spark runs jobs from several threads at once, which overlaps the
    # driver-side Delta commit work of the ten small writes.
    tables = rows_by_table()
    # crawldb in two writes (URLs of the first round, then the others) so that it has an
    # earlier version to compare with: the time-travel examples of docs/analysts.md need one.
    first, rest = [], []
    for r in tables["crawldb"]:
        (first if r["discovered_at"] == _ts(0) else rest).append(r)
    tables["crawldb"] = first
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda item: _append(spark, cfg, *item), tables.items()))
    _append(spark, cfg, "crawldb", rest)
    write_reference_rates(cfg.home, TRUE_RATES)
    return cfg


def sample_home(spark, tmp_path_factory) -> Config:
    """The session's sample crawl home (built on first use)."""
    home = tmp_path_factory.getbasetemp() / "sample-crawl"
    marker = home / ".complete"
    if not marker.exists():
        build(spark, home)
        marker.write_text("ok\n")
    return config_for(home)

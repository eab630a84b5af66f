"""analyst.analytics on change signals: per-host trust, fetch reasons, freshness by signal class.

Numbers are worked out by hand from tests/sample_crawl.py (EXPECTED); tables made before
change signals (no signal columns, no signal_sources) give empty answers and a report.
"""

from __future__ import annotations

import datetime as dt

import pytest

from analyst import analytics, fastsql, report
from tests.sample_crawl import EXPECTED, SIGNALS, config_for, sample_home


@pytest.fixture(scope="module")
def sample(spark, tmp_path_factory):
    return sample_home(spark, tmp_path_factory)


@pytest.fixture(scope="module")
def con(sample):
    c = fastsql.connect(sample)
    yield c
    c.close()


@pytest.mark.spark
def test_signal_trust_per_host_by_hand(con):
    got = {r["host"]: r for r in analytics.signal_trust_per_host(con)}
    assert list(got) == list(EXPECTED["signal_trust"])  # most evidence first; SLOW, ERR left out
    for host, (sources, kinds, precision, recall, trusted, defer, signalled, changed,
               fetched) in EXPECTED["signal_trust"].items():
        r = got[host]
        assert (r["sources"], r["kinds"], r["trusted"], r["defer"]) == (sources, kinds, trusted, defer)
        assert (r["precision"], r["recall"]) == (
            (None, None) if precision is None else (pytest.approx(precision), pytest.approx(recall)))
        assert (r["signalled_urls"], r["changed_since_fetch"], r["signal_fetches"]) == \
            (signalled, changed, fetched), host
    a = next(iter(got.values()))
    assert (a["tp"], a["fp"], a["fn"], a["tn"], a["checks"], a["lm_trusted"]) == (3, 1, 0, 2, 6, True)
    assert analytics.signal_trust_per_host(con, top=1) == [a]


@pytest.mark.spark
def test_changed_since_fetch_is_the_crawlers_rule(con):
    """The count per host is recrawl.rules.signal_trust.signalled_changed over crawldb, the rule
    updatedb and generate apply; a wider tolerance lets A/2's date two days ahead count."""
    from recrawl.rules.signal_trust import signalled_changed

    as_of = dt.datetime(2026, 11, 3, tzinfo=dt.UTC)
    last = {u: t for u, t in con.execute(
        "SELECT url, last_fetch_time FROM crawldb WHERE signal_time IS NOT NULL").fetchall()}
    for tolerance, extra in ((1.0, 0), (2.0, 1)):
        want: dict[str, int] = {}
        for url, (t, precision, _) in SIGNALS.items():
            fetched = last[url] and last[url].replace(tzinfo=dt.UTC)
            if signalled_changed(t, precision, fetched, as_of, tolerance):
                host = url.split("/", 3)[0] + "//" + url.split("/", 3)[2]
                want[host] = want.get(host, 0) + 1
        got = {r["host"]: r["changed_since_fetch"]
               for r in analytics.signal_trust_per_host(con, future_tolerance_days=tolerance)}
        assert {h: n for h, n in got.items() if n} == want
        assert sum(want.values()) == 4 + extra


@pytest.mark.spark
def test_fetch_reasons_per_round(con):
    got = {r["round_id"]: ((r["signal"], r["new"], r["due"], r["fill"]), r["signal_requests"])
           for r in analytics.fetch_reasons_per_round(con)}
    assert got == EXPECTED["fetch_reasons"]
    for r in analytics.fetch_reasons_per_round(con):
        assert r["unknown"] == 0 and r["generated"] == sum(r[k] for k in analytics.FETCH_REASONS)


@pytest.mark.spark
def test_freshness_by_signal_class(con):
    got = analytics.freshness_by_signal_class(con)
    assert [r["signal_class"] for r in got] == list(analytics.SIGNAL_CLASSES)
    for r in got:
        want = EXPECTED["signal_classes"][r["signal_class"]]
        assert (r["hosts"], r["pages"], r["changed_share"], r["mean_age_d"],
                r["mean_change_rate"], r["stale_by_signal"]) == (
            want[0], want[1], *(pytest.approx(v) for v in want[2:5]), want[5]), r


@pytest.mark.spark
def test_report_shows_signal_trust_and_reasons(con):
    page = report.build_report(con)
    section = page[page.index('<section id="signals">'):]
    section = section[:section.index("</section>")]
    assert "<h2>Change signals</h2>" in section and 'href="#signals"' in page
    bars = {(b["data-category"], b["data-series"]): b["data-value"]
            for b in _bars(section, "chart-fetch-reasons")}
    for rid, ((sig, new, due, fill), _) in EXPECTED["fetch_reasons"].items():
        assert [bars[(rid, k)] for k in analytics.FETCH_REASONS] == \
            [str(sig), str(new), str(due), str(fill)]
    trust = section[section.index('<table id="table-signal-trust">'):]
    trust = trust[:trust.index("</table>")]
    assert trust.count("<tr>") == 1 + len(EXPECTED["signal_trust"])
    assert "<td>http://a.sim.test:80</td><td>feed, sitemap</td><td class=\"num\">0.667</td>" \
           "<td class=\"num\">0.8</td><td>yes</td><td>yes</td>" in trust
    assert 'id="table-signal-classes"' in section and "probed-untrusted" in section


def _bars(html: str, chart_id: str) -> list[dict]:
    from tests.recrawl.test_report import _Bars

    return _Bars.parse(html)[chart_id]


# ---------------------------------------------------------------- tables without signals

def _arrow(dtype):
    """A pyspark type of recrawl.store.schemas as a pyarrow type (as delta-rs reads Spark's tables)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    if isinstance(dtype, T.StructType):
        return pa.struct([(f.name, _arrow(f.dataType)) for f in dtype.fields])
    if isinstance(dtype, T.ArrayType):
        return pa.list_(_arrow(dtype.elementType))
    if isinstance(dtype, T.MapType):
        return pa.map_(_arrow(dtype.keyType), _arrow(dtype.valueType))
    return {T.StringType: pa.string(), T.LongType: pa.int64(), T.IntegerType: pa.int32(),
            T.DoubleType: pa.float64(), T.BooleanType: pa.bool_(), T.DateType: pa.date32(),
            T.TimestampType: pa.timestamp("us", "UTC"), T.BinaryType: pa.binary(),
            T.FloatType: pa.float32(), T.ShortType: pa.int16()}[type(dtype)]


def _old_home(tmp_path):
    """A crawl home whose tables predate change signals: every table of recrawl.store.schemas but
    signal_sources, without the signal columns (crawldb's and hosts' signal_* / lm_*,
    fetch_list.reason), a few rows; written with delta-rs, no JVM."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from recrawl.store.schemas import TABLES

    cfg = config_for(tmp_path / "old")
    t = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    rows = {
        "crawldb": [{"url": "http://h:80/", "host": "http://h:80", "status": "fetched",
                     "last_fetch_time": t, "change_rate": 0.1, "last_changed": True,
                     "fetch_count": 1}],
        "hosts": [{"host": "http://h:80"}],
        "fetch_list": [{"round_id": "20261101", "url": "http://h:80/", "host": "http://h:80",
                        "partition": 0}],
        "fetches": [{"round_id": "20261101", "url": "http://h:80/", "fetch_time": t,
                     "fetch_status": "fetched", "http_status": 200}],
        "rounds": [{"round_id": "20261101", "logical_date": t.date(),
                    "counts": [("generate.generated", 1)]}],
    }
    for name, spec in TABLES.items():
        if name == "signal_sources":
            continue
        fields = [f for f in spec.schema.fields
                  if not f.name.startswith(("signal", "lm_")) and f.name != "reason"]
        schema = pa.schema([(f.name, _arrow(f.dataType)) for f in fields])
        write_deltalake(cfg.table_path(name), pa.Table.from_pylist(rows.get(name, []), schema))
    return cfg


def test_tables_made_before_change_signals_give_empty_answers(tmp_path):
    cfg = _old_home(tmp_path)
    con = fastsql.connect(cfg)
    assert not analytics.has_columns(con, "crawldb", "signal_time")
    assert analytics.has_columns(con, "crawldb", "url", "host")
    assert not analytics.has_columns(con, "signal_sources")
    assert analytics.signal_trust_per_host(con) == []
    assert analytics.fetch_reasons_per_round(con) == []
    assert analytics.freshness_by_signal_class(con) == []
    page = report.build_report(con)
    section = page[page.index('<section id="signals">'):]
    assert "No change signals yet" in section and "No fetch list with reasons yet" in section


def test_signal_columns_without_signal_sources_or_reasons(tmp_path):
    """crawldb and hosts migrated, signal_sources not readable (an object-storage home probes
    the contract tables) and fetch_list without `reason`: trust still answers, 0 sources."""
    import duckdb

    con = duckdb.connect()
    con.execute("""CREATE TABLE crawldb AS SELECT * FROM (VALUES
        ('http://h:80/', 'http://h:80', 'fetched', TIMESTAMP '2026-11-01', 0.1, true,
         TIMESTAMP '2026-11-01 12:00', 86400::BIGINT)) t(url, host, status, last_fetch_time,
         change_rate, last_changed, signal_time, signal_precision_s)""")
    con.execute("""CREATE TABLE hosts AS SELECT 'http://h:80' AS host, 1.0 AS signal_tp,
        0.0 AS signal_fp, 0.0 AS signal_fn, 0.0 AS signal_tn, 2 / 3 AS signal_precision,
        2 / 3 AS signal_recall, false AS signal_trusted, false AS signal_defer,
        TIMESTAMP '2026-11-02' AS signals_read_at, NULL::BOOLEAN AS lm_trusted""")
    con.execute("CREATE TABLE fetch_list AS SELECT '20261102' AS round_id, 'http://h:80/' AS url, "
                "'http://h:80' AS host")
    con.execute("CREATE TABLE rounds AS SELECT '20261102' AS round_id, DATE '2026-11-02' "
                "AS logical_date, MAP {'signals.requests': 1} AS counts")
    [r] = analytics.signal_trust_per_host(con)
    assert (r["host"], r["sources"], r["kinds"], r["checks"], r["signalled_urls"],
            r["changed_since_fetch"], r["signal_fetches"]) == ("http://h:80", 0, [], 1, 1, 1, 0)
    assert analytics.fetch_reasons_per_round(con) == []
    classes = {c["signal_class"]: c["pages"] for c in analytics.freshness_by_signal_class(con)}
    assert classes == {"trusted": 0, "probed-untrusted": 1, "no signals": 0}


def test_fetch_reasons_match_the_schema():
    from recrawl.store.schemas import FETCH_REASONS

    assert analytics.FETCH_REASONS == FETCH_REASONS

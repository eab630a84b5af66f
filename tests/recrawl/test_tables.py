"""Spark + Delta round trips and the table contract."""

import pytest
from pyspark.sql import Row

from recrawl.store.schemas import TABLES
from recrawl.store.tables import (
    SchemaMismatch,
    check_schema,
    conform,
    init_tables,
    read,
    replace_round,
    small_round_rows,
)

pytestmark = pytest.mark.spark


def test_init_creates_every_table_with_declared_schema_and_is_idempotent(spark, cfg):
    first = init_tables(spark, cfg)
    assert all(first.values()) and set(first) == set(TABLES)
    versions = {
        n: spark.sql(f"DESCRIBE HISTORY delta.`{cfg.table_path(n)}`").count() for n in TABLES
    }
    second = init_tables(spark, cfg)
    assert not any(second.values())
    for name, spec in TABLES.items():
        stored = spark.read.format("delta").load(cfg.table_path(name)).schema
        assert stored == spec.schema, name
        # re-running init wrote no new commit
        assert spark.sql(f"DESCRIBE HISTORY delta.`{cfg.table_path(name)}`").count() == versions[name]
    names = {r.tableName for r in spark.sql("SHOW TABLES IN crawl").collect()}
    assert set(TABLES) <= names


def test_delta_write_merge_read_back(spark, cfg):
    from delta.tables import DeltaTable

    init_tables(spark, cfg)
    path = cfg.table_path("scores")
    spark.createDataFrame([Row(url="http://a/", pagerank=0.5, computed_at=None)],
                          TABLES["scores"].schema).write.format("delta").mode("append").save(path)
    upd = spark.createDataFrame(
        [Row(url="http://a/", pagerank=0.7, computed_at=None),
         Row(url="http://b/", pagerank=0.3, computed_at=None)], TABLES["scores"].schema)
    (DeltaTable.forPath(spark, path).alias("t").merge(upd.alias("s"), "t.url = s.url")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    got = {r.url: r.pagerank for r in read(spark, cfg, "scores").collect()}
    assert got == {"http://a/": 0.7, "http://b/": 0.3}
    # time travel sees the first version
    v1 = spark.read.format("delta").option("versionAsOf", 1).load(path).collect()
    assert [(r.url, r.pagerank) for r in v1] == [("http://a/", 0.5)]


# Both writers of a round's rows: delta-rs from the driver (a small round on a local home,
# crawl.small_round_rows) and Spark's own (`0`: always).
WRITERS = {"delta-rs": 10000, "spark": 0}


def _last_writer(cfg, name: str) -> str:
    """Which engine made the table's last commit (its commitInfo)."""
    from deltalake import DeltaTable

    info = DeltaTable(cfg.table_path(name)).history(1)[0]
    engine = str(info.get("engineInfo") or info.get("clientVersion") or "")
    return "spark" if "Spark" in engine else "delta-rs" if "delta-rs" in engine else engine


@pytest.fixture(params=sorted(WRITERS))
def writer(request, cfg):
    return request.param, cfg.with_overrides({"crawl.small_round_rows": WRITERS[request.param]})


def test_replace_round_is_idempotent(spark, writer):
    name, cfg = writer
    init_tables(spark, cfg)
    rows = [Row(round_id="r1", url=f"http://h/{i}", canonical_url="http://h/0", kind="exact",
                distance=0) for i in range(1, 4)]
    df = spark.createDataFrame(rows)
    replace_round(df, cfg, "duplicates", "r1")
    replace_round(df, cfg, "duplicates", "r1")
    replace_round(df.limit(1).withColumn("round_id", df.round_id.substr(1, 1)), cfg,
                  "duplicates", "r")
    out = read(spark, cfg, "duplicates")
    assert out.where("round_id = 'r1'").count() == 3
    assert out.count() == 4
    assert _last_writer(cfg, "duplicates") == name


def test_both_writers_store_the_same_rows_of_every_type(spark, writer):
    import datetime as dt

    from pyspark.sql import functions as F

    name, cfg = writer
    init_tables(spark, cfg)
    when = dt.datetime(2026, 11, 2, 3, 4, 5, 678901)
    fetches = spark.createDataFrame([
        Row(round_id="r1", url=f"http://h/{i}", final_url=None if i else "http://h/x",
            fetch_time=when, http_status=200 + i, fetch_status="fetched", error=None,
            content_type="text/html; charset=utf-8", content_length=2**40 + i,
            payload_digest="sha1:" + "é" * i, warc_file="/w/a.warc.gz", warc_offset=i,
            warc_length=10, etag='"x"', last_modified=None, duration_ms=5,
            redirect_chain=["http://h/a", f"http://h/{i}"] if i else [], truncated=bool(i % 2),
            ip="127.0.0.1", warc_record_id=None, warc_type="response",
            warc_target_uri=f"http://h/{i}", warc_date="2026-11-02T03:04:05Z", executor_id="1")
        for i in range(3)
    ], TABLES["fetches"].schema)
    captures = spark.createDataFrame(
        [("http://h/1", when, 304, None, 7, when.date(), "r1")],
        "url string, fetch_time timestamp, fetch_status int, url_port int, "
        "warc_record_offset long, fetch_date date, round_id string")
    for table, df in (("fetches", fetches), ("captures", captures)):
        replace_round(df, cfg, table, "r1")
        assert _last_writer(cfg, table) == name
        back, want = read(spark, cfg, table), conform(df, table)
        assert back.count() == df.count()
        assert back.exceptAll(want).count() == 0 and want.exceptAll(back).count() == 0
    # a timestamp is the same instant, to the microsecond, whoever wrote it
    assert read(spark, cfg, "fetches").first()["fetch_time"] == when
    # every list empty (Spark's Arrow then has an empty offsets buffer, which delta-rs 1.6
    # panicked on), then an empty round: its rows are gone, the other round's stay
    no_chain = fetches.withColumn("redirect_chain", F.array().cast("array<string>"))
    replace_round(no_chain.withColumn("round_id", F.lit("r2")), cfg, "fetches", "r2")
    assert {len(r.redirect_chain) for r in read(spark, cfg, "fetches").where("round_id = 'r2'")
            .collect()} == {0}
    replace_round(fetches.limit(0), cfg, "fetches", "r1")
    assert _last_writer(cfg, "fetches") == name
    assert [r.round_id for r in read(spark, cfg, "fetches").collect()] == ["r2"] * 3


def test_a_round_larger_than_the_cap_is_written_by_spark(spark, cfg):
    init_tables(spark, cfg)
    rows = spark.createDataFrame([Row(round_id="r1", url=f"http://h/{i}", canonical_url="c",
                                      kind="exact", distance=0) for i in range(3)])
    small = cfg.with_overrides({"crawl.small_round_rows": 3, "generate.top_n": 3})
    replace_round(rows, small, "duplicates", "r1")
    assert _last_writer(small, "duplicates") == "delta-rs"
    # more rows than the cap: collected no further than cap + 1, then Spark writes them all
    two = small.with_overrides({"crawl.small_round_rows": 2, "generate.top_n": 2})
    replace_round(rows, two, "duplicates", "r1")
    assert _last_writer(two, "duplicates") == "spark"
    assert read(spark, two, "duplicates").count() == 3
    # a round configured larger than the cap never collects its output in the driver
    big = small.with_overrides({"generate.top_n": 4})
    replace_round(rows.limit(1), big, "duplicates", "r1")
    assert _last_writer(big, "duplicates") == "spark"
    assert read(spark, big, "duplicates").count() == 1
    # an s3a:// home is always Spark's
    assert small_round_rows(small.with_overrides({"crawl.home": "s3a://b/home"})) == 0


def test_a_null_in_a_required_column_is_refused_and_nothing_is_committed(spark, writer):
    name, cfg = writer
    init_tables(spark, cfg)
    good = spark.createDataFrame([Row(round_id="r1", url="http://h/1", canonical_url="c",
                                      kind="exact", distance=0)])
    replace_round(good, cfg, "duplicates", "r1")
    bad = spark.createDataFrame([Row(round_id="r1", url=None, canonical_url="c",
                                     kind="exact", distance=0)],
                                "round_id string, url string, canonical_url string, kind string, "
                                "distance int")
    with pytest.raises(Exception, match="(?i)null"):
        replace_round(bad, cfg, "duplicates", "r1")
    assert [r.url for r in read(spark, cfg, "duplicates").collect()] == ["http://h/1"]


def test_schema_drift_is_reported_clearly():
    from pyspark.sql.types import StringType, StructField, StructType

    drifted = StructType([StructField("url", StringType()), StructField("pagerank", StringType())])
    with pytest.raises(SchemaMismatch, match="pagerank is string, expected double"):
        check_schema("scores", drifted)
    with pytest.raises(SchemaMismatch, match="missing column computed_at"):
        check_schema("scores", drifted)


def test_init_adds_columns_declared_since_a_table_was_made(spark, cfg):
    from pyspark.sql.types import StructType

    from recrawl.store.schemas import TableSpec
    from recrawl.store.tables import create_table

    spec = TABLES["hosts"]
    old = TableSpec(spec.name, StructType(spec.schema.fields[:-2]), spec.partition_by, spec.comment)
    assert create_table(spark, cfg, old)
    path = cfg.table_path("hosts")
    spark.createDataFrame([("http://a.test:80",) + (None,) * (len(old.schema) - 1)], old.schema) \
        .write.format("delta").mode("append").save(path)
    with pytest.raises(SchemaMismatch, match="crawler init"):
        read(spark, cfg, "hosts")
    init_tables(spark, cfg)  # the additive migration
    df = read(spark, cfg, "hosts")
    assert [f.name for f in df.schema.fields] == [f.name for f in spec.schema.fields]
    rows = df.collect()
    assert [r.host for r in rows] == ["http://a.test:80"]  # the old row survived, new columns NULL
    assert rows[0].scc_root is None and rows[0].scc_hosts is None


def test_a_portable_merge_is_the_same_on_both_writers(spark, tmp_path):
    import datetime as dt

    from recrawl.store.tables import Delete, InsertAll, UpdateAll, merge_into
    from tests.conftest import make_config

    when = dt.datetime(2026, 11, 2, 3, 4, 5, 678901)
    schema = TABLES["robots"].schema
    first = [Row(host=f"h{i}", fetched_at=when, http_status=200, crawl_delay=None,
                 sitemaps=[f"http://h{i}/s.xml"] if i else [], rules="User-agent: *",
                 expires_at=None) for i in range(4)]
    later = [Row(host=f"h{i}", fetched_at=when + dt.timedelta(days=1), http_status=404 + i,
                 crawl_delay=1.5, sitemaps=[], rules=None, expires_at=when)
             for i in range(2, 6)]
    out = {}
    for writer, cap in WRITERS.items():
        cfg = make_config(tmp_path / writer, **{"crawl.small_round_rows": cap})
        init_tables(spark, cfg)
        for rows in (first, later):
            merge_into(spark, cfg, "robots", spark.createDataFrame(rows, schema), "t.host = s.host",
                       Delete("s.http_status = 407"), UpdateAll(), InsertAll(), portable=True)
            assert _last_writer(cfg, "robots") == writer
        out[writer] = read(spark, cfg, "robots")
    a, b = out["delta-rs"], out["spark"]
    # h3 deleted by the first matching clause; h2 updated; h4, h5 inserted
    assert sorted(r.host for r in a.collect()) == ["h0", "h1", "h2", "h4", "h5"]
    assert a.exceptAll(b).count() == 0 and b.exceptAll(a).count() == 0


def test_a_merge_goes_to_spark_unless_portable_small_and_into_a_small_table(spark, cfg, monkeypatch):
    import recrawl.store.tables as tables
    from recrawl.store.tables import InsertAll, UpdateAll, merge_into

    init_tables(spark, cfg)
    rows = spark.createDataFrame([Row(host="h", fetched_at=None, http_status=200, crawl_delay=None,
                                      sitemaps=[], rules=None, expires_at=None)],
                                 TABLES["robots"].schema)

    def merge(**kw):
        merge_into(spark, cfg, "robots", rows, "t.host = s.host", UpdateAll(), InsertAll(), **kw)
        return _last_writer(cfg, "robots")

    assert merge(portable=True) == "delta-rs"
    assert merge() == "spark"  # clauses not declared portable SQL
    monkeypatch.setattr(tables, "SMALL_TARGET_ROWS", 0)  # a target above the size limit
    assert merge(portable=True) == "spark"
    assert read(spark, cfg, "robots").count() == 1


@pytest.mark.parametrize("local", [True, False], ids=["delta-rs", "spark"])
def test_arrow_reads_and_writes_agree_on_both_paths(spark, cfg, monkeypatch, local):
    """The driver's Arrow path (PageRank in the driver): `overwrite_arrow`, `arrow_columns`,
    `row_count` and `set_scores` from Arrow, by delta-rs on a local home and by Spark where
    delta-rs may not write (object storage): the same rows, instants and counts."""
    import datetime as dt

    import pyarrow as pa

    from recrawl.store import arrowtables, crawldb, tables

    init_tables(spark, cfg)
    monkeypatch.setattr(tables, "local_rows_supported", lambda c: local)
    monkeypatch.setattr(arrowtables, "local_rows_supported", lambda c: local)
    monkeypatch.setattr(crawldb, "local_rows_supported", lambda c: local)
    when = dt.datetime(2026, 11, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    arrowtables.overwrite_arrow(spark, cfg, "scores", pa.table({
        "pagerank": [0.5, 0.25], "url": ["http://a/", "http://b/"],
        "computed_at": pa.array([when, None], pa.timestamp("us", tz="UTC"))}))
    got = {r.url: (r.pagerank, r.computed_at) for r in read(spark, cfg, "scores").collect()}
    assert got == {"http://a/": (0.5, when.replace(tzinfo=None)), "http://b/": (0.25, None)}
    assert _last_writer(cfg, "scores") == ("delta-rs" if local else "spark")
    assert arrowtables.row_count(spark, cfg, "scores") == 2
    arrow = arrowtables.arrow_columns(spark, cfg, "scores", ["url", "pagerank"])
    assert sorted(arrow.to_pylist(), key=lambda r: r["url"]) == [
        {"url": "http://a/", "pagerank": 0.5}, {"url": "http://b/", "pagerank": 0.25}]
    # crawldb: a ranked row takes the new score (and a null in-link score), one not ranked
    # keeps its own, a score for a URL crawldb lacks adds nothing
    spark.createDataFrame([("http://a/", "a", 0.1, 0.2), ("http://c/", "c", 0.3, 0.4)],
                          "url string, host string, score double, inlink_score double") \
        .createOrReplaceTempView("seed")
    spark.sql(f"INSERT INTO delta.`{cfg.table_path('crawldb')}` (url, host, status, score, "
              "inlink_score) SELECT url, host, 'fetched', score, inlink_score FROM seed")
    crawldb.set_scores(spark, cfg, pa.table({
        "url": ["http://a/", "http://z/"], "pagerank": [0.9, 0.8],
        "inlink_score": pa.array([None, 0.7], pa.float64())}), in_driver_rows=10)
    rows = {r.url: (r.score, r.inlink_score) for r in read(spark, cfg, "crawldb").collect()}
    assert rows == {"http://a/": (0.9, None), "http://c/": (0.3, 0.4)}
    assert _last_writer(cfg, "crawldb") == ("delta-rs" if local else "spark")


def test_a_merge_by_one_pass_rewrite_is_the_same_as_deltas_merge(spark, tmp_path):
    """recrawl.store.rewrite.rewrite_merge keeps MERGE's meaning: a matched row takes the first
    clause whose condition holds (NULL is false) or is kept, Delete drops it, a source row
    without a match is inserted by the first Insert that holds or dropped, a table row without
    a match is kept; columns no clause sets keep their value (or NULL when inserted)."""
    import datetime as dt

    from recrawl.store.rewrite import files, rewrite_merge
    from recrawl.store.tables import Delete, Insert, Update, merge_into
    from tests.conftest import make_config

    when = dt.datetime(2026, 11, 2, 3, 4, 5)
    schema = TABLES["robots"].schema
    table = [Row(host=f"h{i}", fetched_at=when, http_status=200 + i, crawl_delay=float(i),
                 sitemaps=[f"http://h{i}/s.xml"], rules=f"rules {i}", expires_at=None)
             for i in range(6)]
    src_schema = "host string, code int, delay double, note string"
    source = [("h0", 1, 9.0, "a"),    # first clause
              ("h1", 2, None, "b"),   # first clause's condition NULL: the second clause
              ("h2", 3, 1.0, None),   # no condition holds: kept as it is
              ("h3", 4, 1.0, "del"),  # deleted
              ("n1", 5, 2.0, "ins"),  # inserted
              ("n2", 6, None, "no")]  # the Insert's condition is false: dropped
    clauses = (Update({"http_status": "s.code", "crawl_delay": "s.delay + t.crawl_delay"},
                      when="s.delay > 5"),
               Delete("s.note = 'del'"),
               Update({"rules": "concat(t.rules, '+', s.note)"}, when="s.note IS NOT NULL"),
               Insert({"host": "s.host", "http_status": "s.code", "rules": "s.note"},
                      when="s.delay IS NOT NULL"))
    out = {}
    for way in ("merge", "rewrite"):
        cfg = make_config(tmp_path / way)
        init_tables(spark, cfg)
        conform(spark.createDataFrame(table, schema), "robots").coalesce(2).write \
            .format("delta").mode("append").save(cfg.table_path("robots"))
        src = spark.createDataFrame(source, src_schema)
        if way == "merge":
            merge_into(spark, cfg, "robots", src, "t.host = s.host", *clauses)
        else:
            assert files(spark, cfg, "robots") == 2
            rewrite_merge(spark, cfg, "robots", src, "host", *clauses)
        out[way] = {r.host: r.asDict() for r in read(spark, cfg, "robots").collect()}
    assert out["rewrite"] == out["merge"]
    got = out["rewrite"]
    assert sorted(got) == ["h0", "h1", "h2", "h4", "h5", "n1"]
    assert (got["h0"]["http_status"], got["h0"]["crawl_delay"]) == (1, 9.0)
    assert got["h1"]["rules"] == "rules 1+b" and got["h1"]["http_status"] == 201
    assert got["h2"] == {**table[2].asDict()}
    assert got["n1"] == {"host": "n1", "fetched_at": None, "http_status": 5, "crawl_delay": None,
                         "sitemaps": None, "rules": "ins", "expires_at": None}

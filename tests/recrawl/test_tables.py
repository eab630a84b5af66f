"""Spark + Delta round trips and the table contract."""

import pytest
from pyspark.sql import Row

from recrawl.schemas import TABLES
from recrawl.tables import SchemaMismatch, check_schema, init_tables, read, replace_round

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


def test_replace_round_is_idempotent(spark, cfg):
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


def test_schema_drift_is_reported_clearly():
    from pyspark.sql.types import StringType, StructField, StructType

    drifted = StructType([StructField("url", StringType()), StructField("pagerank", StringType())])
    with pytest.raises(SchemaMismatch, match="pagerank is string, expected double"):
        check_schema("scores", drifted)
    with pytest.raises(SchemaMismatch, match="missing column computed_at"):
        check_schema("scores", drifted)


def test_init_adds_columns_declared_since_a_table_was_made(spark, cfg):
    from pyspark.sql.types import StructType

    from recrawl.schemas import TableSpec
    from recrawl.tables import create_table

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

"""The DuckDB fast path answers like Spark SQL, on tables Spark wrote, without a JVM."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import pytest

from recrawl import fastsql
from tests.sample_crawl import sample_home

# (name, query): group by, joins, ordering with NULLs, timestamps (with microseconds), arrays,
# maps, arrays of structs, negative bigints — each must print the same on both engines.
QUERIES = [
    ("group_by", "SELECT fetch_status, count(*) AS n FROM crawl.fetches "
                 "GROUP BY fetch_status ORDER BY n DESC, fetch_status"),
    ("join", "SELECT c.host, count(*) AS attempts, "
             "sum(CASE WHEN f.fetch_status = 'fetched' THEN 1 ELSE 0 END) AS fetched, "
             "max(f.fetch_time) AS last_fetch "
             "FROM crawl.fetches f JOIN crawl.crawldb c ON c.url = f.url "
             "GROUP BY c.host ORDER BY attempts DESC, c.host"),
    ("nulls_first_asc", "SELECT url, last_fetch_time, next_fetch_time, discovered_at "
                        "FROM crawldb ORDER BY last_fetch_time, url"),
    ("nulls_last_desc", "SELECT url, change_rate, score FROM crawl.crawldb "
                        "ORDER BY change_rate DESC, url"),
    ("timestamp_filter", "SELECT round_id, min(fetch_time) AS first_fetch, "
                         "max(fetch_time) AS last_fetch, count(*) AS n FROM crawl.fetches "
                         "WHERE fetch_time >= TIMESTAMP '2026-11-02 00:00:00' "
                         "GROUP BY round_id ORDER BY round_id"),
    ("map_and_array", "SELECT round_id, logical_date, started_at, counts, steps_done "
                      "FROM crawl.rounds ORDER BY round_id"),
    ("map_subscript", "SELECT round_id, counts['fetch.fetched'] AS fetched FROM crawl.rounds "
                      "ORDER BY round_id"),
    ("array_of_structs", "SELECT url, change_history, last_changed FROM crawl.crawldb "
                         "ORDER BY url"),
    ("bigint_and_micros", "SELECT url, fetch_time, simhash, p.payload_digest FROM crawl.pages p "
                          "JOIN crawl.fetches f USING (round_id, url) "
                          "WHERE round_id = '20261103' ORDER BY fetch_time"),
    ("cte_window", "WITH ranked AS (SELECT host, url, score, row_number() OVER "
                   "(PARTITION BY host ORDER BY score DESC, url) AS rn FROM crawl.crawldb) "
                   "SELECT host, url, score FROM ranked WHERE rn = 1 ORDER BY host"),
    ("arrays_empty_and_null", "SELECT host, sitemaps, crawl_delay, fetched_at "
                              "FROM crawl.robots ORDER BY host"),
]


@pytest.fixture(scope="module")
def sample(spark, tmp_path_factory):
    return sample_home(spark, tmp_path_factory)


@pytest.fixture()
def utc_process(monkeypatch):
    """Spark's Python client shows timestamps in the process's zone: pin it to UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(scope="module")
def spark_tables(spark, sample):
    """The sample's tables registered in the shared session (replacing other tests' ones)."""
    from recrawl.tables import register_tables

    db = sample.get("crawl.database")
    names = fastsql.table_names(sample)
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS `{db}`.`{name}`")  # external: data stays
    register_tables(spark, sample)
    spark.catalog.setCurrentDatabase(db)
    yield sample
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS `{db}`.`{name}`")


def _spark_text(spark, query, fmt):
    """What `crawler sql` prints on Spark (run_sql minus its per-call table registration)."""
    from recrawl.sqlshell import emit

    df = spark.sql(query)
    buf = io.StringIO()
    rows = df.limit(51).collect() if fmt == "table" else df.toLocalIterator()
    emit(df.columns, rows, fmt, limit=50, out=buf)
    return buf.getvalue()


def _duck_text(cfg, query, fmt):
    buf = io.StringIO()
    assert fastsql.run_sql(cfg, query, fmt, limit=50, out=buf) == 0
    return buf.getvalue()


@pytest.mark.spark
@pytest.mark.parametrize("name,query", QUERIES, ids=[q[0] for q in QUERIES])
def test_duckdb_prints_what_spark_prints_as_json(spark, spark_tables, utc_process, name, query):
    expected = _spark_text(spark, query, "json")
    assert expected.count("\n") >= 2, expected  # the sample has rows for every query
    assert _duck_text(spark_tables, query, "json") == expected


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_table_and_csv_formats_match(spark, spark_tables, utc_process, fmt):
    for name in ("map_and_array", "array_of_structs"):
        query = dict(QUERIES)[name]
        assert _duck_text(spark_tables, query, fmt) == _spark_text(spark, query, fmt), name


@pytest.mark.spark
def test_spark_run_sql_and_fast_path_print_the_same(spark, spark_tables, utc_process, capsys):
    """The real `crawler sql` code path on both engines, table format."""
    from recrawl.sqlshell import run_sql

    query = dict(QUERIES)["group_by"]
    assert run_sql(spark, spark_tables, query, "table", 50) == 0
    spark_out = capsys.readouterr().out
    assert fastsql.run_sql(spark_tables, query, "table", 50) == 0
    assert capsys.readouterr().out == spark_out
    assert "fetched" in spark_out and "(8 rows)" in spark_out


@pytest.mark.spark
def test_cli_fast_path_needs_no_jvm(sample):
    """`crawler sql --engine duckdb` with Java made unavailable: answers, and pyspark never loads."""
    code = (
        "import sys; from recrawl.cli import main; "
        "rc = main(['sql', '--engine', 'duckdb', '--format', 'csv', "
        "'SELECT status, count(*) AS n FROM crawl.crawldb GROUP BY status ORDER BY n DESC, status']); "
        "assert 'pyspark' not in sys.modules, 'pyspark imported'; sys.exit(rc)"
    )
    env = dict(os.environ, RECRAWL_CRAWL__HOME=sample.home, JAVA_HOME="/nonexistent")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:3] == ["status,n", "fetched,10", "unfetched,4"]
    assert elapsed < 60  # ~1 s on an idle machine; generous for a loaded CI box
    bad = subprocess.run(
        [sys.executable, "-m", "recrawl.cli", "sql", "--engine", "duckdb", "SELECT nope FROM crawldb"],
        capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "nope" in bad.stderr


@pytest.mark.parametrize("query,local,reason", [
    ("SELECT * FROM crawl.crawldb", True, None),
    ("  -- a comment\n with x AS (SELECT 1) SELECT * FROM x;", True, None),
    ("(SELECT 1)", True, None),
    ("SELECT * FROM crawl.crawldb VERSION AS OF 3", True, "Spark/Delta-only"),
    ("SELECT * FROM table_changes('crawl.crawldb', 2)", True, "Spark/Delta-only"),
    ("SELECT * FROM `crawl`.`crawldb`", True, "Spark/Delta-only"),
    ("SELECT * FROM delta.`/x/tables/crawldb`", True, "Spark/Delta-only"),
    ("DESCRIBE HISTORY crawl.crawldb", True, "not a plain SELECT"),
    ("DELETE FROM crawl.crawldb", True, "not a plain SELECT"),
    ("SELECT 1; DROP TABLE crawl.crawldb", True, "more than one statement"),
    ("SELECT * FROM crawl.crawldb", False, "not a local folder"),
])
def test_auto_engine_sends_only_plain_selects_on_local_homes_to_duckdb(tmp_path, query, local,
                                                                       reason):
    from tests.sample_crawl import config_for

    cfg = config_for(tmp_path if local else "s3a://bucket/crawl")
    got = fastsql.fast_path_reason(cfg, query)
    assert (got is None) if reason is None else (reason in got), got


def test_auto_engine_falls_back_to_spark_when_duckdb_rejects_the_query(monkeypatch, tmp_path):
    """A Spark-dialect query DuckDB cannot bind runs on Spark, with a note on stderr."""
    from recrawl import cli, sqlshell
    from recrawl import spark as spark_mod

    calls = []
    monkeypatch.setattr(fastsql, "run_sql", lambda *a, **k: (_ for _ in ()).throw(
        fastsql.FastPathError("DuckDB: Catalog Error: Scalar Function with name explode does not exist!")))
    monkeypatch.setattr(sqlshell, "run_sql", lambda spark, cfg, q, fmt, limit: calls.append(q) or 0)
    monkeypatch.setattr(spark_mod, "get_spark", lambda cfg: "session")
    monkeypatch.setenv("RECRAWL_CRAWL__HOME", str(tmp_path))
    assert cli.main(["sql", "--engine", "auto", "SELECT explode(steps_done) FROM rounds"]) == 0
    assert calls == ["SELECT explode(steps_done) FROM rounds"]
    calls.clear()
    # --engine duckdb reports the problem instead of starting a JVM
    assert cli.main(["sql", "--engine", "duckdb", "SELECT explode(steps_done) FROM rounds"]) == 2
    assert calls == []


def test_contract_table_names_match_the_schemas():
    from recrawl.schemas import TABLES

    assert set(fastsql.CONTRACT_TABLES) == set(TABLES)


def test_missing_crawl_home_is_a_clear_error(tmp_path):
    from tests.sample_crawl import config_for

    cfg = config_for(tmp_path / "nothing-here")
    with pytest.raises(fastsql.FastPathError, match="no Delta tables under"):
        fastsql.run_sql(cfg, "SELECT count(*) FROM crawl.crawldb", out=io.StringIO())


def _doc_queries():
    """(sql, spark_only) for every ```sql block of docs/analysts.md."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "analysts.md").read_text()
    out, pos = [], 0
    while (start := text.find("```sql\n", pos)) != -1:
        end = text.index("```", start + 7)
        out.append((text[start + 7:end].strip(), "\n*Spark only*" in text[pos:start]))
        pos = end + 3
    return out


@pytest.mark.spark
def test_analysts_doc_examples_run_on_the_fast_path(sample):
    queries = _doc_queries()
    assert len([q for q, spark_only in queries if not spark_only]) >= 8
    assert len([q for q, spark_only in queries if spark_only]) >= 3
    con = fastsql.connect(sample)
    for query, spark_only in queries:
        if spark_only:
            assert fastsql.fast_path_reason(sample, query) is not None
            continue
        assert fastsql.fast_path_reason(sample, query) is None, query
        con.execute(query).fetchall()

"""The DuckDB fast path answers like Spark SQL, on tables Spark wrote, without a JVM."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import pytest

from analyst import fastsql
from tests.sample_crawl import CRAWLDB, sample_home

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
    from recrawl.store.tables import register_tables

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
    from analyst.printers import emit

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
    from app.sparksql import run_sql

    query = dict(QUERIES)["group_by"]
    assert run_sql(spark, spark_tables, query, "table", 50) == 0
    spark_out = capsys.readouterr().out
    assert fastsql.run_sql(spark_tables, query, "table", 50) == 0
    assert capsys.readouterr().out == spark_out
    assert "fetched" in spark_out and "(8 rows)" in spark_out


@pytest.mark.spark
def test_cli_fast_path_needs_no_jvm(sample):
    """`crawler sql` (auto, the default) with Java made unavailable: answers, and pyspark never
    loads."""
    code = (
        "import sys; from app.cli import main; "
        "rc = main(['sql', '--format', 'csv', "
        "'SELECT status, count(*) AS n FROM crawl.crawldb GROUP BY status ORDER BY n DESC, status']); "
        "assert 'pyspark' not in sys.modules, 'pyspark imported'; sys.exit(rc)"
    )
    env = dict(os.environ, RECRAWL_CRAWL__HOME=sample.home, JAVA_HOME="/nonexistent")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:3] == ["status,n", "fetched,10", "unfetched,4"]
    bad = subprocess.run(
        [sys.executable, "-m", "app.cli", "sql", "--engine", "duckdb", "SELECT nope FROM crawldb"],
        capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "nope" in bad.stderr


@pytest.mark.parametrize("query,local,reason", [
    ("SELECT * FROM crawl.crawldb", True, None),
    ("  -- a comment\n with x AS (SELECT 1) SELECT * FROM x;", True, None),
    ("(SELECT 1)", True, None),
    ("SELECT 1; SELECT 2 AS two", True, None),
    ("SELECT * FROM crawl.crawldb VERSION AS OF 3", True, "time travel (VERSION AS OF)"),
    ("SELECT * FROM crawl.crawldb TIMESTAMP  AS OF '2026-11-28'", True, "time travel"),
    ("SELECT * FROM table_changes('crawl.crawldb', 2)", True, "change data feed"),
    ("SELECT * FROM `crawl`.`crawldb`", True, "backtick"),
    ("SELECT * FROM delta.`/x/tables/crawldb`", True, "Delta table by path"),
    ("DESCRIBE HISTORY crawl.crawldb", True, "Delta table history"),
    ("describe detail crawl.crawldb", True, "Delta table history"),
    ("OPTIMIZE crawl.crawldb ZORDER BY (host)", True, "OPTIMIZE writes or changes tables"),
    ("DELETE FROM crawl.crawldb", True, "DELETE writes or changes tables"),
    ("SELECT 1; DROP TABLE crawl.crawldb", True, "DROP writes or changes tables"),
    ("SHOW TABLES IN crawl", True, "SHOW is a Spark catalog/session command"),
    ("SELECT split(url, '/') AS parts FROM crawl.crawldb", True, "split() means something else"),
    ("SELECT element_at(counts, 'fetch.fetched') AS n FROM crawl.rounds", True, "element_at()"),
    ("SELECT string_split(url, '/') AS parts FROM crawldb", True, None),
    ("SELECT 'VERSION AS OF' AS s -- VERSION AS OF", True, "time travel"),  # coarse on purpose
    ("SELECT 1 /* OPTIMIZE */", True, None),
    ("SELECT * FROM crawl.crawldb", False, "not a local folder"),
])
def test_auto_engine_reason(tmp_path, query, local, reason):
    from tests.sample_crawl import config_for

    cfg = config_for(tmp_path if local else "s3a://bucket/crawl")
    got = fastsql.fast_path_reason(cfg, query)
    assert (got is None) if reason is None else (reason in got), got


@pytest.mark.parametrize("sql,statements", [
    ("SELECT 1", ["SELECT 1"]),
    ("SELECT 1;", ["SELECT 1"]),
    (" SELECT 1 ;\n SELECT 2 ; ", ["SELECT 1", "SELECT 2"]),
    ("SELECT ';' AS a, \"x;y\" AS b; SELECT `a;b`", ["SELECT ';' AS a, \"x;y\" AS b", "SELECT `a;b`"]),
    ("SELECT 'it''s; fine' AS a; SELECT 'back\\'slash;' AS b",
     ["SELECT 'it''s; fine' AS a", "SELECT 'back\\'slash;' AS b"]),
    ("SELECT 1 -- one; two\n; SELECT 2 /* ; */", ["SELECT 1 -- one; two", "SELECT 2 /* ; */"]),
    (";; -- only a comment; here\n /* and ; this */ ;", []),
    ("", []),
])
def test_split_statements_respects_quotes_and_comments(sql, statements):
    assert fastsql.split_statements(sql) == statements


def test_spark_only_reason_is_per_statement():
    assert fastsql.spark_only_reason("SELECT count(*) AS n FROM crawl.fetches") is None
    assert fastsql.spark_only_reason("WITH a AS (SELECT 1 AS x) SELECT x FROM a") is None
    got = fastsql.spark_only_reason("SELECT * FROM crawl.crawldb version  as\nof 2")
    assert got == "uses Delta time travel (version as of)"


@pytest.mark.spark
def test_duckdb_checks_every_statement_before_running_any(sample):
    """Spark dialect -> NeedsSpark (auto falls back); a typo -> FastPathError; nothing printed."""
    for query in ("SELECT explode(steps_done) AS step FROM rounds",
                  "SELECT count(*) AS n FROM crawldb; SELECT explode(steps_done) AS s FROM rounds",
                  "SELECT * FROM crawl.crawldb VERSION AS OF 1"):
        buf = io.StringIO()
        with pytest.raises(fastsql.NeedsSpark):
            fastsql.run_sql(sample, query, out=buf)
        assert buf.getvalue() == "", query
    for query in ("SELECT * FROM crawl.crawldbb", "SELECT 1 AS x; SELECT nope FROM crawldb"):
        buf = io.StringIO()
        with pytest.raises(fastsql.FastPathError) as info:
            fastsql.run_sql(sample, query, out=buf)
        assert not isinstance(info.value, fastsql.NeedsSpark), info.value
        assert buf.getvalue() == "", query


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_several_statements_print_every_answer_alike_on_both_engines(spark, spark_tables,
                                                                    utc_process, fmt):
    from app.sparksql import run_sql

    query = ("SELECT status, count(*) AS n FROM crawl.crawldb GROUP BY status ORDER BY n DESC, "
             "status; -- the second one;\n SELECT round_id FROM crawl.rounds ORDER BY round_id;")
    duck = _duck_text(spark_tables, query, fmt)
    buf = io.StringIO()
    assert run_sql(spark, spark_tables, query, fmt, 50, out=buf) == 0
    assert buf.getvalue() == duck
    assert "unfetched" in duck and "20261103" in duck
    if fmt == "table":
        assert duck.count("rows)") == 2 and "\n\nround_id" in duck


def test_contract_table_names_match_the_schemas():
    from recrawl.store.schemas import TABLES

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
def test_every_analysts_doc_example_answers_with_rows_on_its_engines(spark, spark_tables,
                                                                    utc_process):
    """Every ```sql block of docs/analysts.md returns rows on the sample crawl: unmarked ones on
    both engines, *Spark only* ones on Spark (which `auto` picks for them, and which
    `--engine duckdb` refuses before running anything)."""
    queries = _doc_queries()
    assert len([q for q, spark_only in queries if not spark_only]) >= 8
    assert len([q for q, spark_only in queries if spark_only]) >= 3
    con = fastsql.connect(spark_tables)
    for query, spark_only in queries:
        if spark_only:
            assert fastsql.fast_path_reason(spark_tables, query) is not None, query
            with pytest.raises(fastsql.NeedsSpark):
                fastsql.run_sql(spark_tables, query, out=io.StringIO())
        else:
            assert fastsql.fast_path_reason(spark_tables, query) is None, query
            assert con.execute(query).fetchall(), f"DuckDB: no rows from\n{query}"
        assert spark.sql(query).limit(1).collect(), f"Spark: no rows from\n{query}"


def _cli(args, cfg, **env):
    e = dict(os.environ, RECRAWL_CRAWL__HOME=cfg.home, RECRAWL_SPARK__SHUFFLE_PARTITIONS="2")
    e.update(env)
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True,
                          text=True, env=e, timeout=300)


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["auto", "duckdb", "spark"])
def test_a_mistyped_table_is_one_line_on_stderr(sample, engine):
    out = _cli(["sql", "--engine", engine, "SELECT url FROM crawl.crawldbb"], sample)
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith("crawler sql: error: ") and "crawldbb" in out.stderr
    if engine == "spark":
        assert "[TABLE_OR_VIEW_NOT_FOUND]" in out.stderr


@pytest.mark.spark
def test_auto_sends_spark_only_statements_to_spark_with_one_note(sample):
    out = _cli(["sql", "--format", "csv", "DESCRIBE HISTORY crawl.crawldb; "
                "SELECT count(*) AS n FROM crawl.crawldb VERSION AS OF 1"], sample)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [
        "crawler sql: using Spark (uses Delta table history (DESCRIBE HISTORY))"]
    history, count = out.stdout.split("\n\n")
    assert history.startswith("version,timestamp,") and len(history.splitlines()) == 4  # 3 writes
    first_round_urls = sum(1 for c in CRAWLDB if c[1] == 0)
    assert count.split() == ["n", str(first_round_urls)]


@pytest.mark.spark
def test_global_flags_work_after_the_verb(sample):
    out = _cli(["sql", "SELECT count(*) AS n FROM other.crawldb", "--format", "csv",
                "--set", "crawl.database=other"], sample)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["n", "19"]

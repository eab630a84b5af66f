"""The `crawler` entry point, run as a person runs it (a subprocess with its own JVM)."""

import os
import subprocess
import sys

import pytest

CRAWLER = [sys.executable, "-m", "recrawl.cli"]


def run(args, home, **env):
    e = dict(os.environ, RECRAWL_CRAWL__HOME=str(home), RECRAWL_SPARK__SHUFFLE_PARTITIONS="2")
    e.update(env)
    return subprocess.run(CRAWLER + args, capture_output=True, text=True, env=e, timeout=300)


@pytest.mark.spark
def test_init_twice_then_sql_lists_every_table(tmp_path):
    from recrawl.schemas import TABLES

    first = run(["init"], tmp_path)
    assert first.returncode == 0, first.stderr
    assert "tables created: crawldb" in first.stdout
    second = run(["init"], tmp_path)
    assert second.returncode == 0, second.stderr
    assert "none (all existed)" in second.stdout
    # a fresh process (new Spark session) sees the tables without registering them itself
    out = run(["sql", "SHOW TABLES IN crawl", "--format", "csv"], tmp_path)
    assert out.returncode == 0, out.stderr
    names = {line.split(",")[1] for line in out.stdout.strip().splitlines()[1:]}
    assert names == set(TABLES)
    bad = run(["sql", "SELECT nope FROM crawl.crawldb"], tmp_path)
    assert bad.returncode == 2
    assert "error:" in bad.stderr and "Traceback" not in bad.stderr


def test_unknown_config_key_is_one_line_error(tmp_path):
    out = run(["status"], tmp_path, RECRAWL_FETCHER__MIN_DELAI_S="1")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "unknown key fetcher.min_delai_s" in out.stderr


def test_missing_jars_say_what_to_run(tmp_path):
    out = run(["init"], tmp_path, RECRAWL_SPARK__JARS_DIR=str(tmp_path / "nojars"))
    assert out.returncode == 2
    assert "scripts/setup.sh" in out.stderr and "Traceback" not in out.stderr


def test_missing_java_is_explained(tmp_path):
    out = run(["init"], tmp_path, JAVA_HOME=str(tmp_path / "nojava"))
    assert out.returncode == 2
    assert "Java not found" in out.stderr and "Traceback" not in out.stderr


def test_bad_date_is_refused(tmp_path):
    out = run(["generate", "--date", "yesterday"], tmp_path)
    assert out.returncode == 2
    assert "not an ISO date" in out.stderr

"""The `crawler` entry point, run as a person runs it (a subprocess with its own JVM)."""

import os
import subprocess
import sys

import pytest

CRAWLER = [sys.executable, "-m", "app.cli"]


def run(args, home, **env):
    e = dict(os.environ, RECRAWL_CRAWL__HOME=str(home), RECRAWL_SPARK__SHUFFLE_PARTITIONS="2")
    e.update(env)
    return subprocess.run(CRAWLER + args, capture_output=True, text=True, env=e, timeout=300)


@pytest.mark.spark
def test_init_twice_then_sql_lists_every_table(tmp_path):
    from recrawl.store.schemas import TABLES

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


@pytest.mark.parametrize("args,needle", [
    (["generate", "--date", "yesterday"], "not an ISO date"),
    (["round", "--date", "2026-11-01", "--round", "../x"], "round id"),
    (["inject", "seeds.txt", "--date", "2026-13-45"], "not an ISO date"),
    (["pagerank", "--date", "soon"], "not an ISO date"),
    (["maintenance", "--retain-hours", "1"], "VACUUM retention"),
    (["init"], "Java not found"),  # with JAVA_HOME pointing nowhere, below
])
def test_bad_arguments_touch_nothing(tmp_path, args, needle):
    """A refused argument against a crawl home that does not exist yet leaves it absent: no
    folder, no lock file, no tables."""
    home = tmp_path / "home"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    args = [str(seeds) if a == "seeds.txt" else a for a in args]
    env = {"JAVA_HOME": str(tmp_path / "nojava")} if args == ["init"] else {}
    out = run(args, home, **env)
    assert out.returncode == 2, out.stdout + out.stderr
    assert len(out.stderr.splitlines()) == 1 and needle in out.stderr, out.stderr
    assert not home.exists()


def test_global_flags_are_accepted_after_the_verb(tmp_path):
    from app.cli import _merge_globals, _parser

    args = _merge_globals(_parser().parse_args(
        ["--set", "a.b=1", "sql", "SELECT 1", "--set", "c.d=2", "--config", "x.toml", "--verbose"]))
    assert args.set == ["a.b=1", "c.d=2"] and args.config == "x.toml" and args.verbose
    args = _merge_globals(_parser().parse_args(["--config", "y.toml", "status"]))
    assert args.set == [] and args.config == "y.toml" and not args.verbose
    # and they take effect: an unknown key given after the verb is refused like one before it
    out = run(["sql", "SELECT 1 AS x", "--set", "crawl.no_such_key=1"], tmp_path / "home")
    assert out.returncode == 2 and "unknown key crawl.no_such_key" in out.stderr, out.stderr
    assert "usage:" not in out.stderr


def test_round_check_and_help_load_no_pyspark(tmp_path):
    """`crawler round --check` (the DAG's check_round) reads a local home's rounds table with
    DuckDB: no JVM, and not even pyspark's import (~1 s); nor does `crawler --help`."""
    pa = pytest.importorskip("pyarrow")
    deltalake = pytest.importorskip("deltalake")
    from recrawl.config import load_config
    from recrawl.rules.rounds import STEPS

    cfg = load_config(environ={}).with_overrides({"crawl.home": str(tmp_path / "home")}, "test")
    deltalake.write_deltalake(cfg.table_path("rounds"), pa.table({
        "round_id": ["20261101"], "steps_done": pa.array([list(STEPS)], pa.list_(pa.string()))}))
    code = ("import sys; from app.cli import main\n"
            "try:\n    rc = main(sys.argv[1:])\nexcept SystemExit as exc:\n    rc = exc.code\n"
            "assert 'pyspark' not in sys.modules, 'pyspark imported'; sys.exit(rc)")

    def crawler(*args):
        env = dict(os.environ, RECRAWL_CRAWL__HOME=cfg.home, JAVA_HOME=str(tmp_path / "nojava"))
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              env=env, timeout=120)

    done = crawler("round", "--date", "2026-11-01", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "complete (every step done)" in done.stdout
    todo = crawler("round", "--date", "2026-11-02", "--check")
    assert todo.returncode == 3, todo.stdout + todo.stderr
    assert "next step signals (done: none)" in todo.stdout
    usage = crawler("--help")
    assert usage.returncode == 0, usage.stderr
    assert "round" in usage.stdout

"""`crawler`: one entry point with a verb per crawl step.

A person, a test and an Airflow task all call the same verbs. Problems a user can fix (bad
configuration, a missing JVM or jars, bad input, a table written by another version) end in one
line on stderr naming the problem and what to do, and exit code 2 — never a stack trace.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import sys
from collections.abc import Sequence

from recrawl.config import Config, ConfigError, load_config

STEP_VERBS = ("generate", "fetch", "parse", "dedup", "updatedb", "schedule")
WRITING_VERBS = ("init", "inject", *STEP_VERBS, "round", "pagerank", "maintenance")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crawler", description="Nutch-style recrawl on Spark + Delta")
    p.add_argument("--config", help="TOML file overriding recrawl/defaults.toml")
    p.add_argument(
        "--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
        help="override one configuration key (repeatable)",
    )
    sub = p.add_subparsers(dest="verb", required=True)
    sub.add_parser("init", help="create the crawl database and every contract table (idempotent)")
    inj = sub.add_parser("inject", help="normalize seed URLs and merge them into crawldb")
    inj.add_argument("seeds", help="file with one URL per line (# comments and blanks allowed)")
    inj.add_argument("--date", help="logical date (default: today, UTC)")
    for verb in STEP_VERBS:
        sp = sub.add_parser(verb, help=f"run the {verb} step of one round")
        _round_args(sp)
    rnd = sub.add_parser("round", help="run generate, fetch, parse, dedup, updatedb, schedule "
                                       "(resuming after the last step done)")
    _round_args(rnd)
    rnd.add_argument("--redo", action="store_true",
                     help="run every step again, even those the rounds table records as done")
    pr = sub.add_parser("pagerank", help="compute PageRank over the link graph into scores")
    pr.add_argument("--date", help="logical date (default: today, UTC)")
    mt = sub.add_parser("maintenance", help="WARC retention, OPTIMIZE (crawldb Z-ordered by host), VACUUM")
    mt.add_argument("--date", help="logical date WARC ages count from (default: today, UTC)")
    mt.add_argument("--step", action="append", choices=("warc", "optimize", "vacuum"),
                    help="run only this step (repeatable; default: all three)")
    mt.add_argument("--retain-hours", type=float, default=168.0,
                    help="VACUUM retention, at least 168 (Delta's 7-day safety window)")
    mt.add_argument("--warc-retention-days", type=float, default=90.0,
                    help="delete warc/<round> folders of rounds older than this")
    sql = sub.add_parser("sql", help="run SQL over the crawl tables (Spark, or DuckDB without a JVM)")
    sql.add_argument("query")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.add_argument("--limit", type=int, default=100, help="rows to print (table format)")
    sql.add_argument(
        "--engine", choices=("spark", "duckdb", "auto"), default="spark",
        help="spark (default; full Spark SQL, time travel, table_changes), duckdb (the fast "
             "path: current snapshots read with delta-rs, no JVM, ~1 s) or auto (duckdb for a "
             "plain SELECT on a local crawl home, Spark otherwise or when DuckDB rejects it)",
    )
    rep = sub.add_parser("report", help="write a self-contained HTML report of the crawl (no JVM)")
    rep.add_argument("--out", default="crawl-report.html", help="HTML file to write")
    rep.add_argument("--top", type=int, default=15, help="rows in the top-N charts and tables")
    sub.add_parser("status", help="tables, row counts and the last round")
    return p


def _round_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--date", required=True, help="the round's logical date (ISO)")
    sp.add_argument("--round", dest="round_id", help="round id (default: derived from --date)")


def _config(args: argparse.Namespace) -> Config:
    cfg = load_config(args.config)
    if args.set:
        overrides = {}
        for item in args.set:
            if "=" not in item:
                raise ConfigError(f"--set {item!r}: expected SECTION.KEY=VALUE")
            key, raw = item.split("=", 1)
            from recrawl.config import _parse_env_value

            overrides[key.strip()] = _parse_env_value(raw.strip())
        cfg = cfg.with_overrides(overrides, "--set")
    return cfg


def _logical(value: str | None) -> dt.datetime:
    from recrawl.rounds import parse_date

    if value:
        return parse_date(value)
    today = dt.datetime.now(dt.UTC).date()
    return dt.datetime(today.year, today.month, today.day, tzinfo=dt.UTC)


def _print_counts(title: str, counts: dict) -> None:
    parts = ", ".join(f"{k}={v}" for k, v in counts.items())
    print(f"{title}: {parts}" if parts else title)


def run_step(spark, cfg: Config, verb: str, round_id: str, logical: dt.datetime) -> dict:
    """Run one round step through its Spark job module and record its counts."""
    from recrawl.rounds import record_step

    module = importlib.import_module(f"spark_jobs.{verb}")
    counts = module.run(spark, cfg, round_id, logical)
    record_step(spark, cfg, round_id, logical, verb, counts)
    return counts


def _cmd(args: argparse.Namespace) -> int:
    cfg = _config(args)
    if args.verb in WRITING_VERBS:
        from recrawl.lock import crawl_lock

        with crawl_lock(cfg.home, args.verb, float(cfg.get("crawl.lock_wait_s"))):
            return _dispatch(args, cfg)
    return _dispatch(args, cfg)


def steps_done(spark, cfg: Config, round_id: str) -> list[str]:
    """Steps the rounds table records as done for `round_id` (empty when none)."""
    from recrawl.tables import table_exists

    path = cfg.table_path("rounds")
    if not table_exists(spark, path):
        return []
    rows = spark.read.format("delta").load(path).where(
        f"round_id = '{round_id}'").select("steps_done").collect()
    return list(rows[0]["steps_done"] or []) if rows else []


def resume_from(done: Sequence[str]) -> int:
    """Index in STEP_VERBS of the first step not done (len when the round is complete)."""
    for i, verb in enumerate(STEP_VERBS):
        if verb not in done:
            return i
    return len(STEP_VERBS)


def _dispatch(args: argparse.Namespace, cfg: Config) -> int:
    from recrawl.spark import get_spark

    if args.verb == "init":
        from recrawl.tables import init_tables

        spark = get_spark(cfg)
        created = init_tables(spark, cfg)
        new = [n for n, c in created.items() if c]
        print(f"crawl home: {cfg.home}")
        print(f"tables created: {', '.join(new) if new else 'none (all existed)'}")
        return 0
    if args.verb == "sql":
        from recrawl.sqlshell import run_sql

        if args.engine != "spark":
            from recrawl import fastsql

            reason = fastsql.fast_path_reason(cfg, args.query) if args.engine == "auto" else None
            if reason is None:
                try:
                    return fastsql.run_sql(cfg, args.query, args.format, args.limit)
                except fastsql.FastPathError as exc:
                    if args.engine == "duckdb":
                        print(f"crawler sql: error: {exc}", file=sys.stderr)
                        return 2
                    reason = str(exc)
            print(f"crawler sql: using Spark ({reason})", file=sys.stderr)
        return run_sql(get_spark(cfg), cfg, args.query, args.format, args.limit)
    if args.verb == "report":
        from recrawl import fastsql, report

        try:
            path = report.write_report(cfg, args.out, top=args.top)
        except fastsql.FastPathError as exc:
            print(f"crawler report: error: {exc}", file=sys.stderr)
            return 2
        print(f"report written to {path}")
        return 0
    if args.verb == "status":
        from recrawl.sqlshell import print_status

        return print_status(get_spark(cfg), cfg)
    if args.verb == "inject":
        from spark_jobs import inject
        from spark_jobs.common import norm_rules

        # a wrong or malformed seed file is refused before a JVM starts
        inject.check_seeds(inject.read_seeds(args.seeds, norm_rules(cfg)), args.seeds)
        spark = get_spark(cfg)
        from recrawl.tables import check_tables

        check_tables(spark, cfg, ["crawldb"])
        counts = inject.run(spark, cfg, args.seeds, _logical(args.date))
        _print_counts("inject", counts)
        return 0
    if args.verb == "pagerank":
        from spark_jobs import pagerank

        counts = pagerank.run(get_spark(cfg), cfg, _logical(args.date))
        _print_counts("pagerank", counts)
        return 0
    if args.verb == "maintenance":
        from spark_jobs import maintenance

        counts = maintenance.run(
            get_spark(cfg), cfg, _logical(args.date), steps=tuple(args.step or maintenance.STEPS),
            retain_hours=args.retain_hours, warc_retention_days=args.warc_retention_days,
        )
        _print_counts("maintenance", counts)
        return 0
    # round steps
    from recrawl.rounds import check_round_id, round_id_for

    logical = _logical(args.date)
    round_id = check_round_id(args.round_id or round_id_for(cfg, logical))
    spark = get_spark(cfg)
    from recrawl.tables import check_tables

    check_tables(spark, cfg)
    verbs = (args.verb,)
    if args.verb == "round":
        start = 0 if args.redo else resume_from(steps_done(spark, cfg, round_id))
        verbs = STEP_VERBS[start:]
        if start == len(STEP_VERBS):
            print(f"round {round_id}: already complete, nothing to do (--redo runs it again)")
        elif start:
            print(f"round {round_id}: {', '.join(STEP_VERBS[:start])} already done, "
                  f"resuming at {STEP_VERBS[start]} (--redo runs every step)")
    for verb in verbs:
        counts = run_step(spark, cfg, verb, round_id, logical)
        _print_counts(f"{verb} {round_id}", counts)
    return 0


def _user_errors() -> tuple[type[BaseException], ...]:
    from recrawl.lock import LockHeld
    from recrawl.rounds import BadInput
    from recrawl.spark import EnvironmentProblem
    from recrawl.tables import SchemaMismatch

    return (ConfigError, EnvironmentProblem, SchemaMismatch, BadInput, FileNotFoundError,
            LockHeld)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _cmd(args)
    except _user_errors() as exc:
        print(f"crawler {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"crawler {args.verb}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # Spark's AnalysisException (bad SQL, missing table) is a user error too.
        name = type(exc).__name__
        if name in ("AnalysisException", "ParseException", "PySparkException"):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else name
            print(f"crawler {args.verb}: error: {first}", file=sys.stderr)
            return 2
        raise


def dump_json(obj) -> str:
    return json.dumps(obj, default=str, ensure_ascii=False)


if __name__ == "__main__":
    sys.exit(main())

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
import time
from collections.abc import Sequence

from app import daemon
from recrawl.config import Config, ConfigError, load_config, parse_value
from recrawl.rules.rounds import (
    STEPS,
    BadInput,
    StepRun,
    check_round_id,
    parse_date,
    round_id_for,
)
from recrawl.store.roundsdb import record_step

# Only what parsing the command line needs is imported here; each verb imports its own modules
# (`# lazy:`), so `crawler --help`, `sql`, `report` and `round --check` load no pyspark.

STEP_VERBS = STEPS  # each step is also a verb
ROUND_INCOMPLETE = 3  # `crawler round --check`'s exit code for a round with steps left
WRITING_VERBS = ("init", "inject", *STEP_VERBS, "round", "pagerank", "maintenance")


def _global_flags(p: argparse.ArgumentParser, after_verb: bool) -> None:
    """--config, --set and --verbose, accepted before the verb and after it.

    After the verb they land in their own `*_after` attributes (default: absent), merged by
    `_merge_globals`: a subparser would otherwise overwrite what was given before the verb.
    """
    suffix, default = ("_after", argparse.SUPPRESS) if after_verb else ("", None)
    p.add_argument("--config", dest=f"config{suffix}", default=default,
                   help="TOML file overriding recrawl/defaults.toml")
    p.add_argument(
        "--set", dest=f"set{suffix}", action="append",
        default=default if after_verb else [], metavar="SECTION.KEY=VALUE",
        help="override one configuration key (repeatable)",
    )
    p.add_argument("--verbose", dest=f"verbose{suffix}", action="store_true",
                   default=default if after_verb else False,
                   help="show Spark's own output (JVM banner, logs) for sql and status")


def _merge_globals(args: argparse.Namespace) -> argparse.Namespace:
    if getattr(args, "config_after", None):
        args.config = args.config_after
    args.set = list(args.set) + list(getattr(args, "set_after", []))
    args.verbose = args.verbose or getattr(args, "verbose_after", False)
    for name in ("config_after", "set_after", "verbose_after"):
        if hasattr(args, name):
            delattr(args, name)
    return args


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crawler", description="Nutch-style recrawl on Spark + Delta")
    _global_flags(p, after_verb=False)
    common = argparse.ArgumentParser(add_help=False)
    _global_flags(common, after_verb=True)
    sub = p.add_subparsers(dest="verb", required=True)

    def add(name: str, **kw) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kw)

    add("init", help="create the crawl database and every contract table (idempotent)")
    inj = add("inject", help="normalize seed URLs and merge them into crawldb")
    inj.add_argument("seeds", help="file with one URL per line (# comments and blanks allowed)")
    inj.add_argument("--date", help="logical date (default: today, UTC)")
    for verb in STEP_VERBS:
        sp = add(verb, help=f"run the {verb} step of one round")
        _round_args(sp)
    rnd = add("round", help="run signals, generate, fetch, parse, dedup, updatedb, schedule "
                            "(resuming after the last step done)")
    _round_args(rnd)
    rnd.add_argument("--redo", action="store_true",
                     help="run every step again, even those the rounds table records as done")
    rnd.add_argument("--check", action="store_true",
                     help="crawl nothing: exit 0 when the round has done every step, "
                          f"{ROUND_INCOMPLETE} when not (no JVM on a local crawl home)")
    pr = add("pagerank", help="compute PageRank over the link graph into scores")
    pr.add_argument("--date", help="logical date (default: today, UTC)")
    mt = add("maintenance", help="WARC retention, OPTIMIZE (crawldb Z-ordered by host), VACUUM")
    mt.add_argument("--date", help="logical date WARC ages count from (default: today, UTC)")
    mt.add_argument("--step", action="append", choices=("warc", "optimize", "vacuum"),
                    help="run only this step (repeatable; default: all three)")
    mt.add_argument("--retain-hours", type=float, default=168.0,
                    help="VACUUM retention, at least 168 (Delta's 7-day safety window)")
    mt.add_argument("--warc-retention-days", type=float, default=90.0,
                    help="delete warc/<round> folders of rounds older than this")
    sql = add("sql", help="run SQL over the crawl tables (DuckDB without a JVM when it "
                          "can, Spark for Spark/Delta-only SQL)")
    sql.add_argument("query", help="one or more statements separated by ';'")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.add_argument("--limit", type=int, default=100, help="rows to print (table format)")
    sql.add_argument(
        "--engine", choices=("spark", "duckdb", "auto"), default="auto",
        help="auto (default: DuckDB for queries on a local crawl home, ~1 s, no JVM; Spark for "
             "Spark/Delta-only SQL such as VERSION AS OF, DESCRIBE HISTORY, table_changes, "
             "writes, or SQL DuckDB does not know), spark (always; 5-20 s) or duckdb (never "
             "starts a JVM)",
    )
    rep = add("report", help="write a self-contained HTML report of the crawl (no JVM)")
    rep.add_argument("--out", default="crawl-report.html", help="HTML file to write")
    rep.add_argument("--top", type=int, default=15, help="rows in the top-N charts and tables")
    add("status", help="tables, row counts and the last round")
    dm = add("daemon", help="the warm drivers of spark.driver_daemon: list them or stop them")
    dm.add_argument("action", choices=("status", "stop"))
    rp = add("replay", help="browse the captures in pywb on 127.0.0.1 (collection "
                     "built from the rounds' WARCs and CDXJ indexes)")
    rp.add_argument("--port", type=int, default=8090,
                    help="port on 127.0.0.1 (default 8090; Airflow's UI has 8080)")
    rp.add_argument("--build-only", action="store_true",
                    help="bring the pywb collection up to date and exit")
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
            overrides[key.strip()] = parse_value(raw.strip())
        cfg = cfg.with_overrides(overrides, "--set")
    return cfg


def _logical(value: str | None) -> dt.datetime:
    if value:
        return parse_date(value)
    today = dt.datetime.now(dt.UTC).date()
    return dt.datetime(today.year, today.month, today.day, tzinfo=dt.UTC)


def _print_counts(title: str, counts: dict) -> None:
    parts = ", ".join(f"{k}={v}" for k, v in counts.items())
    print(f"{title}: {parts}" if parts else title)


def run_step(spark, cfg: Config, verb: str, round_id: str, logical: dt.datetime) -> dict:
    """Run one round step through its Spark job module and record its counts and timing.

    Every Spark job of the step is labelled `<verb> <round>` (recrawl.sparkenv.joblabels); its health
    gates (recrawl.rules.gates) are checked, the round's after its last step; counts, timing and
    gate results go to the round's row and to the step's metrics (recrawl.sparkenv.metrics). A failed
    gate raises GateFailed after both are written: the step is then not done.
    """
    from recrawl.rules import gates  # lazy: keeps crawler startup fast
    from recrawl.sparkenv import joblabels, metrics  # lazy: keeps crawler startup fast

    module = importlib.import_module(f"spark_jobs.{verb}")
    started, t0, cpu0 = dt.datetime.now(dt.UTC), time.monotonic(), time.process_time()
    with joblabels.step_label(spark, verb, round_id):
        counts = module.run(spark, cfg, round_id, logical)
    settings = cfg.section("gates")
    results = gates.check(verb, counts, settings)
    run = StepRun(started, time.monotonic() - t0, time.process_time() - cpu0, results,
                  gates.first_failure(results))
    # the round's gates, over every step's counts, after its last step (and fail that step)
    round_gates = ((lambda merged: gates.check("round", merged, settings))
                   if verb == STEPS[-1] else None)
    row = record_step(spark, cfg, round_id, logical, verb, counts, run, round_gates)
    mine = {g.split(".", 1)[1]: r for g, r in (row["gates"] or {}).items()
            if g.startswith(verb + ".")}
    metrics.export(cfg, verb, metrics.registry_for(
        verb, round_id, counts, run.seconds, run.cpu_seconds, time.time(), mine))
    failed = row["failed_gate"]
    if failed and failed.startswith(verb + "."):
        gate = failed.split(".", 1)[1]
        raise gates.GateFailed(verb, gate, mine[gate])
    return counts


def _validate(args: argparse.Namespace, cfg: Config) -> None:
    """Check every argument before anything is written (the lock file creates the crawl home)
    or a JVM starts; sets `args.logical` and, for round verbs, `args.round_id`."""

    if hasattr(args, "date"):
        args.logical = _logical(args.date)
    if args.verb in (*STEP_VERBS, "round"):
        args.round_id = check_round_id(args.round_id or round_id_for(cfg, args.logical))
    if args.verb == "inject":
        from spark_jobs import inject  # lazy: pyspark (via recrawl.store.crawldb)
        from spark_jobs.common import norm_rules  # lazy: keeps crawler startup fast

        # a wrong or malformed seed file is refused before a JVM starts
        inject.check_seeds(inject.read_seeds(args.seeds, norm_rules(cfg)), args.seeds)
    if args.verb == "maintenance":
        from spark_jobs import maintenance  # lazy: keeps crawler startup fast

        maintenance.check_args(tuple(args.step or maintenance.STEPS), args.retain_hours,
                               args.warc_retention_days)
    if getattr(args, "check", False) and args.redo:
        raise BadInput("--check and --redo: a check crawls nothing, so --redo has no meaning")
    if args.verb in WRITING_VERBS and not getattr(args, "check", False):
        from recrawl.sparkenv.spark import check_environment  # lazy: keeps crawler startup fast

        check_environment(cfg)  # missing Java or jars: said before the crawl home is touched


def _cmd(args: argparse.Namespace) -> int:
    cfg = _config(args)
    _validate(args, cfg)
    if args.verb == "round" and args.check:
        return _check_round(cfg, args.round_id)
    if args.verb == "daemon":
        return _daemon(args, cfg)
    if args.verb in WRITING_VERBS and daemon.wanted(cfg):
        rc = daemon.forward(args.argv, cfg, args.verb)
        if rc is not None:
            return rc
    if args.verb in WRITING_VERBS:
        from recrawl.store.lock import crawl_lock  # lazy: keeps crawler startup fast

        with crawl_lock(cfg.home, args.verb, float(cfg.get("crawl.lock_wait_s"))):
            return _dispatch(args, cfg)
    return _dispatch(args, cfg)


def _daemon(args: argparse.Namespace, cfg: Config) -> int:
    """`crawler daemon status|stop` for the daemons of this configuration's folder."""
    if args.action == "stop":
        print(f"stopped {daemon.stop_all(cfg)} driver daemon(s) in {daemon.daemon_dir(cfg)}")
        return 0
    found = daemon.daemons(cfg)
    for d in found:
        since = dt.datetime.fromtimestamp(d["since"], dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        doing = f"running `{d['busy']}`" if d.get("busy") else "idle"
        print(f"pid {d['pid']}: up since {since}, {d['served']} verbs served, {doing}, {d['socket']}")
    if not found:
        print(f"no driver daemon in {daemon.daemon_dir(cfg)}")
    return 0


def steps_done(spark, cfg: Config, round_id: str) -> list[str]:
    """Steps the rounds table records as done for `round_id` (empty when none)."""
    from recrawl.store.tables import read, sql_str, table_exists  # lazy: pyspark (via recrawl.store.tables)

    if not table_exists(spark, cfg.table_path("rounds")):
        return []
    rows = read(spark, cfg, "rounds").where(
        f"round_id = {sql_str(round_id)}").select("steps_done").collect()
    return list(rows[0]["steps_done"] or []) if rows else []


def _steps_done_fast(cfg: Config, round_id: str) -> list[str] | None:
    """steps_done read with DuckDB (no JVM, no pyspark); None when only Spark can tell."""
    from analyst import fastsql  # lazy: keeps crawler startup fast

    if fastsql.fast_path_reason(cfg, "SELECT 1") is not None:
        return None
    try:
        con = fastsql.connect(cfg, ["rounds"])
        if "rounds" not in {r[0] for r in con.execute("SHOW TABLES").fetchall()}:
            return []  # no round ran yet
        row = con.execute("SELECT steps_done FROM rounds WHERE round_id = ?", [round_id]).fetchone()
    except fastsql.NeedsSpark:
        return None
    return list(row[0] or []) if row else []


def _check_round(cfg: Config, round_id: str) -> int:
    """`crawler round --check`: the resume test of `crawler round`, answering by exit code."""
    done = _steps_done_fast(cfg, round_id)
    if done is None:
        from recrawl.sparkenv.spark import get_spark  # lazy: keeps crawler startup fast

        done = steps_done(get_spark(cfg, short_lived=True), cfg, round_id)
    start = resume_from(done)
    if start == len(STEP_VERBS):
        print(f"round {round_id}: complete (every step done)")
        return 0
    print(f"round {round_id}: not complete, next step {STEP_VERBS[start]} "
          f"(done: {', '.join(s for s in STEP_VERBS if s in done) or 'none'})")
    return ROUND_INCOMPLETE


def resume_from(done: Sequence[str]) -> int:
    """Index in STEP_VERBS of the first step not done (len when the round is complete)."""
    for i, verb in enumerate(STEP_VERBS):
        if verb not in done:
            return i
    return len(STEP_VERBS)


def _dispatch(args: argparse.Namespace, cfg: Config) -> int:
    from recrawl.sparkenv.spark import get_spark  # lazy: keeps crawler startup fast

    if args.verb == "init":
        from recrawl.store.tables import init_tables  # lazy: pyspark (via recrawl.store.tables)

        spark = get_spark(cfg, short_lived=True)
        created = init_tables(spark, cfg)
        new = [n for n, c in created.items() if c]
        print(f"crawl home: {cfg.home}")
        print(f"tables created: {', '.join(new) if new else 'none (all existed)'}")
        return 0
    if args.verb == "sql":
        return _sql(args, cfg)
    if args.verb == "report":
        from analyst import fastsql, report  # lazy: keeps crawler startup fast

        try:
            path = report.write_report(cfg, args.out, top=args.top)
        except fastsql.FastPathError as exc:
            print(f"crawler report: error: {exc}", file=sys.stderr)
            return 2
        print(f"report written to {path}")
        return 0
    if args.verb == "replay":
        from app import replay  # lazy: heavy (fetcher: warcio, urllib3, fsspec)

        coll = replay.build_collection(cfg)
        if args.build_only:
            print(f"replay: collection {coll.name!r} in {coll.root}: {coll.warcs} WARC files, "
                  f"{coll.rounds} rounds ({coll.added_rounds} indexes added or updated)")
            return 0
        return replay.serve(coll, args.port)
    if args.verb == "status":
        from app.sparksql import print_status  # lazy: keeps crawler startup fast

        return print_status(get_spark(cfg, quiet=not args.verbose, short_lived=True), cfg)
    if args.verb == "inject":
        from spark_jobs import inject  # lazy: pyspark (via recrawl.store.crawldb)

        spark = get_spark(cfg, short_lived=True)
        from recrawl.store.tables import check_tables  # lazy: pyspark (via recrawl.store.tables)

        check_tables(spark, cfg, ["crawldb"])
        counts = inject.run(spark, cfg, args.seeds, args.logical)
        _print_counts("inject", counts)
        return 0
    if args.verb == "pagerank":
        from recrawl.sparkenv import joblabels, metrics  # lazy: keeps crawler startup fast
        from spark_jobs import pagerank  # lazy: pyspark (via recrawl.store.crawldb)

        spark = get_spark(cfg, short_lived=True)
        t0, cpu0 = time.monotonic(), time.process_time()
        when = args.logical.strftime("%Y-%m-%d")
        with joblabels.step_label(spark, "pagerank", when):
            counts = pagerank.run(spark, cfg, args.logical)
        metrics.export(cfg, "pagerank", metrics.registry_for(
            "pagerank", when, counts, time.monotonic() - t0, time.process_time() - cpu0,
            time.time()))
        _print_counts("pagerank", counts)
        return 0
    if args.verb == "maintenance":
        from spark_jobs import maintenance  # lazy: keeps crawler startup fast

        counts = maintenance.run(
            get_spark(cfg, short_lived=True), cfg, args.logical, steps=tuple(args.step or maintenance.STEPS),
            retain_hours=args.retain_hours, warc_retention_days=args.warc_retention_days,
        )
        _print_counts("maintenance", counts)
        return 0
    # round steps: one step is a short-lived driver; `round` runs all six in one, minutes on
    # a loaded machine, which the optimizing compiler pays back (docs/design-choices.md)
    logical, round_id = args.logical, args.round_id
    spark = get_spark(cfg, short_lived=args.verb != "round")
    from recrawl.store.tables import check_tables  # lazy: pyspark (via recrawl.store.tables)

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


def _sql(args: argparse.Namespace, cfg: Config) -> int:
    """`crawler sql`: DuckDB when it can answer (auto, duckdb), Spark otherwise (auto, spark)."""
    from analyst import fastsql  # lazy: keeps crawler startup fast

    if not fastsql.split_statements(args.query):
        print("crawler sql: error: no SQL statement given", file=sys.stderr)
        return 2
    if args.engine != "spark":
        reason = fastsql.fast_path_reason(cfg, args.query) if args.engine == "auto" else None
        if reason is None:
            try:
                return fastsql.run_sql(cfg, args.query, args.format, args.limit)
            except fastsql.NeedsSpark as exc:
                if args.engine == "duckdb":
                    if str(exc).startswith("DuckDB:"):  # syntax or a function DuckDB lacks
                        msg = f"{exc} (if this is Spark SQL, run it with --engine spark)"
                    else:
                        msg = f"{exc}: run it with --engine spark (or the default, auto)"
                    print(f"crawler sql: error: {msg}", file=sys.stderr)
                    return 2
                reason = str(exc)
            except fastsql.FastPathError as exc:
                print(f"crawler sql: error: {exc}", file=sys.stderr)
                return 2
        print(f"crawler sql: using Spark ({reason})", file=sys.stderr)
    from app.sparksql import run_sql  # lazy: keeps crawler startup fast
    from recrawl.sparkenv.spark import get_spark  # lazy: keeps crawler startup fast

    return run_sql(get_spark(cfg, quiet=not args.verbose, short_lived=True), cfg, args.query, args.format,
                   args.limit)


def _spark_error_line(exc: BaseException) -> str | None:
    """One line for an error raised by Spark SQL (error class and message), None when `exc`
    did not come from Spark. Only the SQL-running verbs call this: elsewhere such an error is
    a bug whose stack trace is wanted."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark.errors import PySparkException  # lazy: pyspark (loaded already when it matters)

    if isinstance(exc, PySparkException):
        text = str(exc).strip()
        cond = exc.getCondition() if hasattr(exc, "getCondition") else None
        first = text.splitlines()[0] if text else type(exc).__name__
        return first if not cond or first.startswith(f"[{cond}]") else f"[{cond}] {first}"
    if type(exc).__name__ == "Py4JJavaError":  # a Java error Spark did not classify
        java = getattr(exc, "java_exception", None)
        text = str(java).strip() if java is not None else str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__
    return None


def _user_errors() -> tuple[type[BaseException], ...]:
    from recrawl.rules.gates import GateFailed  # lazy: keeps crawler startup fast
    from recrawl.sparkenv.spark import EnvironmentProblem  # lazy: keeps crawler startup fast
    from recrawl.store.lock import LockHeld  # lazy: keeps crawler startup fast
    from recrawl.store.tables import SchemaMismatch  # lazy: pyspark (via recrawl.store.tables)

    return (ConfigError, EnvironmentProblem, SchemaMismatch, BadInput, FileNotFoundError,
            LockHeld, ValueError, daemon.UnsafeFolder, GateFailed)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _merge_globals(_parser().parse_args(argv))
    args.argv = argv
    try:
        return _cmd(args)
    except _user_errors() as exc:
        print(f"crawler {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"crawler {args.verb}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # Spark SQL errors (bad SQL, missing table, a failing cast) are user errors too.
        line = _spark_error_line(exc) if args.verb in ("sql", "status") else None
        name = type(exc).__name__
        if line is None and name in ("AnalysisException", "ParseException"):
            line = str(exc).strip().splitlines()[0] if str(exc).strip() else name
        if line is not None:
            print(f"crawler {args.verb}: error: {line}", file=sys.stderr)
            return 2
        raise


def dump_json(obj) -> str:
    return json.dumps(obj, default=str, ensure_ascii=False)


if __name__ == "__main__":
    sys.exit(main())

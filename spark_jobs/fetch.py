"""fetch: run the fetcher core inside Spark `mapPartitions`, one task per fetch-list partition.

Each task fetches its hosts (each host lives in exactly one partition, so per-host politeness is
local to a task) and writes WARC files named after the round, a run nonce, the partition and the
task attempt. The task's output rows are written once to a staging folder (a retried task's
output replaces the failed attempt's, by Spark's output commit), then published: `fetches`
by replacing the round's partition, `robots` and `hosts` by MERGE. WARC files that no published
row references — from failed attempts or an earlier run of the step — are deleted last, so a
re-run leaves exactly one row per URL and no referenced file is ever missing. WARCs go through
`fetcher.storage` (local folder or s3a://); listing and deleting here use Hadoop's FileSystem,
like the tables. Last, the round's CDXJ index is written next to its WARCs
(`warc/<round>/index.cdxj`, `fetcher.cdxj`). With `parse.inline` the tasks also parse their
pages as they fetch them (`recrawl.content.parsepool`) and their "page" records are written to
`spark_jobs.parse.inline_dir` for the parse step, the owner of `pages` and `links`, to commit.

A re-run (an earlier attempt left WARC files, staging output or published rows) cannot know
when the killed attempt last requested each host, so every host first waits its delay
(`Fetcher(resume=True)`): politeness holds across a crash and the re-run. The same holds when
another round's fetch requested pages moments ago (a backfill interleaved with the daily run
under Airflow puts two fetch tasks back to back; docs/airflow.md): the `fetches` table's
wall-clock `fetch_time` tells, and every host then waits its delay too.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterable, Iterator

from fetcher import Fetcher, FetchItem, FetchSettings
from fetcher.cdxj import write_index
from fetcher.stats import step_counts
from fetcher.storage import S3Options, Storage
from recrawl.config import Config, ConfigError
from recrawl.content.parsepool import ParsePool, check_nice
from recrawl.sparkenv.cluster import executor_id
from recrawl.sparkenv.joblabels import stage
from recrawl.store.hostdb import record_fetch
from recrawl.store.schemas import FETCHES, HOSTS, ROBOTS
from recrawl.store.tables import (
    InsertAll,
    UpdateAll,
    merge_into,
    read,
    replace_round,
    sql_str,
    table_exists,
)
from spark_jobs.common import norm_rules
from spark_jobs.fetch_progress import FetchMonitor
from spark_jobs.parse import inline_dir, parse_options, parsed_schema


def _json_default(value):
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat()
    return str(value)


def fetch_partition(
    rows: Iterable, settings_map: dict, warc_dir: str, prefix: str, resume: bool = False,
    s3: S3Options | None = None, started_dir: str | None = None,
    status_dir: str | None = None, status_interval_s: float = 5.0,
    parse: dict | None = None,
) -> Iterator[tuple[str, str]]:
    """The per-task body: fetch the partition's URLs and yield (kind, json) records.

    `resume` (or a retried task or stage attempt) makes every host wait its delay before its
    first request: the earlier attempt's last request times are lost with it (`Fetcher` docs).
    With `parse` (`parse.inline`: {"opts", "round_id", "workers"}) every fetched response is
    parsed by the task's `recrawl.content.parsepool.ParsePool` while the fetch goes on, and yields a
    "page" record (a `pages` row with nested `links`).
    """
    from pyspark import TaskContext  # lazy: pyspark

    rows = list(rows)
    if not rows:
        return
    ctx = TaskContext.get()
    part = rows[0]["partition"]
    # A retry is a later attempt of the task, or any attempt of a re-submitted stage: when an
    # executor dies, its shuffle output goes with it, Spark re-runs the stage, and the retried
    # fetch task's attemptNumber() starts at 0 again in the new stage attempt (PySpark has no
    # stageAttemptNumber()). So every attempt leaves a marker `started_dir/p<partition>` before
    # its first request, and finding one means an earlier attempt may have fetched these hosts.
    storage = Storage(s3)
    retried = bool(ctx and ctx.attemptNumber() > 0)
    if started_dir:
        marker = f"{started_dir}/p{part:05d}"
        if storage.exists(marker):
            retried = True
        else:
            f = storage.create(marker)
            f.commit()
    attempt = ctx.taskAttemptId() if ctx else 0  # unique in the application: WARC names differ
    robots_cache = {}
    items = []
    for r in rows:
        items.append(FetchItem(
            url=r["url"], host=r["host"], priority=r["priority"] or 0.0, etag=r["etag"],
            last_modified=r["last_modified"], prev_payload_digest=r["payload_digest"],
            prev_fetch_time=r["last_fetch_time"].isoformat() if r["last_fetch_time"] else None,
            prev_record_id=r.get("payload_record_id"), prev_warc_date=r.get("payload_warc_date"),
            prev_target_uri=r.get("payload_target_uri"),
        ))
        if r["robots_fetched_at"] is not None and r["host"] not in robots_cache:
            robots_cache[r["host"]] = {
                "host": r["host"], "fetched_at": r["robots_fetched_at"].replace(tzinfo=dt.UTC),
                "http_status": r["robots_http_status"], "crawl_delay": r["robots_crawl_delay"],
                "sitemaps": list(r["robots_sitemaps"] or []), "rules": r["robots_rules"],
                "expires_at": r["robots_expires_at"].replace(tzinfo=dt.UTC)
                if r["robots_expires_at"] else None,
            }
    settings = FetchSettings.from_mapping(settings_map)
    # forked before the fetch threads start
    pool = (ParsePool(parse["opts"], parse["round_id"], parse["workers"], parse["max_pending"],
                      parse["nice"]) if parse else None)
    try:
        fetcher = Fetcher(settings, warc_dir, f"{prefix}-p{part:05d}-a{attempt}",
                          robots_cache=robots_cache, resume=resume or retried, storage=storage,
                          status_uri=f"{status_dir}/p{part:05d}.json" if status_dir else None,
                          status_interval_s=status_interval_s,
                          on_capture=pool.submit if pool else None)
        outcome = fetcher.run(items)
        pages = pool.results() if pool else []
    finally:
        if pool:
            pool.close()
    for page in pages:
        yield ("page", json.dumps(page, default=_json_default))
    executor = executor_id()
    for row in outcome.rows:
        yield ("fetch", json.dumps({**row, "executor_id": executor}, default=_json_default))
    for row in outcome.robots:
        yield ("robots", json.dumps(row, default=_json_default))
    for row in outcome.hosts:
        yield ("host", json.dumps(row, default=_json_default))
    yield ("stats", json.dumps(outcome.stats))
    # The WARCs' CDXJ lines as they were written (fetcher.cdxj.RecordIndex), in rows of a few
    # thousand: the driver writes the round's index without reading the WARCs back.
    for path, lines in outcome.cdxj.items():
        for i in range(0, len(lines), _CDXJ_ROW_LINES):
            yield ("cdxj", json.dumps({"file": path, "lines": lines[i:i + _CDXJ_ROW_LINES]}))


_CDXJ_ROW_LINES = 4000


def fs_list(spark, directory: str) -> list[str]:
    """Files directly under `directory` through Hadoop's FileSystem (local or s3a)."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(directory)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return []
    return [str(s.getPath().toUri().getPath()) if directory.startswith("/") else str(s.getPath())
            for s in fs.listStatus(path) if s.isFile()]


def fs_exists(spark, target: str) -> bool:
    """Whether `target` exists, through Hadoop's FileSystem (local or s3a)."""
    path = spark._jvm.org.apache.hadoop.fs.Path(target)
    return bool(path.getFileSystem(spark._jsc.hadoopConfiguration()).exists(path))


def fs_delete(spark, target: str) -> None:
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(target)
    path.getFileSystem(spark._jsc.hadoopConfiguration()).delete(path, True)


def earlier_attempt(spark, cfg: Config, round_id: str) -> bool:
    """Whether this round's fetch ran before (killed, crashed or complete): its WARC folder
    has files, its staging folder is left over, or `fetches` has rows for the round."""
    jvm = spark._jvm
    for folder in (f"{cfg.home}/staging/fetch/{round_id}",
                   f"{cfg.home}/staging/fetch-started/{round_id}"):  # markers of started tasks
        staging = jvm.org.apache.hadoop.fs.Path(folder)
        if staging.getFileSystem(spark._jsc.hadoopConfiguration()).exists(staging):
            return True
    if fs_list(spark, cfg.warc_dir(round_id)):
        return True
    return read(spark, cfg, "fetches").where(f"round_id = {sql_str(round_id)}").limit(1).count() > 0


def recent_fetch_window_s(cfg: Config) -> float:
    """How long after a fetch's last request a host may still be inside its delay: the longest
    Crawl-delay honoured plus the longest a request may take (fetch_time is its start)."""
    return float(cfg.get("fetcher.max_crawl_delay_s")) + float(cfg.get("fetcher.request_deadline_s"))


def recent_fetch(spark, cfg: Config, now: dt.datetime) -> bool:
    """Whether any round's fetch requested a page within `recent_fetch_window_s` before `now`."""
    from pyspark.sql import functions as F  # lazy: pyspark

    since = now.astimezone(dt.UTC) - dt.timedelta(seconds=recent_fetch_window_s(cfg))
    # fetch_time is wall-clock UTC; Delta's per-file min/max statistics skip old files. The bound
    # is a UTC string cast in the session's time zone (UTC), not the Python process's local one.
    bound = F.lit(since.strftime("%Y-%m-%d %H:%M:%S.%f")).cast("timestamp")
    if read(spark, cfg, "fetches").where(F.col("fetch_time") >= bound).limit(1).count() > 0:
        return True
    # the signals step's reads of sitemaps and feeds (spark_jobs.signals) are requests too
    if not cfg.get("signals.enabled") or not table_exists(spark, cfg.table_path("signal_sources")):
        return False
    return read(spark, cfg, "signal_sources").where(F.col("fetched_at") >= bound).limit(1).count() > 0


def check_no_speculation(spark) -> None:
    """Refuse speculative execution: it would run a second copy of a slow fetch task, against
    the same hosts, while the first still runs -- two requests in flight to a host. (A task
    retried after its executor died is different: the first copy is gone, and the retry waits
    every host's delay before its first request.)"""
    if spark.sparkContext.getConf().get("spark.speculation", "false").lower() == "true":
        raise ConfigError("spark.speculation is on: it would fetch a host from two task copies "
                        "at once; turn it off for the crawler (spark.extra)")


def staged_rows(staged, kind: str, schema):
    """The `kind` records of a fetch's staged (kind, json) output, as rows of `schema`."""
    from pyspark.sql import functions as F  # lazy: pyspark

    return staged.where(F.col("kind") == kind).select(
        F.from_json("payload", schema, {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]"})
        .alias("r")
    ).select("r.*")


def publish_politeness(spark, cfg: Config, staged) -> None:
    """The robots.txt copies and per-host politeness state a run of the fetcher core left in
    its staged output (`robots`, `host` records): MERGEd into `robots` and `hosts`."""
    from pyspark.sql import functions as F  # lazy: pyspark

    robots_rows = staged_rows(staged, "robots", ROBOTS).dropDuplicates(["host"])
    if robots_rows.limit(1).count():
        merge_into(spark, cfg, "robots", robots_rows, "t.host = s.host", UpdateAll(), InsertAll(),
                   portable=True)
    hosts_rows = staged_rows(staged, "host", HOSTS).dropDuplicates(["host"]).withColumn(
        "updated_at", F.current_timestamp()
    )
    if hosts_rows.limit(1).count():
        record_fetch(spark, cfg, hosts_rows)


def fetch_settings_map(cfg: Config) -> dict:
    """The fetcher's settings for a task (FetchSettings.from_mapping): `[fetcher]`, and the
    crawl's `[urlnorm]` rules for redirect targets."""
    settings_map = dict(cfg.section("fetcher"))
    settings_map["static_hosts"] = dict(settings_map["static_hosts"])
    settings_map["norm_rules"] = norm_rules(cfg)
    return settings_map


def run(spark, cfg: Config, round_id: str, logical: dt.datetime) -> dict[str, int]:
    from pyspark.sql import functions as F  # lazy: pyspark

    if int(cfg.get("parse.inline_max_pending")) < 1:  # the driver says so, not a fetch task
        raise ConfigError("parse.inline_max_pending must be at least 1, got "
                          f"{cfg.get('parse.inline_max_pending')!r}")
    try:
        check_nice(cfg.get("parse.inline_nice"))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    check_no_speculation(spark)
    fl = read(spark, cfg, "fetch_list").where(f"round_id = {sql_str(round_id)}")
    robots = read(spark, cfg, "robots").select(
        "host",
        F.col("fetched_at").alias("robots_fetched_at"),
        F.col("http_status").alias("robots_http_status"),
        F.col("crawl_delay").alias("robots_crawl_delay"),
        F.col("sitemaps").alias("robots_sitemaps"),
        F.col("rules").alias("robots_rules"),
        F.col("expires_at").alias("robots_expires_at"),
    )
    items = fl.join(robots, "host", "left")
    n_parts = max(1, int(cfg.get("generate.partitions")))
    warc_dir = cfg.warc_dir(round_id)
    nonce = uuid.uuid4().hex[:8]
    started_root = f"{cfg.home}/staging/fetch-started/{round_id}"
    started_dir = f"{started_root}/{nonce}"
    settings_map = fetch_settings_map(cfg)
    resume = earlier_attempt(spark, cfg, round_id) or recent_fetch(spark, cfg, dt.datetime.now(dt.UTC))
    # WARCs on s3a:// are written by Python (s3fs) with the same endpoint settings as Spark's.
    s3 = S3Options.from_spark_conf(cfg.get("spark.extra"))

    # Progress: every task writes a status record through the WARCs' storage, the driver
    # reads them while the job runs (fetcher.progress, spark_jobs.fetch_progress).
    interval = float(cfg.get("progress.interval_s"))
    status_root = f"{cfg.home}/staging/fetch-progress/{round_id}"
    status_dir = f"{status_root}/{nonce}" if interval > 0 else None

    # Inline parse (parse.inline): the pages go to inline_dir for the parse step to commit; an
    # earlier fetch's are gone first, so that a fetch without it leaves the parse step to read
    # the WARCs.
    parsed_dir = inline_dir(cfg, round_id)
    fs_delete(spark, parsed_dir)
    parse = ({"opts": parse_options(cfg), "round_id": round_id,
              "workers": max(1, int(cfg.get("parse.inline_workers"))),
              "max_pending": int(cfg.get("parse.inline_max_pending")),
              "nice": cfg.get("parse.inline_nice")}
             if cfg.get("parse.inline") else None)

    def body(it):
        return fetch_partition((kv[1] for kv in it), settings_map, warc_dir, f"{round_id}-{nonce}",
                               resume, s3, started_dir, status_dir, interval, parse)

    # Identity partitioner: fetch-list partition p is Spark partition p, one task each.
    rdd = (
        items.rdd.map(lambda r: (r["partition"], r.asDict()))
        .partitionBy(n_parts, lambda k: int(k) % n_parts)
        .mapPartitions(body)
    )
    staging = f"{cfg.home}/staging/fetch/{round_id}"
    listed = fl.count() if status_dir else 0
    stage(spark, f"fetching {listed} URLs in {n_parts} tasks" if listed else "fetching")
    with FetchMonitor(Storage(s3), status_dir or "", f"fetch {round_id}", listed, n_parts,
                      interval if status_dir else 0.0) as monitor:
        spark.createDataFrame(rdd, "kind string, payload string").write.mode("overwrite") \
            .parquet(staging)
        if status_dir:
            monitor.report()  # the final tally, every task's last record in
    staged = spark.read.parquet(staging)
    stage(spark, "publishing fetches, robots and hosts")

    def parsed(kind: str, schema):
        return staged_rows(staged, kind, schema)

    fetches = parsed("fetch", FETCHES).withColumn("round_id", F.lit(round_id))
    replace_round(fetches, cfg, "fetches", round_id)
    publish_politeness(spark, cfg, staged)
    # Delete WARC files no published row references (failed attempts, earlier runs, .open).
    published = read(spark, cfg, "fetches").where(f"round_id = {sql_str(round_id)}")
    referenced = {r[0] for r in published.select("warc_file").distinct().collect() if r[0]}
    referenced_names = {f.rsplit("/", 1)[-1] for f in referenced}
    removed = 0
    for f in fs_list(spark, warc_dir):
        if f.rsplit("/", 1)[-1] not in referenced_names:
            fs_delete(spark, f)
            removed += 1
    hosts_stats, task_stats = fetch_stats(staged)
    statuses = {
        r["fetch_status"]: r["n"]
        for r in published.groupBy("fetch_status").agg(F.count("*").alias("n")).collect()
    }
    # the step's counts, the gates' input: one function with the fetcher core's tests
    counts = step_counts(statuses, hosts_stats, task_stats)
    cdxj_known = staged_cdxj(staged)
    pages_inline = 0
    if parse:
        stage(spark, "staging the pages parsed inline")
        inline = staged_rows(staged, "page", parsed_schema())
        inline.write.mode("overwrite").parquet(parsed_dir)
        pages_inline = spark.read.parquet(parsed_dir).count()
    fs_delete(spark, staging)
    fs_delete(spark, started_root)
    fs_delete(spark, status_root)
    # The round's CDXJ index next to its WARCs (fetcher.cdxj), rebuilt on every run.
    _, cdxj_lines = write_index(warc_dir, sorted(referenced), Storage(s3), cdxj_known)
    counts["executors"] = published.select("executor_id").distinct().count()
    counts["warc_files"] = len(referenced)
    counts["warc_orphans_removed"] = removed
    counts["resumed"] = int(resume)
    counts["cdxj_lines"] = cdxj_lines
    counts["pages_inline"] = pages_inline
    return counts


def staged_cdxj(staged) -> dict[str, list[str]]:
    """The CDXJ lines the fetch tasks built as they wrote their WARCs, by file; write_index
    takes those of the files the round's rows reference and reads back any other."""
    known: dict[str, list[str]] = {}
    for r in staged.where("kind = 'cdxj'").select("payload").toLocalIterator():
        rec = json.loads(r[0])
        known.setdefault(rec["file"], []).extend(rec["lines"])
    return known


# What each fetch task reports of its hosts and its timing, beyond the `hosts` table's columns.
_HOST_STATS = ("host string, requests long, bytes long, busy_ms long, wait_ms long, "
               "violations long, worst_short_ms long, robots_unavailable boolean")
_TASK_STATS = "elapsed_ms long, floor_ms long"


def fetch_stats(staged) -> tuple[list[dict], list[dict]]:
    """The `host` and `stats` records a fetch's tasks staged (one `host` record per host per
    task, one `stats` record per task), for fetcher.stats.step_counts: the request statistics
    (requests, bytes, hosts and those whose robots.txt was unavailable, requests per host,
    waits, politeness violations, the slowest task's time and its politeness floor) in the
    rounds table, which recrawl.sparkenv.metrics exports and recrawl.rules.gates judges. Grouped per host
    here, so the driver receives one small row per host."""
    from pyspark.sql import functions as F  # lazy: pyspark

    hosts = staged_rows(staged, "host", _HOST_STATS).groupBy("host").agg(
        F.sum("requests").alias("requests"), F.sum("bytes").alias("bytes"),
        F.sum("wait_ms").alias("wait_ms"), F.sum("violations").alias("violations"),
        F.max("worst_short_ms").alias("worst_short_ms"),
        F.max(F.col("robots_unavailable").cast("int")).alias("robots_unavailable"))
    tasks = staged_rows(staged, "stats", _TASK_STATS)
    return ([r.asDict() for r in hosts.toLocalIterator()], [r.asDict() for r in tasks.collect()])

"""Scale benchmark: one crawl round over a synthetic crawldb, each step against its hardware floor.

    .venv/bin/python benchmarks/scale_bench.py --urls 1000000 [--seed 1] [--driver-memory 8g]
        [--top-n-fraction 0.1] [--pagerank-iterations N] [--set section.key=value ...]
        [--reuse] [--stages generate,dedup,updatedb,pagerank]

1. benchmarks/synth_state.py writes the crawl state (crawldb of --urls URLs over a Zipf host
   distribution, ~10 out-links per fetched page, hosts, robots) under
   var/scale/<urls>/ (or --home). --reuse skips it when the tables are there.
2. The round, as the real steps run it, on local[*]:
     generate   spark_jobs.generate (top_n = --top-n-fraction x URLs; per-host cap from the
                fetch time budget and delays, as configured)
     (synth)    what fetch and parse would write for that fetch list: `fetches` (85 %
                fetched, 5 % 304, 2 % redirect, 3 % gone, 3 % timeout, 2 % retry_later),
                `pages` (30 % of the refetched pages changed, exact and near copies planted)
                and `links` (0-20 out-links per page, ~5 % to new URLs), with parse's own
                "latest outlinks" delete of the pages' older links. Not timed as a step.
     dedup      spark_jobs.dedup
     updatedb   spark_jobs.updatedb
     pagerank   spark_jobs.pagerank (iterations: the configured pagerank.max_iterations /
                tolerance unless --pagerank-iterations N forces exactly N)
3. For each step, measured in the same run right before it: the floor, a plain full scan of the
   step's input tables (spark.read.format("delta").load(...).write.format("noop")), so the
   ratio step / floor says how far the step is from what the disk and the decoder allow.

Per step the table shows: wall seconds, input rows (rows of the step's input tables) per
second, the floor's seconds and the ratio; CPU seconds of the step (JVM + Python workers +
driver, psutil: on a loaded machine wall time stretches, CPU time much less), input rows per
CPU second (the per-core rate) and the floor's CPU seconds; shuffle read+write bytes and spilled bytes summed
over the step's Spark stages, and the largest peak execution memory of one stage (Spark's
status REST API: the UI is enabled on 127.0.0.1 with a random port for this run only); peak
JVM heap in use and the old generation's peak after collections (MemoryMXBean — in local mode
the driver JVM is the executor), peak RSS of the JVM, of this Python driver and of the Python
workers (psutil, sampled every 0.2 s).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._sampler import PeakSampler  # noqa: E402
from benchmarks.synth_state import (  # noqa: E402
    AS_OF,
    fingerprint_sql,
    generate_state,
    id_of_url_sql,
    u,
    url_columns,
)

ROUND_DATE = AS_OF + dt.timedelta(days=1)
STAGES = ("generate", "dedup", "updatedb", "pagerank")
# the steps whose crawldb MERGE touches rows in every file (copy-on-write: a whole rewrite)
REWRITES_CRAWLDB = ("updatedb", "pagerank")


# --- measurement --------------------------------------------------------------------------


class StageMetrics:
    """Sums over the Spark stages that ran since the last call (status REST API)."""

    def __init__(self, spark) -> None:
        sc = spark.sparkContext
        # None when the session was started without the UI (a test's): figures are then 0
        self.base = sc.uiWebUrl.rstrip("/") if sc.uiWebUrl else None
        self.app = sc.applicationId
        self.seen = self._max_stage()

    def _get(self, path: str):
        if self.base is None:
            return []
        with urllib.request.urlopen(f"{self.base}/api/v1/applications/{self.app}/{path}",
                                    timeout=60) as r:
            return json.load(r)

    def _max_stage(self) -> int:
        stages = self._get("stages")
        return max((s["stageId"] for s in stages), default=-1)

    def since_last(self) -> dict:
        stages = [s for s in self._get("stages") if s["stageId"] > self.seen]
        self.seen = max([self.seen] + [s["stageId"] for s in stages])
        done = [s for s in stages if s.get("status") in ("COMPLETE", "FAILED")]

        def total(key):
            return sum(int(s.get(key, 0) or 0) for s in done)

        return {
            "spark_stages": len(done),
            "tasks": total("numCompleteTasks"),
            "shuffle_read": total("shuffleReadBytes"),
            "shuffle_write": total("shuffleWriteBytes"),
            "spill_disk": total("diskBytesSpilled"),
            "spill_mem": total("memoryBytesSpilled"),
            "input_bytes": total("inputBytes"),
            "output_bytes": total("outputBytes"),
            "peak_exec_mem": max((int(s.get("peakExecutionMemory", 0) or 0) for s in done),
                                 default=0),
        }


# --- the synthetic fetch + parse of the round ----------------------------------------------


def synth_fetch_parse(spark, cfg, round_id: str, n_urls: int, seed: int, n_hosts: int) -> dict:
    """Write the round's fetches, pages and links as the fetch and parse steps would."""
    from pyspark.sql import functions as F

    from recrawl.store.tables import read, replace_round, sql_str
    from spark_jobs.parse import write_latest_outlinks

    fetch_time = ROUND_DATE + dt.timedelta(hours=1)
    fl = (
        read(spark, cfg, "fetch_list").where(f"round_id = {sql_str(round_id)}")
        .withColumn("id", F.expr(id_of_url_sql("url")))
        .withColumn("r", F.expr(u("id", seed, f"fetch-{round_id}")))
        .withColumn("fetch_status", F.expr("""CASE WHEN r < 0.85 THEN 'fetched'
            WHEN r < 0.90 THEN 'not_modified' WHEN r < 0.92 THEN 'redirect'
            WHEN r < 0.95 THEN 'gone' WHEN r < 0.98 THEN 'timeout' ELSE 'retry_later' END"""))
        # 30 % of the pages fetched before changed; never fetched ones are new content
        .withColumn("changed", F.expr(
            f"payload_digest IS NULL OR {u('id', seed, f'chg-{round_id}')} < 0.3"))
        .withColumn("redir_id", F.expr(f"pmod(xxhash64(id, {seed}, 'redir'), {n_urls})"))
    )
    fl = url_columns(fl, "redir_id", seed, n_hosts, prefix="redir_")
    new_fp = fingerprint_sql("id", seed, n_urls, round_id)
    old_fp = fingerprint_sql("id", seed, n_urls, "v0")

    def fp(col):
        return F.expr(f"CASE WHEN changed THEN {new_fp[col]} ELSE {old_fp[col]} END")

    fetched = "fetch_status = 'fetched'"
    fetches = fl.select(
        F.lit(round_id).alias("round_id"), "url",
        F.expr("CASE WHEN fetch_status = 'redirect' THEN redir_url ELSE url END")
        .alias("final_url"),
        F.lit(fetch_time).alias("fetch_time"),
        F.expr("""CASE fetch_status WHEN 'fetched' THEN 200 WHEN 'not_modified' THEN 304
            WHEN 'redirect' THEN 301 WHEN 'gone' THEN 404 WHEN 'retry_later' THEN 503
            END""").cast("int").alias("http_status"),
        "fetch_status",
        F.expr("CASE WHEN fetch_status = 'timeout' THEN 'read timeout' END").alias("error"),
        F.expr(f"CASE WHEN {fetched} THEN 'text/html' END").alias("content_type"),
        F.expr(f"CASE WHEN {fetched} THEN 20000 + pmod(xxhash64(id, 'len'), 60000) END")
        .cast("long").alias("content_length"),
        F.expr(f"CASE WHEN {fetched} THEN {new_fp['payload_digest']} END")
        .alias("new_digest"), "payload_digest", "changed",
        F.concat(F.lit(f"warc/{round_id}/synth-"), F.expr("pmod(id, 16)"), F.lit(".warc.gz"))
        .alias("warc_file"),
        F.expr("id * 9000").alias("warc_offset"), F.lit(9000).cast("long").alias("warc_length"),
        F.expr(f"CASE WHEN {fetched} THEN concat('\"', lower(hex(xxhash64(id, '{round_id}'))),"
               " '\"') END").alias("etag"),
        F.lit(None).cast("string").alias("last_modified"),
        F.expr("200 + pmod(id, 800)").cast("long").alias("duration_ms"),
    ).withColumn(
        "payload_digest",
        F.expr(f"CASE WHEN {fetched} THEN CASE WHEN changed THEN new_digest "
               f"ELSE coalesce(payload_digest, new_digest) END END"),
    ).drop("new_digest", "changed")
    replace_round(fetches, cfg, "fetches", round_id)
    pages = fl.where(fetched).select(
        F.lit(round_id).alias("round_id"), "url", F.lit("Synthetic page").alias("title"),
        F.lit("en").alias("lang"), F.lit(None).cast("string").alias("text"),
        F.expr("CAST(500 + pmod(id, 5000) AS INT)").alias("text_len"),
        fp("content_hash").alias("content_hash"), fp("simhash").alias("simhash"),
        F.lit(None).cast("string").alias("canonical_url"),
        F.concat(F.lit(f"warc/{round_id}/synth-"), F.expr("pmod(id, 16)"), F.lit(".warc.gz"))
        .alias("warc_file"),
        F.expr("id * 9000").alias("warc_offset"),
        fp("payload_digest").alias("payload_digest"),
        F.expr(f"CAST(pmod(xxhash64(id, {seed}, 'nlinks'), 21) AS INT)").alias("outlink_count"),
    )
    replace_round(pages, cfg, "pages", round_id)
    # links: the pages' outlinks, same construction as the stored graph
    space = int(n_urls * 1.05)
    pick = (f"CASE WHEN {u('k', seed, 'mode-' + round_id)} < 0.5 "
            f"THEN CAST(floor({u('k', seed, 'uni-' + round_id)} * {space}) AS BIGINT) "
            f"ELSE CAST(floor(pow({space + 1}D, {u('k', seed, 'pop-' + round_id)})) AS BIGINT)"
            " - 1 END")
    stored_pages = read(spark, cfg, "pages").where(f"round_id = {sql_str(round_id)}")
    src = (
        stored_pages.select(F.expr(id_of_url_sql("url")).alias("src_id"),
                            F.col("url").alias("src_url"), "outlink_count")
        .where("outlink_count > 0")
        .withColumn("i", F.explode(F.expr("sequence(1, outlink_count)")))
        .withColumn("k", F.expr("src_id * 32 + i"))
        .withColumn("dst_id", F.expr(pick))
    )
    src = url_columns(src, "src_id", seed, n_hosts, prefix="src_")
    src = url_columns(src, "dst_id", seed, n_hosts, prefix="dst_")
    links = (
        src.where("dst_id != src_id")
        .select("src_url", "dst_url", F.concat(F.lit("link "), F.col("i")).alias("anchor"),
                F.lit(round_id).alias("round_id"), F.lit("a").alias("kind"),
                "src_host", "dst_host")
        .dropDuplicates(["src_url", "dst_url"])
    )
    # parse's own "latest outlinks" write: older links of the pages parsed in this round go
    write_latest_outlinks(spark, cfg, round_id, stored_pages, links)
    return {
        name: read(spark, cfg, name).where(f"round_id = {sql_str(round_id)}").count()
        for name in ("fetches", "pages", "links")
    }


# --- floors --------------------------------------------------------------------------------


def stage_inputs(stage: str, round_id: str) -> list[tuple[str, str | None]]:
    """(table, filter) the step reads; the floor scans exactly these."""
    rnd = f"round_id = '{round_id}'"
    return {
        "generate": [("crawldb", None), ("hosts", None), ("robots", None)],
        "dedup": [("crawldb", None), ("pages", rnd)],
        "updatedb": [("crawldb", None), ("fetches", rnd), ("pages", rnd),
                     ("duplicates", rnd), ("links", rnd), ("robots", None)],
        "pagerank": [("links", None), ("duplicates", None)],
    }[stage]


def floor_scan(spark, cfg, inputs) -> tuple[float, int]:
    """Seconds to read every column of the inputs once (noop sink), and their row count."""
    from pyspark.sql import functions as F

    rows = 0
    for name, where in inputs:
        df = spark.read.format("delta").load(cfg.table_path(name))
        if where:
            df = df.where(where)
        rows += df.count()
    t = time.perf_counter()
    for name, where in inputs:
        df = spark.read.format("delta").load(cfg.table_path(name))
        if where:
            df = df.where(where)
        # every column decoded: a hash over all of them, written nowhere
        df.select(F.xxhash64(*df.columns).alias("h")).write.format("noop").mode(
            "overwrite").save()
    return time.perf_counter() - t, rows


def rewrite_floor(spark, cfg) -> float:
    """Seconds to copy crawldb once (read every column, write a Delta table of it).

    A step that changes rows spread over every crawldb file must rewrite all of it under
    Delta's copy-on-write MERGE: this is that step's floor, next to the scan floor.
    """
    out = Path(cfg.home) / "rewrite-floor"
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    spark.read.format("delta").load(cfg.table_path("crawldb")).write.format("delta").save(str(out))
    elapsed = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    return elapsed


# --- main ----------------------------------------------------------------------------------


def _mb(x: float) -> str:
    return f"{x / 2**20:,.0f}"


def run_bench(args, spark=None) -> list[dict]:
    """Run the benchmark; with `spark` given (a test's session) it is used and left running."""
    from recrawl.config import load_config
    from recrawl.sparkenv.spark import get_spark, set_codegen
    from spark_jobs import dedup, generate, pagerank, updatedb

    home = args.home or str(ROOT / "var" / "scale" / str(args.urls))
    overrides = {
        "crawl.home": home,
        "spark.master": args.master,
        "spark.driver_memory": args.driver_memory,
        "generate.top_n": max(1, int(args.urls * args.top_n_fraction)),
        # a crawl of this size raises the trap caps: the synthetic Zipf hosts are big, not traps
        "updatedb.host_page_cap": max(5000, args.urls),
        "updatedb.trap_pattern_cap": max(200, args.urls),
        # the status REST API is the per-stage shuffle and memory accounting
        "spark.extra": {"spark.ui.enabled": "true", "spark.ui.port": "0",
                        "spark.ui.retainedStages": "100000", "spark.ui.retainedJobs": "100000",
                        "spark.sql.ui.retainedExecutions": "1000"},
    }
    if args.pagerank_iterations:
        overrides.update({"pagerank.max_iterations": args.pagerank_iterations,
                          "pagerank.tolerance": 0.0})
    for item in args.set or []:
        key, _, raw = item.partition("=")
        import tomllib

        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        if key.startswith("spark.extra."):
            overrides["spark.extra"] = {**overrides["spark.extra"],
                                        key[len("spark.extra."):]: str(value)}
        else:
            overrides[key] = value
    cfg = load_config(environ={}).with_overrides(overrides)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the UI binds here, never the LAN
    own = spark is None
    if own:
        spark = get_spark(cfg, app_name="scale-bench")
    else:
        spark.conf.set("spark.sql.shuffle.partitions", str(cfg.get("spark.shuffle_partitions")))
    metrics = StageMetrics(spark)
    n_hosts = max(10, args.urls // args.urls_per_host)
    print(f"scale bench: {args.urls:,} URLs, seed {args.seed}, {os.cpu_count()} cores "
          f"({args.master}), driver memory {args.driver_memory}, shuffle partitions "
          f"{cfg.get('spark.shuffle_partitions')}, top_n {cfg.get('generate.top_n'):,}, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    tables, pristine = Path(cfg.home) / "tables", Path(cfg.home) / "pristine"
    if args.reuse and pristine.is_dir():
        # the state as synthesized, before any round ran on it
        shutil.rmtree(tables, ignore_errors=True)
        shutil.copytree(pristine, tables)
        print(f"state restored from {pristine}", flush=True)
    else:
        t = time.perf_counter()
        out = generate_state(spark, cfg, args.urls, args.seed, args.urls_per_host,
                             log=lambda m: print(m, flush=True))
        print(f"synthetic state in {time.perf_counter() - t:.0f} s: "
              + ", ".join(f"{k} {out[k]:,}" for k in ("crawldb", "links", "hosts", "robots")),
              flush=True)
        shutil.rmtree(pristine, ignore_errors=True)
        shutil.copytree(tables, pristine)
    for prop in args.crawldb_props or []:
        key, _, value = prop.partition("=")
        spark.sql(f"ALTER TABLE delta.`{cfg.table_path('crawldb')}` "
                  f"SET TBLPROPERTIES ('{key}' = '{value}')")
        print(f"crawldb: {key} = {value}", flush=True)
    for name in ("crawldb", "links", "hosts", "robots"):
        d = spark.sql(f"DESCRIBE DETAIL delta.`{cfg.table_path(name)}`").first()
        rows = spark.read.format("delta").load(cfg.table_path(name)).count()
        print(f"  {name:<8} {rows:>12,} rows {d['numFiles']:>5} files "
              f"{d['sizeInBytes'] / 2**20:>9,.1f} MiB {d['sizeInBytes'] / max(rows, 1):>6.1f} B/row",
              flush=True)
    # As a round's session does when it starts on this crawl home (recrawl.sparkenv.spark.get_spark):
    # the crawldb is here now, so spark.codegen = "auto" sees its size.
    print(f"codegen: {'on' if set_codegen(spark, cfg) else 'off'} "
          f"(spark.codegen = {cfg.get('spark.codegen')}, min {cfg.get('spark.codegen_min_mb')} MB)",
          flush=True)
    metrics.since_last()
    round_id = ROUND_DATE.strftime("%Y%m%d")
    results = []
    for stage in STAGES:
        if stage not in args.stages:
            continue
        if stage == "dedup":
            t = time.perf_counter()
            got = synth_fetch_parse(spark, cfg, round_id, args.urls, args.seed, n_hosts)
            print(f"synthetic fetch + parse of the round in {time.perf_counter() - t:.0f} s: "
                  + ", ".join(f"{k} {v:,}" for k, v in got.items()), flush=True)
            metrics.since_last()
        with PeakSampler(spark) as floor_mem:
            floor_s, rows = floor_scan(spark, cfg, stage_inputs(stage, round_id))
        rw = rw_cpu = None
        if args.rewrite_floor and stage in REWRITES_CRAWLDB:
            with PeakSampler(spark) as rw_mem:
                rw = rewrite_floor(spark, cfg)
            rw_cpu = rw_mem.cpu
        metrics.since_last()
        with PeakSampler(spark) as mem:
            t = time.perf_counter()
            if stage == "generate":
                counts = generate.run(spark, cfg, round_id, ROUND_DATE)
            elif stage == "dedup":
                counts = dedup.run(spark, cfg, round_id, ROUND_DATE)
            elif stage == "updatedb":
                counts = updatedb.run(spark, cfg, round_id, ROUND_DATE)
            else:
                counts = pagerank.run(spark, cfg, ROUND_DATE)
            wall = time.perf_counter() - t
        m = metrics.since_last()
        r = {"stage": stage, "wall": wall, "rows": rows, "floor": floor_s, "cpu": mem.cpu,
             "floor_cpu": floor_mem.cpu, "rewrite_floor": rw, "rewrite_floor_cpu": rw_cpu,
             "load": os.getloadavg()[0],
             "heap": mem.heap, "old": mem.old_peak, "jvm_rss": mem.jvm_rss,
             "py_rss": mem.py_rss, "workers_rss": mem.workers_rss, "counts": counts, **m}
        results.append(r)
        print(f"  {stage}: {wall:.1f} s (floor {floor_s:.1f} s) {counts}", flush=True)
        if rw is not None:
            print(f"  {stage}: crawldb rewrite floor {rw:.1f} s, {rw_cpu:.0f} CPU s; step = "
                  f"{wall / rw:.1f}x it ({mem.cpu / max(rw_cpu, 1e-9):.1f}x in CPU)", flush=True)
        print_table(args.urls, [r], header=False)  # a run stopped early keeps its figures
    if own:
        spark.stop()
    return results


def print_table(urls: int, results: list[dict], header: bool = True) -> None:
    show_header = header
    header = (f"{'urls':>10} {'stage':<9} {'wall s':>7} {'rows':>11} {'rows/s':>9} "
              f"{'floor s':>7} {'x floor':>7} {'CPU s':>7} {'rows/CPUs':>9} {'fl CPU':>6} "
              f"{'shuf MB':>8} {'spill MB':>8} {'peak ex MB':>10} "
              f"{'heap MB':>7} {'old MB':>6} {'JVM RSS':>7} {'py RSS':>6} {'wrk RSS':>7}")
    if show_header:
        print(header)
        print("-" * len(header))
    for r in results:
        print(f"{urls:>10,} {r['stage']:<9} {r['wall']:>7.1f} {r['rows']:>11,} "
              f"{r['rows'] / r['wall']:>9,.0f} {r['floor']:>7.1f} "
              f"{r['wall'] / max(r['floor'], 1e-9):>7.1f} {r.get('cpu', 0):>7.0f} "
              f"{r['rows'] / max(r.get('cpu', 0), 1e-9):>9,.0f} {r.get('floor_cpu', 0):>6.0f} "
              f"{_mb(r['shuffle_read'] + r['shuffle_write']):>8} "
              f"{_mb(r['spill_disk']):>8} {_mb(r['peak_exec_mem']):>10} {_mb(r['heap']):>7} "
              f"{_mb(r['old']):>6} {_mb(r['jvm_rss']):>7} {_mb(r['py_rss']):>6} "
              f"{_mb(r['workers_rss']):>7}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--home", default=None, help="crawl home (default var/scale/<urls>)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--urls-per-host", type=int, default=50)
    ap.add_argument("--top-n-fraction", type=float, default=0.1,
                    help="round size as a fraction of crawldb (generate.top_n)")
    ap.add_argument("--pagerank-iterations", type=int, default=0,
                    help="force exactly N iterations (tolerance 0); 0 = the configuration")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--reuse", action="store_true",
                    help="start from the synthetic state a previous run kept in <home>/pristine")
    ap.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="configuration override, e.g. spark.shuffle_partitions=32 or "
                    "spark.extra.spark.sql.adaptive.enabled=false")
    ap.add_argument("--crawldb-props", action="append", metavar="KEY=VALUE",
                    help="a Delta table property set on crawldb before the round, e.g. "
                    "delta.enableDeletionVectors=true")
    ap.add_argument("--rewrite-floor", action="store_true",
                    help="also time a plain copy of crawldb before the steps that rewrite it")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    args.stages = [s for s in args.stages.split(",") if s]
    results = run_bench(args)
    print()
    print_table(args.urls, results)
    if args.json:
        Path(args.json).write_text(json.dumps({"urls": args.urls, "results": results},
                                              indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

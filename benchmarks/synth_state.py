"""Synthetic crawl state at scale: a crawldb of N URLs, its hosts, robots and link graph.

    .venv/bin/python benchmarks/synth_state.py --urls 1000000 --home var/scale/1m [--seed 1]

Everything is computed by Spark from `spark.range` with hash-based columns
(`xxhash64(id, seed, salt)`), never in a Python loop, so 10M URLs take minutes and the same seed
gives the same tables. Tables are written as Delta under `<home>/tables/` with the contract's
schemas (recrawl.store.tables.init_tables / conform), so every job reads them as it reads a real crawl.

The shape of the state:
  * hosts: `urls / urls_per_host` hosts (default 50 URLs a host on average) with a Zipf-like
    (log-uniform, exponent ~1) size distribution: host rank r holds a share
    log((r+2)/(r+1)) / log(H) of the URLs, so at 10M URLs over 200k hosts the largest host has
    ~570k URLs, the top 100 hold ~38 % and the tail hosts 1-10. 2/3 are https.
  * URL identity is its id: `<scheme>://www.site<r>.test/<section>/<base36 id>.html`; a URL's
    host and every fingerprint are functions of its id, so link targets and fetch results can
    be derived without a join.
  * statuses: fetched 35 %, duplicate 1 %, gone 2 %, redirect_perm 1 %, failed 1 %,
    robots_denied 0.5 %, the rest unfetched (a Nutch crawldb is mostly frontier).
    Fetched rows have fetch counts 1-20, a change history (up to 32 entries), change rates,
    fetch intervals from 6 h to 30 days (log-uniform), ETag / Last-Modified, content hash,
    SimHash, payload digest and a PageRank-like heavy-tailed score.
  * fingerprints: 2 % of pages are exact copies in groups (same text hash), 1 % near copies
    (SimHash one bit from a group base), the rest unique; `fingerprints(id, version)` gives
    the same values to the round's synthetic pages, so an unchanged page keeps its hashes.
  * links: 0-20 out-links per fetched page (mean 10); targets half uniform, half
    log-uniform popular over `1.05 * urls` ids, so ~5 % of targets are not yet in crawldb
    (discovery) and a few pages collect most in-links. Stored under the round that last
    fetched the source (`links` keeps each page's latest outlinks).
  * hosts / robots: one row per host; 0.5 % of hosts in back-off, 15 % with Crawl-delay 2-5 s
    and 5 % with 10 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

AS_OF = dt.datetime(2026, 11, 30)  # the state is "as of" this logical time
SECTIONS = ("news", "blog", "product", "docs", "about", "tag", "page", "article")
MAX63 = "9223372036854775807L"


def u(col: str, seed: int, salt: str) -> str:
    """SQL: a uniform double in [0, 1) from (col, seed, salt)."""
    return f"((xxhash64({col}, {seed}, '{salt}') & {MAX63}) / 9.223372036854775807E18D)"


def h(col: str, seed: int, salt: str) -> str:
    """SQL: a non-negative bigint hash of (col, seed, salt)."""
    return f"(xxhash64({col}, {seed}, '{salt}') & {MAX63})"


def host_rank_sql(id_col: str, seed: int, n_hosts: int) -> str:
    """Log-uniform host rank in [0, n_hosts): P(r) = log((r+2)/(r+1)) / log(n_hosts + 1)."""
    return f"(CAST(floor(pow({n_hosts + 1}D, {u(id_col, seed, 'host')})) AS BIGINT) - 1)"


def site_sql(rank_col: str, seed: int) -> tuple[str, str]:
    """(scheme://host, scheme://host:port) SQL of a host rank."""
    https = f"(pmod(xxhash64({rank_col}, {seed}, 'sch'), 3) != 0)"
    base = (f"concat(CASE WHEN {https} THEN 'https' ELSE 'http' END, '://www.site', "
            f"CAST({rank_col} AS STRING), '.test')")
    key = f"concat({base}, CASE WHEN {https} THEN ':443' ELSE ':80' END)"
    return base, key


def url_columns(df, id_col: str, seed: int, n_hosts: int, prefix: str = ""):
    """Add <prefix>url and <prefix>host (host_key form) computed from the id column."""
    from pyspark.sql import functions as F

    rank = f"__rank_{prefix}"
    base, key = site_sql(rank, seed)
    sections = ", ".join(f"'{s}'" for s in SECTIONS)
    path = (f"concat('/', element_at(array({sections}), "
            f"CAST(pmod(xxhash64({id_col}, {seed}, 'sec'), {len(SECTIONS)}) + 1 AS INT)), '/', "
            f"lower(conv(CAST({id_col} AS STRING), 10, 36)), '.html')")
    return (
        df.withColumn(rank, F.expr(host_rank_sql(id_col, seed, n_hosts)))
        .withColumn(f"{prefix}url", F.expr(f"concat({base}, {path})"))
        .withColumn(f"{prefix}host", F.expr(key))
        .drop(rank)
    )


def id_of_url_sql(url_col: str = "url") -> str:
    """SQL: the id back from a synthetic URL (base36 file name)."""
    return (f"CAST(conv(regexp_extract({url_col}, '/([0-9a-z]+)\\\\.html$', 1), 36, 10) "
            "AS BIGINT)")


def fingerprint_sql(id_col: str, seed: int, n_urls: int, version: str) -> dict[str, str]:
    """SQL for content_hash, simhash, payload_digest of page `id` at `version`.

    2 % of ids are exact copies (groups of ~20 sharing text hash and SimHash, whatever the
    version: boilerplate pages), 1 % near copies (a group base with one bit flipped), the rest
    unique per (id, version).
    """
    groups = max(1, n_urls // 1000)
    kind = f"pmod(xxhash64({id_col}, {seed}, 'dupkind'), 100)"
    grp = f"pmod(xxhash64({id_col}, {seed}, 'dupgrp'), {groups})"
    bit = f"CAST(pmod(xxhash64({id_col}, {seed}, 'bit'), 64) AS INT)"
    return {
        "content_hash": f"""CASE WHEN {kind} < 2 THEN concat('x', lpad(hex({grp}), 15, '0'))
            ELSE lower(hex(xxhash64({id_col}, {seed}, 'text', '{version}'))) END""",
        "simhash": f"""CASE WHEN {kind} < 2 THEN xxhash64({grp}, {seed}, 'exact')
            WHEN {kind} < 3 THEN xxhash64({grp}, {seed}, 'near') ^ shiftleft(1L, {bit})
            ELSE xxhash64({id_col}, {seed}, 'sim', '{version}') END""",
        "payload_digest": f"concat('sha1:', lpad(hex(xxhash64({id_col}, {seed}, 'pay', "
                          f"'{version}')), 16, '0'))",
    }


def crawldb_df(spark, n_urls: int, seed: int, n_hosts: int, partitions: int):
    from pyspark.sql import functions as F

    as_of = AS_OF.isoformat(sep=" ")
    df = spark.range(0, n_urls, 1, partitions).withColumnRenamed("id", "id")
    df = url_columns(df, "id", seed, n_hosts)
    r = u("id", seed, "status")
    status = f"""CASE WHEN {r} < 0.35 THEN 'fetched' WHEN {r} < 0.36 THEN 'duplicate'
        WHEN {r} < 0.38 THEN 'gone' WHEN {r} < 0.39 THEN 'redirect_perm'
        WHEN {r} < 0.40 THEN 'failed' WHEN {r} < 0.405 THEN 'robots_denied'
        ELSE 'unfetched' END"""
    fp = fingerprint_sql("id", seed, n_urls, "v0")
    df = (
        df.withColumn("status", F.expr(status))
        .withColumn("was_fetched", F.expr("status != 'unfetched'"))
        .withColumn("has_text", F.expr("status IN ('fetched', 'duplicate')"))
        .withColumn("depth", F.expr(
            f"CAST(CASE WHEN was_fetched THEN floor({u('id', seed, 'depth')} * 5) "
            f"ELSE 1 + floor({u('id', seed, 'depth')} * 8) END AS INT)"))
        .withColumn("discovered_at", F.expr(
            f"timestamp'{as_of}' - make_interval(0, 0, 0, 0, 0, 0, "
            f"CAST({u('id', seed, 'disc')} * 120 * 86400 AS BIGINT))"))
        # fetch interval: 6 h .. 30 days, log-uniform
        .withColumn("fetch_interval_s", F.expr(
            f"CAST(21600 * pow(120D, {u('id', seed, 'interval')}) AS BIGINT)"))
        .withColumn("last_fetch_time", F.expr(
            f"CASE WHEN was_fetched THEN greatest(discovered_at, timestamp'{as_of}' - "
            f"make_interval(0, 0, 0, 0, 0, 0, CAST({u('id', seed, 'last')} * 30 * 86400 "
            "AS BIGINT))) END"))
        .withColumn("next_fetch_time", F.expr(
            "CASE WHEN was_fetched THEN last_fetch_time + make_interval(0, 0, 0, 0, 0, 0, "
            "fetch_interval_s) ELSE discovered_at END"))
        .withColumn("fetch_count", F.expr(
            f"CAST(CASE WHEN was_fetched THEN 1 + floor({u('id', seed, 'fc')} * 20) "
            "ELSE 0 END AS INT)"))
        .withColumn("change_rate", F.expr(
            f"CASE WHEN was_fetched THEN 0.01 * pow(300D, {u('id', seed, 'rate')}) END"))
        .withColumn("hist_n", F.expr("CAST(least(greatest(fetch_count - 1, 0), 32) AS INT)"))
        .withColumn("change_history", F.expr(
            "CASE WHEN hist_n > 0 THEN transform(sequence(1, hist_n), i -> named_struct("
            "'interval_d', fetch_interval_s / 86400D, "
            f"'changed', {u('id + i * 1000003', seed, 'hist')} < least(change_rate * "
            "fetch_interval_s / 86400D, 1D))) END"))
        .withColumn("change_count", F.expr(
            "CAST(CASE WHEN hist_n > 0 THEN size(filter(change_history, x -> x.changed)) "
            "WHEN was_fetched THEN 0 END AS INT)"))
        .withColumn("last_changed", F.expr(
            "CASE WHEN hist_n > 0 THEN element_at(change_history, -1).changed END"))
        .withColumn("last_change_time", F.expr(
            "CASE WHEN was_fetched THEN last_fetch_time - make_interval(0, 0, 0, 0, 0, 0, "
            "fetch_interval_s * CAST(pmod(id, 4) AS BIGINT)) END"))
        .withColumn("retries", F.expr("CAST(CASE WHEN status = 'failed' THEN 3 ELSE 0 END AS INT)"))
        .withColumn("http_status", F.expr(
            "CAST(CASE status WHEN 'fetched' THEN 200 WHEN 'duplicate' THEN 200 "
            "WHEN 'gone' THEN 404 WHEN 'redirect_perm' THEN 301 WHEN 'failed' THEN 503 END "
            "AS INT)"))
        .withColumn("etag", F.expr(
            f"CASE WHEN has_text AND {u('id', seed, 'etag')} < 0.6 THEN "
            f"concat('\"', lower(hex(xxhash64(id, {seed}, 'etag'))), '\"') END"))
        .withColumn("last_modified", F.expr(
            f"CASE WHEN has_text AND {u('id', seed, 'lm')} < 0.5 THEN "
            "date_format(last_change_time, 'EEE, dd MMM yyyy HH:mm:ss') || ' GMT' END"))
        .withColumn("content_hash", F.expr(f"CASE WHEN has_text THEN {fp['content_hash']} END"))
        .withColumn("simhash", F.expr(f"CASE WHEN has_text THEN {fp['simhash']} END"))
        .withColumn("payload_digest",
                    F.expr(f"CASE WHEN has_text THEN {fp['payload_digest']} END"))
        # PageRank-like: heavy tail, summing to ~1 over the crawl
        .withColumn("score", F.expr(
            f"CASE WHEN was_fetched THEN pow({u('id', seed, 'score')}, 8D) * 9D / {n_urls}D END"))
        .withColumn("redirect_to", F.expr(
            "CASE WHEN status = 'redirect_perm' THEN regexp_replace(url, '\\\\.html$', '/') END"))
        .withColumn("last_round", F.expr(
            "CASE WHEN was_fetched THEN date_format(last_fetch_time, 'yyyyMMdd') END"))
        .withColumn("scheduled_round", F.col("last_round"))
        .withColumn("parse_failures", F.expr("CAST(0 AS INT)"))
    )
    return df


def links_df(db, seed: int, n_urls: int, n_hosts: int):
    """0-20 out-links per fetched page (mean 10) under the round that last fetched it."""
    from pyspark.sql import functions as F

    space = int(n_urls * 1.05)
    pick = (f"CASE WHEN {u('k', seed, 'mode')} < 0.5 "
            f"THEN CAST(floor({u('k', seed, 'uni')} * {space}) AS BIGINT) "
            f"ELSE CAST(floor(pow({space + 1}D, {u('k', seed, 'pop')})) AS BIGINT) - 1 END")
    src = (
        db.where("status IN ('fetched', 'duplicate')")
        .select(F.col("id").alias("src_id"), F.col("url").alias("src_url"),
                F.col("host").alias("src_host"), F.col("last_round").alias("round_id"))
        .withColumn("n", F.expr(f"CAST(pmod(xxhash64(src_id, {seed}, 'nlinks'), 21) AS INT)"))
        .where("n > 0")
        .withColumn("i", F.explode(F.expr("sequence(1, n)")))
        .withColumn("k", F.expr("src_id * 32 + i"))
        .withColumn("dst_id", F.expr(pick))
    )
    out = url_columns(src, "dst_id", seed, n_hosts, prefix="dst_")
    return (
        out.where("dst_id != src_id")
        .select("src_url", "dst_url", F.concat(F.lit("link "), F.col("i")).alias("anchor"),
                "round_id", F.lit("a").alias("kind"), "src_host", "dst_host")
        .dropDuplicates(["src_url", "dst_url"])
    )


def hosts_robots_df(spark, seed: int, n_hosts: int, db):
    """(hosts, robots): one row per host that has URLs."""
    from pyspark.sql import functions as F

    as_of = AS_OF.isoformat(sep=" ")
    per_host = db.groupBy("host").agg(
        F.count("*").alias("pages_known"),
        F.sum(F.when(F.col("fetch_count") > 0, 1).otherwise(0)).cast("long").alias("pages_fetched"),
    )
    hosts = (
        per_host.withColumn("hh", F.expr(u("host", seed, "backoff")))
        .select(
            "host", "pages_known", "pages_fetched",
            F.expr("CASE WHEN hh < 0.005 THEN timestamp'2099-01-01 00:00:00' END")
            .alias("backoff_until"),
            F.expr("CAST(CASE WHEN hh < 0.005 THEN 3 ELSE 0 END AS INT)")
            .alias("consecutive_failures"),
            F.lit(False).alias("trap"),
            F.expr(f"timestamp'{as_of}'").alias("updated_at"),
        )
    )
    robots = per_host.select("host").withColumn("r", F.expr(u("host", seed, "robots"))).select(
        "host",
        F.expr(f"timestamp'{as_of}' - INTERVAL 6 HOURS").alias("fetched_at"),
        F.expr("CAST(CASE WHEN r < 0.97 THEN 200 ELSE 404 END AS INT)").alias("http_status"),
        F.expr("CASE WHEN r < 0.05 THEN 10D WHEN r < 0.20 THEN 2D + floor(r * 100) % 4 END")
        .alias("crawl_delay"),
        F.lit("User-agent: *\nDisallow: /private/\n").alias("rules"),
        F.expr(f"timestamp'{as_of}' + INTERVAL 18 HOURS").alias("expires_at"),
    )
    return hosts, robots


def generate_state(spark, cfg, n_urls: int, seed: int = 1, urls_per_host: int = 50,
                   rows_per_file: int = 250_000, log=print) -> dict:
    """Write crawldb, links, hosts, robots (and empty other tables) under cfg's crawl home.

    Returns {table: rows} and the seconds each write took. Existing tables are overwritten.
    """
    import shutil

    from recrawl.store.tables import init_tables, overwrite

    home = Path(cfg.home)
    if (home / "tables").exists():
        shutil.rmtree(home / "tables")
    init_tables(spark, cfg)
    n_hosts = max(10, n_urls // urls_per_host)
    parts = max(1, -(-n_urls // rows_per_file))
    out: dict = {"hosts_total": n_hosts}
    t = time.perf_counter()
    db = crawldb_df(spark, n_urls, seed, n_hosts, parts)
    overwrite(db, cfg, "crawldb")
    out["crawldb_s"] = time.perf_counter() - t
    log(f"  synth crawldb: {n_urls:,} URLs over {n_hosts:,} host ranks in "
        f"{out['crawldb_s']:.0f} s")
    # links, hosts, robots are computed from the id-derived columns, not read back
    t = time.perf_counter()
    links = links_df(db, seed, n_urls, n_hosts)
    link_parts = max(1, -(-n_urls * 4 // rows_per_file))
    (
        conform(links.repartition(link_parts, "round_id"), "links")
        .write.format("delta").mode("overwrite").save(cfg.table_path("links"))
    )
    out["links_s"] = time.perf_counter() - t
    log(f"  synth links in {out['links_s']:.0f} s")
    t = time.perf_counter()
    stored = spark.read.format("delta").load(cfg.table_path("crawldb"))
    hosts, robots = hosts_robots_df(spark, seed, n_hosts, stored)
    overwrite(hosts.coalesce(max(1, parts // 8)), cfg, "hosts")
    overwrite(robots.coalesce(max(1, parts // 8)), cfg, "robots")
    out["hosts_s"] = time.perf_counter() - t
    for name in ("crawldb", "links", "hosts", "robots"):
        out[name] = spark.read.format("delta").load(cfg.table_path(name)).count()
    return out


def conform(df, name):
    from recrawl.store.tables import conform as _conform

    return _conform(df, name)


def table_bytes(cfg, name: str) -> int:
    """Bytes of the current version's data files (Delta's own accounting)."""
    from delta.tables import DeltaTable

    from recrawl.sparkenv.spark import get_spark

    spark = get_spark(cfg)
    d = DeltaTable.forPath(spark, cfg.table_path(name)).detail().first()
    return int(d["sizeInBytes"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--home", default=None, help="crawl home (default var/scale/<urls>)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--urls-per-host", type=int, default=50)
    ap.add_argument("--driver-memory", default="8g")
    args = ap.parse_args(argv)

    from recrawl.config import load_config
    from recrawl.sparkenv.spark import get_spark

    home = args.home or str(ROOT / "var" / "scale" / str(args.urls))
    cfg = load_config(environ={}).with_overrides({
        "crawl.home": home, "spark.driver_memory": args.driver_memory,
    })
    spark = get_spark(cfg, app_name="synth-state")
    t = time.perf_counter()
    out = generate_state(spark, cfg, args.urls, args.seed, args.urls_per_host)
    print(f"wrote {home} in {time.perf_counter() - t:.0f} s")
    for name in ("crawldb", "links", "hosts", "robots"):
        size = table_bytes(cfg, name)
        print(f"  {name:<8} {out[name]:>12,} rows {size / 2**20:>9,.1f} MiB "
              f"{size / max(out[name], 1):>7.1f} B/row")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

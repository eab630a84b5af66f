"""signals: re-read each host's sitemaps and feeds, first in a round, and keep what they say.

The change signals sites publish (docs/freshness.md, "Change signals"): a sitemap's <lastmod>
and a feed entry's date, per listed URL. This step runs before generate so that a round acts on
what the signals say when it starts (a change published before the round is fetched in it).

1. Sources (`signal_sources`, this step's table): the sitemaps robots.txt names (the `robots`
   table), the child sitemaps of a sitemap index, and the feeds parse found as
   `<link rel="alternate">` outlinks of kind `feed`. A source is read again
   `signals.read_interval_days` after its last read, at most `signals.max_sources_per_host` a
   host per round; `signals.max_read_share` of the round's top_n in all, the longest overdue
   first (recrawl.rules.signal_trust.choose_reads), and a trusted host's all once discovery's
   reserve takes the whole frontier; seldom
   when it lists no dates, its host's signals proved wrong, or it is the feed of a host whose
   dated sitemap proved its recall (recrawl.rules.signal_trust.next_read_at).
2. Reading: the fetcher core inside Spark `mapPartitions`, exactly as the fetch step runs it:
   one queue per host, robots.txt obeyed, the host's delay between requests, conditional GET
   with the stored ETag / Last-Modified (a 304 costs the site an empty answer). Captures go to
   WARC under `warc/<round>/signals/`. The requests count in the round's budget (generate takes
   them off top_n). The fetch step that follows waits every host's delay first when a read was
   moments ago (spark_jobs.fetch.recent_fetch).
3. Entries: each answer's listed URLs (normalized, same host as the source only: a sitemap may
   not speak for other sites) with their dates. crawldb keeps each URL's newest date
   (`signal_time`, `signal_precision_s`, `signal_kind`, `signal_read_at`; recrawl.store.crawldb
   set_signals); listed URLs crawldb lacks enter the frontier as unfetched, depth 0, as a
   sitemap's URLs always have. hosts.signals_read_at says the host's sources answered.

Idempotent: a re-run finds every source read for this round (next_read_at past the round) and
reads nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from collections.abc import Iterable, Iterator

from fetcher.cdxj import INDEX_NAME, write_index
from fetcher.storage import S3Options, Storage
from recrawl.config import Config, ConfigError
from recrawl.content.urlnorm import host_key_or_none, try_normalize
from recrawl.rules.schedules import discovery_slots
from recrawl.rules.signal_trust import TrustRule, choose_reads, next_read_at
from recrawl.sparkenv.joblabels import stage
from recrawl.store.crawldb import set_signals
from recrawl.store.hostdb import record_signal_reads
from recrawl.store.schemas import SIGNAL_SOURCES
from recrawl.store.tables import Insert, Update, merge_into, naive_utc, read, sql_str, ts_lit
from spark_jobs.common import norm_rules, with_trust_oracle
from spark_jobs.fetch import (
    check_no_speculation,
    fetch_partition,
    fetch_settings_map,
    fs_delete,
    fs_list,
    publish_politeness,
    recent_fetch,
)
from spark_jobs.parse import UnchangedPayload, read_payload
from spark_jobs.schedule import frontier_and_held

FEED_TYPES = ("application/rss+xml", "application/atom+xml", "application/rdf+xml",
              "application/feed+json")


def entries_of(body: bytes, ctype: str | None, base_url: str, limit: int) -> tuple[
        list[tuple[str, dt.datetime | None, int]], list[str]]:
    """([(url, time or None, precision_s)], [child sitemap URLs]) of one source's answer."""
    from recrawl.content import feeds, sitemaps  # lazy: feedparser

    if sitemaps.is_sitemap(body, ctype):
        rows = sitemaps.sitemap_entries(body, limit)
        if sitemaps.is_sitemap_index(body):
            return [], [loc for loc, _ in rows]
        return [(loc, None, 0) if lm is None else (loc, lm[0], int(lm[1]))
                for loc, lm in rows], []
    if feeds.is_feed(body, ctype):
        return [(link, when, 1) for link, when in feeds.feed_entries(body, base_url, limit)], []
    return [], []


def read_sources(rows: Iterable, settings_map: dict, warc_dir: str, prefix: str, opts: dict,
                 resume: bool, s3) -> Iterator[tuple[str, str]]:
    """One task: fetch its sources (spark_jobs.fetch.fetch_partition) and read each answer's
    entries back from the WARC just written. Yields (kind, json): the fetcher's `fetch`,
    `robots` and `host` records, an `entry` per listed URL, a `child` per index child."""

    storage = Storage(s3)
    hosts = {}
    for kind, payload in fetch_partition(rows, settings_map, warc_dir, prefix, resume, s3):
        yield kind, payload
        if kind != "fetch":
            continue
        row = json.loads(payload)
        if row["fetch_status"] != "fetched" or not row.get("warc_file"):
            continue
        try:
            body, ctype, _ = read_payload(row["warc_file"], row["warc_offset"],
                                          opts["max_bytes"], length=row.get("warc_length"),
                                          storage=storage)
        except UnchangedPayload:  # the same bytes as the last read: nothing new
            continue
        except Exception as exc:  # a corrupt capture is recorded on the source, not fatal
            yield "error", json.dumps({"url": row["url"], "error": f"{type(exc).__name__}: {exc}"})
            continue
        base = row.get("final_url") or row["url"]
        source_host = hosts.setdefault(row["url"], host_key_or_none(row["url"]))
        try:
            entries, children = entries_of(body, ctype or row.get("content_type"), base,
                                           opts["max_entries"])
        except Exception as exc:  # garbage in a sitemap is the site's problem, not the round's
            yield "error", json.dumps({"url": row["url"], "error": f"{type(exc).__name__}: {exc}"})
            continue
        for loc in children:
            url, _ = try_normalize(loc, rules=opts["norm_rules"])
            if url and host_key_or_none(url) == source_host:
                yield "child", json.dumps({"source_url": url, "host": source_host,
                                           "parent": row["url"]})
        kind_name = opts["kinds"].get(row["url"], "sitemap")
        for loc, when, precision in entries:
            url, _ = try_normalize(loc, rules=opts["norm_rules"])
            if not url or host_key_or_none(url) != source_host:
                continue  # a source speaks for its own host only
            yield "entry", json.dumps({
                "url": url, "host": source_host, "kind": kind_name, "source": row["url"],
                "signal_time": None if when is None else
                when.astimezone(dt.UTC).replace(tzinfo=None).isoformat(),
                "signal_precision_s": precision or None,
            })


def run(spark, cfg: Config, round_id: str, logical: dt.datetime) -> dict[str, int]:
    from pyspark.sql import functions as F  # lazy: pyspark


    sig = cfg.section("signals")
    if not sig["enabled"]:
        return {"enabled": 0}
    share = float(sig["max_read_share"])  # checked before any Spark work
    if not 0.0 < share <= 1.0:
        raise ConfigError(f"signals.max_read_share must be within (0, 1], got {share!r}")
    check_no_speculation(spark)
    now = naive_utc(logical)
    now_sql = ts_lit(now)
    rid = sql_str(round_id)
    _add_sources(spark, cfg)
    sources = read(spark, cfg, "signal_sources")
    due = [r.asDict() for r in sources.where(
        f"next_read_at IS NULL OR next_read_at <= {now_sql}").collect()]
    round_cap = max(1, math.floor(share * int(cfg.get("generate.top_n")) + 1e-9))
    # A re-run of a round that already read its share reads nothing: the sources the cap left
    # out wait for the next round, so that a retried round spends no second share of its budget.
    rerun = sources.where(f"round_id = {rid}").limit(1).count() > 0
    # A trusted host's sources are read whatever the cap once discovery's reserve takes the
    # whole frontier; before that every read competes with a first fetch, and at a tenth of
    # the pages a day the trusted hosts' daily reads and the chases they bring held discovery
    # back for weeks (docs/freshness.md, "Reads priced against the round").
    top_n = int(cfg.get("generate.top_n"))
    open_frontier = not rerun and frontier_and_held(read(spark, cfg, "crawldb"))[0] > \
        discovery_slots(top_n, float(cfg.get("generate.discovery_share")), top_n)
    trusted = set() if rerun or open_frontier else {r["host"] for r in with_trust_oracle(
        spark, cfg, read(spark, cfg, "hosts").select("host", "signal_trusted", "signal_defer"))
        .where("signal_trusted").select("host").collect()}
    chosen = [] if rerun else choose_reads(due, int(sig["max_sources_per_host"]), round_cap,
                                           trusted)
    per_host = {r["host"] for r in chosen}
    counts = {"enabled": 1, "sources_known": sources.count(), "sources_due": len(due),
              "sources_read": len(chosen),
              "sources_read_trusted": sum(r["host"] in trusted for r in chosen)}
    if not chosen:
        return {**counts, "requests": 0, "entries": 0, "urls_updated": 0}

    robots = {r["host"]: r.asDict() for r in read(spark, cfg, "robots").where(
        F.col("host").isin(sorted(per_host))).collect()}
    n_parts = max(1, int(cfg.get("generate.partitions")))
    part_of = {h: i % n_parts for i, h in enumerate(sorted({r["host"] for r in chosen}))}
    items = []
    for r in chosen:
        rb = robots.get(r["host"]) or {}
        items.append({
            "url": r["source_url"], "host": r["host"], "partition": part_of[r["host"]],
            "priority": 1.0, "etag": r["etag"], "last_modified": r["last_modified"],
            "payload_digest": None, "last_fetch_time": None,
            "robots_fetched_at": rb.get("fetched_at"), "robots_http_status": rb.get("http_status"),
            "robots_crawl_delay": rb.get("crawl_delay"), "robots_sitemaps": rb.get("sitemaps"),
            "robots_rules": rb.get("rules"), "robots_expires_at": rb.get("expires_at"),
        })
    settings_map = fetch_settings_map(cfg)
    settings_map["allowed_content_types"] = [
        *settings_map["allowed_content_types"], *[t for t in FEED_TYPES
                                                  if t not in settings_map["allowed_content_types"]]]
    opts = {"max_bytes": int(cfg.get("fetcher.max_decompressed_bytes")),
            "max_entries": int(sig["max_entries_per_source"]), "norm_rules": norm_rules(cfg),
            "kinds": {r["source_url"]: r["kind"] for r in chosen}}
    s3 = S3Options.from_spark_conf(cfg.get("spark.extra"))
    warc_dir = f"{cfg.warc_dir(round_id)}/signals"
    prefix = f"{round_id}-signals-{uuid.uuid4().hex[:8]}"
    resume = recent_fetch(spark, cfg, dt.datetime.now(dt.UTC))

    def body(it):
        return read_sources((kv[1] for kv in it), settings_map, warc_dir, prefix, opts, resume, s3)

    rdd = (spark.sparkContext.parallelize([(i["partition"], i) for i in items], n_parts)
           .partitionBy(n_parts, lambda k: int(k) % n_parts).mapPartitions(body))
    staging = f"{cfg.home}/staging/signals/{round_id}"
    stage(spark, "reading sitemaps and feeds")
    spark.createDataFrame(rdd, "kind string, payload string").write.mode("overwrite").parquet(staging)
    staged = spark.read.parquet(staging).cache()
    records = {k: [json.loads(p) for (p,) in staged.where(F.col("kind") == k).select("payload")
                   .collect()] for k in ("fetch", "child", "error")}
    publish_politeness(spark, cfg, staged)
    entries = staged.where("kind = 'entry'").select(F.from_json(
        "payload", "url string, host string, kind string, source string, signal_time string, "
                   "signal_precision_s long").alias("e")).select("e.*")
    entries = entries.withColumn("signal_time", F.col("signal_time").cast("timestamp"))
    n_entries = entries.count()
    updated = set_signals(spark, cfg, entries, now)

    # The sources' own rows: validators, status, when they answered, when to read them again.
    errors = {e["url"]: e["error"] for e in records["error"]}
    n_entries_by = {r[0]: (r[1], r[2]) for r in entries.groupBy("source").agg(
        F.count("*"), F.count("signal_time")).collect()}
    rule = TrustRule.from_section(sig)
    distrusted = {r["host"] for r in read(spark, cfg, "hosts").where(
        F.col("host").isin(sorted(per_host))
        & (F.coalesce("signal_tp", F.lit(0.0)) + F.coalesce("signal_fp", F.lit(0.0))
           + F.coalesce("signal_fn", F.lit(0.0)) >= F.lit(rule.min_evidence))
        & ~F.coalesce("signal_trusted", F.lit(False))).select("host").collect()}
    # A feed adds nothing daily where the host's dated sitemap already proved its recall (every
    # change showed as a date there): it is read as seldom as an undated source, for new URLs.
    # Should the sitemap alone miss changes, recall falls and the feed is read daily again.
    hosts = with_trust_oracle(spark, cfg, read(spark, cfg, "hosts").where(
        F.col("host").isin(sorted(per_host))).select("host", "signal_trusted", "signal_defer"))
    dated_sitemaps = sources.where("kind = 'sitemap' AND dated_entries > 0").select("host")
    feed_redundant = {r["host"] for r in hosts.where(F.coalesce("signal_defer", F.lit(False)))
                      .join(dated_sitemaps.distinct(), "host").select("host").collect()}
    wall = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    fetched = {f["url"]: f for f in records["fetch"]}
    rows, answered = [], {}
    by_url = {r["source_url"]: r for r in chosen}
    requests = 0
    for url, src in by_url.items():
        f = fetched.get(url) or {}
        status = f.get("fetch_status")
        ok = status in ("fetched", "not_modified")
        requests += status not in (None, "robots_denied", "skipped_budget")
        if ok:
            answered[src["host"]] = now
        n, dated = ((src["entries"], src["dated_entries"]) if status == "not_modified"
                    else n_entries_by.get(url, (0, 0)) if ok else (None, None))
        rows.append((
            url, src["host"], src["kind"],
            f.get("etag") if ok else src["etag"],
            f.get("last_modified") if ok else src["last_modified"],
            f.get("http_status"), status, now if ok else src["read_at"],
            wall if status not in (None, "robots_denied", "skipped_budget") else src["fetched_at"],
            next_read_at(now, sig, src["kind"], answered=ok, entries=n, dated=dated,
                         distrusted=src["host"] in distrusted,
                         feed_redundant=src["host"] in feed_redundant), n, dated,
            errors.get(url) or f.get("error"), round_id,
        ))
    for c in records["child"]:
        rows.append((c["source_url"], c["host"], "sitemap", None, None, None, None, None, None,
                     None, None, None, None, None))

    src_df = spark.createDataFrame(rows, SIGNAL_SOURCES).dropDuplicates(["source_url"])
    cols = [f.name for f in SIGNAL_SOURCES.fields if f.name not in ("source_url", "host", "kind")]
    merge_into(spark, cfg, "signal_sources", src_df, "t.source_url = s.source_url",
               Update({c: f"s.{c}" for c in cols},
                      when=f"s.round_id = {rid}"),
               Insert({f.name: f"s.{f.name}" for f in SIGNAL_SOURCES.fields}), portable=True)
    if answered:
        record_signal_reads(spark, cfg, spark.createDataFrame(
            sorted(answered.items()), "host string, signals_read_at timestamp"))
    _index_captures(spark, warc_dir, records["fetch"], s3)
    fs_delete(spark, staging)
    staged.unpersist()
    statuses: dict[str, int] = {}
    for f in records["fetch"]:
        statuses[f["fetch_status"]] = statuses.get(f["fetch_status"], 0) + 1
    return {**counts, "requests": requests, "entries": n_entries, "urls_updated": updated,
            "children": len(records["child"]), "errors": len(errors),
            **{f"status_{k}": v for k, v in statuses.items()}}


def _add_sources(spark, cfg: Config) -> None:
    """New sources: robots.txt sitemaps of known hosts and feeds found by parse."""
    from pyspark.sql import functions as F  # lazy: pyspark


    rules = norm_rules(cfg)

    def norm(u):

        url, _ = try_normalize(u, rules=rules) if u else (None, None)
        return (url, host_key_or_none(url)) if url else (None, None)

    norm_udf = F.udf(norm, "struct<url:string,host:string>")
    sitemaps = (read(spark, cfg, "robots").select(F.explode("sitemaps").alias("u"))
                .select(norm_udf("u").alias("n"), F.lit("sitemap").alias("kind")))
    feeds = (read(spark, cfg, "links").where("kind = 'feed'")
             .select(norm_udf("dst_url").alias("n"), F.lit("feed").alias("kind")))
    new = (sitemaps.unionByName(feeds)
           .select(F.col("n.url").alias("source_url"), F.col("n.host").alias("host"), "kind")
           .where("source_url IS NOT NULL AND host IS NOT NULL")
           .dropDuplicates(["source_url"]))
    known = read(spark, cfg, "signal_sources").select("source_url")
    new = new.join(known, "source_url", "left_anti")
    if new.limit(1).count():
        merge_into(spark, cfg, "signal_sources", new, "t.source_url = s.source_url",
                   Insert({"source_url": "s.source_url", "host": "s.host", "kind": "s.kind"}),
                   portable=True)


def _index_captures(spark, warc_dir: str, fetch_rows: list[dict], s3) -> None:
    """The reads' captures stay in warc/<round>/signals/ with their own CDXJ index (replay
    finds them); files of an earlier, unfinished attempt that no read of this run wrote are
    removed (a finished run reads nothing when re-run, so it never gets here)."""
    written = sorted({f["warc_file"] for f in fetch_rows if f.get("warc_file")})
    names = {f.rsplit("/", 1)[-1] for f in written}
    for f in fs_list(spark, warc_dir):
        name = f.rsplit("/", 1)[-1]
        if name != INDEX_NAME and name not in names:
            fs_delete(spark, f)
    if written:
        write_index(warc_dir, written, Storage(s3))

"""The crawldb table's owner: every write to crawldb is one of the functions here.

Nutch's CrawlDb idea: several steps produce crawldb changes (inject's seeds, updatedb's round,
the schedule, PageRank's scores), but one module turns them into commits, so a change to how a
row moves is made and reviewed in one place. The rules themselves (transitions, the change
rule, the history window, a new row's values) are recrawl/rules/crawldb_rules.py; this module writes
them into MERGEs. The jobs build the source DataFrames and call these.

Each write is idempotent for a re-run of its round: a row remembers the round that updated it
(`last_round`, `scheduled_round`) and inserts take only absent URLs.
"""

from __future__ import annotations

import datetime as dt

from recrawl.config import Config
from recrawl.rules.crawldb_rules import (
    SUCCESS,
    TRANSIENT,
    ChangeColumns,
    append_history_sql,
    meaningful_change_sql,
    new_url_values_sql,
    next_status_sql,
    sql_list,
)
from recrawl.rules.schedules import RetryIntervals, next_fetch_after_sql
from recrawl.rules.signal_trust import http_date_sql
from recrawl.rules.traps import blocked_sql
from recrawl.rules.units import SECONDS_PER_DAY
from recrawl.store.arrowtables import arrow_batches, overwrite_arrow, row_count
from recrawl.store.rewrite import files, rewrite_merge
from recrawl.store.tables import (
    Insert,
    InsertAll,
    Update,
    local_rows_supported,
    merge_into,
    overwrite,
    read,
    session_conf,
    sql_str,
    update_where,
)


def _ts(t: dt.datetime) -> str:
    return f"timestamp'{t.isoformat(sep=' ')}'"


def _after(now_sql: str, seconds: str | int) -> str:
    return f"{now_sql} + make_interval(0, 0, 0, 0, 0, 0, {seconds})"


def insert_new(spark, cfg: Config, rows) -> None:
    """Add URLs absent from crawldb (inject's seeds: rows already in crawldb's columns)."""
    merge_into(spark, cfg, "crawldb", rows, "t.url = s.url", InsertAll())


def round_updates(cfg: Config, round_id: str, now: dt.datetime) -> dict[str, str]:
    """The SET clause of a fetched URL's row: status, retries, validators, payload pointers,
    change detection and history, the next fetch time (the schedule step refines it for
    successes). `s` is the round's fetch joined with its parse and dedup verdicts."""
    u, sch = cfg.section("updatedb"), cfg.section("schedule")
    now_sql = _ts(now)
    transient = sql_list(TRANSIENT)
    success = f"s.fetch_status IN ({sql_list(SUCCESS)})"
    # A meaningful change: new text differs beyond the trivial SimHash distance and the payload
    # differs. NULL when the URL was not successfully fetched or had no previous capture.
    changed = meaningful_change_sql(ChangeColumns(
        status="s.fetch_status", new_digest="s.payload_digest", old_digest="t.payload_digest",
        new_hash="s.content_hash", old_hash="t.content_hash", new_simhash="s.simhash",
        old_simhash="t.simhash",
        # a previous capture: crawldb holds its payload digest or text hash
        has_previous="t.payload_digest IS NOT NULL OR t.content_hash IS NOT NULL",
        new_extractor="s.text_extractor", old_extractor="t.text_extractor",
    ), int(u["trivial_change_distance"]))
    interval_d = (f"(unix_timestamp({now_sql}) - unix_timestamp(t.last_fetch_time)) "
                  f"/ {float(SECONDS_PER_DAY)}")
    history = f"""CASE WHEN ({changed}) IS NOT NULL AND t.last_fetch_time IS NOT NULL
      THEN {append_history_sql("t.change_history", interval_d, f"({changed})")}
      ELSE t.change_history END"""
    # recrawl.rules.schedules owns when a fetch's outcome brings the URL back
    wait_s = next_fetch_after_sql("s.fetch_status", "t.fetch_interval_s",
                                  RetryIntervals.from_section(u),
                                  float(sch["default_interval_days"]))
    next_fetch = _after(now_sql, wait_s)
    fetched = "s.fetch_status = 'fetched'"
    new_payload = f"{fetched} AND s.warc_type = 'response'"
    lm = lm_updates(now_sql, success, interval_d)
    return {
        "status": next_status_sql(int(u["max_retries"])),
        "retries": f"CASE WHEN {success} THEN 0 WHEN s.fetch_status IN ({transient}) "
                   "THEN coalesce(t.retries, 0) + 1 ELSE t.retries END",
        "fetch_count": f"coalesce(t.fetch_count, 0) + CASE WHEN {success} THEN 1 ELSE 0 END",
        "last_fetch_time": f"CASE WHEN {success} THEN {now_sql} ELSE t.last_fetch_time END",
        "http_status": "coalesce(s.http_status, t.http_status)",
        "etag": f"CASE WHEN {fetched} THEN s.etag ELSE coalesce(s.etag, t.etag) END",
        "last_modified": f"CASE WHEN {fetched} THEN s.last_modified "
                         "ELSE coalesce(s.last_modified, t.last_modified) END",
        "payload_digest": f"CASE WHEN {fetched} THEN s.payload_digest ELSE t.payload_digest END",
        # The record holding the payload, which later revisits refer to: a new `response`;
        # after a revisit (or a fetch that stored nothing new) the original stays.
        "payload_record_id": f"CASE WHEN {new_payload} THEN s.warc_record_id "
                             "ELSE t.payload_record_id END",
        "payload_warc_date": f"CASE WHEN {new_payload} THEN s.warc_date "
                             "ELSE t.payload_warc_date END",
        "payload_target_uri": f"CASE WHEN {new_payload} THEN s.warc_target_uri "
                              "ELSE t.payload_target_uri END",
        "content_hash": f"CASE WHEN {fetched} AND s.content_hash IS NOT NULL "
                        "THEN s.content_hash ELSE t.content_hash END",
        "simhash": f"CASE WHEN {fetched} AND s.simhash IS NOT NULL THEN s.simhash "
                   "ELSE t.simhash END",
        # the extractor of the text content_hash was made of (the change rule's comparison)
        "text_extractor": f"CASE WHEN {fetched} AND s.content_hash IS NOT NULL "
                          "THEN s.text_extractor ELSE t.text_extractor END",
        "last_changed": changed,
        "change_count": f"coalesce(t.change_count, 0) + "
                        f"CASE WHEN coalesce(({changed}), false) THEN 1 ELSE 0 END",
        "change_history": history,
        "last_change_time": f"CASE WHEN coalesce(({changed}), false) OR "
                            f"({fetched} AND t.last_change_time IS NULL) THEN {now_sql} "
                            "ELSE t.last_change_time END",
        "redirect_to": "CASE WHEN s.fetch_status = 'redirect' THEN s.final_url "
                       "ELSE t.redirect_to END",
        "next_fetch_time": next_fetch,
        **lm,
        # An identical payload (a `revisit`, not parsed again) would break the parser again:
        # it counts as one more failure, or a static poison page would never be parked.
        "parse_failures": f"CASE WHEN {fetched} AND s.parse_error IS NOT NULL "
                          "THEN coalesce(t.parse_failures, 0) + 1 "
                          f"WHEN {fetched} AND s.parsed IS NULL "
                          "AND coalesce(t.parse_failures, 0) > 0 THEN t.parse_failures + 1 "
                          f"WHEN {fetched} THEN 0 ELSE t.parse_failures END",
        "generated_round": "NULL",
        "generated_at": "NULL",
        "last_round": sql_str(round_id),
    }


def lm_updates(now_sql: str, success: str, interval_d: str) -> dict[str, str]:
    """The last-modified estimator's counts after a fetch (recrawl.rules.changerate.lm_rate):
    exposure = days known free of changes, changes = the changes Last-Modified dates.
    The first fetch says "a change at L, none since", like a revisit that finds Last-Modified
    moved: a change and the copy's age (now - L). (Counted as no change, as it once was, it
    biased every estimate low by about one change in (changes + 1): a page changing weekly,
    seen three times in two weeks, was estimated at half its rate. Under a Poisson process
    the time since the last change is exponential with the page's rate, so the first date is
    as much evidence as any later one; a page never changed since it was created gets one
    change over its whole life, a slight overestimate of a rate near zero.) A revisit that
    finds Last-Modified unchanged (or a 304) adds the interval; one that finds it moved adds
    a change and the time since the new date -- and, when a change signal sent the fetch, the
    interval up to the round before (the signal was not there then, so neither was the
    change: without it, chasing signals would count every change and almost no exposure)."""
    new, old = http_date_sql("s.last_modified"), http_date_sql("t.last_modified")
    age = (f"greatest(0.0, (unix_timestamp({now_sql}) - unix_timestamp({new})) "
           f"/ {float(SECONDS_PER_DAY)})")
    first = "t.last_fetch_time IS NULL"
    moved = f"s.fetch_status = 'fetched' AND {new} > {old}"
    chased = f"CASE WHEN s.reason = 'signal' THEN greatest(0.0, {interval_d} - 1.0) ELSE 0.0 END"
    exposure = f"""CASE
      WHEN NOT ({success}) THEN t.lm_exposure_d
      WHEN {first} THEN CASE WHEN {new} IS NOT NULL THEN {age} END
      WHEN t.lm_exposure_d IS NULL THEN t.lm_exposure_d
      WHEN s.fetch_status = 'not_modified' THEN t.lm_exposure_d + {interval_d}
      WHEN {new} IS NULL OR {old} IS NULL THEN t.lm_exposure_d
      WHEN {moved} THEN t.lm_exposure_d + {age} + {chased}
      ELSE t.lm_exposure_d + greatest(0.0, {interval_d}) END"""
    changes = f"""CASE
      WHEN NOT ({success}) THEN t.lm_changes
      WHEN {first} THEN CASE WHEN {new} IS NOT NULL THEN 1.0 END
      WHEN t.lm_exposure_d IS NOT NULL AND {moved} THEN coalesce(t.lm_changes, 0.0) + 1.0
      ELSE t.lm_changes END"""
    return {"lm_exposure_d": exposure, "lm_changes": changes}


def apply_round(spark, cfg: Config, source, round_id: str, now: dt.datetime,
                rows: int | None = None) -> None:
    """updatedb's one MERGE: the round's fetch results, stored duplicates, depth updates and
    new URLs (outlinks, redirect targets, sitemaps).

    `source` has one row per URL: the fetch columns (fetch_status NULL when the URL was not
    fetched), `stored_dup` (a stored page that lost to a new copy in dedup) and the link
    columns `link_depth`, `link_host`, `inlink_est` (NULL when nothing links to it). The
    fetched URLs are spread over every crawldb file, so any MERGE they take part in rewrites
    the whole table (copy-on-write): all of these share that one rewrite (docs/scale.md,
    "fewer rewrites per round"). With `rows` (the round's fetched URLs) at least as many as
    crawldb's files that rewrite is one pass over the table (recrawl.store.rewrite) rather than
    a MERGE's two joins; a smaller round is MERGEd.
    """
    now_sql = _ts(now)
    rid = sql_str(round_id)
    better_depth = "s.link_depth IS NOT NULL AND (t.depth IS NULL OR s.link_depth < t.depth)"
    depth = f"CASE WHEN {better_depth} THEN s.link_depth ELSE t.depth END"
    stored_dup = "coalesce(s.stored_dup, false) AND t.status = 'fetched'"
    default_days = float(cfg.get("schedule.default_interval_days"))
    # The MERGE's update projection (the joined crawldb and source rows, ~60 fields, the change
    # rule inlined several times) is more than one Java method can hold: whole-stage code
    # generation spent seconds compiling it, failed with "Code grows beyond 64 KB", logged the
    # stack trace and fell back, every round. Operators this wide now skip whole-stage codegen
    # (each expression is still compiled, in split methods); the narrower stages that build
    # the source keep it.
    clauses = (
        Update({**round_updates(cfg, round_id, now), "depth": depth},
               when=f"s.fetch_status IS NOT NULL AND (t.last_round IS NULL OR t.last_round != {rid})"),
        Update({"status": f"CASE WHEN {stored_dup} THEN 'duplicate' ELSE t.status END",
                "depth": depth},
               when=f"s.fetch_status IS NULL AND (({stored_dup}) OR ({better_depth}))"),
        Insert({"url": "s.url", "host": "s.link_host", "depth": "s.link_depth",
                "discovered_at": now_sql, "next_fetch_time": now_sql,
                "inlink_score": "s.inlink_est", **new_url_values_sql(default_days)},
               when="s.link_depth IS NOT NULL"),
    )
    with session_conf(spark, {"spark.sql.codegen.maxFields": "40"}):
        _round_write(spark, cfg, source, rows, *clauses)


def park_poison(spark, cfg: Config, now: dt.datetime) -> None:
    """Pages that keep breaking the parser are parked (a poison page must not fail every
    round) until updatedb.retry_gone_interval_days. Few rows match: only the files holding them
    are rewritten."""
    max_pf = int(cfg.get("parse.max_parse_failures"))
    # parked like an unusable fetch (recrawl.rules.schedules: gone_days)
    retry_s = int(RetryIntervals.from_section(cfg.section("updatedb")).gone_days * SECONDS_PER_DAY)
    update_where(spark, cfg, "crawldb", f"parse_failures >= {max_pf} AND status = 'fetched'",
                 {"status": "'failed'", "next_fetch_time": _after(_ts(now), retry_s)})


def mark_traps(spark, cfg: Config, trap_hosts) -> None:
    """Unfetched URLs of trap hosts (`trap_hosts`: a `host` column) become `trap`: never
    generated."""
    merge_into(spark, cfg, "crawldb", trap_hosts,
               f"t.host = s.host AND {blocked_sql('true', 't.status')}",
               Update({"status": "'trap'"}))


def set_schedule(spark, cfg: Config, plan, round_id: str, rows: int | None = None) -> None:
    """The schedule step's result (`plan`: url, change_rate, fetch_interval_s,
    next_fetch_time), once per round: a row already scheduled by this round keeps its values,
    so a re-run cannot schedule it twice; one atomic commit, which fails if crawldb changed
    meanwhile. A plan of `rows` at least as many as crawldb's files rewrites the table in one
    pass (recrawl.store.rewrite), a smaller one is MERGEd."""
    rid = sql_str(round_id)
    update = Update({"change_rate": "s.change_rate", "fetch_interval_s": "s.fetch_interval_s",
                     "next_fetch_time": "s.next_fetch_time", "scheduled_round": rid},
                    when=f"t.scheduled_round IS NULL OR t.scheduled_round != {rid}")
    _round_write(spark, cfg, plan, rows, update)


def _round_write(spark, cfg: Config, source, rows: int | None, *clauses) -> None:
    """A round's write keyed by url: one pass over crawldb (recrawl.store.rewrite) when its
    `rows` are at least crawldb's file count (they touch nearly every file), else a MERGE,
    which rewrites only the files it touches."""
    if rows is not None and rows >= files(spark, cfg, "crawldb"):
        rewrite_merge(spark, cfg, "crawldb", source, "url", *clauses)
    else:
        merge_into(spark, cfg, "crawldb", source, "t.url = s.url", *clauses)


def set_rates(spark, cfg: Config, rates) -> None:
    """Re-estimated change rates (`rates`: url, change_rate) of pages the round did not fetch
    (spark_jobs.schedule: pages followed by their host's trusted signals); nothing else moves."""
    merge_into(spark, cfg, "crawldb", rates, "t.url = s.url",
               Update({"change_rate": "s.change_rate"}))


def set_signals(spark, cfg: Config, entries, now: dt.datetime) -> int:
    """The signals step's reading (`entries`: url, host, kind, signal_time, signal_precision_s;
    one row per listing, a URL possibly listed by several sources): each URL's newest date is
    kept (a stored date in the future gives way to any other: it said nothing), listed URLs
    crawldb lacks are added as unfetched at depth 0 (a site's own list of its pages, as
    updatedb adds a sitemap's). Only rows whose signal moved are written. Returns their number."""
    from pyspark.sql import functions as F  # lazy: pyspark

    tol = float(cfg.get("signals.future_tolerance_days"))
    future_at = _after(_ts(now), int(tol * SECONDS_PER_DAY))
    newest = entries.groupBy("url").agg(
        F.first("host").alias("host"), F.max("signal_time").alias("signal_time"),
        F.max_by("signal_precision_s", "signal_time").alias("signal_precision_s"),
        F.coalesce(F.max_by("kind", "signal_time"), F.first("kind")).alias("signal_kind"),
    )
    db = read(spark, cfg, "crawldb").select(
        "url", F.col("signal_time").alias("old_time"),
        F.col("signal_precision_s").alias("old_precision"))
    moved = (
        newest.join(db, "url", "left")
        .withColumn("keep_old", F.expr(f"old_time IS NOT NULL AND old_time <= {future_at} AND "
                                       "(signal_time IS NULL OR old_time > signal_time)"))
        .where("NOT keep_old AND NOT (old_time <=> signal_time "
               "AND old_precision <=> signal_precision_s)")
        .drop("keep_old", "old_time", "old_precision")
        .cache()
    )
    n = moved.count()
    if n:
        default_days = float(cfg.get("schedule.default_interval_days"))
        now_sql = _ts(now)
        sig = {"signal_time": "s.signal_time", "signal_precision_s": "s.signal_precision_s",
               "signal_kind": "s.signal_kind", "signal_read_at": now_sql}
        merge_into(spark, cfg, "crawldb", moved, "t.url = s.url", Update(sig),
                   Insert({"url": "s.url", "host": "s.host", "depth": "0",
                           "discovered_at": now_sql, "next_fetch_time": now_sql,
                           **new_url_values_sql(default_days), **sig}))
    moved.unpersist()
    return n


def set_scores(spark, cfg: Config, scores, in_driver_rows: int = 0) -> None:
    """PageRank's `score` and the in-link estimate `inlink_score` (`scores`: url, pagerank,
    inlink_score, a DataFrame or an Arrow table); URLs absent from crawldb are not added, rows
    not ranked keep theirs.

    Scores held in the driver (Arrow) rewrite a crawldb of at most `in_driver_rows` rows in the
    driver too (`_set_scores_in_driver`); otherwise Spark joins and writes.

    A PageRank run moves almost every rank, so every crawldb file changes whatever the write:
    the table is rewritten in one pass (crawldb left-joined with the scores) instead of
    MERGEd, which finds the files it touches (all of them) by one join and rewrites them by a
    second: at 1M URLs 21 s against 45-56 s (docs/scale.md, "PageRank in the driver"). Still
    one atomic commit, and one that fails, as the MERGE did, if crawldb changed meanwhile
    (Delta's overwrite reads the whole table)."""
    from pyspark.sql import functions as F  # lazy: pyspark

    if not hasattr(scores, "sparkSession"):  # an Arrow table
        if in_driver_rows > 0 and local_rows_supported(cfg) and \
                row_count(spark, cfg, "crawldb") <= in_driver_rows:
            _set_scores_in_driver(spark, cfg, scores)
            return
        scores = spark.createDataFrame(scores)
    db = read(spark, cfg, "crawldb")
    ranked = scores.select("url", F.col("pagerank").alias("_score"),
                           F.col("inlink_score").alias("_inlink"), F.lit(True).alias("_ranked"))
    joined = db.join(ranked, "url", "left")
    hit = F.coalesce(F.col("_ranked"), F.lit(False))
    overwrite(joined.withColumn("score", F.when(hit, F.col("_score")).otherwise(F.col("score")))
              .withColumn("inlink_score", F.when(hit, F.col("_inlink"))
                          .otherwise(F.col("inlink_score")))
              .select(*db.columns), cfg, "crawldb")


def _set_scores_in_driver(spark, cfg: Config, scores) -> None:
    """`set_scores` as Arrow compute on crawldb read from its files (delta-rs), written back
    by delta-rs in one overwrite: at 1M URLs ~12 s where Spark's join and write took 21 s
    (docs/scale.md, "PageRank in the driver"). crawldb streams through a batch at a time
    (`arrow_batches`: the driver holds the scores, crawldb's URLs and one batch, not the
    table; each row's score found by one lookup over all URLs). The crawl
    lock keeps other writers out between the read and the commit."""
    import pyarrow as pa  # lazy: heavy
    import pyarrow.compute as pc  # lazy: heavy

    new_values = {"score": scores["pagerank"].combine_chunks(),
                  "inlink_score": scores["inlink_score"].combine_chunks()}
    db = arrow_batches(spark, cfg, "crawldb", rows=500_000,
                       find=("url", scores["url"].combine_chunks()))

    def scored(batch):
        at = batch["_found"]
        hit = pc.is_valid(at)
        for col, values in new_values.items():
            i = batch.schema.get_field_index(col)
            new = pc.take(values, at).cast(batch.schema.field(col).type)
            batch = batch.set_column(i, col, pc.if_else(hit, new, batch[col]))
        return batch.drop_columns(["_found"])

    schema = db.schema.remove(db.schema.get_field_index("_found"))
    overwrite_arrow(spark, cfg, "crawldb", pa.RecordBatchReader.from_batches(schema, map(scored, db)))

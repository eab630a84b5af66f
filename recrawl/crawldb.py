"""The crawldb table's owner: every write to crawldb is one of the functions here.

Nutch's CrawlDb idea: several steps produce crawldb changes (inject's seeds, updatedb's round,
the schedule, PageRank's scores), but one module turns them into commits, so a change to how a
row moves is made and reviewed in one place. The rules themselves (transitions, the change
rule, the history window, a new row's values) are recrawl/crawldb_rules.py; this module writes
them into MERGEs. The jobs build the source DataFrames and call these.

Each write is idempotent for a re-run of its round: a row remembers the round that updated it
(`last_round`, `scheduled_round`) and inserts take only absent URLs.
"""

from __future__ import annotations

import datetime as dt

from recrawl.config import Config
from recrawl.crawldb_rules import (
    SUCCESS,
    TRANSIENT,
    UNFETCHABLE,
    ChangeColumns,
    append_history_sql,
    meaningful_change_sql,
    new_url_values_sql,
    next_status_sql,
    sql_list,
)
from recrawl.spark import session_conf
from recrawl.tables import Insert, InsertAll, Update, merge_into, sql_str, update_where

DAY = 86400


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
    ), int(sch["trivial_change_distance"]))
    interval_d = f"(unix_timestamp({now_sql}) - unix_timestamp(t.last_fetch_time)) / {float(DAY)}"
    history = f"""CASE WHEN ({changed}) IS NOT NULL AND t.last_fetch_time IS NOT NULL
      THEN {append_history_sql("t.change_history", interval_d, f"({changed})")}
      ELSE t.change_history END"""
    interval_s = f"coalesce(t.fetch_interval_s, {int(sch['default_interval_days'] * DAY)})"
    next_fetch = f"""CASE
      WHEN {success} OR s.fetch_status = 'redirect' THEN {_after(now_sql, interval_s)}
      WHEN s.fetch_status IN ('gone', {sql_list(UNFETCHABLE)})
        THEN {_after(now_sql, int(u['retry_gone_interval_days'] * DAY))}
      WHEN s.fetch_status IN ({transient})
        THEN {_after(now_sql, int(u['retry_interval_days'] * DAY))}
      WHEN s.fetch_status = 'robots_denied'
        THEN {_after(now_sql, int(u['retry_denied_interval_days'] * DAY))}
      ELSE {now_sql} END"""
    fetched = "s.fetch_status = 'fetched'"
    new_payload = f"{fetched} AND s.warc_type = 'response'"
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


def apply_round(spark, cfg: Config, source, round_id: str, now: dt.datetime) -> None:
    """updatedb's one MERGE: the round's fetch results, stored duplicates, depth updates and
    new URLs (outlinks, redirect targets, sitemaps).

    `source` has one row per URL: the fetch columns (fetch_status NULL when the URL was not
    fetched), `stored_dup` (a stored page that lost to a new copy in dedup) and the link
    columns `link_depth`, `link_host`, `inlink_est` (NULL when nothing links to it). The
    fetched URLs are spread over every crawldb file, so any MERGE they take part in rewrites
    the whole table (copy-on-write): all of these share that one rewrite (docs/scale.md,
    "fewer rewrites per round").
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
    with session_conf(spark, {"spark.sql.codegen.maxFields": "40"}):
        merge_into(
            spark, cfg, "crawldb", source, "t.url = s.url",
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


def park_poison(spark, cfg: Config, now: dt.datetime) -> None:
    """Pages that keep breaking the parser are parked (a poison page must not fail every
    round) until updatedb.retry_gone_interval_days. Few rows match: only the files holding them
    are rewritten."""
    max_pf = int(cfg.get("parse.max_parse_failures"))
    retry_s = int(float(cfg.get("updatedb.retry_gone_interval_days")) * DAY)
    update_where(spark, cfg, "crawldb", f"parse_failures >= {max_pf} AND status = 'fetched'",
                 {"status": "'failed'", "next_fetch_time": _after(_ts(now), retry_s)})


def mark_traps(spark, cfg: Config, trap_hosts) -> None:
    """Unfetched URLs of trap hosts (`trap_hosts`: a `host` column) become `trap`: never
    generated."""
    merge_into(spark, cfg, "crawldb", trap_hosts, "t.host = s.host AND t.status = 'unfetched'",
               Update({"status": "'trap'"}))


def set_schedule(spark, cfg: Config, plan, round_id: str) -> None:
    """The schedule step's result (`plan`: url, change_rate, fetch_interval_s,
    next_fetch_time), once per round: re-checked at commit time, so a concurrent re-run cannot
    schedule a row twice."""
    rid = sql_str(round_id)
    merge_into(spark, cfg, "crawldb", plan, "t.url = s.url", Update(
        {"change_rate": "s.change_rate", "fetch_interval_s": "s.fetch_interval_s",
         "next_fetch_time": "s.next_fetch_time", "scheduled_round": rid},
        when=f"t.scheduled_round IS NULL OR t.scheduled_round != {rid}",
    ))


def set_scores(spark, cfg: Config, scores) -> None:
    """PageRank's `score` and the in-link estimate `inlink_score` (`scores`: url, pagerank,
    inlink_score); URLs absent from crawldb are not added."""
    merge_into(spark, cfg, "crawldb", scores, "t.url = s.url",
               Update({"score": "s.pagerank", "inlink_score": "s.inlink_score"}))

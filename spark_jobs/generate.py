"""generate: pick the URLs due at the round's logical time into a host-partitioned fetch list.

Nutch's Generator in DataFrame form: due URLs (next_fetch_time <= logical date + the due
lookahead, not out in a round that updatedb has not applied yet), best priority first, at most `max_per_host` per host
and `top_n` in all, hosts in back-off skipped, trap hosts limited to pages already known good.
Generation marks are the open rounds' `fetch_list` rows (`live_marks`), so a second generate
before updatedb cannot hand a URL out again, and generate writes nothing into crawldb: a mark
column there cost a rewrite of every crawldb file per round (docs/scale.md). A re-run of
generate for the same round replaces its own fetch list (idempotent).

Partitioning: every URL of a host lands in one fetch partition, and hosts are packed into
partitions by expected fetch time (URLs x delay, longest first into the least loaded
partition), because a fetch task lasts as long as its slowest host queue, not its URL count.
"""

from __future__ import annotations

import datetime as dt
import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass

from recrawl.config import Config, ConfigError
from recrawl.rules.crawldb_rules import eligible_sql, is_due_sql, may_fetch_sql, per_host_cap_sql
from recrawl.rules.politeness import host_delay_sql
from recrawl.rules.schedules import change_probability_sql, discovery_slots, revisit_budget
from recrawl.rules.units import SECONDS_PER_DAY
from recrawl.sparkenv.joblabels import stage
from spark_jobs import chases
from spark_jobs.common import with_trust_oracle
from spark_jobs.schedule import frontier_and_held
from spark_jobs.topk import top_rows


def priority_sql(mode: str, as_of: str, damping: float, staleness_cap: float) -> str:
    """SQL for a due URL's priority at the logical time `as_of` (a timestamp literal).

    pagerank: importance x staleness. Importance is the page's PageRank; a URL not ranked yet
    gets what its known in-links would pass on, damping x sum(rank / out-degree) (the
    `inlink_score` kept by pagerank and updatedb), on the same scale without the small uniform
    term. Staleness is 1 + (time overdue / fetch interval), capped: of two equally important
    pages the one further past its due date goes first, but staleness cannot outweigh a
    PageRank more than `staleness_cap` times larger.
    bfs (scores missing or stale): shallower first, 1 / (1 + depth).
    """
    if mode == "bfs":
        return "1.0 / (1.0 + coalesce(depth, 0))"
    importance = importance_sql(mode, damping)
    overdue = f"greatest(0.0, unix_timestamp({as_of}) - unix_timestamp(next_fetch_time))"
    interval = f"greatest(coalesce(fetch_interval_s, {SECONDS_PER_DAY}), 1)"
    staleness = f"least({float(staleness_cap)!r}, 1.0 + {overdue} / {interval})"
    return f"{importance} * {staleness}"


def importance_sql(mode: str, damping: float) -> str:
    """A page's importance: its PageRank, or for a page not ranked yet what its known in-links
    pass on (`priority_sql`); uniform (1) without fresh scores."""
    if mode == "bfs":
        return "1.0"
    return f"coalesce(score, {damping!r} * inlink_score, 0.0)"


def pack_hosts(loads: Iterable[tuple[str, float]], partitions: int) -> dict[str, int]:
    """Longest-processing-time-first packing of hosts into partitions by expected time."""
    heap = [(0.0, p) for p in range(max(1, partitions))]
    heapq.heapify(heap)
    out: dict[str, int] = {}
    for host, load in sorted(loads, key=lambda x: (-x[1], x[0])):
        total, p = heapq.heappop(heap)
        out[host] = p
        heapq.heappush(heap, (total + load, p))
    return out


@dataclass(frozen=True)
class Clocks:
    """The round's times: its logical time, the due horizon (plus the lookahead), the wall clock
    (back-off and marks are real time) and the wall time before which marks have expired."""

    logical: dt.datetime
    due_by: dt.datetime
    wall: dt.datetime
    mark_expiry: dt.datetime


@dataclass
class Candidates:
    """Stage 1's output: the URLs not handed out by an open round, with their host's verdicts,
    and the rules the later stages select by (Spark Columns over `known`)."""

    known: object  # DataFrame: crawldb rows + hosts + robots + delay
    cols: object  # DataFrame: eligible rows ranked within their host's cap, fetch-list columns
    is_due: object
    deferred: object
    may_fetch: object
    cap: object
    mode: str
    signal_counts: dict[str, int]
    signal_first: bool  # signals are on: `cols` holds the signalled changes first


@dataclass
class Selection:
    """Stage 2's output: the chosen rows, per host (count, delay), and the cached parts."""

    selected: object
    per_host: dict[str, tuple[int, float]]
    parts: list
    reserve: int = 0
    signal_first: int = 0
    filled: int = 0


def run(spark, cfg: Config, round_id: str, logical: dt.datetime) -> dict[str, int]:
    """Generate the round's fetch list in four stages: the candidates (`_candidates`), the
    budget rule (`_select`), the fill with pages not due yet (`_fill`), and the host
    partitioning and write (`_write`). Returns the step's counts."""
    from recrawl.store.tables import naive_utc, read  # lazy: pyspark (via recrawl.store.tables)

    g = cfg.section("generate")
    lookahead = float(g["due_lookahead_days"])
    if not 0.0 <= lookahead < 1.0:
        raise ConfigError(f"generate.due_lookahead_days must be within [0, 1), got {lookahead!r}")
    discovery_slots(1, float(g["discovery_share"]), 1)  # validates the share before Spark work
    min_change = float(g["fill_min_change_probability"])
    if not 0.0 <= min_change <= 1.0:
        raise ConfigError("generate.fill_min_change_probability must be within [0, 1], "
                          f"got {min_change!r}")
    now = naive_utc(logical)
    wall = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    # Marks expire by the wall clock (Nutch's crawl.gen.delay): a round generated minutes ago
    # holds its URLs whatever its logical date, so a backfill of a month-old day and today's
    # round never hand out the same URLs while both are open.
    clocks = Clocks(now, now + dt.timedelta(days=lookahead), wall,
                    wall - dt.timedelta(days=g["mark_expiry_days"]))
    db = read(spark, cfg, "crawldb")
    signal_requests = chases.signal_requests(spark, cfg, round_id)
    stage(spark, "selecting due URLs from crawldb")
    cands = _candidates(spark, cfg, db, round_id, clocks, signal_requests)
    sel = _select(cfg, db, cands)
    _fill(spark, cfg, cands, sel, clocks)
    stage(spark, "writing the fetch list")
    assignment, worst = _write(spark, cfg, round_id, sel)
    skipped = _skipped(cands, clocks)
    for part in sel.parts:
        part.unpersist()
    return {
        "generated": sum(n for n, _ in sel.per_host.values()),
        "hosts": len(assignment),
        "partitions": len(set(assignment.values())),
        "skipped_backoff": skipped[0],
        "skipped_crawl_delay": skipped[1],
        "discovery_reserved": sel.reserve,
        "filled_not_due": sel.filled,
        "signal_first": sel.signal_first,
        **cands.signal_counts,
        "priority_pagerank": 1 if cands.mode == "pagerank" else 0,
        "priority_bfs": 1 if cands.mode == "bfs" else 0,
        "max_partition_expected_s": math.ceil(worst),
    }


def _candidates(spark, cfg: Config, db, round_id: str, clocks: Clocks,
                signal_requests: int) -> Candidates:
    """Stage 1: every URL an open round does not hold, joined to its host's verdicts and
    delay; the eligible ones (recrawl.rules.crawldb_rules.eligible_sql) ranked within their host's
    cap, signalled changes (`spark_jobs.chases.signal_marks`) first, then the discovery reserve of the host's
    cap, then priority."""
    from pyspark.sql import Window  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    from recrawl.store.tables import read, ts_lit  # lazy: pyspark (via recrawl.store.tables)

    g, f = cfg.section("generate"), cfg.section("fetcher")
    hosts = read(spark, cfg, "hosts").select(
        "host", "backoff_until", F.coalesce("trap", F.lit(False)).alias("trap"),
        F.coalesce("signal_trusted", F.lit(False)).alias("signal_trusted"),
        F.coalesce("signal_defer", F.lit(False)).alias("signal_defer"), "signals_read_at",
    )
    hosts = with_trust_oracle(spark, cfg, hosts)
    robots = read(spark, cfg, "robots").select("host", "crawl_delay")
    known = (
        db.where(F.col("generated_round").isNull()
                 | (F.col("generated_at") < F.lit(clocks.mark_expiry)))
        .join(hosts, "host", "left")
        .join(robots, "host", "left")
    )
    out = live_marks(spark, cfg, round_id, clocks.mark_expiry)
    if out is not None:
        known = known.join(out, "url", "left_anti")
    # Rounds come at a fixed period, planned intervals do not: a URL due before this round
    # plus the lookahead (half a daily period by default) is served now rather than a whole
    # round late, so intervals round to the nearest round, not always up.
    is_due = F.expr(is_due_sql(ts_lit(clocks.due_by)))
    # recrawl.rules.politeness: NULL for a host whose Crawl-delay exceeds the cap (the fetcher defers
    # it, so slots given to it would only come back retry_later).
    known = known.withColumn("delay", F.expr(host_delay_sql(
        "crawl_delay", float(f["min_delay_s"]), float(f["max_crawl_delay_s"]))))
    # recrawl.rules.crawldb_rules.may_fetch: no back-off, not a new URL of a trap host, a delay
    # within the cap; is_eligible adds due-ness and the signals' deferral.
    may_fetch = F.expr(may_fetch_sql(ts_lit(clocks.wall)))
    mode = _scores_mode(spark, cfg, clocks.logical)
    damping = float(cfg.get("pagerank.damping"))
    priority = F.expr(priority_sql(
        mode, ts_lit(clocks.logical), damping, float(g["staleness_cap"])))
    # Change signals (recrawl/rules/signal_trust.py): signalled changes first, fresh-by-signal
    # URLs of hosts whose recall is proven deferred (up to signals.defer_max_days).
    known, first, deferred_expr, sig_counts = chases.signal_marks(
        cfg, known, clocks.logical, F.expr(importance_sql(mode, damping)), ~may_fetch,
        is_due, signal_requests)
    candidates = known.where(F.expr(eligible_sql(
        ts_lit(clocks.due_by), ts_lit(clocks.wall), deferred=deferred_expr))).withColumn(
        "signal_first", F.lit(False))
    if first is not None:
        candidates = candidates.join(F.broadcast(first.select("url")), "url", "left_anti")
    cap = F.expr(per_host_cap_sql(float(f["time_budget_s"]), "delay", int(g["max_per_host"])))
    # Discovery share (recrawl.rules.schedules.discovery_slots): inside each host's cap, the first
    # ceil(share x cap) never-fetched URLs go before the host's revisits, so a host whose
    # revisits could fill its cap still discovers.
    share = float(g["discovery_share"])
    new_url = F.col("status") == "unfetched"
    w_kind = Window.partitionBy("host", new_url).orderBy(
        F.col("priority").desc(), F.col("depth").asc_nulls_last(), F.col("url")
    )
    reserved = new_url & (F.col("kind_rank") <= F.ceil(F.col("cap") * F.lit(share) - 1e-9))
    w = Window.partitionBy("host").orderBy(
        F.col("signal_first").desc(), F.col("reserved").desc(), F.col("priority").desc(),
        F.col("depth").asc_nulls_last(), F.col("url"),
    )
    scored = candidates.withColumn("priority", priority)
    if first is not None:  # a signalled change's priority: importance x the freshness it buys
        scored = scored.unionByName(first.withColumn("signal_first", F.lit(True)))
    ranked = (
        scored
        .withColumn("cap", cap)
        .withColumn("kind_rank", F.row_number().over(w_kind))
        .withColumn("reserved", reserved)
        .withColumn("host_rank", F.row_number().over(w))
        .where(F.col("host_rank") <= F.col("cap"))
    )
    reason = (F.when(F.col("signal_first"), F.lit("signal"))
              .when(new_url, F.lit("new")).otherwise(F.lit("due")))
    cols = ranked.select("url", "host", "priority", "etag", "last_modified", "depth",
                         "payload_digest", "last_fetch_time", "payload_record_id",
                         "payload_warc_date", "payload_target_uri", "delay", "host_rank",
                         reason.alias("reason"), new_url.alias("is_new"), "signal_first")
    return Candidates(known, cols, is_due, F.expr(f"coalesce({deferred_expr}, false)"),
                      may_fetch, cap, mode, sig_counts, first is not None)


def _select(cfg: Config, db, cands: Candidates) -> Selection:
    """Stage 2, the budget rule: the discovery share of the whole round, ceil(share x top_n) of
    the best never-fetched URLs while the frontier holds any, then signalled changes (best by
    importance x gain when they exceed what is left), then every candidate by priority. The
    share is taken out of the whole round, not of what signals leave: on a web whose hosts
    are all trusted the signalled changes alone could fill the round and stop discovery.
    One top-k pass per kind; the frontier's size is not counted first (a pass of its own):
    the reserve pass returns at most what the frontier holds."""
    from pyspark.sql import functions as F  # lazy: pyspark

    g = cfg.section("generate")
    share = float(g["discovery_share"])
    cols = cands.cols
    order = [F.col("priority").desc(), F.col("host_rank"), F.col("url")]
    # The signals step's requests count in the round's budget.
    top_n = max(0, int(g["top_n"]) - cands.signal_counts["signal_requests"])
    in_memory_max = int(g["top_n_in_memory"])
    reserve, top_new = discovery_slots(top_n, share, top_n), None
    if reserve:
        top_new = top_rows(cols.where("is_new AND NOT signal_first"), reserve, order, in_memory_max)
        reserve = top_new.count()
    top_sig, n_sig = None, 0
    if cands.signal_first and top_n - reserve > 0:
        # Signalled changes are revisits: while the frontier holds URLs they take no more than
        # the held pages' share of the known ones (recrawl.rules.schedules.revisit_budget,
        # without schedule.min_revisit_share's floor), so that on a web whose hosts are all
        # trusted the chases do not hold discovery at its reserve for weeks, and at a small
        # budget they do not take half of every round while most pages are unfetched
        # (docs/freshness.md, "A tenth of the budget").
        frontier, held = frontier_and_held(db)
        sig_cap = int(math.floor(revisit_budget(top_n, share, frontier, held, 0.0) + 1e-9))
        top_sig = top_rows(cols.where("signal_first"), min(top_n - reserve, sig_cap), order,
                       in_memory_max)
        n_sig = top_sig.count()
    rest = cols.where("NOT signal_first")
    if reserve:
        rest = rest.join(top_new.select("url"), "url", "left_anti")
    top_rest = top_rows(rest, top_n - reserve - n_sig, order, in_memory_max)
    top, parts = top_rest, [top_rest]
    for part in (top_new, top_sig):
        if part is not None:
            top = part.unionByName(top)
            parts.append(part)
    selected = top.drop("host_rank", "is_new", "signal_first")
    per_host = {
        r["host"]: (r["n"], r["delay"])
        for r in selected.groupBy("host").agg(F.count("*").alias("n"), F.max("delay").alias("delay"))
        .collect()
    }
    return Selection(selected, per_host, parts, reserve, n_sig)


def _fill(spark, cfg: Config, cands: Candidates, sel: Selection, clocks: Clocks) -> None:
    """Stage 3: fewer due URLs than the round may fetch (its budget: top_n, and no more than a
    day's fetch budget, rounds being daily): fill it with pages not due yet, best gain first
    (recrawl.rules.schedules, "filling the round"), within each host's remaining cap. Pages fresh
    by a trusted signal are not fetched early: a round may under-spend."""
    from pyspark.sql import Window  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    from recrawl.store.tables import ts_lit  # lazy: pyspark (via recrawl.store.tables)

    g = cfg.section("generate")
    room = (min(int(g["top_n"]), int(cfg.get("schedule.daily_budget")))
            - cands.signal_counts["signal_requests"] - sum(n for n, _ in sel.per_host.values()))
    if not g["fill_budget"] or room <= 0:
        return
    taken = spark.createDataFrame([(h, n) for h, (n, _) in sel.per_host.items()] or [("", 0)],
                                  "host string, taken long")
    p_change = F.expr(change_probability_sql(
        "change_rate", "last_fetch_time", ts_lit(clocks.logical),
        float(cfg.get("schedule.prior_mean"))))
    importance = F.expr(importance_sql(cands.mode, float(cfg.get("pagerank.damping"))))
    w_fill = Window.partitionBy("host").orderBy(F.col("priority").desc(), F.col("url"))
    order = [F.col("priority").desc(), F.col("host_rank"), F.col("url")]
    fill = (
        # fetched is a due status, so "not due" is the next fetch time past the lookahead
        cands.known.where((F.col("status") == "fetched") & ~cands.is_due & ~cands.deferred
                          & cands.may_fetch)
        .join(F.broadcast(sel.selected.select("url")), "url", "left_anti")
        .where(p_change >= F.lit(float(g["fill_min_change_probability"])))
        .withColumn("priority", importance * p_change)
        .withColumn("reason", F.lit("fill"))
        .withColumn("cap", cands.cap)
        .join(F.broadcast(taken), "host", "left")
        .withColumn("host_rank", F.row_number().over(w_fill))
        .where(F.col("host_rank") <= F.col("cap") - F.coalesce("taken", F.lit(0)))
        .select(*sel.selected.columns, "host_rank")
    )
    top_fill = top_rows(fill, room, order, int(g["top_n_in_memory"]))
    sel.parts.append(top_fill)
    sel.filled = top_fill.count()
    if sel.filled:
        fill_rows = top_fill.drop("host_rank")
        for r in fill_rows.groupBy("host").agg(
                F.count("*").alias("n"), F.max("delay").alias("delay")).collect():
            n0, d0 = sel.per_host.get(r["host"], (0, 0.0))
            sel.per_host[r["host"]] = (n0 + r["n"], max(d0, r["delay"]))
        sel.selected = sel.selected.unionByName(fill_rows)


def _write(spark, cfg: Config, round_id: str, sel: Selection) -> tuple[dict[str, int], float]:
    """Stage 4: hosts packed into partitions by expected fetch time (`pack_hosts`), the fetch
    list written for the round. Returns (host -> partition, the longest partition's expected
    seconds). What was written is known without reading it back: the selected parts are
    cached and disjoint (new, due, not-due fill), and every selected host has its partition."""
    from pyspark.sql import functions as F  # lazy: pyspark

    from recrawl.store.tables import replace_round  # lazy: pyspark (via recrawl.store.tables)

    loads = [(h, n * d) for h, (n, d) in sel.per_host.items()]
    assignment = pack_hosts(loads, int(cfg.get("generate.partitions")))
    amap = spark.createDataFrame(list(assignment.items()) or [("", 0)], "host string, partition int")
    fetch_list = (sel.selected.join(F.broadcast(amap), "host")
                  .withColumn("round_id", F.lit(round_id)))
    replace_round(fetch_list, cfg, "fetch_list", round_id)
    return assignment, max((load for _, load in loads), default=0.0)


def _skipped(cands: Candidates, clocks: Clocks) -> tuple[int, int]:
    """(due URLs skipped for their host's back-off, for a Crawl-delay above the cap). Back-off
    comes from the servers' real Retry-After / failures: compared with the wall clock."""
    from pyspark.sql import functions as F  # lazy: pyspark

    in_backoff = F.col("backoff_until").isNotNull() & (F.col("backoff_until") > F.lit(clocks.wall))
    due = cands.known.where(cands.is_due & ~cands.deferred)
    row = due.agg(
        F.sum(F.when(in_backoff, 1).otherwise(0)).alias("backoff"),
        F.sum(F.when(~in_backoff & F.col("delay").isNull(), 1).otherwise(0)).alias("delay"),
    ).first()
    return int(row["backoff"] or 0), int(row["delay"] or 0)


def open_rounds(rounds: Iterable[tuple[str, dt.datetime | None, list[str] | None]], current: str,
                expiry: dt.datetime) -> list[str]:
    """Rounds whose fetch lists are still out: generated, not yet applied by updatedb, started
    (wall clock, `rounds.started_at`) after the mark expiry (Nutch's crawl.gen.delay), other
    than the round being generated."""
    return sorted(
        rid for rid, started, steps in rounds
        if rid != current and "generate" in (steps or []) and "updatedb" not in (steps or [])
        and started is not None and started >= expiry
    )


def live_marks(spark, cfg: Config, round_id: str, expiry: dt.datetime):
    """URLs handed out by a round that updatedb has not applied yet (None when there are none).

    The generation marks live in `fetch_list` + `rounds`, not in crawldb: writing a mark into
    crawldb was a MERGE of the whole round, which rewrote every crawldb file (docs/scale.md).
    """
    from recrawl.store.tables import (  # lazy: pyspark (via recrawl.store.tables)
        all_rows,
        local_rows_supported,
        naive_utc,
        read,
        sql_str,
    )

    if local_rows_supported(cfg):  # one small table: delta-rs reads it without a Spark job
        rows = [(r["round_id"], r["started_at"], r["steps_done"])
                for r in all_rows(cfg, "rounds", ["round_id", "started_at", "steps_done"])]
    else:
        # epoch seconds, not the timestamp: collect() would convert it to the driver's local zone
        rows = [(r[0], None if r[1] is None else dt.datetime.fromtimestamp(r[1], dt.UTC), r[2])
                for r in read(spark, cfg, "rounds").selectExpr(
                    "round_id", "CAST(started_at AS DOUBLE)", "steps_done").collect()]
    ids = open_rounds(((rid, None if started is None else naive_utc(started), steps)
                       for rid, started, steps in rows), round_id, expiry)
    if not ids:
        return None
    return (
        read(spark, cfg, "fetch_list")
        .where(f"round_id IN ({', '.join(sql_str(i) for i in ids)})")
        .select("url").distinct()
    )


def _scores_mode(spark, cfg: Config, now: dt.datetime) -> str:
    """"pagerank" priorities when scores exist and are recent enough, else "bfs"."""
    from pyspark.sql import functions as F  # lazy: pyspark

    from recrawl.store.tables import read  # lazy: pyspark (via recrawl.store.tables)

    latest = read(spark, cfg, "scores").agg(F.max("computed_at")).first()[0]
    max_age = dt.timedelta(days=cfg.get("generate.max_score_age_days"))
    if latest is None or latest < now - max_age:
        return "bfs"
    return "pagerank"

"""dedup: exact and near-duplicate detection of the round's pages against everything stored.

Candidates are this round's parsed pages plus the latest fingerprint of every other fetched URL
in crawldb, so a new page is compared with the whole store, not only with its own round.
  * exact: same main-text hash; one survivor per group by the configured order
    (recrawl.survivor, Nutch's compareOrder), the others are duplicates (distance 0);
  * near: 64-bit SimHash within `dedup.max_distance`, found with the pigeonhole block join
    (`near_duplicate_pairs_df`); one page per exact group (its survivor) takes part, so an
    exact duplicate is never also reported as a near one ("exact beats near").
A page is a near duplicate of the best-ranked page it is close to, if that page outranks it.
Chains are not collapsed (as in Nutch): if A is close to B and B to C but A not to C, A points
at B. A stored page outranked by a new copy is reported too (it is "found duplicate" in this
round), though updatedb only marks the round's own fetches.
A host whose new pages are mostly duplicates is flagged as a trap.
Output: the round's partition of `duplicates` (replaced on re-run); updatedb marks them.

Cost: when the round is small (`dedup.broadcast_new_pages`), every join against the crawldb is
a broadcast of the round's side, so the store is scanned but never shuffled; only buckets that
hold a new page reach the self-join.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from recrawl.config import Config
from recrawl.hostdb import flag_traps


@dataclass(frozen=True)
class NearDupJoin:
    """The lazy result of `near_duplicate_pairs_df`.

    pairs  - DataFrame[u1, u2, distance, (<carry>_1, <carry>_2)...]: u1 < u2, each pair once.
    rows   - the block-key rows that reached the join: one per (url, table) whose bucket has
             a second member and a new page; columns url, simhash, is_new, tbl, key, size,
             capped and the carried columns. Persist it when you call several actions.
    """

    pairs: object
    rows: object

    @property
    def capped_buckets(self):
        """DataFrame[tbl, key, size, new_members] of the buckets over the cap."""
        from pyspark.sql import functions as F

        return self.rows.where("capped").groupBy("tbl", "key").agg(
            F.first("size").alias("size"),
            F.sum(F.col("is_new").cast("int")).alias("new_members"),
        )

    @property
    def capped_pages(self):
        """DataFrame[url, is_new, capped_tables]: pages left out of at least one table."""
        from pyspark.sql import functions as F

        return self.rows.where("capped").groupBy("url", "is_new").agg(
            F.count("*").alias("capped_tables")
        )


def block_keys_column(k: int, layout: str):
    """array<struct<tbl:int,key:bigint>> of `simhash`: recrawl.fingerprint.block_keys in SQL."""
    from pyspark.sql import functions as F

    from recrawl.fingerprint import table_masks

    return F.array(
        *[
            F.struct(F.lit(t).alias("tbl"), F.col("simhash").bitwiseAND(F.lit(m)).alias("key"))
            for t, m in enumerate(table_masks(layout, k))
        ]
    )


def first_uncapped_table_sql(k: int, layout: str, xor: str, cmask: str) -> str:
    """SQL: the lowest table in which two fingerprints share an uncapped bucket (else NULL).

    `xor` is a.simhash ^ b.simhash; `cmask` has bit t set when the pair's table-t bucket is
    over the cap (the bucket is the same for both pages when they share table t). A pair is
    kept only from that table: recrawl.fingerprint.first_shared_table, minus capped tables,
    in place of a distinct() over all emitted pairs.
    """
    from recrawl.fingerprint import table_masks

    whens = " ".join(
        f"WHEN ({xor} & {m}L) = 0 AND ({cmask} & {1 << t}L) = 0 THEN {t}"
        for t, m in enumerate(table_masks(layout, k))
    )
    return f"CASE {whens} END"


def near_duplicate_pairs_df(
    df,
    k: int = 3,
    layout: str = "6c3",
    max_bucket: int = 1000,
    *,
    carry: Sequence[str] = (),
    prune: bool = False,
) -> NearDupJoin:
    """All pairs within Hamming distance `k` that involve at least one new page.

    Args:
        df: DataFrame[url, simhash (long, NULL = no text), is_new (boolean), *carry], one row
            per url. Pairs of two stored pages (is_new false) are never formed: they were
            compared in their own rounds.
        k, layout: distance and block layout (recrawl.fingerprint.parse_layout).
        max_bucket: buckets (table, key) with more members than this are not self-joined in
            that table. Such a bucket is a boilerplate cluster (with 6c3, 1000 pages sharing
            ~32 bits by chance needs billions of pages) and joining it costs C(n, 2). Its
            pages are still compared through every other table where their buckets are
            small: a close pair is lost only when every table it shares is capped (one table
            for a pair whose differences fall in three blocks, up to 20 for identical ones).
            Salting would spread the C(n, 2) comparisons over tasks, not remove them, so we
            cap and report: `NearDupJoin.capped_buckets` / `capped_pages`.
        carry: columns copied to the output as <col>_1 / <col>_2 (of u1 / u2), so the caller
            needs no join back to the (large) input.
        prune: first keep only the block keys of buckets that hold a new page, through a
            broadcast of the new pages' keys. Use it when the new pages are few and the
            stored ones many (a crawl round): the stored keys are then filtered map-side and
            never shuffled. Leave it off when most pages are new.

    Returns:
        NearDupJoin (lazy DataFrames; nothing is computed here).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from recrawl.fingerprint import parse_layout

    if parse_layout(layout, k).n_tables > 63:  # cmask is one bigint
        raise ValueError(f"layout {layout!r} has more than 63 tables")
    keys = (
        df.where(F.col("simhash").isNotNull())
        .select("url", "simhash", "is_new", *carry,
                F.explode(block_keys_column(k, layout)).alias("tk"))
        .select("url", "simhash", "is_new", *carry, "tk.tbl", "tk.key")
    )
    if prune:
        probe = keys.where("is_new").select("tbl", "key")
        keys = keys.join(F.broadcast(probe), ["tbl", "key"], "left_semi")
    bucket = Window.partitionBy("tbl", "key")
    rows = (
        keys.withColumn("size", F.count(F.lit(1)).over(bucket))
        .withColumn("n_new", F.sum(F.col("is_new").cast("int")).over(bucket))
        .where("size >= 2 AND n_new >= 1")
        .drop("n_new")
        .withColumn("capped", F.col("size") > F.lit(int(max_bucket)))
    )
    live = rows.where("NOT capped")
    a = live.where("is_new").alias("a")
    b = live.alias("b")
    a_first = F.col("a.url") < F.col("b.url")
    cols = [
        F.least("a.url", "b.url").alias("u1"),
        F.greatest("a.url", "b.url").alias("u2"),
        F.col("distance"),
    ]
    for c in carry:
        cols.append(F.when(a_first, F.col(f"a.{c}")).otherwise(F.col(f"b.{c}")).alias(f"{c}_1"))
        cols.append(F.when(a_first, F.col(f"b.{c}")).otherwise(F.col(f"a.{c}")).alias(f"{c}_2"))
    # Every close pair, once per uncapped table it shares (a pair of identical fingerprints
    # shares all of them).
    emitted = (
        a.join(
            b,
            (F.col("a.tbl") == F.col("b.tbl"))
            & (F.col("a.key") == F.col("b.key"))
            & (F.col("a.url") != F.col("b.url"))
            # new x stored once, new x new once (from its lower url)
            & (~F.col("b.is_new") | a_first),
        )
        .withColumn("distance", F.expr("bit_count(a.simhash ^ b.simhash)"))
        .where(F.col("distance") <= int(k))
    )
    # cmask: the tables in which the new page's bucket is capped, from the (usually empty)
    # capped rows; in a table both pages share, the bucket and so its bit is the same for both.
    # Adaptive execution broadcasts it at run time when small: no shuffle of the pairs.
    cmask = (
        rows.where("capped").groupBy(F.col("url").alias("cm_url"))
        .agg(F.sum(F.expr("shiftleft(1L, tbl)")).alias("cmask"))
    )
    first = first_uncapped_table_sql(
        k, layout, "(a.simhash ^ b.simhash)", "coalesce(cmask, 0L)"
    )
    pairs = (
        emitted.join(cmask, F.col("a.url") == F.col("cm_url"), "left")
        .where(F.col("a.tbl") == F.expr(first))
        .select(*cols)
    )
    return NearDupJoin(pairs=pairs, rows=rows)


def rank_key_column(order):
    """A struct that sorts ascending in survivor order: smaller wins (recrawl.survivor).

    Built from `spark_order_columns`, one (is_null, value) field per criterion with the value
    negated for descending ones, so that nulls lose in both directions as in the Python key;
    the URL ends it, which makes it a total order. Criteria columns must be numeric (times as
    epoch micros). Comparing two such structs orients a pair without a global sort.
    """
    from pyspark.sql import functions as F

    from recrawl.survivor import spark_order_columns

    fields = []
    for i, (expr, desc) in enumerate(spark_order_columns(order)):
        if expr == "url":
            fields.append(F.col("url").alias("url"))
            continue
        v = F.expr(expr)
        fields.append(
            F.struct(
                v.isNull().alias("missing"),
                F.coalesce(-v if desc else v, F.lit(0)).alias("v"),
            ).alias(f"c{i}")
        )
    return F.struct(*fields)


def run(spark, cfg: Config, round_id: str, logical: dt.datetime) -> dict[str, int]:
    """Find the round's duplicates and replace its partition of `duplicates`.

    Counts: new_pages, exact, near, near_pairs (pairs within distance), capped_buckets (over
    `dedup.max_bucket`, not joined in their table), capped_pages (new pages in at least one
    of them), trap_hosts.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from recrawl.tables import read, replace_round, sql_str
    from spark_jobs.common import ts_lit

    d = cfg.section("dedup")
    k, layout, cap = int(d["max_distance"]), d["layout"], int(d["max_bucket"])
    rid = sql_str(round_id)
    db = read(spark, cfg, "crawldb")
    new = (
        read(spark, cfg, "pages").where(f"round_id = {rid} AND parse_error IS NULL")
        .where("content_hash IS NOT NULL AND text_len > 0")
        .select("url", "content_hash", "simhash").dropDuplicates(["url"])
        .withColumn("is_new", F.lit(True))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    new_pages = new.count()
    small = new_pages <= int(d["broadcast_new_pages"])

    def side(df):  # the round's side of a join with the whole store
        return F.broadcast(df) if small else df

    # Meta for the survivor order. fetch_time: the logical date for this round's pages (what
    # updatedb writes), so a re-run after updatedb ranks the same; first_seen falls back to it.
    def with_meta(df, fetch_ts):
        t = F.coalesce(F.col("discovered_at"), fetch_ts)
        return df.select(
            "url", "host", "content_hash", "simhash", "is_new",
            F.coalesce("score", "inlink_score", F.lit(0.0)).alias("score"),
            F.unix_micros(t).alias("first_seen"),
            F.unix_micros(fetch_ts).alias("fetch_time"),
        )

    meta_cols = ["url", "host", "score", "inlink_score", "discovered_at"]
    new_meta = db.select(*meta_cols).join(side(new.select("url")), "url", "left_semi")
    # The round's side, materialized (small): later plans start from it, not from its lineage.
    new_c = with_meta(new.join(new_meta, "url", "left"), F.expr(ts_lit(logical))).localCheckpoint()
    stored = (
        db.where("status = 'fetched' AND content_hash IS NOT NULL")
        .join(side(new.select("url")), "url", "left_anti")
        .withColumn("is_new", F.lit(False))
    )
    stored_c = with_meta(stored, F.col("last_fetch_time"))
    rank_key = rank_key_column(d["survivor_order"])
    cands = new_c.unionByName(stored_c).withColumn("rank_key", rank_key)

    # Exact: groups by text hash that contain at least one page of this round.
    touched = new.select("content_hash").distinct()
    grouped = cands.join(side(touched), "content_hash", "left_semi")
    survivors = grouped.groupBy("content_hash").agg(F.min("rank_key").alias("best"))
    exact = (
        grouped.join(survivors, "content_hash")
        .where(F.col("url") != F.col("best.url"))
        .select("url", F.col("best.url").alias("canonical_url"),
                F.lit("exact").alias("kind"), F.lit(0).alias("distance"))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )

    # Near: everything but the exact duplicates (each exact group joins with its survivor).
    near_in = cands.join(side(exact.select("url")), "url", "left_anti").select(
        "url", "simhash", "is_new", "rank_key"
    )
    nd = near_duplicate_pairs_df(near_in, k, layout, cap, carry=("rank_key",), prune=small)
    nd.rows.persist(StorageLevel.MEMORY_AND_DISK)
    pairs = nd.pairs.persist(StorageLevel.MEMORY_AND_DISK)
    # Orient: the page with the larger key loses; keep its best-ranked neighbour.
    oriented = pairs.select(
        F.when(F.col("rank_key_1") < F.col("rank_key_2"), F.col("u2")).otherwise(F.col("u1"))
        .alias("url"),
        F.struct(
            F.least("rank_key_1", "rank_key_2").alias("key"),
            F.when(F.col("rank_key_1") < F.col("rank_key_2"), F.col("u1"))
            .otherwise(F.col("u2")).alias("canonical_url"),
            F.col("distance"),
        ).alias("c"),
    )
    near = oriented.groupBy("url").agg(F.min("c").alias("c")).select(
        "url", "c.canonical_url", F.lit("near").alias("kind"),
        F.col("c.distance").cast("int").alias("distance"),
    )
    # Materialized: the write and the counts below then plan over a small scan, not the joins.
    dups = exact.unionByName(near).withColumn("round_id", F.lit(round_id)).localCheckpoint()
    replace_round(dups, cfg, "duplicates", round_id)
    by_kind = dups.groupBy("kind").agg(F.count("*").alias("n")).collect()
    counts = {r["kind"]: r["n"] for r in by_kind}
    near_pairs = pairs.count()
    capped = nd.rows.where("capped").agg(
        F.count_distinct("tbl", "key").alias("buckets"),
        F.count_distinct(F.when(F.col("is_new"), F.col("url"))).alias("pages"),
    ).first()

    # Trap: a host whose new pages are mostly duplicates (a near-duplicate flood).
    frac = float(d["trap_near_dup_fraction"])
    per_host = (
        new_c.select("url", "host")
        .join(dups.select("url", F.lit(1).alias("dup")), "url", "left")
        .groupBy("host").agg(F.count("*").alias("n"), F.sum(F.coalesce("dup", F.lit(0))).alias("d"))
        .where((F.col("n") >= 10) & (F.col("d") >= F.col("n") * frac))
        .select("host", F.lit(True).alias("trap"),
                F.lit("near-duplicate flood").alias("trap_reason"))
    )
    trap_rows = per_host.collect()
    flagged = {r["host"] for r in read(spark, cfg, "hosts").where("trap").select("host").collect()}
    to_flag = [r for r in trap_rows if r["host"] not in flagged]  # a re-run commits nothing
    if to_flag:
        flag_traps(spark, cfg, spark.createDataFrame(to_flag, per_host.schema))
    for df in (new, exact, nd.rows, pairs):
        df.unpersist()
    return {
        "new_pages": new_pages,
        "exact": counts.get("exact", 0),
        "near": counts.get("near", 0),
        "near_pairs": near_pairs,
        "capped_buckets": int(capped["buckets"]),
        "capped_pages": int(capped["pages"]),
        "trap_hosts": len(trap_rows),
    }

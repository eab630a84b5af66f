"""The near-duplicate join over Spark DataFrames: every pair of 64-bit SimHash fingerprints
within Hamming distance k, found with the pigeonhole block tables of recrawl.content.fingerprint.

recrawl.content.fingerprint owns the per-record logic (the layouts, `table_masks`, `block_keys`,
`first_shared_table`) and a pure-Python reference (`near_duplicate_pairs`); this module is
the same join as DataFrame operations: explode each fingerprint's block keys, self-join the
buckets (capped at `max_bucket` members), keep each pair once from the first table it shares.
The dedup job (spark_jobs/dedup.py) runs it on a round's pages against the stored ones;
benchmarks/dedup_bench.py times it.

Functions take and return DataFrames and never create a session. pyspark is imported inside
each function, as elsewhere in the core: core modules are imported on paths that must not load
pyspark (`crawler sql` on the fast path, `crawler report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recrawl.content.fingerprint import parse_layout, table_masks


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
        from pyspark.sql import functions as F  # lazy: pyspark

        return self.rows.where("capped").groupBy("tbl", "key").agg(
            F.first("size").alias("size"),
            F.sum(F.col("is_new").cast("int")).alias("new_members"),
        )

    @property
    def capped_pages(self):
        """DataFrame[url, is_new, capped_tables]: pages left out of at least one table."""
        from pyspark.sql import functions as F  # lazy: pyspark

        return self.rows.where("capped").groupBy("url", "is_new").agg(
            F.count("*").alias("capped_tables")
        )


def block_keys_column(k: int, layout: str):
    """array<struct<tbl:int,key:bigint>> of `simhash`: recrawl.content.fingerprint.block_keys in SQL."""
    from pyspark.sql import functions as F  # lazy: pyspark

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
    kept only from that table: recrawl.content.fingerprint.first_shared_table, minus capped tables,
    in place of a distinct() over all emitted pairs.
    """
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
        k, layout: distance and block layout (recrawl.content.fingerprint.parse_layout).
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
    from pyspark.sql import Window  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

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

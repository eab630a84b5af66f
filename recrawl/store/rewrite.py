"""A MERGE's clauses applied by rewriting the whole table in one pass.

Delta's MERGE (recrawl.store.tables.merge_into) finds the files its source touches by one join
and rewrites them by a second. When the source touches nearly every file, as a round's
fetched URLs do in crawldb (they are spread over all of its files), both joins cover the whole
table, and reading it once -- the table full-outer-joined with the source, each column taken
from the first clause that applies, written back as the table's new version -- does the same
work in one: on the 110k-URL round ~7 s against ~19 s for the schedule's write
(docs/scale.md). It is still one atomic commit, and one that fails, as the MERGE would, if the
table changed meanwhile (Delta's overwrite reads the whole table).

The clauses keep MERGE's meaning: a matched row takes the first `Update` or `Delete` whose
condition holds (NULL is false) and is otherwise kept; a source row without a match is added by
the first `Insert` whose condition holds, else dropped; a table row without a match is kept.
Unlike MERGE, nothing here checks that the source has one row per key: callers pass sources
unique by construction.
"""

from __future__ import annotations

from recrawl.config import Config
from recrawl.store.tables import Clause, Delete, Insert, Update, overwrite, read

__all__ = ["files", "rewrite_merge"]


def files(spark, cfg: Config, name: str) -> int:
    """How many data files the table's current version has (from its log: no data read)."""
    from delta.tables import DeltaTable  # lazy: delta-spark

    return int(DeltaTable.forPath(spark, cfg.table_path(name)).detail().first()["numFiles"])


def rewrite_merge(spark, cfg: Config, name: str, source, key: str, *clauses: Clause) -> None:
    """MERGE `source` (alias `s`) into table `name` (alias `t`) on equal `key` columns by
    rewriting the table in one pass; `clauses` as merge_into's (Update, Delete, Insert)."""
    from pyspark.sql import functions as F  # lazy: pyspark

    if not clauses:
        raise ValueError("rewrite_merge needs at least one clause")
    for c in clauses:
        if not isinstance(c, Update | Delete | Insert):
            raise TypeError(f"rewrite_merge takes Update, Delete and Insert, not {c!r}")
    table = read(spark, cfg, name)
    cols = table.columns
    joined = table.withColumn("_in_t", F.lit(True)).alias("t").join(
        source.withColumn("_in_s", F.lit(True)).alias("s"),
        F.col(f"t.{key}") == F.col(f"s.{key}"), "full")
    matched, only_s = "t._in_t AND s._in_s", "t._in_t IS NULL"
    # Which clause each row takes: its index, or NULL for none.
    picks = []
    for i, c in enumerate(clauses):
        scope = only_s if isinstance(c, Insert) else matched
        cond = f"coalesce(({c.when}), false)" if c.when else "true"
        picks.append(f"WHEN {scope} AND {cond} THEN {i}")
    out = joined.withColumn("_clause", F.expr(f"CASE {' '.join(picks)} END"))
    deletes = [i for i, c in enumerate(clauses) if isinstance(c, Delete)]
    inserts = [i for i, c in enumerate(clauses) if isinstance(c, Insert)]
    keep = "t._in_t IS NOT NULL"
    if deletes:
        keep += f" AND (_clause IS NULL OR _clause NOT IN ({', '.join(map(str, deletes))}))"
    if inserts:
        keep = f"({keep}) OR _clause IN ({', '.join(map(str, inserts))})"
    out = out.where(keep)
    projected = []
    for col in cols:
        cases = []
        for i, c in enumerate(clauses):
            if isinstance(c, Update) and col in c.set:
                cases.append(f"WHEN _clause = {i} THEN {c.set[col]}")
            elif isinstance(c, Insert):
                cases.append(f"WHEN _clause = {i} THEN {c.values.get(col, 'NULL')}")
        expr = f"CASE {' '.join(cases)} ELSE t.`{col}` END" if cases else f"t.`{col}`"
        projected.append(F.expr(expr).alias(col))
    overwrite(out.select(*projected), cfg, name)

"""Creating, registering, reading and atomically publishing the crawl's Delta tables.

Tables live at paths under the crawl home (`<home>/tables/<name>`), so they work the same on a
local disk and on s3a://. For SQL they are registered in the session catalog as `crawl.<name>`
(CREATE TABLE ... LOCATION is idempotent and cheap), which every new session does on start —
no metastore to keep in sync.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from recrawl.config import Config
from recrawl.schemas import TABLES, TableSpec


def sql_str(value: str) -> str:
    """A Spark SQL string literal, quotes and backslashes escaped (the one escaping rule for
    values spliced into Spark SQL; DuckDB's is recrawl.analytics._in)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class SchemaMismatch(RuntimeError):
    """A Delta table's stored schema does not match the declaration in recrawl.schemas."""


def table_exists(spark, path: str) -> bool:
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, path)


def create_table(spark, cfg: Config, spec: TableSpec) -> bool:
    """Create one table if absent; returns True when it was created."""
    from delta.tables import DeltaTable

    path = cfg.table_path(spec.name)
    if table_exists(spark, path):
        add_missing_columns(spark, path, spec)
        return False
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(spec.schema)
    if spec.partition_by:
        builder = builder.partitionedBy(*spec.partition_by)
    # Change data feed lets analysts ask "what changed since yesterday" cheaply.
    builder = builder.property("delta.enableChangeDataFeed", "true")
    if spec.comment:
        builder = builder.comment(spec.comment)
    builder.execute()
    return True


def add_missing_columns(spark, path: str, spec: TableSpec) -> list[str]:
    """Additive migration: columns declared since the table was made are added (NULL for old rows).

    Renames and type changes are never done here; check_schema reports them.
    """
    have = {f.name for f in spark.read.format("delta").load(path).schema.fields}
    missing = [f for f in spec.schema.fields if f.name not in have]
    if missing:
        cols = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
        escaped = path.replace("`", "``")
        spark.sql(f"ALTER TABLE delta.`{escaped}` ADD COLUMNS ({cols})")
    return [f.name for f in missing]


def init_tables(spark, cfg: Config) -> dict[str, bool]:
    """Create every contract table that is missing and register them all; idempotent."""
    created = {name: create_table(spark, cfg, spec) for name, spec in TABLES.items()}
    register_tables(spark, cfg)
    return created


def register_tables(spark, cfg: Config, names: Iterable[str] | None = None) -> list[str]:
    """Register existing tables as `<database>.<name>` in this session's catalog."""
    db = cfg.get("crawl.database")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS `{db}`")
    done = []
    for name in names or TABLES:
        path = cfg.table_path(name)
        if not table_exists(spark, path):
            continue
        spark.sql(f"CREATE TABLE IF NOT EXISTS `{db}`.`{name}` USING DELTA LOCATION {sql_str(path)}")
        done.append(name)
    return done


def read(spark, cfg: Config, name: str):
    """The current version of a table as a DataFrame (raises SchemaMismatch on drift)."""
    df = spark.read.format("delta").load(cfg.table_path(name))
    check_schema(name, df.schema)
    return df


def check_schema(name: str, actual) -> None:
    """Every declared column must exist with the declared type (extra columns are fine)."""
    declared = TABLES[name].schema
    have = {f.name: f.dataType for f in actual.fields}
    problems = []
    for f in declared.fields:
        if f.name not in have:
            problems.append(f"missing column {f.name}")
        elif have[f.name] != f.dataType:
            problems.append(f"{f.name} is {have[f.name].simpleString()}, "
                            f"expected {f.dataType.simpleString()}")
    if problems:
        raise SchemaMismatch(
            f"table {name} does not match the declared schema ({'; '.join(problems)}); "
            "it was written by another version — `crawler init` adds new columns; otherwise migrate it "
            "or point crawl.home elsewhere"
        )


def check_tables(spark, cfg: Config, names: Iterable[str] | None = None) -> None:
    """Before a step writes anything: every table exists and matches its declared schema.

    Raises SchemaMismatch naming the first table that is missing or drifted, and what to do.
    """
    for name in names or TABLES:
        path = cfg.table_path(name)
        if not table_exists(spark, path):
            raise SchemaMismatch(
                f"table {name} not found at {path}: run `crawler init` for this crawl home "
                "(or check crawl.home)"
            )
        check_schema(name, spark.read.format("delta").load(path).schema)


def conform(df, name: str):
    """Select and cast columns into the declared order and types of `name`."""
    from pyspark.sql import functions as F

    cols = []
    present = set(df.columns)
    for f in TABLES[name].schema.fields:
        if f.name in present:
            cols.append(F.col(f.name).cast(f.dataType).alias(f.name))
        else:
            cols.append(F.lit(None).cast(f.dataType).alias(f.name))
    return df.select(*cols)


def replace_round(df, cfg: Config, name: str, round_id: str) -> None:
    """Atomically replace one round's partition: a re-run leaves exactly one copy."""
    (
        conform(df, name)
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", f"round_id = {sql_str(round_id)}")
        .save(cfg.table_path(name))
    )


def overwrite(df, cfg: Config, name: str) -> None:
    conform(df, name).write.format("delta").mode("overwrite").save(cfg.table_path(name))


def with_retry(action, *, attempts: int = 5, what: str = "Delta commit"):
    """Run `action`, retrying Delta's optimistic-concurrency conflicts with back-off.

    Conflicts are reported (re-raised) after the last attempt, never swallowed.
    """
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:  # Delta raises Py4J-wrapped Concurrent*Exception types
            text = f"{type(exc).__name__}: {exc}"
            if "Concurrent" not in text or attempt == attempts:
                raise
            time.sleep(0.5 * 2 ** attempt)
    raise AssertionError(f"unreachable: {what}")

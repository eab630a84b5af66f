"""The table API: creating, registering, reading and writing the crawl's Delta tables.

Tables live at paths under the crawl home (`<home>/tables/<name>`), so they work the same on a
local disk and on s3a://. For SQL they are registered in the session catalog as `crawl.<name>`
(CREATE TABLE ... LOCATION is idempotent and cheap), which every new session does on start —
no metastore to keep in sync.

Every read and write of a table goes through this module (`read`, `replace_round`,
`overwrite`, `merge_into`, `update_where`); it is the only one that touches Delta's API,
with recrawl.store.arrowtables, the whole-table reads and writes of the driver's Arrow.
Which module may write which table is declared once, in `recrawl.store.schemas.TABLES` (`writers`),
and tests/test_table_owners.py holds every call site to it: a table with several writers in
Nutch's sense (crawldb, hosts) has one owner module holding all its MERGEs
(recrawl/store/crawldb.py, recrawl/store/hostdb.py).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from recrawl.config import Config
from recrawl.store.schemas import TABLES, TableSpec


def sql_str(value: str) -> str:
    """A Spark SQL string literal, quotes and backslashes escaped (the one escaping rule for
    values spliced into Spark SQL; DuckDB's is analyst.analytics_sql.sql_in)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def naive_utc(t: dt.datetime) -> dt.datetime:
    """Spark's TimestampType takes naive UTC datetimes (session time zone is UTC)."""
    return t.astimezone(dt.UTC).replace(tzinfo=None) if t.tzinfo else t


def ts_lit(t: dt.datetime) -> str:
    """A Spark SQL timestamp literal for an instant (naive values are taken as UTC); our
    sessions run in UTC (recrawl.sparkenv.spark), so the literal's wall time is the instant."""
    return f"timestamp'{naive_utc(t).isoformat(sep=' ')}'"


class SchemaMismatch(RuntimeError):
    """A Delta table's stored schema does not match the declaration in recrawl.store.schemas."""


def table_exists(spark, path: str) -> bool:
    from delta.tables import DeltaTable  # lazy: delta-spark

    return DeltaTable.isDeltaTable(spark, path)


def create_table(spark, cfg: Config, spec: TableSpec) -> bool:
    """Create one table if absent; returns True when it was created."""
    from delta.tables import DeltaTable  # lazy: delta-spark

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
    have = {f.name for f in read_path(spark, path).schema.fields}
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


def read(spark, cfg: Config, name: str, *, check: bool = True):
    """The current version of a table as a DataFrame (raises SchemaMismatch on drift unless
    `check` is off: `crawler status` lists a drifted table rather than failing)."""
    df = read_path(spark, cfg.table_path(name))
    if check:
        check_schema(name, df.schema)
    return df


def read_path(spark, path: str):
    """A Delta table by location (for tables outside the contract: a snapshot, a test's)."""
    return spark.read.format("delta").load(path)


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
        check_schema(name, read_path(spark, path).schema)


def conform(df, name: str):
    """Select and cast columns into the declared order and types of `name`."""
    from pyspark.sql import functions as F  # lazy: pyspark

    cols = []
    present = set(df.columns)
    for f in TABLES[name].schema.fields:
        if f.name in present:
            cols.append(F.col(f.name).cast(f.dataType).alias(f.name))
        else:
            cols.append(F.lit(None).cast(f.dataType).alias(f.name))
    return df.select(*cols)


def replace_round(df, cfg: Config, name: str, round_id: str) -> None:
    """Atomically replace one round's partition: a re-run leaves exactly one copy.

    A small round's rows (`small_round_rows`) are committed by delta-rs from the driver, the
    rest by Spark's own writer (`replaceWhere`); either way one commit of Delta's files.
    """
    data = conform(df, name)
    arrow = _small_rows(data, cfg)
    if arrow is not None:
        _replace_arrow(cfg, name, "round_id", round_id, arrow)
        return
    (
        data.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", f"round_id = {sql_str(round_id)}")
        .save(cfg.table_path(name))
    )


def append(df, cfg: Config, name: str) -> None:
    """Add rows to a table (one commit; nothing read or rewritten)."""
    conform(df, name).write.format("delta").mode("append").save(cfg.table_path(name))


def overwrite(df, cfg: Config, name: str) -> None:
    """Replace a whole table (one atomic commit; readers see the old or the new version)."""
    conform(df, name).write.format("delta").mode("overwrite").save(cfg.table_path(name))


# --- Reads and commits without Spark (delta-rs) --------------------------------------------
# A Spark commit costs ~0.4-1.3 s of driver time even for one row; delta-rs (the `deltalake`
# package) commits a small change to a local table in ~20-50 ms, and reads a table into the
# driver's Arrow without the JVM. Used for `rounds`, a small round's outputs and portable
# MERGEs, and PageRank's in-driver step (recrawl.store.arrowtables); on a local crawl home
# only (one writer at a time: the crawl lock). Object storage keeps Spark (its credentials
# live in Hadoop's configuration).


def local_rows_supported(cfg: Config) -> bool:
    """Whether `rows_where` / `replace_rows` can serve this crawl home (a local folder)."""
    return cfg.local_home is not None


def small_round_rows(cfg: Config) -> int:
    """Up to how many rows `replace_round` and a portable `merge_into` hand to delta-rs
    (0: always Spark).

    `crawl.small_round_rows`, on a local crawl home, for rounds of at most that many URLs
    (`generate.top_n`): a larger round never collects its output in the driver.
    """
    cap = int(cfg.get("crawl.small_round_rows"))
    if cap <= 0 or not local_rows_supported(cfg) or int(cfg.get("generate.top_n")) > cap:
        return 0
    return cap


def _small_rows(df, cfg: Config):
    """`df`'s rows as an Arrow table when this is a small round on a local home and `df` has
    at most `small_round_rows` of them (at most cap + 1 are collected), else None."""
    cap = small_round_rows(cfg)
    if not cap:
        return None
    arrow = df.limit(cap + 1).toArrow()
    return arrow if arrow.num_rows <= cap else None


def _rebuilt(data):
    """`data` with every array rebuilt (`take`): Spark's record batches give a list column
    whose lists are all empty a string child with an empty offsets buffer (legal Arrow), on
    which delta-rs 1.6's writer panics (seen on `fetches.redirect_chain`)."""
    import pyarrow as pa  # lazy: heavy

    return data.take(pa.array(range(data.num_rows), pa.int64()))


def _checkpoint_like_spark(table) -> None:
    """Spark checkpoints a table every 10 commits (delta-rs by default every 100): keep its
    readers' log replay as short as Spark's own commits would."""
    if table.version() % 10 == 0:
        table.create_checkpoint()


def _rs_table(cfg: Config, name: str):
    if not local_rows_supported(cfg):
        raise ValueError(f"{name}: delta-rs writes are for a local crawl home, not {cfg.home}")
    from deltalake import DeltaTable  # lazy: heavy (delta-rs)

    return DeltaTable(cfg.table_path(name))


def rows_where(cfg: Config, name: str, column: str, value: str) -> list[dict]:
    """The rows of a local table whose `column` equals `value`, as dicts (delta-rs, no JVM)."""
    return _rs_table(cfg, name).to_pyarrow_table(filters=[(column, "=", value)]).to_pylist()


def all_rows(cfg: Config, name: str, columns: list[str]) -> list[dict]:
    """`columns` of every row of a small local table, as dicts (delta-rs, no JVM; timestamps
    aware UTC)."""
    return _rs_table(cfg, name).to_pyarrow_table(columns=columns).to_pylist()












def replace_rows(cfg: Config, name: str, column: str, value: str, rows: list[dict]) -> None:
    """Replace the rows of a local table whose `column` equals `value` by `rows`: one atomic
    commit (delta-rs's overwrite with a predicate), the other rows untouched."""
    if any(r.get(column) != value for r in rows):
        raise ValueError(f"{name}: every row must have {column} = {value!r}")
    _replace_arrow(cfg, name, column, value, rows)


def _replace_arrow(cfg: Config, name: str, column: str, value: str, data) -> None:
    """Replace the rows whose `column` equals `value` by `data`, dicts or an Arrow table
    (columns named as the table's, any order): one delta-rs commit, then Spark's checkpoint
    rhythm."""
    import pyarrow as pa  # lazy: heavy
    from deltalake import write_deltalake  # lazy: heavy (delta-rs)

    table = _rs_table(cfg, name)
    target = pa.schema(table.schema().to_arrow())
    if isinstance(data, list):
        data = pa.Table.from_pylist(data, schema=target)
    data = _rebuilt(data.select(target.names).cast(target))
    # delta-rs's SQL (DataFusion) quotes as the standard does: '' inside, backslash literal
    literal = "'" + value.replace("'", "''") + "'"
    write_deltalake(table, data, mode="overwrite", predicate=f"{column} = {literal}")
    _checkpoint_like_spark(table)


# --- MERGE and UPDATE ---------------------------------------------------------------------
# Clauses of a MERGE, in Delta's order of evaluation: the first matching clause of its kind
# applies. Conditions and values are SQL over the aliases `t` (the table) and `s` (the source).


@dataclass(frozen=True)
class Update:
    set: Mapping[str, str]
    when: str | None = None


@dataclass(frozen=True)
class Insert:
    values: Mapping[str, str]
    when: str | None = None


@dataclass(frozen=True)
class _Conditional:
    """A clause that takes nothing but its optional condition."""

    when: str | None = None


class UpdateAll(_Conditional):
    """WHEN MATCHED: every column from the source."""


class Delete(_Conditional):
    """WHEN MATCHED: delete the table's row."""


class InsertAll(_Conditional):
    """WHEN NOT MATCHED: insert the source row as it is."""


Clause = Update | UpdateAll | Delete | Insert | InsertAll


def merge_into(spark, cfg: Config, name: str, source, on: str, *clauses: Clause,
               portable: bool = False) -> None:
    """MERGE `source` (alias `s`) into table `name` (alias `t`) on `on`, one atomic commit.

    `portable`: `on` and the clauses are SQL that Spark and delta-rs (DataFusion) read alike.
    Then a small round's source (`small_round_rows`) into a local table of at most
    SMALL_TARGET_ROWS rows is merged by delta-rs from the driver, without a Spark job.
    """
    from delta.tables import DeltaTable  # lazy: delta-spark

    if not clauses:
        raise ValueError("merge_into needs at least one clause")
    if portable:
        arrow = _small_rows(source, cfg)
        if arrow is not None and (n := _rs_rows(cfg, name)) is not None \
                and n <= SMALL_TARGET_ROWS:
            _merge_arrow(cfg, name, arrow, on, clauses)
            return
    m = DeltaTable.forPath(spark, cfg.table_path(name)).alias("t").merge(source.alias("s"), on)
    for c in clauses:
        if isinstance(c, Update):
            m = m.whenMatchedUpdate(condition=c.when, set=dict(c.set))
        elif isinstance(c, UpdateAll):
            m = m.whenMatchedUpdateAll(condition=c.when)
        elif isinstance(c, Delete):
            m = m.whenMatchedDelete(condition=c.when)
        elif isinstance(c, Insert):
            m = m.whenNotMatchedInsert(condition=c.when, values=dict(c.values))
        elif isinstance(c, InsertAll):
            m = m.whenNotMatchedInsertAll(condition=c.when)
        else:
            raise TypeError(f"not a MERGE clause: {c!r}")
    m.execute()


# The largest table delta-rs merges into: it rewrites the files a MERGE touches in the
# driver's memory, which is cheap for the per-host tables of a small crawl, not for crawldb.
SMALL_TARGET_ROWS = 1_000_000




def _rs_rows(cfg: Config, name: str) -> int | None:
    """Rows of a local table, from its log's file statistics (no data read); None when a file
    has none, or delta-rs cannot read the table's protocol."""
    import pyarrow as pa  # lazy: heavy
    from deltalake.exceptions import DeltaProtocolError  # lazy: heavy (delta-rs)

    with suppress(DeltaProtocolError):
        files = pa.table(_rs_table(cfg, name).get_add_actions(flatten=True))
        n = files["num_records"] if "num_records" in files.column_names else None
        if not files.num_rows or n is not None and not n.null_count:
            return sum(n.to_pylist()) if files.num_rows else 0
    return None



def _merge_arrow(cfg: Config, name: str, source, on: str, clauses) -> None:
    """`merge_into`'s clauses, in order, as one delta-rs MERGE of the Arrow table `source`."""
    import pyarrow as pa  # lazy: heavy

    table = _rs_table(cfg, name)
    target = pa.schema(table.schema().to_arrow())
    # the table's types for the columns it has (delta-rs refuses a type mismatch)
    cols = [source[c].cast(target.field(c).type) if c in target.names else source[c]
            for c in source.column_names]
    source = _rebuilt(pa.table(cols, names=source.column_names))
    m = table.merge(source, predicate=on, source_alias="s", target_alias="t")
    for c in clauses:
        if isinstance(c, Update):
            m = m.when_matched_update(updates=dict(c.set), predicate=c.when)
        elif isinstance(c, UpdateAll):
            m = m.when_matched_update_all(predicate=c.when)
        elif isinstance(c, Delete):
            m = m.when_matched_delete(predicate=c.when)
        elif isinstance(c, Insert):
            m = m.when_not_matched_insert(updates=dict(c.values), predicate=c.when)
        elif isinstance(c, InsertAll):
            m = m.when_not_matched_insert_all(predicate=c.when)
        else:
            raise TypeError(f"not a MERGE clause: {c!r}")
    m.execute()
    _checkpoint_like_spark(table)


def update_where(spark, cfg: Config, name: str, condition: str, set: Mapping[str, str]) -> None:
    """UPDATE rows of `name` matching `condition` (SQL over its columns); only the files that
    hold such rows are rewritten."""
    from delta.tables import DeltaTable  # lazy: delta-spark

    DeltaTable.forPath(spark, cfg.table_path(name)).update(condition, dict(set))


def delta_table(spark, cfg: Config, name: str):
    """Delta's handle on a table, for housekeeping (OPTIMIZE, VACUUM: spark_jobs/maintenance)."""
    from delta.tables import DeltaTable  # lazy: delta-spark

    return DeltaTable.forPath(spark, cfg.table_path(name))


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


@contextmanager
def session_conf(spark, settings: Mapping[str, str]) -> Iterator[None]:
    """Spark SQL settings for the body only; the previous values (or unset) afterwards."""
    saved = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


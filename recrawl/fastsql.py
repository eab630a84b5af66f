"""The SQL fast path: the crawl's Delta tables in DuckDB, read with delta-rs, no JVM.

`crawler sql` on Spark costs a JVM start (5-20 s) before the first row; an analyst's "how many
404s per host" should take a second. Here each table's current snapshot is opened with the
`deltalake` package (delta-rs: it reads the protocol our Spark tables use — reader version 1,
writer features invariants / appendOnly / changeDataFeed), exposed to DuckDB as an Arrow
dataset (scanned lazily, columns and filters pushed down) and wrapped in a view `crawl.<table>`,
so the same SQL text runs on both engines for ordinary SELECTs.

What the fast path does to stay answer-compatible with Spark (checked by
tests/recrawl/test_fastsql.py):
  * session time zone UTC and timestamps exposed as plain TIMESTAMP (UTC wall time), as Spark
    with `spark.sql.session.timeZone=UTC` shows them;
  * NULLs sort first ascending and last descending (Spark's default, not DuckDB's);
  * the same printers (`recrawl.sqlshell.emit`) for table / csv / json output.

What it does not do — and why `crawler sql --engine auto` sends such queries to Spark: Delta
time travel (`VERSION AS OF`), the change data feed (`table_changes`), writes and DDL, Spark-only
functions and syntax (backticks, `explode`, `size`...). Tables on object storage are read with
delta-rs's own S3 client configured from the standard AWS_* environment variables (best effort;
`auto` uses it for local crawl homes only).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from recrawl.config import Config

# The contract tables (recrawl.schemas.TABLES) named without importing pyspark: on object
# storage there is no cheap listing, so these are the names probed there.
CONTRACT_TABLES = (
    "crawldb", "fetch_list", "fetches", "pages", "links", "duplicates", "robots", "hosts",
    "scores", "rounds",
)

_SPARK_ONLY = re.compile(
    r"\b(?:VERSION|TIMESTAMP)\s+AS\s+OF\b|\btable_changes\s*\(|`|\bdelta\s*\.|@v\d+",
    re.IGNORECASE,
)
_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)


class FastPathError(RuntimeError):
    """The fast path cannot answer (missing package, unreadable table, DuckDB rejected the SQL)."""


def is_local_home(cfg: Config) -> bool:
    home = cfg.home
    return "://" not in home or home.startswith("file://")


def fast_path_reason(cfg: Config, query: str) -> str | None:
    """Why `--engine auto` should not use DuckDB for `query` (None when it may)."""
    if not is_local_home(cfg):
        return f"crawl home {cfg.home} is not a local folder"
    text = _COMMENTS.sub(" ", query).strip().lstrip("(").lstrip()
    first = text.split(None, 1)[0].upper() if text else ""
    if first not in ("SELECT", "WITH"):
        return "not a plain SELECT"
    if ";" in text.rstrip().rstrip(";"):
        return "more than one statement"
    m = _SPARK_ONLY.search(text)
    if m:
        return f"uses Spark/Delta-only syntax ({m.group(0).strip()})"
    return None


def _storage_options(location: str) -> dict[str, str] | None:
    """delta-rs options for object storage, from the usual AWS_* environment (None locally)."""
    if "://" not in location or location.startswith("file://"):
        return None
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
            "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AWS_S3_ALLOW_UNSAFE_RENAME")
    opts = {k: os.environ[k] for k in keys if os.environ.get(k)}
    if opts.get("AWS_ENDPOINT_URL", "").startswith("http://"):
        opts.setdefault("AWS_ALLOW_HTTP", "true")
    return opts


def _delta_uri(location: str) -> str:
    # Hadoop's s3a:// scheme is plain S3 to delta-rs.
    return "s3://" + location[len("s3a://"):] if location.startswith("s3a://") else location


def table_names(cfg: Config) -> list[str]:
    """Tables present under the crawl home (every Delta folder locally; the contract remotely)."""
    if is_local_home(cfg):
        root = Path(cfg.home.removeprefix("file://")) / "tables"
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if (p / "_delta_log").is_dir())
    return list(CONTRACT_TABLES)


def require_tables(cfg: Config) -> None:
    """Raise FastPathError when a local crawl home has no tables (a wrong crawl.home, usually)."""
    if is_local_home(cfg) and not table_names(cfg):
        raise FastPathError(f"no Delta tables under {cfg.home}/tables (is crawl.home right? "
                            "`crawler init` creates them)")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def connect(cfg: Config, tables: Iterable[str] | None = None, database=None):
    """A DuckDB connection with a view `<crawl.database>.<table>` per Delta table.

    Args:
        cfg: configuration; `crawl.home` locates the tables, `crawl.database` names the schema.
        tables: only these tables (default: every table found under the crawl home).
        database: DuckDB database file (default: in memory).
    Returns:
        a `duckdb.DuckDBPyConnection` whose default schema is the crawl database, so both
        `crawl.crawldb` and `crawldb` resolve.
    Raises:
        FastPathError: deltalake / duckdb are not installed or a table cannot be read.
    """
    try:
        import duckdb
        from deltalake import DeltaTable
    except ImportError as exc:
        raise FastPathError(
            f"the DuckDB fast path needs the analytics extra ({exc.name} is missing): "
            "pip install -e '.[analytics]'"
        ) from None
    schema = cfg.get("crawl.database")
    con = duckdb.connect(database or ":memory:")
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(schema)}")
    names = list(tables) if tables is not None else table_names(cfg)
    for name in names:
        location = cfg.table_path(name)
        try:
            dt = DeltaTable(_delta_uri(location), storage_options=_storage_options(location))
            dataset = dt.to_pyarrow_dataset()
        except Exception as exc:  # delta-rs raises TableNotFoundError, DeltaProtocolError, ...
            if type(exc).__name__ == "TableNotFoundError":
                continue  # a table not created yet (remote homes probe every contract table)
            raise FastPathError(f"cannot read table {name} at {location} with delta-rs: "
                                f"{str(exc).strip().splitlines()[0]}") from None
        source = f"__delta_{name}"
        con.register(source, dataset)
        cols = []
        for field in dataset.schema:
            q = _quote(field.name)
            # Spark's TIMESTAMP is an instant shown in the session zone (UTC here): expose
            # UTC wall time, as Spark prints it, rather than DuckDB's TIMESTAMPTZ.
            if str(field.type).startswith("timestamp[") and "tz=" in str(field.type):
                cols.append(f"CAST({q} AS TIMESTAMP) AS {q}")
            else:
                cols.append(q)
        con.execute(f"CREATE OR REPLACE VIEW {_quote(schema)}.{_quote(name)} AS "
                    f"SELECT {', '.join(cols)} FROM {_quote(source)}")
    con.execute(f"USE {_quote(schema)}")
    return con


def execute(con, query: str):
    """Run `query`; returns (columns, cursor). DuckDB's errors become FastPathError."""
    import duckdb

    try:
        cur = con.execute(query)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FastPathError(f"DuckDB: {first}") from None
    if cur.description is None:
        return [], iter(())
    columns = [d[0] for d in cur.description]
    return columns, _batches(cur)


def _batches(cur, size: int = 1000):
    while True:
        chunk = cur.fetchmany(size)
        if not chunk:
            return
        yield from chunk


def run_sql(cfg: Config, query: str, fmt: str = "table", limit: int = 100, out=None) -> int:
    """`crawler sql --engine duckdb`: print the answer like the Spark path does.

    Raises FastPathError before printing anything when the query cannot be answered here.
    """
    from recrawl.sqlshell import emit

    require_tables(cfg)
    con = connect(cfg)
    columns, rows = execute(con, query)
    emit(columns, rows, fmt, limit, out=out or sys.stdout)
    return 0

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
  * the same printers (`analyst.printers.emit`) for table / csv / json output.

What it does not do — and why `crawler sql` (`--engine auto`, the default) sends such input
to Spark (`spark_only_reason`, or DuckDB rejecting the syntax or a function at `check`): Delta
time travel (`VERSION AS OF`), history, the change data feed (`table_changes`), writes and DDL,
Spark-only functions and syntax (backticks, `explode`...) and the functions both dialects name
but compute differently (`split`, `element_at`, `concat`, `datediff`). Tables on object storage are read with
delta-rs's own S3 client configured from the standard AWS_* environment variables (best effort;
`auto` uses it for local crawl homes only).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable

from analyst.printers import emit
from recrawl.config import Config, local_path

# The contract tables (recrawl.store.schemas.TABLES) named without importing pyspark: on object
# storage there is no cheap listing, so these are the names probed there.
CONTRACT_TABLES = (
    "crawldb", "fetch_list", "fetches", "pages", "links", "duplicates", "robots", "hosts",
    "scores", "rounds", "captures", "signal_sources",
)

# Statements that only Spark (with Delta) can run, and why: (pattern on the comment-free
# statement, reason shown to the user). Matching is deliberately coarse: sending a query to
# Spark costs seconds, answering it wrongly on DuckDB costs trust.
_SPARK_ONLY: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), why) for p, why in (
        (r"\b(?:VERSION|TIMESTAMP)\s+AS\s+OF\b", "uses Delta time travel ({m})"),
        (r"@v\d+", "uses Delta time travel ({m})"),
        (r"^\s*DESC(?:RIBE)?\s+(?:HISTORY|DETAIL)\b", "uses Delta table history ({m})"),
        (r"\btable_changes\s*\(", "uses the Delta change data feed ({m}...))"),
        (r"\bdelta\s*\.\s*`", "reads a Delta table by path ({m}...`)"),
        (r"`", "uses Spark's backtick quoting"),
        (r"^\s*(?:OPTIMIZE|VACUUM|RESTORE|MERGE|INSERT|UPDATE|DELETE|CREATE|REPLACE|DROP|ALTER|"
         r"TRUNCATE|CONVERT|REFRESH|MSCK|CACHE|UNCACHE|CLEAR|ANALYZE|GRANT|REVOKE)\b",
         "{m} writes or changes tables"),
        (r"^\s*(?:SHOW|DESC|DESCRIBE|EXPLAIN|SET|RESET|USE|LIST|ADD)\b",
         "{m} is a Spark catalog/session command"),
        # Same name, different meaning: DuckDB would answer, differently (regex vs literal
        # split, list vs value from a map, NULL handling, argument order).
        (r"\b(?:split|element_at|concat|datediff)\s*\(",
         "{m}) means something else in DuckDB"),
    )
)
_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)
# DuckDB errors that mean "Spark dialect", not "wrong query": --engine auto retries on Spark.
_DIALECT_ERRORS = re.compile(
    r"^(?:Parser Error|Catalog Error: (?:Scalar |Table |Aggregate |Macro )?Function with name|"
    r"Binder Error: No function matches)",
)


class FastPathError(RuntimeError):
    """The fast path cannot answer (missing package, unreadable table, DuckDB rejected the SQL)."""


class NeedsSpark(FastPathError):
    """Spark can answer where the fast path cannot: Spark/Delta SQL (time travel, history,
    Spark-only functions...), a table delta-rs cannot read, or no DuckDB/delta-rs installed."""


def split_statements(sql: str) -> list[str]:
    """The statements of `sql`, split on `;` outside quotes, backticks and comments.

    Statements with nothing but whitespace and comments are dropped; the others keep their
    text (comments included) minus the separating `;`.
    """
    out: list[str] = []
    buf: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`":
            j = i + 1
            while j < n and sql[j] != c:
                j += 2 if sql[j] == "\\" and c != "`" else 1  # Spark's backslash escapes
            buf.append(sql[i:j + 1])  # '' escapes split into two adjacent strings: same text
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j == -1 else j
            buf.append(sql[i:j])
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j == -1 else j + 2
            buf.append(sql[i:j])
            i = j
        elif c == ";":
            out.append("".join(buf))
            buf = []
            i += 1
        else:
            buf.append(c)
            i += 1
    out.append("".join(buf))
    return [s.strip() for s in out if _COMMENTS.sub(" ", s).strip()]


def spark_only_reason(statement: str) -> str | None:
    """Why one SQL statement needs Spark (Delta time travel, history, writes...), else None."""
    text = _COMMENTS.sub(" ", statement).strip()
    for pattern, why in _SPARK_ONLY:
        m = pattern.search(text)
        if m:
            return why.format(m=" ".join(m.group(0).split()))
    return None


def fast_path_reason(cfg: Config, query: str) -> str | None:
    """Why `--engine auto` should not use DuckDB for `query` (None when it may)."""
    if not is_local_home(cfg):
        return f"crawl home {cfg.home} is not a local folder"
    for statement in split_statements(query):
        reason = spark_only_reason(statement)
        if reason:
            return reason
    return None


def is_local_home(cfg: Config) -> bool:
    return cfg.local_home is not None


def _storage_options(location: str) -> dict[str, str] | None:
    """delta-rs options for object storage, from the usual AWS_* environment (None locally)."""
    if local_path(location) is not None:
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
    local = cfg.local_home
    if local is not None:
        root = local / "tables"
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if (p / "_delta_log").is_dir())
    return list(CONTRACT_TABLES)


def require_tables(cfg: Config) -> None:
    """Raise FastPathError when a local crawl home has no tables (a wrong crawl.home, usually:
    e.g. a notebook started without RECRAWL_CRAWL__HOME / RECRAWL_CONFIG)."""
    if is_local_home(cfg) and not table_names(cfg):
        raise FastPathError(
            f"no Delta tables under {cfg.home}/tables (is crawl.home right? set "
            "RECRAWL_CRAWL__HOME or RECRAWL_CONFIG to the crawl's; `crawler init` creates them)")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def connect(cfg: Config, tables: Iterable[str] | None = None, database=None,
            allow_empty: bool = False):
    """A DuckDB connection with a view `<crawl.database>.<table>` per Delta table.

    Args:
        cfg: configuration; `crawl.home` locates the tables, `crawl.database` names the schema.
        tables: only these tables (default: every table found under the crawl home).
        database: DuckDB database file (default: in memory).
        allow_empty: accept a local crawl home without tables (no views); by default that is
            an error, since every query would fail or answer nothing.
    Returns:
        a `duckdb.DuckDBPyConnection` whose default schema is the crawl database, so both
        `crawl.crawldb` and `crawldb` resolve.
    Raises:
        FastPathError: deltalake / duckdb are not installed, a table cannot be read, or (unless
            `allow_empty`) the local crawl home has no tables.
    """
    try:
        import duckdb  # lazy: heavy, optional (the analytics extra)
        from deltalake import DeltaTable  # lazy: heavy, optional (the analytics extra)
    except ImportError as exc:
        raise NeedsSpark(
            f"the DuckDB fast path needs the analytics extra ({exc.name} is missing): "
            "pip install -e '.[analytics]'"
        ) from None
    if tables is None and not allow_empty:
        require_tables(cfg)
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
            raise NeedsSpark(f"cannot read table {name} at {location} with delta-rs: "
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check(con, statement: str) -> None:
    """Parse and bind `statement` without running it (DuckDB's PREPARE).

    Raises:
        NeedsSpark: DuckDB does not know the syntax or a function (Spark SQL, most likely).
        FastPathError: any other error (a mistyped table or column...), the same on Spark.
    """
    import duckdb  # lazy: heavy, optional (the analytics extra)

    try:
        con.execute(f"PREPARE __recrawl_check AS {statement}")
        con.execute("DEALLOCATE PREPARE __recrawl_check")
    except duckdb.Error as exc:
        first = _first_line(exc)
        if _DIALECT_ERRORS.match(first):
            raise NeedsSpark(f"DuckDB: {first}") from None
        raise FastPathError(f"DuckDB: {first}") from None


def execute(con, query: str):
    """Run `query`; returns (columns, cursor). DuckDB's errors become FastPathError."""
    import duckdb  # lazy: heavy, optional (the analytics extra)

    try:
        cur = con.execute(query)
    except duckdb.Error as exc:
        raise FastPathError(f"DuckDB: {_first_line(exc)}") from None
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
    """`crawler sql` on DuckDB: run every statement of `query`, printing each answer as the
    Spark path does (a blank line between answers in table and csv format).

    Every statement is checked (parsed and bound) before the first one runs, so a rejected
    statement prints nothing and `--engine auto` can hand the whole input to Spark.

    Raises:
        NeedsSpark: a statement needs Spark (Delta-only syntax, or DuckDB does not know it).
        FastPathError: the fast path cannot answer (bad SQL, no tables, unreadable table).
    """
    statements = split_statements(query)
    if not statements:
        raise FastPathError("no SQL statement given")
    for statement in statements:
        reason = spark_only_reason(statement)
        if reason:
            raise NeedsSpark(f"the query {reason}, which needs Spark")
    con = connect(cfg)
    for statement in statements:
        check(con, statement)
    out = out or sys.stdout
    for i, statement in enumerate(statements):
        columns, rows = execute(con, statement)
        if i and fmt != "json":
            print(file=out)
        emit(columns, rows, fmt, limit, out=out)
    return 0

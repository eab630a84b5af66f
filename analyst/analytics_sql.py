"""What every analytics module shares: running a query into dicts, and asking what the crawl
home's connection holds (tables before a first round, columns before `crawler init` migrates)."""

from __future__ import annotations

from collections.abc import Sequence


def rows(con, sql: str, params: Sequence | None = None) -> list[dict]:
    """Run `sql` and return its rows as dicts (column name -> value)."""
    cur = con.execute(sql, list(params) if params is not None else None)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def has_tables(con, *names: str) -> bool:
    """True when every named table (view) exists in the connection's current schema."""
    have = {
        r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    }
    return all(n in have for n in names)


def has_columns(con, table: str, *columns: str) -> bool:
    """True when the table (view) exists and has every named column: a table created before a
    column was added lacks it until `crawler init` adds it (docs/tables.md)."""
    have = {
        r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ?", [table]
        ).fetchall()
    }
    return bool(have) and all(c in have for c in columns)


def sql_in(values: Sequence[str]) -> str:
    """A SQL list of string literals (quotes doubled)."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)

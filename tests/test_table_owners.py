"""One owner per table: every write names its table and comes from the module
recrawl.store.schemas.TABLES declares as its writer, and only recrawl/store/tables.py touches Delta's API
(docs/architecture.md, "Writers per table"). Read from the source, every call site."""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

import pytest

from recrawl.store.schemas import HOUSEKEEPING, TABLES

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("recrawl", "analyst", "fetcher", "spark_jobs", "app", "dags")
TABLE_API = "recrawl.store.tables"
# the driver's Arrow reads and writes: delta-rs, with Spark's writes as the fallback
TABLE_API_ARROW = "recrawl.store.arrowtables"
# a MERGE's clauses as a one-pass rewrite of the whole table
TABLE_API_REWRITE = "recrawl.store.rewrite"
# write function -> index of the table name among its positional arguments
WRITES = {"merge_into": 2, "update_where": 2, "replace_round": 2, "overwrite": 2,
          "overwrite_arrow": 2, "rewrite_merge": 2,
          "replace_rows": 1}
HOUSEKEEPING_ONLY = {"delta_table"}


def _module(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


@functools.cache
def _findings(root: Path) -> tuple[list[str], dict[str, set[str]]]:
    """(violations, table -> modules that write it)."""
    bad: list[str] = []
    writers: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = _module(path, root)
            where = f"{path.relative_to(root)}"
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if module in (TABLE_API, TABLE_API_ARROW, TABLE_API_REWRITE):
                    break
                if isinstance(node, ast.ImportFrom) and node.module == "delta.tables":
                    bad.append(f"{where}:{node.lineno} imports delta.tables")
                if not isinstance(node, ast.Call):
                    continue
                name = _call_name(node)
                if (name == "format" and node.args and isinstance(node.args[0], ast.Constant)
                        and node.args[0].value == "delta"):
                    bad.append(f"{where}:{node.lineno} reads or writes Delta directly")
                if name in HOUSEKEEPING_ONLY and module != HOUSEKEEPING:
                    bad.append(f"{where}:{node.lineno} calls {name} (housekeeping only)")
                if name not in WRITES:
                    continue
                pos = WRITES[name]
                arg = node.args[pos] if len(node.args) > pos else None
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    if module != HOUSEKEEPING:
                        bad.append(f"{where}:{node.lineno} {name} without a literal table name")
                    continue
                table = arg.value
                writers.setdefault(table, set()).add(module)
                if table not in TABLES:
                    bad.append(f"{where}:{node.lineno} {name} into unknown table {table!r}")
                elif module != TABLES[table].writer:
                    bad.append(f"{where}:{node.lineno} writes {table}, "
                               f"owned by {TABLES[table].writer}")
    return bad, writers


def test_every_write_comes_from_its_tables_owner():
    bad, _ = _findings(ROOT)
    assert bad == []


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_table_has_an_owner_that_writes_it(name):
    writer = TABLES[name].writer
    assert writer, f"{name} declares no writer"
    importlib.import_module(writer)  # the declared owner exists
    _, writers = _findings(ROOT)
    assert writers.get(name) == {writer}


def test_the_check_sees_a_second_writer(tmp_path):
    # a job that MERGEs into crawldb itself, or reaches for Delta directly, is caught
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "spark_jobs" / "rogue.py").write_text(
        "from recrawl.store.tables import merge_into, Update\n"
        "def run(spark, cfg, df):\n"
        "    merge_into(spark, cfg, 'crawldb', df, 't.url = s.url', Update({'score': '1'}))\n"
        "    from delta.tables import DeltaTable\n"
        "    spark.read.format('delta').load('x')\n"
    )
    bad, writers = _findings(tmp_path)
    assert sorted(bad) == [
        "spark_jobs/rogue.py:3 writes crawldb, owned by recrawl.store.crawldb",
        "spark_jobs/rogue.py:4 imports delta.tables",
        "spark_jobs/rogue.py:5 reads or writes Delta directly",
    ]
    assert writers == {"crawldb": {"spark_jobs.rogue"}}

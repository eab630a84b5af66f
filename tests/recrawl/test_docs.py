"""docs/tables.md matches the declared tables: every column (name and type) of every table in
recrawl/store/schemas.py is documented and nothing else is, and the enumerated values it lists are
the code's constants. No JVM: the declarations are plain pyspark type objects."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from recrawl.content.extract import LABELS
from recrawl.content.parsing import OUTLINK_KINDS
from recrawl.store import schemas

DOC = Path(__file__).resolve().parents[2] / "docs" / "tables.md"


def _column_tables(text: str) -> dict[str, dict[str, str]]:
    """{table: {column: type}} from each `## <table>` section's `| column | type | |` table."""
    out: dict[str, dict[str, str]] = {}
    for section in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        name = section.split("\n", 1)[0].strip()
        rows = re.findall(r"^\| `([^`]+)` \| ([^|]+?) \|", section, flags=re.MULTILINE)
        if name in schemas.TABLES or rows:
            out[name] = dict(rows)
    return out


def _enumerations(text: str) -> dict[str, list[str]]:
    """{"table.column": [values]} from the "- `table.column`: `v1`, `v2`" lines."""
    return {m[1]: re.findall(r"`([^`]+)`", m[2])
            for m in re.finditer(r"^- `(\w+\.\w+)`: (.+)$", text, flags=re.MULTILINE)}


def test_every_table_and_column_is_documented_with_its_type():
    documented = _column_tables(DOC.read_text())
    assert set(documented) == set(schemas.TABLES)
    for name, spec in schemas.TABLES.items():
        declared = {f.name: f.dataType.simpleString() for f in spec.schema.fields}
        assert documented[name] == declared, name


def test_partitioning_is_documented():
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|$", DOC.read_text(), re.MULTILINE))
    for name, spec in schemas.TABLES.items():
        expected = ", ".join(f"`{c}`" for c in spec.partition_by) or "—"
        assert rows[name].strip() == expected, name


@pytest.mark.parametrize("key,values", [
    ("fetches.fetch_status", schemas.FETCH_STATUSES),
    ("crawldb.status", schemas.CRAWLDB_STATUSES),
    ("links.kind", schemas.LINK_KINDS),
    ("duplicates.kind", schemas.DUPLICATE_KINDS),
    ("pages.text_extractor", tuple(LABELS.values())),
])
def test_enumerated_values_match_the_code(key, values):
    assert _enumerations(DOC.read_text())[key] == list(values)


def test_link_kinds_are_the_parser_kinds_that_reach_the_links_table():
    assert "sitemap" in schemas.LINK_KINDS
    assert set(schemas.LINK_KINDS) == set(OUTLINK_KINDS) - {"redirect"}


def test_analysts_guide_lists_the_same_statuses():
    text = (DOC.parent / "analysts.md").read_text()
    for key, values in (("fetch_status", schemas.FETCH_STATUSES),
                        ("crawldb.status", schemas.CRAWLDB_STATUSES)):
        m = re.search(rf"^`{re.escape(key)}`: (.+?)\.$", text, re.MULTILINE | re.DOTALL)
        assert m, key
        found = re.findall(r"`([a-z_]+)`", m.group(1))
        assert found == list(values), key


def test_docs_reference_only_existing_files_and_columns():
    """Links to files resolve, and `table.column` names in the docs exist."""
    docs = DOC.parent
    columns = {f"{n}.{f.name}" for n, s in schemas.TABLES.items() for f in s.schema.fields}
    for page in sorted(docs.glob("*.md")):
        text = page.read_text()
        for target in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", text):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name}: {target}"
        for ref in re.findall(r"`(\w+)\.(\w+)`", text):
            if ref[0] in schemas.TABLES:
                assert ".".join(ref) in columns, f"{page.name}: {'.'.join(ref)}"


def test_notebook_snippet_without_a_crawl_home_fails_at_once_with_a_clear_message(tmp_path):
    """The "In your own notebook" snippet of docs/analysts.md, run where no crawl is configured:
    it stops at `fastsql.connect` with one clear line, not an empty frame then a DuckDB error."""
    import os
    import subprocess
    import sys

    text = (DOC.parent / "analysts.md").read_text()
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL)
                   if "fastsql.connect(" in b)
    assert "fastsql.connect(load_config())" in snippet
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECRAWL_")}
    env["PYTHONPATH"] = str(DOC.parents[1])
    out = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=120)
    assert out.returncode != 0 and out.stdout == ""
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("analyst.fastsql.FastPathError: no Delta tables under ")
    assert f"{tmp_path.resolve()}/crawl-home/tables" in last  # the default crawl.home
    assert "RECRAWL_CRAWL__HOME or RECRAWL_CONFIG" in last
    assert "duckdb" not in out.stderr.lower().replace("recrawl", "")  # no DuckDB error behind it
    assert not (tmp_path / "crawl-home").exists()

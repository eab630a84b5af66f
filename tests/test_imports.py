"""Imports sit at the top of a module; one inside a function body is either of a heavy
dependency (HEAVY) or carries a `# lazy: <why>` comment (issue #19), so a module's ties to the
project's other modules show at its top. And the module-level imports between the project's
modules form no cycle (a cycle is what a `# lazy: cycle ...` import avoids)."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("recrawl", "analyst", "fetcher", "spark_jobs", "app", "dags", "simweb")
# Dependencies too slow to import (> ~50 ms) or optional: importing one inside a function needs
# no comment (one is still welcome).
HEAVY = frozenset({
    "pyspark", "delta", "py4j", "duckdb", "deltalake", "pyarrow", "pandas", "matplotlib",
    "trafilatura", "htmldate", "airflow", "s3fs", "boto3", "botocore", "psutil", "cdxj_indexer",
    "surt", "tldextract",
})
LAZY = re.compile(r"#\s*lazy:")


def _comments(source: str) -> dict[int, str]:
    """Line number -> the comment on that line."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}


def _says_lazy(line: int, lines: list[str], comments: dict[int, str]) -> bool:
    """A `# lazy:` comment on `line` or in the block of comment lines directly above it."""
    if LAZY.match(comments.get(line, "")):
        return True
    above = line - 1
    while above >= 1 and lines[above - 1].lstrip().startswith("#"):
        if LAZY.match(comments.get(above, "")):
            return True
        above -= 1
    return False


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return ["." * node.level + (node.module or "")]


def function_imports_without_reason(source: str, where: str = "<snippet>") -> list[str]:
    """`where:line imports x` for every import in a function body that is neither of a HEAVY
    module nor commented `# lazy: ...` (on its first line or directly above)."""
    tree = ast.parse(source, filename=where)
    lines = source.splitlines()
    comments = _comments(source)
    found: dict[int, str] = {}
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if not isinstance(node, ast.Import | ast.ImportFrom) or node.lineno in found:
                continue
            names = _imported(node)
            if all(n.split(".")[0] in HEAVY for n in names):
                continue
            if not _says_lazy(node.lineno, lines, comments):
                found[node.lineno] = f"{where}:{node.lineno} imports {', '.join(names)}"
    return [found[k] for k in sorted(found)]


def _sources() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


@pytest.mark.parametrize("package", PACKAGES)
def test_function_imports_are_heavy_or_say_why(package):
    bad = [v for p in sorted((ROOT / package).rglob("*.py"))
           for v in function_imports_without_reason(p.read_text(), str(p.relative_to(ROOT)))]
    assert not bad, "move to the module's top, or say why not (# lazy: ...):\n" + "\n".join(bad)


@pytest.mark.parametrize(("snippet", "flagged"), [
    ("def f():\n    from recrawl.store.tables import sql_str\n", [2]),
    ("def f():\n    import json\n", [2]),
    ("async def f():\n    from . import x\n", [2]),
    ("def f():\n    def g():\n        import re\n", [3]),
    ("def f():\n    from pyspark.sql import functions as F\n    import delta.tables\n", []),
    ("def f():\n    from pyspark.sql import Row, functions\n    from recrawl import x\n", [3]),
    ("def f():\n    import pandas, recrawl.x\n", [2]),  # one light module is enough
    ("def f():\n    from recrawl import spark  # lazy: cycle with recrawl.sparkenv.spark\n", []),
    ("def f():\n    # lazy: pyspark (via recrawl.store.tables)\n    from recrawl.store.tables import read\n", []),
    ("def f():\n    # lazy: keeps the CLI fast,\n    # a second line\n    import recrawl.sparkenv.spark\n", []),
    ("def f():\n    from recrawl.store.tables import (  # lazy: pyspark\n        read,\n    )\n", []),
    ("def f():\n    from recrawl.store.tables import (\n        read,  # lazy: pyspark\n    )\n", [2]),
    ("def f():\n    # lazy: pyspark\n\n    from recrawl.store.tables import read\n", [4]),
    ("def f():\n    x = 1  # lazy: not about the import\n    import recrawl.x\n", [3]),
    ("def f():\n    # why not at the top? nobody said\n    import recrawl.x\n", [3]),
    ("def f():\n    s = '# lazy: in a string'; import recrawl.x\n", [2]),
    ("import recrawl.x\n\n\nclass C:\n    import json\n", []),  # not in a function body
])
def test_the_check_flags_unexplained_function_imports(snippet, flagged):
    found = function_imports_without_reason(snippet)
    assert [int(f.split(":")[1].split()[0]) for f in found] == flagged


# --- no cycle among module-level imports ------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[0] == "dags":  # the DAG folder is on Airflow's path: recrawl_airflow is top-level
        parts = parts[1:]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported: not in functions, nor under TYPE_CHECKING."""
    out = []

    def visit(body):
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                out.append(node)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                    visit(block)
            elif isinstance(node, ast.ClassDef | ast.With):
                visit(node.body)

    visit(tree.body)
    return out


def import_graph(files: dict[str, str], packages: frozenset[str] = frozenset()) -> dict[str, set[str]]:
    """Module -> the project modules its module-level imports load (`files`: module -> source;
    `packages`: the modules that are packages, i.e. their __init__).

    `from pkg import name` loads pkg.name when that is a module. Importing a.b.c loads the
    packages a and a.b first, except the importer's own: it is imported by way of them.
    """
    graph: dict[str, set[str]] = {}
    for module, source in files.items():
        package = module if module in packages else module.rpartition(".")[0]
        edges = graph.setdefault(module, set())
        for node in _top_level_imports(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                           for a in node.names]
            for target in targets:
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    name = ".".join(parts[:i])
                    own_package = module.startswith(name + ".") and i < len(parts)
                    if name in files and name != module and not own_package:
                        edges.add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def test_no_import_cycle_between_modules():
    files = {_module_name(p): p.read_text() for p in _sources()}
    packages = frozenset(_module_name(p) for p in _sources() if p.name == "__init__.py")
    assert cycles(import_graph(files, packages)) == []


def test_the_cycle_check_sees_a_cycle():
    files = {
        "pkg": "from pkg.a import f\n",
        "pkg.a": "from pkg.b import f\n",
        "pkg.b": "def f():\n    from pkg.a import g  # lazy: cycle with pkg.a\n",
        "pkg.c": "from pkg import d\n",
        "pkg.d": "from . import c\n",
        "pkg.e": "from pkg import f\n",  # a name from the package's __init__
    }
    graph = import_graph(files, frozenset({"pkg"}))
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == set()
    assert graph["pkg.e"] == {"pkg"}
    assert cycles(graph) == [["pkg.c", "pkg.d"]]
    files["pkg.b"] = "from pkg.a import g\n"
    assert cycles(import_graph(files, frozenset({"pkg"}))) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
    files["pkg.b"] = "from pkg import e\n"
    assert cycles(import_graph(files, frozenset({"pkg"})))[0] == ["pkg", "pkg.a", "pkg.b", "pkg.e"]

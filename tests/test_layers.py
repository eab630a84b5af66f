"""The layers of docs/architecture.md hold: no package imports one above it (or simweb, the test
web, unless it is the app), the core's packages import only the ones below them, and the fetch
core and the analysts' layer use only the core's Spark-free packages. Every import statement
counts, module-level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Bottom to top; a package may import its own layer and the ones below, except the analysts'
# layer, which no other package but the app uses (ANALYST_USERS).
LAYERS = ("recrawl", "analyst", "fetcher", "spark_jobs", "app")
ANALYST_USERS = {"analyst", "app"}
ALLOWED_EXTRA = {"app": {"simweb"}}
PROJECT = {*LAYERS, "simweb", "dags", "benchmarks", "tests"}
# The core (recrawl/) bottom to top: config.py, then its packages by concern. Each may import
# the ones before it.
CORE = ("config", "rules", "content", "store", "sparkenv", "graph")
# What the packages outside the core may take from it.
CORE_FOR = {
    "fetcher": {"config", "rules", "content"},  # the fetch core runs without Spark
    "analyst": {"config", "rules", "content"},  # analysts' SQL never starts a JVM
}
# Third-party packages the analysts' layer must never import.
SPARK = {"pyspark", "delta", "py4j"}


def _core_part(path: Path) -> str:
    """The core package a file of recrawl/ belongs to (config for recrawl/*.py)."""
    rel = path.relative_to(ROOT / "recrawl").parts
    return rel[0] if len(rel) > 1 else "config"


def _imported_modules(path: Path) -> set[tuple[str, int]]:
    """(dotted module, line) of every import in `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "recrawl":  # from recrawl import config
                found.update((f"recrawl.{a.name}", node.lineno) for a in node.names)
            else:
                found.add((node.module, node.lineno))
    return found


def _core_violations(package: str) -> list[str]:
    """Imports of the core's packages that `package` (a core package, or fetcher / analyst)
    may not make."""
    out = []
    root = ROOT / ("recrawl" if package in CORE else package)
    paths = sorted(root.rglob("*.py"))
    if package in CORE:
        paths = [p for p in paths if _core_part(p) == package]
        allowed = set(CORE[: CORE.index(package) + 1])
    else:
        allowed = CORE_FOR[package]
    for path in paths:
        for module, line in sorted(_imported_modules(path)):
            parts = module.split(".")
            if parts[0] != "recrawl" or len(parts) < 2:
                continue
            part = parts[1] if parts[1] in CORE else "config"
            if part not in allowed:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
        if package == "analyst":
            out.extend(f"{path.relative_to(ROOT)}:{line} imports {module}"
                       for module, line in sorted(_imported_modules(path))
                       if module.split(".")[0] in SPARK)
    return out


@pytest.mark.parametrize("package", [*CORE, *CORE_FOR])
def test_the_cores_packages_are_layered_too(package):
    assert _core_violations(package) == []


def test_the_core_check_sees_a_back_arrow(tmp_path, monkeypatch):
    # rules importing the store, the fetch core importing Spark plumbing, analysts' SQL pyspark
    (tmp_path / "recrawl" / "rules").mkdir(parents=True)
    (tmp_path / "recrawl" / "rules" / "bad.py").write_text(
        "def f():\n    from recrawl.store import tables\n")
    (tmp_path / "fetcher").mkdir()
    (tmp_path / "fetcher" / "bad.py").write_text("from recrawl.sparkenv.spark import get_spark\n")
    (tmp_path / "analyst").mkdir()
    (tmp_path / "analyst" / "bad.py").write_text("import pyspark.sql\nfrom recrawl import config\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert _core_violations("rules") == ["recrawl/rules/bad.py:2 imports recrawl.store"]
    assert _core_violations("fetcher") == ["fetcher/bad.py:1 imports recrawl.sparkenv.spark"]
    assert _core_violations("analyst") == ["analyst/bad.py:1 imports pyspark.sql"]


def _imported_packages(path: Path) -> set[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update((name.split(".")[0], node.lineno) for name in names)
    # importlib.import_module("pkg.x") with a literal or f-string prefix
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
                and node.args):
            arg = node.args[0]
            text = arg.value if isinstance(arg, ast.Constant) else (
                arg.values[0].value if isinstance(arg, ast.JoinedStr) and arg.values
                and isinstance(arg.values[0], ast.Constant) else "")
            if isinstance(text, str) and text:
                found.add((text.split(".")[0], node.lineno))
    return found


def _violations(package: str) -> list[str]:
    allowed = set(LAYERS[: LAYERS.index(package) + 1]) | ALLOWED_EXTRA.get(package, set())
    if package not in ANALYST_USERS:
        allowed.discard("analyst")
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name, line in sorted(_imported_packages(path)):
            if name in PROJECT and name not in allowed:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return out


@pytest.mark.parametrize("package", LAYERS)
def test_no_package_imports_a_layer_above_it(package):
    assert _violations(package) == []


def test_the_dags_import_nothing_of_the_project():
    bad = [f"{p.relative_to(ROOT)}:{line} imports {name}"
           for p in sorted((ROOT / "dags").rglob("*.py"))
           for name, line in sorted(_imported_packages(p)) if name in PROJECT - {"dags"}]
    assert bad == []


def test_the_check_sees_a_back_arrow(tmp_path, monkeypatch):
    # the checker itself must catch a core module importing a job, also from a function body
    pkg = tmp_path / "recrawl"
    pkg.mkdir()
    (pkg / "bad.py").write_text("def f():\n    from spark_jobs import generate\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert _violations("recrawl") == ["recrawl/bad.py:2 imports spark_jobs"]


# Jobs tested in another file, and by which test there.
TESTED_ELSEWHERE = {  # parse runs captures; the replay tests read the captures table
    "captures": ("test_replay.py", "test_captures_have_url_index_columns"),
}


def test_every_job_has_its_test_file():
    tests = ROOT / "tests" / "spark_jobs"
    missing = []
    for job in sorted(p.stem for p in (ROOT / "spark_jobs").glob("*.py")):
        if job in ("__init__", "common") or (tests / f"test_{job}.py").exists():
            continue
        where = TESTED_ELSEWHERE.get(job)
        if where is None or f"def {where[1]}" not in (tests / where[0]).read_text():
            missing.append(job)
    assert missing == []


PRODUCT = ("recrawl", "analyst", "fetcher", "spark_jobs", "app", "dags")
MAX_LINES = 500


def test_no_product_file_is_over_500_lines():
    """Short modules with names that say what they hold: a file past 500 lines holds more than
    one concern and is split by concern, not by size."""
    long = [f"{p.relative_to(ROOT)}: {n}" for pkg in PRODUCT for p in sorted((ROOT / pkg).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert long == []

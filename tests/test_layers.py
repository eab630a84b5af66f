"""The layers of docs/architecture.md hold: no package imports one above it (or simweb, the test
web, unless it is the app). Every import statement counts, module-level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Bottom to top; a package may import its own layer and the ones below.
LAYERS = ("recrawl", "fetcher", "spark_jobs", "app")
ALLOWED_EXTRA = {"app": {"simweb"}}
PROJECT = {*LAYERS, "simweb", "dags", "benchmarks", "tests"}


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

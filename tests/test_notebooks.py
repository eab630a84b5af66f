"""The analyst notebooks run headless, top to bottom, against a small crawl home.

Each notebook is executed by nbclient in a fresh kernel with `RECRAWL_CRAWL__HOME` pointing at
the synthetic crawl of tests/sample_crawl.py, as an analyst's Jupyter would run it; a cell that
raises fails the test. The notebooks hold no queries of their own (analyst.analytics does), so
this checks the wiring and that every plot renders.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sample_crawl import sample_home

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
# Text each notebook must show somewhere in its outputs (a sign it read the crawl, not nothing).
MUST_SHOW = {
    "01_crawl_overview": "20261103",
    "02_politeness_and_errors": "slow.sim.test",
    "03_change_rate": "0.988 over 10 URLs",  # the estimates against the sample's true rates
    "04_near_duplicates": "b.sim.test:80/p2",
    "05_link_graph_pagerank": "a.sim.test:80/",
}


@pytest.fixture(scope="module")
def sample(spark, tmp_path_factory):
    return sample_home(spark, tmp_path_factory)


def test_every_notebook_is_listed():
    assert [p.stem for p in NOTEBOOKS] == sorted(MUST_SHOW)


def test_notebooks_are_stored_without_outputs():
    import nbformat

    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(not c.outputs and c.execution_count is None for c in code), path.name
        # no logic of their own: data comes from analyst.analytics / fastsql only
        source = "\n".join(c.source for c in code)
        assert "SELECT" not in source.upper().replace("SELECTED", ""), path.name


@pytest.mark.spark
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_headless(sample, path, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("RECRAWL_CRAWL__HOME", sample.home)
    # the kernel imports this checkout's code, whatever checkout the venv was installed from
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2, f"{path.name}: expected plots, got {len(images)}"
    text = "\n".join(
        o.get("text", "") + "".join(str(v) for k, v in o.get("data", {}).items() if k.startswith("text/"))
        for o in outputs
    )
    assert MUST_SHOW[path.stem] in text

"""`crawler replay`'s pywb collection: laid out from the rounds' WARCs and indexes, incrementally.

The replay itself (pywb serving every capture byte for byte) is tests/spark_jobs/test_replay.py;
this checks the collection's bookkeeping on a crawl home laid out by hand, without Spark.
"""

from __future__ import annotations

import os
import shutil

from app import replay
from app.cli import main
from tests.conftest import make_config


def _round(home, rid: str, n: int, line: str = "x") -> None:
    d = home / "warc" / rid
    d.mkdir(parents=True)
    for i in range(n):
        (d / f"{rid}-abc-p00000-a0-{i:05d}.warc.gz").write_bytes(b"warc")
    (d / "index.cdxj").write_text(f"{line} {rid}\n")


def test_collection_links_every_warc_and_copies_each_round_index_once(tmp_path):
    home = tmp_path / "home"
    _round(home, "20261101", 2)
    _round(home, "20261102", 1)
    (home / "warc" / "20261103").mkdir()  # a round whose fetch has not finished: no index yet
    cfg = make_config(home)
    first = replay.build_collection(cfg)
    coll = home / "replay" / "collections" / "crawl"
    assert (first.warcs, first.rounds, first.added_rounds) == (3, 2, 2)
    links = sorted(os.listdir(coll / "archive"))
    assert len(links) == 3
    for name in links:
        target = os.readlink(coll / "archive" / name)
        assert os.path.basename(target) == name and os.path.exists(target)
    assert sorted(os.listdir(coll / "indexes")) == ["20261101.cdxj", "20261102.cdxj"]
    # nothing new: nothing copied again
    assert replay.build_collection(cfg).added_rounds == 0
    # a new round is added, a rewritten index (fetch re-run) replaced, a deleted round dropped
    _round(home, "20261104", 1)
    (home / "warc" / "20261102" / "index.cdxj").write_text("y 20261102 rewritten\n")
    shutil.rmtree(home / "warc" / "20261101")
    third = replay.build_collection(cfg)
    assert (third.warcs, third.rounds, third.added_rounds) == (2, 2, 2)
    assert sorted(os.listdir(coll / "indexes")) == ["20261102.cdxj", "20261104.cdxj"]
    assert (coll / "indexes" / "20261102.cdxj").read_text() == "y 20261102 rewritten\n"
    assert all(n.startswith(("20261102", "20261104")) for n in os.listdir(coll / "archive"))


def test_cli_build_only(tmp_path, capsys):
    home = tmp_path / "home"
    _round(home, "20261101", 1)
    rc = main(["--set", f"crawl.home={home}", "replay", "--build-only"])
    assert rc == 0
    assert "1 WARC files, 1 rounds" in capsys.readouterr().out


def test_cli_says_how_to_install_pywb(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    _round(home, "20261101", 1)
    monkeypatch.setenv("PYWB_VENV", str(tmp_path / "no-such-venv"))
    rc = main(["--set", f"crawl.home={home}", "replay", "--port", "0"])
    assert rc == 2
    assert "scripts/setup_pywb.sh" in capsys.readouterr().err

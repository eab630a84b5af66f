"""`crawler replay`: the crawl's WARCs in pywb, on 127.0.0.1, with the capture calendar.

pywb (the replay tool web archivists use) runs from its own virtualenv, ``.venv-pywb``
(``scripts/setup_pywb.sh``, pinned by ``scripts/pywb-constraints.txt``): its pins (gevent, an
old redis, brotlipy) clash with the project's. This module only lays out a pywb collection
and starts pywb's ``wayback`` server on it.

The collection lives in ``<home>/replay/collections/<name>/``: ``archive/`` holds a symbolic
link per WARC file of every round (pywb finds a record by its file's base name, which the
round's CDXJ index names), ``indexes/<round>.cdxj`` a copy of each round's index
(``warc/<round>/index.cdxj``, written by the fetch step; pywb merges the files of the folder).
Building is incremental: only rounds whose index changed are copied again, and links and
indexes of rounds that are gone (WARC retention) are removed. WARCs on s3a:// are not
replayed from here.

URLs: ``http://127.0.0.1:PORT/<name>/<14-digit timestamp>id_/<url>`` is the raw capture
(what the server sent, no rewriting), ``.../<name>/<timestamp>/<url>`` the page in pywb's
frame with its calendar, ``.../<name>/*/<url>`` every capture of the URL.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fetcher.cdxj import INDEX_NAME
from recrawl.config import Config

COLLECTION = "crawl"
REPO = Path(__file__).resolve().parent.parent


class PywbMissing(FileNotFoundError):
    """pywb's virtualenv is not set up."""


@dataclass(frozen=True)
class Collection:
    root: Path  # the folder pywb runs in (holds collections/)
    name: str
    warcs: int
    rounds: int
    added_rounds: int


def wayback_bin() -> Path:
    """pywb's ``wayback`` (``PYWB_VENV`` names another virtualenv)."""
    venv = Path(os.environ.get("PYWB_VENV") or REPO / ".venv-pywb")
    exe = venv / "bin" / "wayback"
    if not exe.exists():
        raise PywbMissing(f"pywb is not installed at {venv}: run `bash scripts/setup_pywb.sh`")
    return exe


def build_collection(cfg: Config, name: str = COLLECTION) -> Collection:
    """Create or bring up to date the pywb collection of every round's WARCs and index."""
    home = cfg.local_home
    if home is None:
        raise ValueError(f"crawler replay reads local WARCs; the crawl home is {cfg.home}")
    warc_root = home / "warc"
    root = home / "replay"
    coll = root / "collections" / name
    archive, indexes = coll / "archive", coll / "indexes"
    archive.mkdir(parents=True, exist_ok=True)
    indexes.mkdir(parents=True, exist_ok=True)
    rounds = sorted(d for d in warc_root.iterdir() if (d / INDEX_NAME).is_file()) \
        if warc_root.is_dir() else []
    wanted_links: set[str] = set()
    added = 0
    for rdir in rounds:
        for w in sorted(rdir.glob("*.warc.gz")):
            wanted_links.add(w.name)
            link = archive / w.name
            if not link.is_symlink() or os.readlink(link) != str(w):
                if link.is_symlink() or link.exists():
                    link.unlink()
                link.symlink_to(w)
        src, dst = rdir / INDEX_NAME, indexes / f"{rdir.name}.cdxj"
        if not dst.exists() or dst.stat().st_mtime < src.stat().st_mtime \
                or dst.stat().st_size != src.stat().st_size:
            tmp = dst.with_suffix(".cdxj.tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)  # pywb never reads half a file
            added += 1
    # Rounds gone from warc/ (retention) leave the collection too.
    for link in archive.iterdir():
        if link.name not in wanted_links:
            link.unlink()
    names = {f"{r.name}.cdxj" for r in rounds}
    for idx in indexes.iterdir():
        if idx.name not in names:
            idx.unlink()
    return Collection(root, name, len(wanted_links), len(rounds), added)


def serve_command(coll: Collection, port: int, bind: str = "127.0.0.1") -> list[str]:
    """The ``wayback`` command line serving ``coll`` (run it with cwd ``coll.root``)."""
    return [str(wayback_bin()), "--bind", bind, "--port", str(port), "-d", str(coll.root)]


def start(coll: Collection, port: int) -> subprocess.Popen:
    """Start pywb on 127.0.0.1:``port`` in the background (tests, scripts)."""
    return subprocess.Popen(serve_command(coll, port), cwd=coll.root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def serve(coll: Collection, port: int) -> int:
    """Run pywb in the foreground until interrupted."""
    cmd = serve_command(coll, port)  # PywbMissing before anything is printed
    print(f"replay: {coll.warcs} WARC files of {coll.rounds} rounds in collection "
          f"{coll.name!r} ({coll.added_rounds} round indexes added or updated)")
    print(f"replay: browse http://127.0.0.1:{port}/{coll.name}/  (Ctrl-C stops)")
    sys.stdout.flush()
    return subprocess.call(cmd, cwd=coll.root)

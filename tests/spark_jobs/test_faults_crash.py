"""Crash tests with real processes: `crawler round` killed with SIGKILL mid-fetch and again
mid-updatedb, then resumed, compared with an uninterrupted run of the same round on an
identical simulated web.

Crawl home A: `crawler round` (a subprocess, its own JVM) is killed (-9, the whole process
group, JVM included) once the fetch has written part of a WARC file; `crawler round` is run
again (it resumes at fetch) and killed once updatedb's first MERGE has committed; a third
`crawler round` finishes it, while a `crawler maintenance` started next to it must be refused
by the crawl-home lock. Crawl home B: the same round in-process, uninterrupted. The Airflow
task case is the same process: a `crawl_cycle` task is this `crawler updatedb` in a
BashOperator, and a killed task is retried by running it again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from recrawl.rules.rounds import STEPS, parse_date, round_id_for

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

DATE = "2026-11-02"
SETTINGS = {
    "crawl.max_depth": 3,
    "fetcher.static_hosts": {"*.sim.test": "127.0.0.1"},
    "fetcher.allow_private_networks": ["127.0.0.1/32"],
    "fetcher.min_delay_s": 0.5,
    "fetcher.max_crawl_delay_s": 2.0,
    "fetcher.time_budget_s": 60.0,
    "fetcher.request_deadline_s": 6.0,
    "fetcher.read_timeout_s": 3.0,
    "fetcher.threads": 4,
    "generate.max_per_host": 20,
    "generate.partitions": 2,
    "spark.shuffle_partitions": 2,
}
HOSTS = ("site0.sim.test", "site1.sim.test")  # site1: Crawl-delay 1, /private/ disallowed


def _toml(settings: dict) -> str:
    sections: dict[str, dict] = {}
    for dotted, value in settings.items():
        sec, key = dotted.split(".", 1)
        sections.setdefault(sec, {})[key] = value

    def val(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {val(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return json.dumps(v)

    return "\n".join(f"[{s}]\n" + "\n".join(f"{k} = {val(v)}" for k, v in kv.items()) + "\n"
                     for s, kv in sections.items())


class Crawler:
    """`crawler ...` as a subprocess in its own process group (JVM included)."""

    def __init__(self, home: Path, config: Path, out_dir: Path):
        self.home, self.config, self.out_dir = home, config, out_dir
        self.n = 0

    def start(self, *args: str) -> tuple[subprocess.Popen, Path, Path]:
        self.n += 1
        out, err = self.out_dir / f"{self.n}.out", self.out_dir / f"{self.n}.err"
        env = dict(os.environ, RECRAWL_CONFIG=str(self.config),
                   RECRAWL_CRAWL__HOME=str(self.home), PYTHONUNBUFFERED="1")
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", *args],
                                stdout=out.open("w"), stderr=err.open("w"), env=env,
                                start_new_session=True)
        return proc, out, err


def _group(pgid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid:
                out.append(p)
        except (ProcessLookupError, psutil.Error):
            pass
    return out


def kill_group(proc: subprocess.Popen) -> float:
    """SIGKILL the process group (python driver and its JVM); returns when all are gone."""
    members = _group(proc.pid)
    assert any("java" in (p.name() or "") for p in members), "JVM not in the process group"
    os.killpg(proc.pid, signal.SIGKILL)
    t = time.time()
    proc.wait(30)
    deadline = time.monotonic() + 30
    while _group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _group(proc.pid), "processes of the killed group survived"
    return t


def _wait_for(cond, proc, what: str, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc.poll() is not None:
            raise AssertionError(f"crawler exited ({proc.returncode}) before {what}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _commits(table_dir: Path) -> int:
    return len(list((table_dir / "_delta_log").glob("*.json")))


def _cfg(home):
    from app.demo import demo_config

    return demo_config(home, **SETTINGS)


def _seed(spark, cfg, web, path: Path):
    from recrawl.store.tables import init_tables
    from spark_jobs import inject

    init_tables(spark, cfg)
    path.write_text("\n".join(u for h in HOSTS for u in web.truth.pages(h)) + "\n")
    inject.run(spark, cfg, str(path), parse_date(DATE))


@pytest.fixture(scope="module")
def crash(spark, tmp_path_factory):
    from app.cli import run_step
    from simweb import SimWeb

    base = tmp_path_factory.mktemp("crash")
    web_a, web_b = SimWeb(seed=11, n_sites=2, pages_per_site=8), SimWeb(seed=11, n_sites=2,
                                                                        pages_per_site=8)
    web_a.start()
    web_b.start()
    timings: dict[str, float] = {}
    try:
        cfg_a = _cfg(base / "a")
        cfg_b = _cfg(base / "b")
        logical = parse_date(DATE)
        rid = round_id_for(cfg_a, logical)
        # the two webs listen on different ports: seeds carry them, so each crawl hits its own
        _seed(spark, cfg_a, web_a, base / "seeds-a.txt")
        _seed(spark, cfg_b, web_b, base / "seeds-b.txt")

        # B: the uninterrupted reference, in this process
        t0 = time.monotonic()
        for step in STEPS:
            run_step(spark, cfg_b, step, rid, logical)
        timings["reference round (in-process)"] = time.monotonic() - t0

        config = base / "crawler.toml"
        config.write_text(_toml(SETTINGS))
        crawler = Crawler(Path(cfg_a.home), config, base)
        warc_dir = Path(cfg_a.warc_dir(rid))

        # 1. kill -9 mid-fetch: part of a WARC written, pages requested
        t0 = time.monotonic()
        proc, _, err1 = crawler.start("round", "--date", DATE)
        pages = lambda: [e for e in web_a.request_log() if e["path"] != "/robots.txt"]  # noqa: E731
        _wait_for(lambda: list(warc_dir.glob("*.open")) and len(pages()) >= 4, proc,
                  "the fetch to write a WARC")
        n_requested = len(pages())
        kill1 = kill_group(proc)
        open_left = sorted(p.name for p in warc_dir.glob("*.open"))
        timings["run 1 (killed mid-fetch)"] = time.monotonic() - t0

        # 2. resume; kill -9 once updatedb's first MERGE into crawldb has committed
        t0 = time.monotonic()
        proc, out2, _ = crawler.start("round", "--date", DATE)
        crawldb_dir = Path(cfg_a.table_path("crawldb"))
        _wait_for(lambda: f"dedup {rid}" in out2.read_text(), proc, "dedup to finish")
        before = _commits(crawldb_dir)
        _wait_for(lambda: _commits(crawldb_dir) > before, proc, "updatedb's first commit")
        kill2 = kill_group(proc)
        out2_text = out2.read_text()
        timings["run 2 (resumed, killed mid-updatedb)"] = time.monotonic() - t0

        # 3. resume to the end; a maintenance started next to it is refused by the lock
        t0 = time.monotonic()
        proc, out3, err3 = crawler.start("round", "--date", DATE)
        # Run 2's stale lock is still there: wait until this round has reclaimed it and holds
        # its own, or maintenance may win the race for the stale lock instead.
        _wait_for(lambda: _lock_pid(Path(cfg_a.home) / "crawler.lock") == proc.pid, proc, "the lock")
        maint = subprocess.run(
            [sys.executable, "-m", "app.cli", "maintenance", "--step", "optimize"],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, RECRAWL_CONFIG=str(config), RECRAWL_CRAWL__HOME=cfg_a.home))
        rc3 = proc.wait(600)
        timings["run 3 (resumed to the end)"] = time.monotonic() - t0
        yield {
            "cfg_a": cfg_a, "cfg_b": cfg_b, "rid": rid, "web_a": web_a, "web_b": web_b,
            "kill1": kill1, "kill2": kill2, "open_left": open_left, "n_requested": n_requested,
            "err1": err1, "out2": out2_text, "out3": out3.read_text(), "err3": err3.read_text(),
            "rc3": rc3, "maint": maint, "timings": timings,
        }
    finally:
        web_a.stop()
        web_b.stop()
        print("\ncrash test timings:", {k: round(v, 1) for k, v in timings.items()})


def _local(url: str) -> str:
    """A URL without its port: the two webs listen on different ports."""
    return re.sub(r"^(https?://[^/:]+):\d+", r"\1", url)


def _rows(spark, cfg, table, where="true"):
    from recrawl.store.tables import read

    return [r.asDict(recursive=True) for r in read(spark, cfg, table).where(where).collect()]


def test_runs_were_killed_where_intended_and_resumed(crash):
    assert crash["open_left"], "the first kill should leave a partial .open WARC"
    assert "generate already done, resuming at fetch" in crash["out2"]
    assert f"updatedb {crash['rid']}" not in crash["out2"]  # killed inside updatedb
    assert crash["rc3"] == 0, crash["err3"]
    assert "resuming at updatedb" in crash["out3"]
    assert "reclaiming a stale lock" in crash["err3"]


def _lock_pid(path: Path) -> int | None:
    try:
        return json.loads(path.read_text()).get("pid")
    except (OSError, ValueError):
        return None  # absent, or being rewritten


def test_concurrent_maintenance_is_refused_clearly(crash):
    m = crash["maint"]
    assert m.returncode == 2, m.stderr
    assert m.stderr.strip().count("\n") == 0
    assert "is in use by `crawler round`" in m.stderr


def test_same_outcome_as_an_uninterrupted_run(spark, crash):
    rid = crash["rid"]

    def outcome(cfg):
        return sorted((_local(r["url"]), r["fetch_status"], r["http_status"])
                      for r in _rows(spark, cfg, "fetches", f"round_id = '{rid}'"))

    a, b = outcome(crash["cfg_a"]), outcome(crash["cfg_b"])
    assert a == b
    assert {s for _, s, _ in a} >= {"fetched", "robots_denied"}

    def db(cfg):
        return sorted((_local(r["url"]), r["status"], r["depth"], r["fetch_count"], r["retries"],
                       r["parse_failures"], _local(r["redirect_to"] or ""))
                      for r in _rows(spark, cfg, "crawldb"))

    assert db(crash["cfg_a"]) == db(crash["cfg_b"])


def test_one_fetch_row_per_generated_url_and_one_crawldb_row_per_url(spark, crash):
    cfg, rid = crash["cfg_a"], crash["rid"]
    generated = sorted(r["url"] for r in _rows(spark, cfg, "fetch_list", f"round_id = '{rid}'"))
    fetched = sorted(r["url"] for r in _rows(spark, cfg, "fetches", f"round_id = '{rid}'"))
    assert generated and fetched == generated
    urls = [r["url"] for r in _rows(spark, cfg, "crawldb")]
    assert len(urls) == len(set(urls))
    rounds = _rows(spark, cfg, "rounds", f"round_id = '{rid}'")
    assert len(rounds) == 1 and set(rounds[0]["steps_done"]) == set(STEPS)
    assert rounds[0]["counts"]["fetch.resumed"] == 1


def test_every_referenced_warc_is_complete_and_no_partial_is_referenced(spark, crash):
    from warcio.archiveiterator import ArchiveIterator

    cfg = crash["cfg_a"]
    referenced = {r["warc_file"] for r in _rows(spark, cfg, "fetches", "warc_file IS NOT NULL")}
    referenced |= {r["warc_file"] for r in _rows(spark, cfg, "pages", "warc_file IS NOT NULL")}
    assert referenced
    for f in referenced:
        assert f.endswith(".warc.gz") and Path(f).is_file(), f
        with open(f, "rb") as fh:
            n = sum(1 for _ in ArchiveIterator(fh))  # raises on a truncated member
        assert n > 1
    names = {Path(f).name for f in referenced}
    assert not names & set(crash["open_left"])
    assert not any(n.startswith(o.split("-p")[0]) for o in crash["open_left"] for n in names)
    on_disk = {str(p) for p in Path(cfg.home, "warc").rglob("*") if p.is_file()}
    index = Path(cfg.home, "warc", crash["rid"], "index.cdxj")  # the round's CDXJ index
    assert on_disk == referenced | {str(index)}  # the killed attempt's partial files are gone
    indexed = {json.loads(line.split(" ", 2)[2])["filename"] for line in index.read_text().splitlines()}
    assert indexed and indexed <= names  # the index names surviving WARCs only
    assert not Path(cfg.home, "staging", "fetch", crash["rid"]).exists()


def test_server_saw_no_politeness_violation_across_the_crash(crash):
    from simweb.audit import politeness_violations

    web = crash["web_a"]
    cfg = crash["cfg_a"]
    delays = {h: min(web.truth.crawl_delay(h) or 0.0, cfg.get("fetcher.max_crawl_delay_s"))
              for h in web.hosts()}
    log = web.request_log()
    # both attempts requested the hosts: the killed one and the resumed one
    assert any(e["start"] < crash["kill1"] for e in log)
    assert any(e["start"] > crash["kill1"] for e in log)
    assert politeness_violations(log, cfg.get("fetcher.min_delay_s"), delays) == []

"""A real Airflow deployment for a test module: API server, scheduler and DAG processor.

Each component is its own `.venv-airflow/bin/airflow ...` process (what `airflow standalone`
starts, minus the triggerer: no task here defers), with a throw-away AIRFLOW_HOME configured by
the project's own `scripts/setup_airflow.sh` (LocalExecutor, SQLite metadata DB — Airflow 3 runs
the LocalExecutor on SQLite —, the simple auth manager with everyone admin, the `crawl_tables`
pool), the repository's dags/ and the environment the caller gives (RECRAWL_CONFIG), which task
processes inherit from the scheduler. The REST API is called as a script would: a JWT from
`GET /auth/token` (the all-admins mode of the simple auth manager needs no credentials), sent
as a Bearer header. Every process starts in its own session, so stopping a component also stops
the task processes and Spark drivers it started.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.dags.airflow_helpers import AIRFLOW_BIN, ROOT, airflow_env

T = TypeVar("T")
COMPONENTS = ("api-server", "scheduler", "dag-processor")
TERMINAL = {"success", "failed"}


def free_port(first: int, last: int) -> int:
    """The first port in [first, last] nobody listens on (helpers and CI share one machine)."""
    for port in range(first, last + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}-{last}")


class AirflowStack:
    """Start, call and stop the Airflow components of one AIRFLOW_HOME."""

    def __init__(self, home: Path, port: int, extra_env: dict[str, str]) -> None:
        self.home = home
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.env = airflow_env(
            home, **extra_env,
            AIRFLOW__API__PORT=str(port), AIRFLOW__API__BASE_URL=self.base,
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"{self.base}/execution/",
            # Two cores shared with Spark: one parsing process, and DAG files re-read rarely.
            AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES="1",
            AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL="120",
        )
        self.procs: dict[str, subprocess.Popen] = {}
        self.token = ""

    def start(self, timeout: float = 600) -> None:
        """setup_airflow.sh into this home, then the components; returns once the DAGs are loaded."""
        setup = subprocess.run(["bash", str(ROOT / "scripts" / "setup_airflow.sh")], env=self.env, cwd=ROOT,
                               capture_output=True, text=True, timeout=timeout)
        if setup.returncode != 0:
            raise RuntimeError(f"setup_airflow.sh failed:\n{(setup.stdout + setup.stderr)[-3000:]}")
        for name in COMPONENTS:
            with open(self.home / f"{name}.out", "w", encoding="utf-8") as out:
                self.procs[name] = subprocess.Popen(
                    [str(AIRFLOW_BIN / "airflow"), name], env=self.env, cwd=ROOT,
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.wait_for("the API server", self._token, timeout)

    def _token(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base}/auth/token", timeout=10) as resp:
                self.token = json.loads(resp.read())["access_token"]
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False
        return True

    def _call(self, method: str, path: str, body: Any = None) -> tuple[int, str]:
        req = urllib.request.Request(
            self.base + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def api(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201)) -> Any:
        """Call the REST API (`/api/v2/...`); the decoded JSON answer."""
        status, text = self._call(method, path, body)
        if status not in ok:
            raise AssertionError(f"{method} {path}: HTTP {status}: {text[:2000]}")
        return json.loads(text) if text else None

    def create_backfill(self, body: dict, timeout: float = 300) -> dict:
        """`POST /api/v2/backfills`, retried while it answers 503.

        On SQLite, Airflow answers 503 "Database is locked. Backfill creation is not supported on
        SQLite under concurrent access" when the scheduler or DAG processor holds the write lock
        (it happened in CI while the scheduler was starting). Airflow then cleans up (deleting
        the backfill, and any runs it had cleared: docs/airflow.md), so trying again is what the
        UI's user does; a retry answered 409 takes the active backfill as the answer, or tries
        again while the clean-up is still removing it.
        """
        deadline = time.monotonic() + timeout
        retried = False
        while True:
            status, text = self._call("POST", "/api/v2/backfills", body)
            if status in (200, 201):
                return json.loads(text)
            if status == 409 and retried:
                running = self.active_backfills(body["dag_id"])
                if running:
                    return running[0]
                # 409 yet none active: the failed creation's clean-up was still under way
            elif status != 503:
                raise AssertionError(f"POST /api/v2/backfills: HTTP {status}: {text[:2000]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"POST /api/v2/backfills: HTTP {status}: {text[:2000]}")
            retried = True
            time.sleep(3)

    def resubmit_backfill(self, body: dict) -> int:
        """`POST /api/v2/backfills` once more, for a wait that found its backfill gone.

        The answer is only the HTTP status: 409 means a backfill is active after all (the read
        that found none raced a creation or its clean-up; CI saw exactly that), 503 the SQLite
        write lock again; either way the caller polls on and decides on its next look.
        """
        status, text = self._call("POST", "/api/v2/backfills", body)
        if status not in (200, 201, 409, 503):
            raise AssertionError(f"POST /api/v2/backfills: HTTP {status}: {text[:2000]}")
        return status

    def active_backfills(self, dag_id: str) -> list[dict]:
        """The DAG's backfills not completed yet."""
        out = self.api("GET", f"/api/v2/backfills?dag_id={dag_id}")["backfills"]
        return [b for b in out if b["completed_at"] is None]

    def dag_runs(self, dag_id: str) -> list[dict]:
        """Every run of a DAG, oldest logical date first (what the UI's runs page lists)."""
        out = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=run_after")
        return out["dag_runs"]

    def task_instances(self, dag_id: str, run_id: str, missing_ok: bool = False) -> list[dict] | None:
        """A run's task instances; None for a run that does not exist when `missing_ok`."""
        from urllib.parse import quote

        path = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances?limit=100"
        out = self.api("GET", path, ok=(200, 404) if missing_ok else (200,))
        return out["task_instances"] if "task_instances" in out else None

    def alive(self) -> None:
        """Fail at once when a component died (instead of waiting for a timeout)."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"airflow {name} exited with {proc.returncode}:\n{self.output(name)}")

    def output(self, name: str, chars: int = 4000) -> str:
        path = self.home / f"{name}.out"
        return path.read_text(encoding="utf-8", errors="replace")[-chars:] if path.exists() else ""

    def wait_for(self, what: str, probe: Callable[[], T], timeout: float, every: float = 3.0) -> T:
        """Poll `probe` until it returns something truthy; a deadline only to stop a hung run."""
        deadline = time.monotonic() + timeout
        while True:
            self.alive()
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"gave up waiting for {what} after {timeout:.0f}s; scheduler log:\n"
                                   f"{self.output('scheduler')}")
            time.sleep(every)

    def stop(self) -> None:
        """SIGTERM each component's process group (tasks, crawler drivers, JVMs), SIGKILL leftovers."""
        for proc in self.procs.values():
            _signal_group(proc, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)  # whatever of the group outlived the leader
            proc.wait(timeout=30)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass

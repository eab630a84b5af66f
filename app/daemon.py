"""A warm driver for many short `crawler` verbs: one Spark session that Airflow's tasks share.

Every Airflow task is one `crawler` verb, and on a small crawl a verb's own driver spends most of
its life starting: a JVM, Spark's and Delta's ~24,000 classes, a session, the first queries'
planning, all before the step's few seconds of work. With `spark.driver_daemon` on, `crawler`
(the client) hands a Spark verb to a driver process that stays up between verbs (the daemon, this
module) and prints what the verb printed, with its exit code: the task is still one step, the
fetch still runs in `mapPartitions` of a Spark session, and the step's code is the same
`crawler` code, now run by the warm driver. It is Gradle's daemon, applied to a Spark driver:

* **Compatible or new.** A daemon serves only clients whose session would be the same: its key
  hashes the `[spark]` configuration, the environment the JVM and executors read (JAVA_*,
  SPARK_*, PYSPARK_*, HADOOP_*, AWS_*, PYTHONPATH), the Python interpreter, and the project's
  code (path, size and mtime of every source file). A client with another key starts its own
  daemon; an edited source file means a new daemon on the next verb, never stale code.
* **One verb at a time.** The daemon serves its clients in turn (Airflow's `crawl_tables` pool
  has one slot anyway); each verb runs with the client's environment, working directory and
  command line, and takes the crawl home's lock as any `crawler` does.
* **A killed client stops its verb.** When the client's connection closes before the verb ends
  (an Airflow task killed on timeout, Ctrl-C), the daemon cancels the session's Spark jobs, as
  killing the verb's own driver would have stopped them; steps resume from what they committed.
* **Idle daemons exit.** After `spark.driver_daemon_idle_s` without a client (default 15 min:
  longer than the gap between two tasks of a DAG run, shorter than a day), the daemon stops its
  session and exits. `crawler daemon stop` stops them (each after its current verb); `crawler
  daemon status` lists them and what each runs, answered at once.
* **Where:** `spark.driver_daemon` = "on", "off", or "auto" (the default): on for a verb run by an
  Airflow task (`AIRFLOW_CTX_DAG_ID` is set) with a local master; off otherwise -- a person's
  `crawler round` is one long session already, and on a cluster an idle daemon would hold its
  executors. The daemon's sockets and logs are in `spark.driver_daemon_dir` (default
  `$TMPDIR/recrawl-driver-<uid>`); its log holds the JVM's output and Python workers' logs.

A client that cannot reach a daemon (it failed to start, or died during the verb) says so in one
line on stderr; a verb the daemon never started runs in the client's own driver instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from recrawl.config import PROJECT_ROOT, Config, ConfigError
from recrawl.sparkenv.cluster import is_local

MODES = ("auto", "on", "off")
# Environment variables the driver JVM, its Python workers or the executors read at start-up.
_ENV_PREFIXES = ("JAVA_", "SPARK_", "PYSPARK_", "HADOOP_", "AWS_")
_ENV_NAMES = ("PYTHONPATH",)
_CODE_DIRS = ("app", "recrawl", "spark_jobs", "fetcher", "simweb")
_NOT_SESSION = ("driver_daemon", "driver_daemon_idle_s", "driver_daemon_dir")
START_WAIT_S = 120.0  # a daemon listens within seconds; its session starts with the first verb
DIED = 70  # exit code when the daemon ended before the verb did (EX_SOFTWARE)


def mode(cfg: Config) -> str:
    value = str(cfg.get("spark.driver_daemon")).lower()
    if value not in MODES:
        raise ConfigError(f"spark.driver_daemon must be one of {', '.join(MODES)}, got {value!r}")
    if float(cfg.get("spark.driver_daemon_idle_s")) <= 0:
        raise ConfigError("spark.driver_daemon_idle_s must be > 0")
    return value


def wanted(cfg: Config, environ: Mapping[str, str] | None = None) -> bool:
    """Should this process hand its Spark verb to a daemon?"""
    env = os.environ if environ is None else environ
    chosen = mode(cfg)
    if chosen == "off" or env.get("CRAWLER_DRIVER_DAEMON") or env.get("PYSPARK_GATEWAY_PORT"):
        return False  # a daemon itself, or a driver spark-submit started: run here
    if chosen == "on":
        return True
    return bool(env.get("AIRFLOW_CTX_DAG_ID")) and is_local(str(cfg.get("spark.master")))


def _code_stamp(root: Path = PROJECT_ROOT) -> list[tuple[str, int, int]]:
    out = []
    for name in _CODE_DIRS:
        for path in sorted((root / name).rglob("*")):
            if path.suffix in (".py", ".toml") and "__pycache__" not in path.parts:
                st = path.stat()
                out.append((str(path.relative_to(root)), st.st_size, st.st_mtime_ns))
    return out


def daemon_key(cfg: Config, environ: Mapping[str, str] | None = None) -> str:
    """What makes two verbs' sessions interchangeable, hashed (see the module docstring)."""
    env = os.environ if environ is None else environ
    spark = {k: v for k, v in cfg.section("spark").items() if k not in _NOT_SESSION}
    seen = {k: v for k, v in env.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}
    blob = json.dumps({"spark": spark, "env": seen, "python": sys.executable,
                       "code": _code_stamp()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class UnsafeFolder(RuntimeError):
    """The daemon folder is not this user's alone: its sockets would run anyone's verbs."""


def daemon_dir(cfg: Config) -> Path:
    """The folder of the daemons' sockets and logs, created private; refused unless it is owned
    by this user and closed to others (whoever can connect runs verbs as this user)."""
    configured = str(cfg.get("spark.driver_daemon_dir"))
    path = Path(configured) if configured else Path(tempfile.gettempdir()) / f"recrawl-driver-{os.getuid()}"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise UnsafeFolder(f"{path} must be a folder owned by uid {os.getuid()} with mode 0700 "
                           f"(spark.driver_daemon_dir)")
    return path


def _same_user(conn: socket.socket) -> bool:
    """Is the peer of a Unix socket this user (SO_PEERCRED: pid, uid, gid)?"""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1] == os.getuid()


# A verb's output may come from several threads (the fetch step's progress thread): one
# message at a time, or two sendall calls could interleave their bytes on the socket.
_SEND_LOCK = threading.Lock()


def _send(conn: socket.socket, obj: dict) -> None:
    data = (json.dumps(obj) + "\n").encode()
    with _SEND_LOCK:
        conn.sendall(data)


def _lines(conn: socket.socket) -> Iterator[dict]:
    buf = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield json.loads(line)


# ---------------------------------------------------------------------------------- client


def _connect(sock_path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(sock_path))
    except OSError:
        conn.close()
        return None
    return conn


def _start(sock_path: Path, log_path: Path, idle_s: float) -> socket.socket | None:
    """Start a daemon for `sock_path` (one starter at a time) and connect to it."""
    with open(sock_path.with_suffix(".lock"), "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # two clients at once start one daemon, not two
        conn = _connect(sock_path)
        if conn is not None:
            return conn
        sock_path.unlink(missing_ok=True)  # a dead daemon's socket
        with open(log_path, "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "app.daemon", str(sock_path), str(idle_s)],
                cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env={**os.environ, "CRAWLER_DRIVER_DAEMON": "1"},
                start_new_session=True)  # its own session: outlives the task that started it
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            conn = _connect(sock_path)
            if conn is not None:
                return conn
            time.sleep(0.1)
    return None


def forward(argv: Sequence[str], cfg: Config, verb: str) -> int | None:
    """Run `crawler argv` in the daemon for this configuration; its exit code, or None when no
    daemon could be reached (the caller then runs the verb itself)."""
    try:
        root = daemon_dir(cfg)
    except UnsafeFolder as exc:
        print(f"crawler {verb}: no driver daemon: {exc}; running in this process", file=sys.stderr)
        return None
    key = daemon_key(cfg)
    sock_path, log_path = root / f"{key}.sock", root / f"{key}.log"
    conn = _connect(sock_path) or _start(sock_path, log_path, float(cfg.get("spark.driver_daemon_idle_s")))
    if conn is None:
        print(f"crawler {verb}: no driver daemon started (log: {log_path}); running in this process",
              file=sys.stderr)
        return None
    with conn:
        _send(conn, {"argv": list(argv), "env": dict(os.environ), "cwd": os.getcwd()})
        for msg in _lines(conn):
            if "out" in msg:
                sys.stdout.write(msg["out"])
                sys.stdout.flush()
            elif "err" in msg:
                sys.stderr.write(msg["err"])
                sys.stderr.flush()
            elif "rc" in msg:
                return int(msg["rc"])
            elif "refused" in msg:
                print(f"crawler {verb}: driver daemon: {msg['refused']}; running in this process",
                      file=sys.stderr)
                return None
    print(f"crawler {verb}: the driver daemon ended before the verb did (log: {log_path})",
          file=sys.stderr)
    return DIED


def _ask_each(cfg: Config, request: dict) -> list[dict]:
    """Send `request` to every daemon of the folder that answers; their replies."""
    replies = []
    for sock_path in sorted(daemon_dir(cfg).glob("*.sock")):
        conn = _connect(sock_path)
        if conn is None:
            continue  # a dead daemon's socket
        with conn:
            _send(conn, request)
            replies.extend(_lines(conn))
    return replies


def daemons(cfg: Config) -> list[dict]:
    """The daemons in this configuration's daemon folder that answer: pid, socket, since, served,
    busy (the verb running, or None)."""
    return [msg for msg in _ask_each(cfg, {"status": True}) if "pid" in msg]


def stop_all(cfg: Config) -> int:
    """Ask every daemon of the folder to exit (each ends its current verb first); how many."""
    return sum(1 for msg in _ask_each(cfg, {"stop": True}) if "stopping" in msg)


# ---------------------------------------------------------------------------------- server


class _Frames(io.TextIOBase):
    """sys.stdout / sys.stderr of a verb: each write goes to the client as one message."""

    def __init__(self, conn: socket.socket, kind: str) -> None:
        self.conn, self.kind = conn, kind

    def write(self, text: str) -> int:
        if text:
            with contextlib.suppress(OSError):  # the client is gone; the verb is being cancelled
                _send(self.conn, {self.kind: text})
        return len(text)

    def writable(self) -> bool:
        return True


@contextlib.contextmanager
def _as_client(request: dict) -> Iterator[None]:
    """The client's environment and working directory for the duration of one verb."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ["CRAWLER_DRIVER_DAEMON"] = "1"
    os.chdir(request["cwd"])
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)


def _watch_client(conn: socket.socket, done: threading.Event) -> None:
    """Cancel the session's Spark jobs if the client goes away before its verb ends."""
    try:
        conn.recv(1)  # the client sends nothing after its request: returns at EOF
    except OSError:
        pass
    if done.is_set():
        return
    from pyspark import SparkContext  # lazy: pyspark (the daemon has a session by now or none)

    sc = SparkContext._active_spark_context
    _log("client gone: cancelling the verb's Spark jobs")
    if sc is not None:
        sc.cancelAllJobs()


def _run_verb(conn: socket.socket, request: dict) -> int:
    from app.cli import main  # lazy: the daemon's first verb pays for it, once

    done = threading.Event()
    threading.Thread(target=_watch_client, args=(conn, done), daemon=True).start()
    out, err = _Frames(conn, "out"), _Frames(conn, "err")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                with _as_client(request):
                    rc = main(request["argv"])
            except SystemExit as exc:  # argparse's --help and usage errors
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            except BaseException:
                traceback.print_exc()  # to the client, as its own driver would have printed it
                rc = 1
    finally:
        done.set()
    return rc


def _log(text: str) -> None:
    """A line in the daemon's log (its own stdout: sys.stdout is a client's while a verb runs)."""
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.__stdout__, flush=True)


class _Daemon:
    """Verbs one at a time (under `lock`); status and stop are answered at once, even mid-verb."""

    def __init__(self, sock_path: Path, idle_s: float) -> None:
        self.sock_path, self.idle_s = sock_path, idle_s
        self.lock = threading.Lock()
        self.started, self.served, self.busy = time.time(), 0, None
        self.last_active, self.stopping, self.closed = time.monotonic(), False, False

    def handle(self, conn: socket.socket) -> None:
        with conn:
            if not _same_user(conn):  # the folder is private; this is the second lock
                return
            try:
                request = next(_lines(conn), None)
            except (OSError, ValueError):
                return
            if not request:
                return
            with contextlib.suppress(OSError):
                if request.get("status"):
                    _send(conn, {"pid": os.getpid(), "socket": str(self.sock_path), "since": self.started,
                                 "served": self.served, "busy": self.busy})
                elif request.get("stop"):
                    self.stopping = True  # the main loop exits once no verb runs
                    _send(conn, {"stopping": True})
                elif "argv" in request:
                    self.verb(conn, request)

    def verb(self, conn: socket.socket, request: dict) -> None:
        with self.lock:
            if self.closed or self.stopping:
                _send(conn, {"refused": "the daemon is stopping"})  # the client runs it itself
                return
            self.busy, t0 = " ".join(request["argv"]), time.monotonic()
            try:
                rc = _run_verb(conn, request)
            finally:
                self.served += 1
                self.busy, self.last_active = None, time.monotonic()
            _log(f"{' '.join(request['argv'])}: rc {rc}, {time.monotonic() - t0:.1f} s")
            _send(conn, {"rc": rc})

    def should_exit(self) -> bool:
        """True (and no verb will start any more) when told to stop or idle long enough."""
        if not self.lock.acquire(blocking=False):
            return False  # a verb runs
        try:
            idle = time.monotonic() - self.last_active >= self.idle_s
            if self.stopping or idle:
                self.closed = True
                _log("stopping on request" if self.stopping else f"idle for {self.idle_s:.0f} s: exiting")
            return self.closed
        finally:
            self.lock.release()


def serve(sock_path: Path, idle_s: float) -> None:
    """Serve clients until idle for `idle_s` seconds, told to stop, or sent SIGTERM."""
    import recrawl.sparkenv.spark  # lazy: only the daemon's process sets it; clients stay light

    recrawl.sparkenv.spark.LONG_LIVED = True  # many verbs: the full JIT pays back (recrawl/sparkenv/jit.py)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock_path.unlink(missing_ok=True)
    server.bind(str(sock_path))
    inode = sock_path.stat().st_ino
    server.listen(16)
    server.settimeout(1.0)  # how often the main loop looks at stop and idle

    def on_term(signum, frame):  # noqa: ARG001 (signal handler signature)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    daemon = _Daemon(sock_path, idle_s)
    _log(f"daemon {os.getpid()} listening on {sock_path}")
    try:
        while not daemon.should_exit():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            daemon.last_active = time.monotonic()
            threading.Thread(target=daemon.handle, args=(conn,), daemon=True).start()
    finally:
        with contextlib.suppress(OSError):
            if sock_path.stat().st_ino == inode:  # not a successor's socket
                sock_path.unlink()
        server.close()
        from pyspark import SparkContext  # lazy: pyspark

        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(sys.argv[2]))

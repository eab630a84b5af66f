"""Where the JVMs' CPU goes, by thread, for one command run under several settings in turn.

    .venv/bin/python benchmarks/jvm_threads.py \\
        --variant baseline \\
        --variant quick:JAVA_TOOL_OPTIONS=-XX:TieredStopAtLevel=1 \\
        --variant baseline --variant quick:JAVA_TOOL_OPTIONS=-XX:TieredStopAtLevel=1 \\
        --variant baseline \\
        -- .venv/bin/python -m pytest -q -p no:cacheprovider tests/spark_jobs/test_round_e2e.py

Each `--variant NAME[:VAR=VALUE[,VAR=VALUE...]]` runs the command once with those environment
variables set, in the order given: list a baseline between the others, since this machine's
figures drift by a third between hours and only neighbouring runs compare. While a run lasts,
every Java thread's CPU time is read from /proc/<pid>/task every `--interval` seconds (the last
interval of a thread is not counted) and summed by thread group: HotSpot's compilers (C2, C1),
the py4j threads that analyse and plan each query ("Thread"), the task threads ("Executor task
l"), the collector, the exchange threads that run broadcast and shuffle subqueries. The machine's
busy CPU seconds (all processes, /proc/stat) are printed beside them. With `--per-role` each
variant's JVMs are also summed by what they are (a test session's driver, a warm driver, a
`crawler` verb's, spark-submit's, an executor, master, worker), with their compilers' share.
docs/airflow.md has a comparison of settings, docs/architecture.md a whole test run by role.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time

import psutil

TICK = os.sysconf("SC_CLK_TCK")
COLUMNS = ("C2 CompilerThre", "C1 CompilerThre", "Thread", "Executor task l", "GC Thread",
           "shuffle-exchang", "broadcast-excha")


def thread_group(name: str) -> str:
    """A thread's group: its name without the number a pool appends ("GC Thread#1" -> "GC
    Thread", "Executor task launch worker-3" is cut to 15 characters by the kernel first)."""
    return re.sub(r"[#\-\s]*\d+$", "", name.strip())


def parse_stat(line: str) -> tuple[str, float]:
    """(name, user + system CPU seconds) from a /proc/<pid>/task/<tid>/stat line; the name may
    hold spaces and parentheses, so it is cut at the first "(" and the last ")"."""
    name = line[line.index("(") + 1:line.rindex(")")]
    fields = line[line.rindex(")") + 2:].split()
    return name, (int(fields[11]) + int(fields[12])) / TICK


def machine_busy() -> float:
    """The machine's busy CPU seconds since boot (all but idle and iowait)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) \
        - getattr(t, "guest_nice", 0.0)


class ThreadSampler:
    """The last CPU time seen of every thread of every java process, until stopped."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        # keyed by (process, thread id); a process is "pid@start time": pids come round again
        # within a test run (pid_max may be 32768)
        self.seen: dict[tuple[str, str], tuple[str, float]] = {}
        self.roles: dict[str, str] = {}  # process -> what the JVM is (jvm_role)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        for proc in psutil.process_iter(["name", "create_time"]):
            if "java" not in (proc.info["name"] or ""):
                continue
            key = f"{proc.pid}@{proc.info['create_time']}"
            try:
                if key not in self.roles:
                    self.roles[key] = jvm_role(proc)
                tids = os.listdir(f"/proc/{proc.pid}/task")
            except (OSError, psutil.Error):  # gone, or not ours to read
                continue
            # thread names are not in psutil: read each thread's stat line
            for tid in tids:
                try:
                    with open(f"/proc/{proc.pid}/task/{tid}/stat") as f:
                        self.seen[(key, tid)] = parse_stat(f.read())
                except (OSError, ValueError):
                    pass

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> ThreadSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def by_role(self, before: dict[tuple[str, str], tuple[str, float]]) -> dict[str, dict]:
        """Per role (jvm_role): how many JVMs, their CPU and their compilers' share."""
        out: dict[str, dict] = {}
        for (proc, tid), (name, cpu) in self.seen.items():
            used = cpu - before.get((proc, tid), (name, 0.0))[1]
            row = out.setdefault(self.roles.get(proc, "other JVM"),
                                 {"pids": set(), "cpu": 0.0, "compilers": 0.0})
            row["pids"].add(proc)
            row["cpu"] += used
            if "CompilerThre" in name:
                row["compilers"] += used
        return out

    def by_group(self, before: dict[tuple[str, str], tuple[str, float]]) -> dict[str, float]:
        """CPU seconds per thread group since `before` (threads alive before the run start
        from what they had used then)."""
        out: dict[str, float] = {}
        for key, (name, cpu) in self.seen.items():
            start = before.get(key, (name, 0.0))[1]
            group = thread_group(name)
            out[group] = out.get(group, 0.0) + cpu - start
        return out


def role_of(args: list[str], parent: list[str]) -> str:
    """What a JVM is, from its command line and its parent's (a driver JVM is the child of the
    program that started it): a Spark executor, master or worker, or a driver and whose (the
    test session, a warm driver, a `crawler` verb, spark-submit, another script)."""
    line = " ".join(args)
    # scripts/spark_submit.sh execs spark-submit, so its JVM names the main script itself
    for needle, role in (("CoarseGrainedExecutorBackend", "executor"),
                         ("deploy.master.Master", "master"), ("deploy.worker.Worker", "worker"),
                         ("submit_main.py", "driver: spark-submit")):
        if needle in line:
            return role
    text = " ".join(parent)
    for needle, role in (("app.daemon", "driver: warm driver"),
                         ("app.cli", "driver: crawler verb"),
                         ("pytest", "driver: test session"),
                         ("exec(eval(sys.stdin", "driver: test session")):
        if needle in text:
            return role
    scripts = [os.path.basename(a) for a in parent[1:] if a.endswith(".py")]
    return f"driver: {scripts[0]}" if scripts else "other JVM"


def jvm_role(proc: psutil.Process) -> str:
    try:
        parent = proc.parent()
        parent_args = parent.cmdline() if parent else []
    except psutil.Error:
        parent_args = []
    return role_of(proc.cmdline(), parent_args)


def parse_variant(spec: str) -> tuple[str, dict[str, str]]:
    """`NAME[:VAR=VALUE[,VAR=VALUE...]]` -> (name, environment)."""
    name, _, rest = spec.partition(":")
    env = {}
    for item in filter(None, rest.split(",")):
        var, sep, value = item.partition("=")
        if not sep or not var:
            raise SystemExit(f"jvm_threads: --variant {spec!r}: expected NAME[:VAR=VALUE,...]")
        env[var] = value
    if not name:
        raise SystemExit(f"jvm_threads: --variant {spec!r} has no name")
    return name, env


def run_variant(cmd: list[str], env: dict[str, str], interval: float) -> dict:
    with ThreadSampler(interval) as sampler:
        before = dict(sampler.seen)
        busy0, t0 = machine_busy(), time.monotonic()
        rc = subprocess.run(cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        wall, busy = time.monotonic() - t0, machine_busy() - busy0
    groups = sampler.by_group(before)
    return {"rc": rc, "wall": wall, "machine": busy, "jvm": sum(groups.values()), "groups": groups,
            "roles": sampler.by_role(before)}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        raise SystemExit("jvm_threads: give the command after --")
    split = argv.index("--")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variant", action="append", required=True)
    p.add_argument("--interval", type=float, default=2.0)
    p.add_argument("--per-role", action="store_true",
                   help="also print each variant's JVMs by role (test session, warm driver, "
                        "crawler verb, spark-submit, executor, master, worker)")
    args = p.parse_args(argv[:split])
    cmd = argv[split + 1:]
    variants = [parse_variant(v) for v in args.variant]
    head = ["variant", "rc", "wall s", "machine CPU s", "JVM threads", *COLUMNS]
    print(" | ".join(head), flush=True)
    for name, env in variants:
        r = run_variant(cmd, env, args.interval)
        cells = [name, str(r["rc"]), f"{r['wall']:.0f}", f"{r['machine']:.0f}", f"{r['jvm']:.0f}"]
        cells += [f"{r['groups'].get(c, 0.0):.0f}" for c in COLUMNS]
        print(" | ".join(cells), flush=True)
        if args.per_role:
            for role, row in sorted(r["roles"].items(), key=lambda kv: -kv[1]["cpu"]):
                print(f"    {role}: {len(row['pids'])} JVM(s), {row['cpu']:.0f} CPU s, "
                      f"compilers {row['compilers']:.0f} s", flush=True)


if __name__ == "__main__":
    main()

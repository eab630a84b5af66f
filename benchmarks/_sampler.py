"""Peak memory and CPU of a benchmark step: the Python driver, the JVM and its Python workers.

Shared by the benchmarks (scale_bench, dedup_bench); psutil samples RSS every 0.2 s and the
JVM's MemoryMXBean gives heap in use and the old generation's peak after collections.
"""

from __future__ import annotations

import threading


class PeakSampler:
    """Peak RSS (Python driver, JVM, Python workers) and JVM heap, sampled every 0.2 s."""

    def __init__(self, spark, interval: float = 0.2) -> None:
        import psutil

        self.interval = interval
        self.me = psutil.Process()
        jvms = [p for p in self.me.children(recursive=True) if "java" in p.name()]
        self.jvm = jvms[0] if jvms else None
        mf = spark._jvm.java.lang.management.ManagementFactory
        self.mem = mf.getMemoryMXBean()
        self.old_pools = [p for p in mf.getMemoryPoolMXBeans()
                          if "Old" in p.getName() or "Tenured" in p.getName()]
        self.jvm_gc = spark._jvm.java.lang.System
        self.py_rss = self.jvm_rss = self.workers_rss = self.heap = 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        self.py_rss = max(self.py_rss, self.me.memory_info().rss)
        if self.jvm is not None:
            self.jvm_rss = max(self.jvm_rss, self.jvm.memory_info().rss)
            workers = 0
            for p in self.jvm.children(recursive=True):
                try:
                    workers += p.memory_info().rss
                except Exception:
                    pass
            self.workers_rss = max(self.workers_rss, workers)
        self.heap = max(self.heap, self.mem.getHeapMemoryUsage().getUsed())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._sample()
            except Exception:  # a sample lost to a busy gateway is not worth a crash
                pass

    def cpu_seconds(self) -> float:
        """CPU time (user + system) of the JVM, its Python workers and this driver so far.

        Under a loaded machine wall time stretches, CPU time does not: rows per CPU second is
        the per-core rate the capacity plan uses. Reaped workers count through their
        parent's children_* times.
        """
        total = 0.0
        procs = [self.me] + ([self.jvm] + self.jvm.children(recursive=True) if self.jvm else [])
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
                if p is not self.me:
                    total += t.children_user + t.children_system
            except Exception:
                pass
        return total

    def __enter__(self) -> PeakSampler:
        self.cpu0 = self.cpu_seconds()
        self.jvm_gc.gc()
        for p in self.old_pools:
            p.resetPeakUsage()
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        self.cpu = self.cpu_seconds() - self.cpu0
        self.old_peak = sum(p.getPeakUsage().getUsed() for p in self.old_pools)

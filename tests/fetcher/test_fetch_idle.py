"""fetcher.idle: one idle worker keeps the timer, a release wakes it alone, a burst is taken by
a chain of workers, and the end of the run reaches every worker."""

from __future__ import annotations

import threading
import time

from fetcher import idle
from fetcher.idle import IdleWorkers


class Harness:
    """Workers looping as Fetcher._next does, over a list of (due time, item) in place of the
    scheduler; each counts the times it woke."""

    def __init__(self, n: int) -> None:
        self.lock = threading.RLock()
        self.idle = IdleWorkers(self.lock)
        self.work: list[tuple[float, str]] = []
        self.taken: dict[str, str] = {}
        self.wakes = [0] * n
        self.over = False
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(n)]
        for t in self.threads:
            t.start()

    def _due(self) -> float | None:
        return min((d for d, _ in self.work), default=None)

    def _run(self, i: int) -> None:
        with self.lock:
            while True:
                now = time.monotonic()
                ready = [w for w in self.work if w[0] <= now]
                if ready:
                    self.work.remove(ready[0])
                    self.taken[ready[0][1]] = f"w{i}"
                    self.idle.took()
                    self.lock.release()  # "fetch" it outside the lock, as a worker does
                    try:
                        time.sleep(0.01)
                    finally:
                        self.lock.acquire()
                    continue
                if self.over:
                    self.idle.wake_all()
                    return
                self.idle.wait(now, self._due())
                self.wakes[i] += 1

    def add(self, *items: str, due_in: float = 0.0) -> None:
        with self.lock:
            due = time.monotonic() + due_in
            self.work.extend((due, it) for it in items)
            self.idle.changed(self._due())

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until the work is taken and every worker is idle again."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                if not self.work and self.idle._timed and self.idle._spares == len(self.wakes) - 1:
                    return
            time.sleep(0.005)
        raise AssertionError("workers did not settle")

    def stop(self) -> None:
        with self.lock:
            self.over = True
            self.idle.changed(None)
        for t in self.threads:
            t.join(5.0)


def test_a_release_wakes_the_timer_not_every_idle_worker(monkeypatch):
    monkeypatch.setattr(idle, "MAX_WAIT_S", 30.0)  # no safety-net wake-ups inside the count
    h = Harness(16)
    try:
        h.settle()
        before = sum(h.wakes)
        h.add("a")
        h.settle()
        assert list(h.taken) == ["a"]
        # the timer's holder takes it and hands the timer to one spare; with notify_all all
        # sixteen would have woken
        assert sum(h.wakes) - before <= 3
    finally:
        h.stop()
    assert not any(t.is_alive() for t in h.threads)


def test_a_burst_of_due_work_is_taken_by_several_workers():
    h = Harness(8)
    try:
        h.settle()
        h.add(*[f"u{i}" for i in range(40)])
        h.settle()
        assert len(h.taken) == 40
        assert len(set(h.taken.values())) > 1  # a chain of workers, not one after another
    finally:
        h.stop()


def test_the_timer_wakes_at_the_due_time_without_a_release():
    h = Harness(4)
    try:
        h.settle()
        with h.lock:  # no changed(): only the timer's own wait can find it
            h.work.append((time.monotonic() + 0.05, "later"))
        end = time.monotonic() + 3.0
        while "later" not in h.taken and time.monotonic() < end:
            time.sleep(0.01)
        assert "later" in h.taken
    finally:
        h.stop()


def test_the_end_of_the_run_reaches_every_worker():
    h = Harness(6)
    h.settle()
    t0 = time.monotonic()
    h.stop()
    assert not any(t.is_alive() for t in h.threads)
    assert time.monotonic() - t0 < 4.0  # each wait is at most a second; nobody hangs

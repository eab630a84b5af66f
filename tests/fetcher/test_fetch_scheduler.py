"""The politeness scheduler driven by a fake clock: no sleeping, no threads."""

from __future__ import annotations

import pytest

from fetcher.scheduler import Scheduler


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def make(budget: float = 1000.0, deadline: float = 10.0, backoff: float = 2.0) -> Scheduler:
    return Scheduler(budget_end=budget, request_deadline=deadline, backoff_base=backoff)


def test_queues_are_served_by_next_allowed_time_and_fifo_within_a_host():
    s = make()
    for t in ("a1", "a2"):
        s.add("a", t)
    s.add("b", "b1")
    assert s.pop_ready(0.0) == ("a", "a1")
    assert s.pop_ready(0.0) == ("b", "b1")
    assert s.pop_ready(0.0) is None  # a is in flight, b is empty
    s.release("a", 0.5, delay=1.0)
    assert s.pop_ready(1.4) is None
    assert s.next_ready_time() == pytest.approx(1.5)
    assert s.pop_ready(1.5) == ("a", "a2")


def test_one_request_in_flight_per_host():
    s = make()
    for i in range(5):
        s.add("a", i)
    assert s.pop_ready(0.0) == ("a", 0)
    for t in (0.0, 10.0, 100.0):
        assert s.pop_ready(t) is None, "a second task of a busy host must not be handed out"
    assert s.in_flight == 1


def test_delay_runs_from_the_end_of_the_response_not_its_start():
    s = make()
    s.add("a", 1)
    s.add("a", 2)
    clock = FakeClock()
    assert s.pop_ready(clock()) == ("a", 1)
    clock.t = 3.0  # a slow response: started at 0, ended at 3
    s.release("a", clock(), delay=1.0)
    assert s.pop_ready(1.0) is None  # start + delay would be 1.0: too early
    assert s.pop_ready(3.99) is None
    assert s.pop_ready(4.0) == ("a", 2)


def test_min_heap_orders_many_hosts_by_due_time():
    s = make()
    for host, due in (("a", 5.0), ("b", 1.0), ("c", 3.0)):
        s.add(host, host)
        s.queue(host).next_allowed = due
        s.add(host, host + "2")  # re-push with the new time
    order = []
    t = 0.0
    while (nxt := s.next_ready_time()) is not None:
        t = max(t, nxt)
        key, _ = s.pop_ready(t)
        order.append(key)
        s.release(key, t, delay=100.0)
    assert order == ["b", "c", "a", "b", "c", "a"]


def test_no_request_starts_unless_it_can_finish_within_the_budget():
    s = make(budget=20.0, deadline=5.0)
    for i in range(3):
        s.add("a", i)
    assert s.pop_ready(0.0) == ("a", 0)
    s.release("a", 1.0, delay=10.0)  # next allowed at 11: 11 + 5 > 20 would overrun
    assert s.next_ready_time() == 11.0 and s.can_start(11.0) is True
    assert s.pop_ready(11.0) == ("a", 1)
    s.release("a", 12.0, delay=10.0)  # next at 22: cannot finish by 20
    assert s.next_ready_time() is None
    assert s.finished(12.0)
    assert [t for _, t in s.drain_all()] == [2]  # what the fetcher reports as skipped_budget


def test_pop_refuses_once_now_plus_deadline_passes_the_budget():
    s = make(budget=20.0, deadline=5.0)
    s.add("a", 1)
    assert s.pop_ready(15.5) is None
    assert s.finished(15.5)


def test_failures_back_off_exponentially_and_success_resets():
    s = make(backoff=2.0)
    for i in range(5):
        s.add("a", i)
    t = 0.0
    waits = []
    for result in ("fail", "fail", "fail", "ok", "ok"):
        key, _ = s.pop_ready(t)
        q = s.release(key, t, delay=0.5, result=result)
        waits.append(q.next_allowed - t)
        t = q.next_allowed
        if not q.tasks:
            break
    assert waits[:3] == [2.0, 4.0, 8.0]
    assert waits[3] == 0.5 and s.queue("a").consecutive_failures == 0


def test_backoff_never_shorter_than_the_host_delay():
    s = make(backoff=0.1)
    s.add("a", 1)
    s.add("a", 2)
    s.pop_ready(0.0)
    q = s.release("a", 1.0, delay=3.0, result="fail")
    assert q.next_allowed == 4.0


def test_retry_after_pauses_the_whole_host():
    s = make()
    for i in range(3):
        s.add("a", i)
    s.add("b", "b")
    s.pop_ready(0.0)
    q = s.release("a", 1.0, delay=0.2, pause_until=61.0)
    assert q.next_allowed == 61.0 and q.paused_until == 61.0
    assert s.pop_ready(2.0) == ("b", "b")  # other hosts go on
    assert s.pop_ready(60.9) is None
    assert s.pop_ready(61.0) == ("a", 1)


def test_slot_without_a_request_keeps_the_next_allowed_time():
    s = make()
    s.add("a", 1)
    s.add("a", 2)
    s.pop_ready(0.0)
    s.release("a", 5.0, delay=1.0)  # next at 6
    assert s.pop_ready(6.0) == ("a", 2)
    q = s.release("a", 7.0, delay=1.0, result="none")  # e.g. robots-denied: nothing sent
    assert q.next_allowed == 6.0 and q.requests == 1


def test_push_front_puts_continuations_first():
    s = make()
    s.add("a", "later")
    s.pop_ready(0.0)
    s.push_front("a", ["hop1", "again"])
    s.release("a", 1.0, delay=1.0)
    got = [s.pop_ready(t)[1] for t in (2.0,)]
    s.release("a", 2.0, delay=1.0)
    got.append(s.pop_ready(3.0)[1])
    assert got == ["hop1", "again"]


def test_blocked_queue_waits_for_unblock():
    s = make()
    s.add("a", 1)
    s.block("a")
    assert s.pop_ready(0.0) is None
    assert s.finished(0.0)  # nothing else could ever run it: the caller drains
    s.unblock("a")
    assert s.pop_ready(0.0) == ("a", 1)


def test_drain_with_predicate_keeps_other_hosts_of_a_shared_queue():
    s = make()
    for t in ("x1", "y1", "x2"):
        s.add("10.0.0.1", t)  # per-IP mode: hosts x and y share a queue
    assert s.drain("10.0.0.1", lambda t: t.startswith("x")) == ["x1", "x2"]
    assert s.pop_ready(0.0) == ("10.0.0.1", "y1")


def test_many_adds_do_not_flood_the_heap():
    s = make()
    for i in range(10_000):
        s.add("a", i)
    assert len(s._heap) == 1

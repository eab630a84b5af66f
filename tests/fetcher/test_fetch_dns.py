"""DNS cache and the SSRF guard. Nothing here connects to anything but 127.0.0.1: refusals are
checked to happen before any connection attempt (socket creation is trapped)."""

from __future__ import annotations

import socket
import threading

import pytest

from fetcher.dns import DNSError, Resolver, SSRFGuard, SSRFRefused
from fetcher.http import HostConnection

DEFAULT = SSRFGuard()


@pytest.mark.parametrize("addr", [
    "10.0.0.1", "172.16.5.4", "192.168.1.1",  # RFC 1918
    "127.0.0.1", "127.8.8.8", "::1",  # loopback
    "169.254.1.1", "fe80::1",  # link-local
    "169.254.169.254", "fd00:ec2::254",  # cloud metadata
    "100.64.0.1",  # shared address space (CGNAT)
    "0.0.0.0", "::",  # unspecified
    "224.0.0.1", "239.255.255.250", "ff02::1",  # multicast
    "240.0.0.1", "255.255.255.255",  # reserved / broadcast
    "192.0.2.1", "198.51.100.7", "203.0.113.9", "2001:db8::1",  # documentation
    "fc00::1", "fd12:3456::1",  # unique local
    "::ffff:127.0.0.1", "::ffff:10.1.2.3", "::ffff:169.254.169.254",  # IPv4-mapped
    "2002:7f00:1::1", "2002:0a00:0001::1",  # 6to4 wrapping 127.0.0.1 / 10.0.0.1
    "not-an-ip", "",
])
def test_refused_by_default(addr):
    assert not DEFAULT.permits(addr)
    with pytest.raises(SSRFRefused, match="ssrf: address"):
        DEFAULT.check(addr)


@pytest.mark.parametrize("addr", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111",
                                  "::ffff:93.184.216.34"])
def test_public_addresses_permitted(addr):
    assert DEFAULT.permits(addr)


def test_allow_private_networks_opens_exactly_those_ranges():
    g = SSRFGuard.from_cidrs(["127.0.0.1/32", "10.1.0.0/16"])
    assert g.permits("127.0.0.1") and g.permits("10.1.200.3")
    assert not g.permits("127.0.0.2") and not g.permits("10.2.0.1")
    assert not g.permits("169.254.169.254")


def test_static_hosts_exact_and_suffix_globs():
    r = Resolver({"a.example": "127.0.0.2", "*.sim.test": "127.0.0.1"},
                 lookup=lambda h: pytest.fail(f"system lookup for {h}"))
    assert r.resolve("a.example") == ["127.0.0.2"]
    assert r.resolve("site3.SIM.test") == ["127.0.0.1"]
    assert r.resolve("deep.er.sim.test") == ["127.0.0.1"]
    assert r.resolve("127.0.0.9") == ["127.0.0.9"]
    assert r.resolve("[::1]") == ["::1"]


def test_invalid_tld_never_resolves_and_no_lookup_is_made():
    r = Resolver(lookup=lambda h: pytest.fail("looked up"))
    with pytest.raises(DNSError):
        r.resolve("nothing.invalid")


def test_each_name_is_looked_up_once_per_ttl_even_concurrently():
    calls = []
    now = [0.0]
    arrived = threading.Semaphore(0)
    all_arrived = []

    class Arrivals(dict):
        """The resolver's per-name locks: every caller takes its name's lock from here."""

        def setdefault(self, key, default=None):
            arrived.release()
            return super().setdefault(key, default)

    def lookup(host):
        calls.append(host)
        if len(calls) == 1:  # answer once all eight callers are inside resolve(), waiting
            all_arrived.append(all(arrived.acquire(timeout=30) for _ in range(8)))
        return ["93.184.216.34"]

    r = Resolver(lookup=lookup, ttl_s=10, clock=lambda: now[0])
    r._locks = Arrivals()
    threads = [threading.Thread(target=r.resolve, args=("x.example",)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["x.example"] and all_arrived == [True]
    now[0] = 11.0
    r.resolve("x.example")
    assert calls == ["x.example", "x.example"]


def test_failures_are_cached_too():
    calls = []

    def lookup(host):
        calls.append(host)
        raise socket.gaierror("no such name")

    r = Resolver(lookup=lookup)
    for _ in range(3):
        with pytest.raises(DNSError, match="no such name"):
            r.resolve("nx.example")
    assert len(calls) == 1


def test_resolve_checked_picks_a_permitted_address_or_refuses():
    r = Resolver(lookup=lambda h: ["10.0.0.5", "93.184.216.34"])
    assert r.resolve_checked("mixed.example", DEFAULT) == "93.184.216.34"
    r = Resolver({"evil.sim.test": "169.254.169.254"})
    with pytest.raises(SSRFRefused, match="169.254.169.254"):
        r.resolve_checked("evil.sim.test", DEFAULT)


def test_connection_is_refused_before_any_socket_is_opened(monkeypatch):
    def trap(*args, **kwargs):
        raise AssertionError(f"connection attempted: {args}")

    monkeypatch.setattr(socket, "create_connection", trap)
    monkeypatch.setattr("urllib3.util.connection.create_connection", trap)
    for ip in ("10.0.0.1", "169.254.169.254"):
        conn = HostConnection("http", "evil.example", 80, ip, DEFAULT, connect_timeout=1,
                              read_timeout=1)
        with pytest.raises(SSRFRefused):
            conn.acquire(1.0)

"""Name resolution (once per host, cached, thread-safe) and the SSRF guard on addresses.

The guard decides on the address that is actually connected to: the fetcher resolves a host
here, checks the address, then opens the TCP connection to *that* address and sends the
original ``Host`` header (and, for https, the host name as SNI and for certificate checks).
Re-resolving between check and connect would let DNS rebinding slip a private address past
the check. Refused by default: private (RFC 1918, ULA), loopback, link-local, shared (CGNAT),
multicast, reserved, unspecified and other non-global ranges, and the cloud metadata
endpoints 169.254.169.254 / fd00:ec2::254; IPv4-mapped / 6to4 / Teredo IPv6 addresses are
judged by the IPv4 address they embed. ``allow_private_networks`` CIDRs are let through (tests
and the demo allow ``127.0.0.1/32``).

``static_hosts`` overrides resolution (exact names, or ``*.suffix`` for every name under a
suffix) so tests and the demo can map ``*.sim.test`` to 127.0.0.1. Names under ``.invalid``
never resolve (RFC 6761 section 6.4) without a lookup.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)


class DNSError(Exception):
    """The host name did not resolve."""


class SSRFRefused(Exception):
    """The resolved address is one the crawler must not connect to."""

    def __init__(self, address: str):
        super().__init__(f"ssrf: address {address} refused")
        self.address = address


def _embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr.teredo is not None:
        return addr.teredo[1]
    return None


@dataclass(frozen=True)
class SSRFGuard:
    """Decides whether an address may be connected to."""

    allowed_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def from_cidrs(cls, cidrs: Iterable[str]) -> SSRFGuard:
        """Guard letting through the given CIDRs (``"127.0.0.1/32"``)."""
        return cls(tuple(ipaddress.ip_network(c, strict=False) for c in cidrs))

    def permits(self, address: str) -> bool:
        """True if connecting to ``address`` is allowed."""
        try:
            addr: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        if any(addr in net for net in self.allowed_networks):
            return True
        if addr in METADATA_ADDRESSES:
            return False
        if isinstance(addr, ipaddress.IPv6Address):
            embedded = _embedded_ipv4(addr)
            if embedded is not None:
                return self.permits(str(embedded))
        return addr.is_global and not (
            addr.is_multicast or addr.is_reserved or addr.is_unspecified
            or addr.is_loopback or addr.is_link_local or addr.is_private
        )

    def check(self, address: str) -> str:
        """Return ``address`` if permitted, else raise :class:`SSRFRefused`."""
        if not self.permits(address):
            raise SSRFRefused(address)
        return address


def _system_lookup(host: str) -> list[str]:
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    out: list[str] = []
    for *_, sockaddr in infos:
        if sockaddr[0] not in out:
            out.append(sockaddr[0])
    return out


class Resolver:
    """Host name -> addresses, each name looked up once per TTL even under concurrency."""

    def __init__(
        self,
        static_hosts: Mapping[str, str] | None = None,
        *,
        ttl_s: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
        lookup: Callable[[str], list[str]] = _system_lookup,
    ) -> None:
        self._static = {k.lower(): v for k, v in (static_hosts or {}).items()}
        self._ttl = ttl_s
        self._clock = clock
        self._lookup = lookup
        self._cache: dict[str, tuple[float, list[str] | None, str | None]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _static_match(self, host: str) -> str | None:
        if host in self._static:
            return self._static[host]
        for pattern, ip in self._static.items():
            if pattern.startswith("*.") and (
                host.endswith(pattern[1:]) or fnmatch.fnmatchcase(host, pattern)
            ):
                return ip
        return None

    def resolve(self, host: str) -> list[str]:
        """Addresses of ``host`` (IP literals are returned as they are).

        Raises:
            DNSError: no address (cached as negative for the TTL as well).
        """
        host = host.lower().strip("[]")
        try:
            return [str(ipaddress.ip_address(host))]
        except ValueError:
            pass
        static = self._static_match(host)
        if static is not None:
            return [static]
        if host == "invalid" or host.endswith(".invalid"):
            raise DNSError(f"dns: {host} does not resolve (RFC 6761 .invalid)")
        with self._guard:
            lock = self._locks.setdefault(host, threading.Lock())
        with lock:  # one lookup per name; concurrent callers wait for its answer
            now = self._clock()
            hit = self._cache.get(host)
            if hit is None or hit[0] <= now:
                try:
                    addrs: list[str] | None = self._lookup(host) or None
                    err = None if addrs else f"dns: no address for {host}"
                except (OSError, UnicodeError) as exc:
                    addrs, err = None, f"dns: {host}: {exc}"
                hit = (now + self._ttl, addrs, err)
                self._cache[host] = hit
        if hit[1] is None:
            raise DNSError(hit[2] or f"dns: {host}")
        return list(hit[1])

    def resolve_checked(self, host: str, guard: SSRFGuard) -> str:
        """The first address of ``host`` the guard permits.

        Raises:
            DNSError: the name did not resolve.
            SSRFRefused: no address is permitted (the first one is named).
        """
        addrs = self.resolve(host)
        for addr in addrs:
            if guard.permits(addr):
                return addr
        raise SSRFRefused(addrs[0])

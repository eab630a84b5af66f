"""Fetcher settings: one frozen object, field names equal to the ``[fetcher]`` config keys.

The defaults here mirror ``recrawl/defaults.toml``; the Spark job builds the object with
:meth:`FetchSettings.from_mapping` from the loaded config section, so the fetcher never reads
configuration or globals itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from recrawl.content.urlnorm import DEFAULT_RULES, NormalizeRules

DEFAULT_USER_AGENT = "recrawlbot/0.1 (+https://example.invalid/recrawlbot; crawler@example.invalid)"


@dataclass(frozen=True)
class FetchSettings:
    """Everything one fetch task needs to know; each field is a ``fetcher.<name>`` config key."""

    #: Honest User-Agent header with a contact URL (RFC 9309 section 2.2.1 asks crawlers to
    #: identify themselves); also the source of the warcinfo ``operator`` field.
    user_agent: str = DEFAULT_USER_AGENT
    #: Product token matched (case-insensitively, exactly) against robots.txt user-agent lines.
    robots_token: str = "recrawlbot"
    #: Least delay between the *end* of one response and the start of the next request to the
    #: same host (Mercator / Nutch ``fetcher.server.delay``).
    min_delay_s: float = 1.0
    #: A robots ``Crawl-delay`` above this defers the host's URLs (``retry_later``) instead of
    #: tying up a queue for the whole run (Nutch ``fetcher.max.crawl.delay``).
    max_crawl_delay_s: float = 30.0
    #: One politeness queue per resolved IP address instead of per scheme://host:port
    #: (Nutch ``fetcher.queue.mode=byIP``); the host delay then applies to the whole address.
    per_ip: bool = False
    #: Worker threads of one fetch task; many hosts are fetched at once, one request per host.
    threads: int = 16
    #: Wall-clock budget of one ``Fetcher.run``; URLs not reached become ``skipped_budget``.
    time_budget_s: float = 300.0
    #: TCP connect timeout.
    connect_timeout_s: float = 5.0
    #: Longest wait for any single read from the socket (headers or body).
    read_timeout_s: float = 10.0
    #: Total time one request may take, however slowly the server trickles bytes. A request
    #: starts only if it can end before the budget: ``now + request_deadline_s <= budget end``.
    request_deadline_s: float = 30.0
    #: Most bytes of an HTTP body, as received on the wire, that are read and stored; beyond it
    #: the capture is truncated (``WARC-Truncated: length``, row ``truncated=True``).
    max_body_bytes: int = 2 * 1024 * 1024
    #: Most bytes a gzip/deflate/br body may decode to; beyond it the fetch is ``too_large``.
    max_decompressed_bytes: int = 8 * 1024 * 1024
    #: Redirect hops followed on the same host before the URL is recorded as ``redirect``.
    max_redirects: int = 5
    #: Media types kept; other 2xx responses are ``filtered_type`` and their body is not read.
    allowed_content_types: tuple[str, ...] = ("text/html", "application/xhtml+xml")
    #: Longest ``Retry-After`` honoured; longer values are capped to this.
    retry_after_max_s: float = 600.0
    #: Consecutive failed requests after which a host's remaining URLs are deferred.
    host_failure_limit: int = 3
    #: Exponential back-off after a failure: ``backoff_base_s * 2**(failures-1)`` seconds.
    backoff_base_s: float = 2.0
    #: How long a fetched robots.txt is trusted (RFC 9309 section 2.4: at most 24 hours).
    robots_ttl_s: float = 86400.0
    #: Most bytes of robots.txt parsed (RFC 9309 section 2.5 requires at least 500 KiB).
    robots_max_bytes: int = 500 * 1024
    #: How long a DNS answer is reused within a run.
    dns_ttl_s: float = 3600.0
    #: Static resolution overrides: exact host names or ``*.suffix`` globs mapped to an IP.
    static_hosts: Mapping[str, str] = field(default_factory=dict)
    #: CIDRs the SSRF guard lets through although they are private / loopback / link-local.
    allow_private_networks: tuple[str, ...] = ()
    #: WARC files are closed and a new one begun once a file reaches this size.
    warc_max_bytes: int = 1_000_000_000
    #: gzip level of each WARC record; 1 chosen by measurement (numbers in ``fetcher.warc``).
    warc_gzip_level: int = 1
    #: URL normalization of redirect targets: the crawl's ``[urlnorm]`` rules, so that a
    #: target is the URL inject, parse and updatedb would make of it (not a config key here;
    #: the Spark job passes ``spark_jobs.common.norm_rules(cfg)``).
    norm_rules: NormalizeRules = DEFAULT_RULES

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> FetchSettings:
        """Build settings from a config section; unknown keys are ignored, lists become tuples."""
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            if key not in known:
                continue
            if key == "static_hosts":
                value = dict(value)
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[key] = value
        return cls(**kwargs)

    @property
    def operator(self) -> str | None:
        """The contact in the User-Agent (an e-mail address or URL), for warcinfo ``operator``."""
        inner = self.user_agent.partition("(")[2].rstrip(")")
        parts = [p.strip().lstrip("+") for p in inner.split(";") if p.strip()]
        for part in parts:
            if "@" in part:
                return part
        return parts[0] if parts else None

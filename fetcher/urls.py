"""URL helpers over the project's normalizer and host key (``recrawl.content.urlnorm``).

The fetcher must agree with the crawldb on what a redirect target's URL and host are, so it
normalizes with the crawl's own rules (``FetchSettings.norm_rules``, from ``[urlnorm]``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from recrawl.content.urlnorm import DEFAULT_RULES, InvalidURL, NormalizeRules, normalize_url
from recrawl.content.urlnorm import host_key as recrawl_host_key

_DEFAULT_PORTS = {"http": 80, "https": 443}


class BadURL(ValueError):
    """Not an http(s) URL with a host."""


_ERRORS: tuple[type[Exception], ...] = (InvalidURL, BadURL, ValueError)


def host_key(url: str) -> str:
    """``scheme://host:port`` of ``url`` (port always explicit). Raises :class:`BadURL`."""
    try:
        return recrawl_host_key(url)
    except _ERRORS as exc:
        raise BadURL(str(exc)) from None


def normalize(url: str, base: str | None = None, rules: NormalizeRules = DEFAULT_RULES) -> str:
    """Normalized absolute URL of ``url`` relative to ``base`` with the crawl's ``rules``
    (``[urlnorm]``, as inject, parse and updatedb apply them). Raises :class:`BadURL`."""
    try:
        return normalize_url(url, base, rules)
    except _ERRORS as exc:
        raise BadURL(str(exc)) from None


def split_host_key(key: str) -> tuple[str, str, int]:
    """``"http://a.test:8080"`` -> ``("http", "a.test", 8080)``."""
    parts = urlsplit(key)
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise BadURL(f"bad host key {key!r}")
    return parts.scheme, parts.hostname, parts.port or _DEFAULT_PORTS[parts.scheme]


def origin_url(key: str, path: str = "/") -> str:
    """URL of ``path`` on the host ``key``, default port omitted (``http://a.test/robots.txt``)."""
    scheme, host, port = split_host_key(key)
    name = f"[{host}]" if ":" in host else host
    netloc = name if port == _DEFAULT_PORTS[scheme] else f"{name}:{port}"
    return f"{scheme}://{netloc}{path}"

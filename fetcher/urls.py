"""URL helpers: the project's normalizer and host key when importable, a minimal fallback if not.

The fetcher must agree with the crawldb on what a redirect target's URL and host are, so it
uses ``recrawl.urlnorm`` whenever that package is installed (it always is in the project); the
fallback keeps this package usable on its own (lowercase scheme and host, default port
dropped, fragment dropped, dot segments resolved).
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

from fetcher.robots import remove_dot_segments

_DEFAULT_PORTS = {"http": 80, "https": 443}


class BadURL(ValueError):
    """Not an http(s) URL with a host."""


def _split(url: str):
    """(parts, lower-case scheme, host as written in a URL) of an http(s) URL, else BadURL."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise BadURL(f"unsupported URL {url[:200]!r}")
    host = parts.hostname.lower().rstrip(".")
    return parts, scheme, f"[{host}]" if ":" in host else host


def _fallback_normalize(url: str, base: str | None = None) -> str:
    if base:
        url = urljoin(base, url)
    parts, scheme, host = _split(url)
    port = parts.port
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = remove_dot_segments(parts.path or "/")
    return f"{scheme}://{netloc}{path}" + (f"?{parts.query}" if parts.query else "")


def _fallback_host_key(url: str) -> str:
    parts, scheme, host = _split(url)
    return f"{scheme}://{host}:{parts.port or _DEFAULT_PORTS[scheme]}"


try:  # pragma: no cover - which branch runs depends on the installation
    from recrawl.urlnorm import InvalidURL
    from recrawl.urlnorm import host_key as _host_key
    from recrawl.urlnorm import normalize_url as _normalize

    _ERRORS: tuple[type[Exception], ...] = (InvalidURL, BadURL, ValueError)
except ImportError:  # pragma: no cover
    _host_key = _fallback_host_key
    _normalize = _fallback_normalize
    _ERRORS = (BadURL, ValueError)


def host_key(url: str) -> str:
    """``scheme://host:port`` of ``url`` (port always explicit). Raises :class:`BadURL`."""
    try:
        return _host_key(url)
    except _ERRORS as exc:
        raise BadURL(str(exc)) from None


def normalize(url: str, base: str | None = None) -> str:
    """Normalized absolute URL of ``url`` relative to ``base``. Raises :class:`BadURL`."""
    try:
        return _normalize(url, base)
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

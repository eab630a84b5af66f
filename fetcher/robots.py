"""robots.txt per RFC 9309: a thin, corrected wrapper around Protego, plus the fetch policy.

Protego 0.7 does the rule matching (longest match, Allow wins ties, ``*`` and ``$``, the
percent-encoding equivalence of RFC 9309 section 2.2.2, group merging). Where it deviates from
RFC 9309 in a way that changes what we may fetch, the text is rewritten before Protego sees it:

* **User-agent matching.** RFC 9309 section 2.2.1: a crawler matches its *product token*
  case-insensitively against the user-agent line's value. Protego instead matches the line's
  whole value as a substring of the caller's name checked only at the left boundary, so a group
  ``User-agent: recrawl`` would apply to ``recrawlbot`` and ``User-agent: recrawlbot/1.0``
  would not. We reduce every user-agent value to its product token (the leading run of
  ``[A-Za-z_-]``, as Google's parser does) and replace tokens other than ours and ``*`` with
  a placeholder that cannot match anything.
* **Unknown lines.** Protego treats any ``field: value`` line as a rule line that ends a run of
  user-agent lines, so ``User-agent: a / Foo: bar / User-agent: b / Disallow: /`` gives ``a``
  an empty group. RFC 9309 section 2.2.4 says unknown records are ignored; we drop them
  (``Sitemap`` and the known non-standard directives stay).
* **Byte order mark.** A UTF-8 BOM (also a truncated one) before the first line is skipped;
  Protego would read ``\\ufeffUser-agent`` as an unknown field.

Other behaviours are Protego's and match RFC 9309 / Google's test suite: paths are case
sensitive; ``Disallow:`` with no value disallows nothing; rules before any user-agent line are
ignored; ``/robots.txt`` itself is always allowed; ``allow: /x/index.html`` also allows
``/x/`` (a Google extension). Percent-encoding follows RFC 9309 (``%62%61%7A`` equals ``baz``),
where Google's library compares the raw bytes.

Request paths are normalised before matching: dot segments are removed (RFC 3986 section
5.2.4, also ``%2E``), so ``/./a/../a/x`` is checked as ``/a/x`` -- the path the server sees.

Fetch policy (RFC 9309 section 2.3.1): 2xx -> parse; 4xx -> "unavailable", allow everything;
5xx, 429, network errors and timeouts -> "unreachable", disallow everything and defer the
host for this run; up to five redirects are followed. Only the first ``robots_max_bytes`` are
parsed (section 2.5). 429 counts as unreachable, as Google treats it, because a server asking
us to slow down is not telling us its rules are absent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from protego import Protego

# Product token characters (RFC 9309 section 2.2.1).
_TOKEN = re.compile(r"[A-Za-z_-]+")
# Stands in for every user-agent token that is not ours: no product token can contain "0".
_OTHER_AGENT = "0other0"
_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z -]*?)\s*:(.*)$")
# Lines Protego understands and that we keep (its typo aliases included).
_KNOWN_FIELDS = {
    "user-agent", "useragent", "user agent",
    "allow", "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw",
    "sitemap", "sitemaps", "site-map",
    "crawl-delay", "crawl delay", "request-rate", "request rate", "visit-time", "visit time",
    "host",
}
_UA_FIELDS = {"user-agent", "useragent", "user agent"}
_BOMS = (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef")


def decode_robots(body: bytes, max_bytes: int) -> str:
    """Bytes of a robots.txt -> text: at most ``max_bytes``, BOM skipped, UTF-8 (lenient)."""
    body = body[:max_bytes]
    for bom in _BOMS:
        if body.startswith(bom):
            body = body[len(bom):]
            break
    return body.decode("utf-8", errors="replace")


def product_token(value: str) -> str:
    """The product token of a user-agent line value (``FooBot/1.2 (x)`` -> ``foobot``)."""
    value = value.strip()
    if value == "*" or value[:2] in ("* ", "*\t"):
        return "*"
    m = _TOKEN.match(value)
    return m.group(0).lower() if m else ""


def rewrite_for_protego(text: str, token: str) -> str:
    """Rewrite robots.txt so that Protego's matching equals RFC 9309's for ``token``."""
    token = token.lower()
    if text.startswith("\ufeff"):
        text = text[1:]
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _FIELD.match(line)
        if m is not None and m.group(1).lower() in _KNOWN_FIELDS:
            name, value = m.group(1).lower(), m.group(2).strip()
        else:
            # Like Google's and Protego's parsers, accept a missing colon ("Disallow /x").
            name, value = _split_without_colon(line)
        if name not in _KNOWN_FIELDS:
            continue  # RFC 9309 2.2.4: unknown records do not end a group
        if name in _UA_FIELDS:
            agent = product_token(value)
            if agent not in ("*", token):
                agent = _OTHER_AGENT
            out.append(f"User-agent: {agent}")
        else:
            out.append(f"{name}: {value}")
    return "\n".join(out)


def _split_without_colon(line: str) -> tuple[str, str]:
    """``"user agent foo"`` -> ``("user agent", "foo")``; unknown fields give ``("", "")``."""
    words = line.split()
    for n in (2, 1):
        name = " ".join(words[:n]).lower().rstrip(":")
        if len(words) >= n and name in _KNOWN_FIELDS:
            return name, " ".join(words[n:]).lstrip(":").strip()
    return "", ""


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 for an absolute path; ``%2E`` counts as a dot."""
    if "%2" in path:
        path = re.sub(r"%2[eE]", ".", path)
    if "." not in path:
        return path or "/"
    segments = path.split("/")
    out: list[str] = []
    for seg in segments[1:] if path.startswith("/") else segments:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    if segments[-1] in (".", ".."):
        out.append("")
    return "/" + "/".join(out)


def request_target(url: str) -> str:
    """The path-and-query a request for ``url`` sends, and robots rules are matched against."""
    parts = urlsplit(url)
    target = remove_dot_segments(parts.path or "/")
    if parts.query or url.split("#", 1)[0].endswith("?"):
        target += "?" + parts.query
    return target


# What a robots.txt answer means (RFC 9309 2.3.1): the one policy for a fresh response and a
# cached row.
RULES, ALLOW_ALL, DISALLOW_ALL = "rules", "allow_all", "disallow_all"


def status_policy(status: int | None) -> str:
    """RULES for a 2xx (parse the body), ALLOW_ALL for a 4xx other than 429 ("unavailable",
    2.3.1.3), DISALLOW_ALL for a 5xx, a 429 or no answer ("unreachable", 2.3.1.4)."""
    if status is not None and 200 <= status < 300:
        return RULES
    if status is not None and 400 <= status < 500 and status != 429:
        return ALLOW_ALL
    return DISALLOW_ALL


@dataclass
class RobotsRules:
    """The rules of one host for our token, plus what the robots table stores."""

    status: int | None  # HTTP status of the (final) robots.txt response; None: unreachable
    text: str = ""
    allow_all: bool = False
    disallow_all: bool = False
    crawl_delay: float | None = None
    sitemaps: list[str] = field(default_factory=list)
    _parser: Protego | None = None
    _token: str = ""

    @classmethod
    def parse(cls, status: int, text: str, token: str) -> RobotsRules:
        """Rules from a 2xx robots.txt body."""
        parser = Protego.parse(rewrite_for_protego(text, token))
        delay = parser.crawl_delay(token.lower())
        return cls(status=status, text=text, crawl_delay=delay, sitemaps=list(parser.sitemaps),
                   _parser=parser, _token=token.lower())

    @classmethod
    def unavailable(cls, status: int | None, text: str = "") -> RobotsRules:
        """RFC 9309 2.3.1.3: a 4xx robots.txt (or too many redirects) allows everything."""
        return cls(status=status, text=text, allow_all=True)

    @classmethod
    def unreachable(cls, status: int | None) -> RobotsRules:
        """RFC 9309 2.3.1.4: 5xx or no answer: assume complete disallow."""
        return cls(status=status, disallow_all=True)

    @classmethod
    def from_status(cls, status: int, body: bytes, token: str, max_bytes: int) -> RobotsRules:
        """Rules for a final (non-redirect) robots.txt response."""
        policy = status_policy(status)
        if policy == RULES:
            return cls.parse(status, decode_robots(body, max_bytes), token)
        if policy == ALLOW_ALL:
            return cls.unavailable(status)
        return cls.unreachable(status)

    def allowed(self, url_or_target: str) -> bool:
        """Whether our token may fetch the URL (or path-and-query) after dot-segment removal."""
        if self.disallow_all:
            return False
        if self.allow_all or self._parser is None:
            return True
        target = (request_target(url_or_target) if "://" in url_or_target
                  else remove_dot_segments(url_or_target))
        return self._parser.can_fetch(target, self._token)

    def to_row(self, host: str, fetched_at: datetime, ttl_s: float) -> dict[str, Any]:
        """A `robots` table row."""
        return {
            "host": host,
            "fetched_at": fetched_at,
            "http_status": self.status,
            "crawl_delay": self.crawl_delay,
            "sitemaps": list(self.sitemaps),
            "rules": self.text,
            "expires_at": fetched_at + timedelta(seconds=ttl_s),
        }


def _as_utc(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            return _as_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


def from_cache(row: dict[str, Any] | None, now: datetime, ttl_s: float,
               token: str) -> RobotsRules | None:
    """Rules from a previous `robots` row while it is fresh: until its `expires_at` (the TTL
    it was written with) or `fetched_at + ttl_s`, whichever comes first (a TTL lowered since
    takes effect at once).

    Only definitive answers are reused (`status_policy`): 2xx (rules) and 4xx (allow all). A
    cached 5xx or unreachable answer is retried, as RFC 9309 2.3.1.4 expects crawlers to do.
    """
    if not row:
        return None
    fetched_at = _as_utc(row.get("fetched_at"))
    status = row.get("http_status")
    if fetched_at is None or status is None:
        return None
    expires = fetched_at + timedelta(seconds=ttl_s)
    written = _as_utc(row.get("expires_at"))
    if written is not None:
        expires = min(expires, written)
    if expires <= now:
        return None
    status = int(status)
    policy = status_policy(status)
    if policy == RULES:
        return RobotsRules.parse(status, row.get("rules") or "", token)
    if policy == ALLOW_ALL:
        return RobotsRules.unavailable(status, row.get("rules") or "")
    return None

"""An independent, deliberately small robots.txt matcher (RFC 9309) for ground truth.

The crawler uses Protego; the audit must not, or a shared bug would hide itself. This matcher
handles exactly what RFC 9309 asks: group selection by product token (case-insensitive, merged
groups, ``*`` fallback), longest-match precedence with Allow winning ties, ``*`` and ``$``,
percent-encoding normalisation, and dot-segment removal of the request path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

_UNRESERVED = re.compile(r"%(2[DdEe]|3[0-9]|[46][1-9A-Fa-f]|[57][0-9Aa]|5[Ff]|7[Ee])")


@dataclass
class Group:
    """One group: its user-agent lines and its rules in file order."""

    agents: list[str] = field(default_factory=list)
    rules: list[tuple[bool, str]] = field(default_factory=list)  # (allow, pattern)
    crawl_delay: float | None = None


def parse(text: str) -> list[Group]:
    """Split robots.txt into groups; consecutive user-agent lines share a group."""
    groups: list[Group] = []
    current: Group | None = None
    last_was_agent = False
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if ":" not in line:
            continue
        key, value = (s.strip() for s in line.split(":", 1))
        key = key.lower()
        if key == "user-agent":
            if current is None or not last_was_agent:
                current = Group()
                groups.append(current)
            current.agents.append(value.lower())
            last_was_agent = True
            continue
        last_was_agent = False
        if current is None:
            continue
        if key in ("allow", "disallow") and value:
            current.rules.append((key == "allow", value))
        elif key == "crawl-delay":
            try:
                current.crawl_delay = float(value)
            except ValueError:
                pass
    return groups


def select(groups: list[Group], token: str) -> list[Group]:
    """Groups that apply to ``token``: all groups naming it, else all ``*`` groups."""
    token = token.lower()
    mine = [g for g in groups if token in g.agents]
    return mine or [g for g in groups if "*" in g.agents]


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, so ``/./a/../a/x`` compares as ``/a/x``."""
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    result = "/".join(out)
    return result if result.startswith("/") else "/" + result


def normalize_path(path: str) -> str:
    """Canonical form of a path plus query, as both a rule and a request are compared."""
    path, sep, query = path.partition("?")
    return _encode(remove_dot_segments(path or "/")) + (sep + _encode(query) if sep else "")


def _encode(s: str) -> str:
    """Percent-encode non-ASCII and upper-case escapes; decode escaped unreserved characters."""
    s = _UNRESERVED.sub(lambda m: unquote(m.group(0)), s)
    s = quote(s, safe="/?&=;:@!$'()*+,%~-._[]")
    return re.sub(r"%[0-9a-fA-F]{2}", lambda m: m.group(0).upper(), s)


def _regex(pattern: str) -> re.Pattern[str]:
    """Compile a rule: ``*`` matches any run, a final ``$`` anchors the end."""
    anchored = pattern.endswith("$")
    body = _encode(pattern[:-1] if anchored else pattern)
    rx = ".*".join(re.escape(part) for part in body.split("*"))
    return re.compile(rx + ("$" if anchored else ""))


def allowed(text: str, path: str, token: str) -> bool:
    """Whether ``token`` may fetch ``path`` (path plus optional query) under ``text``."""
    target = normalize_path(path)
    if target == "/robots.txt":
        return True
    best: tuple[int, bool] | None = None
    for group in select(parse(text), token):
        for allow, pattern in group.rules:
            if _regex(pattern).match(target):
                key = (len(_encode(pattern)), allow)  # longer wins; at equal length allow wins
                if best is None or key > best:
                    best = key
    return True if best is None else best[1]


def crawl_delay(text: str, token: str) -> float | None:
    """The Crawl-delay of the group(s) applying to ``token``, if any."""
    delays = [g.crawl_delay for g in select(parse(text), token) if g.crawl_delay is not None]
    return max(delays) if delays else None

"""Links resolved on one page, remembered for the next pages a worker parses.

Normalizing an outlink (resolution, IDNA, percent-encoding, query rules) and filtering it is
most of a page's link CPU, and a site's pages repeat the same menus, footers and teasers: on
the simulated web 64 % of the hrefs a page holds were seen on an earlier page, and a real
site's navigation repeats more. `recrawl.content.parsing` keeps each page's own hrefs; this is
the memo across pages, held per process for each pair of rules (a Spark Python worker, a parse
pool's process) and bounded. The links' host keys are remembered the same way, by scheme and
authority (:func:`link_host_key`).

A result is reused only under a key that fixes it: the href and the part of the page's base
URL its resolution reads (:func:`reference_key`). An href whose resolution depends on more
(the base's query, a fragment-only or query-only reference, browser clean-up of spaces,
backslashes or tabs, a scheme-relative "http:x", a non-ASCII query percent-encoded in the
page's charset) is not remembered, so a remembered result is always the one computing it
again would give (`tests/recrawl/test_linkmemo.py` holds them equal).
"""

from __future__ import annotations

from recrawl.content.linkfilter import LinkFilterRules
from recrawl.content.urlnorm import NormalizeRules, host_key_or_none, split_base

MAX_ENTRIES = 50_000  # ~15 MB of strings; cleared when full (a crawl's sites change in turn)

Scope = tuple[str, str, str]  # the base URL's scheme, authority and directory

_memos: dict[tuple[NormalizeRules, LinkFilterRules], dict[tuple, tuple[str | None, bool]]] = {}
_host_keys: dict[str, str | None] = {}  # "scheme://authority" -> its host key


def memo_for(norm_rules: NormalizeRules, filter_rules: LinkFilterRules) -> dict:
    """This process's memo for these rules: reference key -> (normalized target or None, kept
    by the filter)."""
    memo = _memos.get((norm_rules, filter_rules))
    if memo is None:
        memo = _memos[norm_rules, filter_rules] = {}
    return memo


def remember(memo: dict, key, value) -> None:
    if len(memo) >= MAX_ENTRIES:
        memo.clear()
    memo[key] = value


def base_scope(base: str) -> Scope | None:
    """What of `base` a relative reference's resolution reads; None for a base that does not
    parse (its links are resolved one by one, as before)."""
    try:
        scheme, netloc, path, _ = split_base(base)
    except ValueError:
        return None
    return scheme, netloc, path[: path.rfind("/") + 1]


def reference_key(href: str, scope: Scope | None) -> tuple | None:
    """The key under which `href`'s resolution against a base of `scope` is remembered, or None
    when it is not: an absolute http(s) URL alone, a path-absolute or network-path reference
    with the base's scheme and authority, a relative path with the base's directory too."""
    if (scope is None or not href or not href.isascii() or href[0] in "?#"
            or href[0] <= " " or href[-1] <= " "
            or "\\" in href or "\t" in href or "\n" in href or "\r" in href):
        return None
    if href.startswith(("http://", "https://")):
        return ("abs", href)
    if href[0] == "/":
        return ("root", scope[0], scope[1], href)
    if ":" in href.split("/", 1)[0]:  # a scheme ("http:x" resolves against the base's)
        return None
    return ("rel", *scope, href)


def link_host_key(url: str) -> str | None:
    """`host_key_or_none(url)`, remembered by the URL's scheme and authority: a page's links
    point at a few hosts. Only a plain http(s) URL (what the normalizer gives) is looked up by
    its prefix, as its host key reads nothing after it."""
    start = 7 if url.startswith("http://") else 8 if url.startswith("https://") else 0
    if (not start or len(url) <= start or url[start] in "/\\" or url[-1] <= " "
            or "\t" in url or "\n" in url or "\r" in url):
        return host_key_or_none(url)
    end = url.find("/", start)
    prefix = url if end < 0 else url[:end]
    if prefix[-1] <= " ":  # cut there, it would be stripped as the whole URL's end is not
        return host_key_or_none(url)
    found = _host_keys.get(prefix)
    if found is None:
        found = host_key_or_none(prefix)
        remember(_host_keys, prefix, found)
    return found

"""The links memo across pages: a key always fixes the result, and parsing with the memo warm
gives what parsing cold does."""

from __future__ import annotations

import itertools

from recrawl.content import linkmemo
from recrawl.content.linkfilter import DEFAULT_FILTER_RULES, filter_reason
from recrawl.content.linkmemo import base_scope, link_host_key, memo_for, reference_key, remember
from recrawl.content.parsing import parse_html
from recrawl.content.urlnorm import DEFAULT_RULES, host_key_or_none, try_normalize

HREFS = [
    "", "#f", "?q=1", "x", "x.html", "./x", "../x", "../../../../x", "/x/../y", "/p/./q/",
    "//other.test/x", "//other.test", "http://a.test/x", "https://a.test/x?b=2&a=1", "HTTP://a.test/X",
    "http:x", "http:/x", "https:x", "http:\\\\a.test\\x", "mailto:a@b.test", "javascript:void(0)",
    " x", "x ", "a\\b", "a\tb", "a\nb", "a b.html", "x?utm_source=1&b=2", "/p/%7Efoo",
    "x#frag", "%2e%2e/x", "%2E%2E/%2e/y", "..", ".", "//", "///x", "ftp://a.test/x",
    "data:text/html,hi", "x:y/z", "a/b:c", "/a:b", "ünï.html", "?ü", "x?ü=1",
    "http://xn--bcher-kva.test/", "http://bücher.test/x", "http://[::1]/x", "http://a.test:80/x",
    "http://a.test:99999/x", "HtTp://A.test/", "x.jpg", "/a/a/a/a/a/a/a", "x;jsessionid=1?sid=2",
    "http://a.test/" + "y" * 600, "\x00x", "x\x7f",
]
BASES = [
    "http://a.test/", "http://a.test/p/1.html", "http://a.test/p/2.html?x=1", "http://a.test/p/",
    "https://a.test/p/1.html", "http://b.test:8080/q/r/s.html", "http://a.test/p/../q/1.html",
    "http://a.test", "http://a.test/p/..", "http://a.test/p/.", "http://a.test/%2e%2e/x",
    "http://a.test/p/1.html#frag", "notaurl", "http://", "HTTP://A.TEST/p/1.html",
    "http://a.test/p/1.html?utm_source=x", "http://[::1]/p/q", "https://a.test:443/p/",
]


def resolve(href: str, base: str) -> tuple[str | None, bool]:
    """What parsing.py's _Outlinks computes for one href, without any memo."""
    target, _ = try_normalize(href, base, DEFAULT_RULES)
    if target is None:
        return None, False
    return target, filter_reason(target, DEFAULT_FILTER_RULES) is None


def test_a_key_fixes_the_result_for_every_base_that_gives_it():
    found: dict[tuple, set] = {}
    keyed = 0
    for href, base in itertools.product(HREFS, BASES):
        key = reference_key(href, base_scope(base))
        if key is None:
            continue
        keyed += 1
        found.setdefault(key, set()).add(resolve(href, base))
    mixed = {k: v for k, v in found.items() if len(v) > 1}
    assert not mixed
    # most of them are remembered, and absolute URLs and root paths share keys across bases
    assert keyed > len(HREFS) * len(BASES) // 2
    assert len(found) < keyed / 2


def test_what_is_not_remembered():
    scope = base_scope("http://a.test/p/1.html")
    for href in ("", "#f", "?q", " x", "a\\b", "a\tb", "http:x", "mailto:a@b.test", "ü.html"):
        assert reference_key(href, scope) is None, href
    assert reference_key("x", None) is None
    assert reference_key("http://a.test/x", scope) == ("abs", "http://a.test/x")
    assert reference_key("/x", scope) == ("root", "http", "a.test", "/x")
    assert reference_key("x", scope) == ("rel", "http", "a.test", "/p/", "x")


def test_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(linkmemo, "MAX_ENTRIES", 3)
    memo: dict = {}
    for i in range(7):
        remember(memo, ("abs", str(i)), (str(i), True))
        assert len(memo) <= 3
    assert memo[("abs", "6")] == ("6", True)


def test_parsing_with_the_memo_warm_gives_what_parsing_cold_gives():
    def page(i: int) -> bytes:
        links = "".join(f'<a href="{h}">{j}</a>' for j, h in enumerate(HREFS) if "\x00" not in h)
        return (f"<html><head><title>p{i}</title></head><body><p>text {i}</p>{links}"
                f'<a href="only{i}.html">mine</a></body></html>').encode()

    pages = [(page(i), base) for i, base in enumerate(BASES)]
    memo_for(DEFAULT_RULES, DEFAULT_FILTER_RULES).clear()
    warm = [parse_html(body, "text/html; charset=utf-8", base).outlinks for body, base in pages * 2]
    cold = []
    for body, base in pages * 2:
        memo_for(DEFAULT_RULES, DEFAULT_FILTER_RULES).clear()
        cold.append(parse_html(body, "text/html; charset=utf-8", base).outlinks)
    assert warm == cold
    assert sum(len(o) for o in warm) > 4 * len(pages)


def test_host_keys_remembered_by_authority_are_the_host_keys():
    urls = ["http://a.test/x", "http://a.test/y?z", "https://a.test/x", "http://a.test:8080/",
            "http://A.TEST/x", "http://a.test", "http://a.test?q=/x", "http://a.test#f/x",
            "http://a.test\\evil/x", "http://a.test?q\\x/y", "http://user@a.test/x",
            "http://[::1]:81/x", "http://bücher.test/x", "http://a.test:99999/x", "http://",
            "http:///x", "http://a.test /x", "http://a.test/x ", "mailto:a@b.test", "ftp://a.test/",
            "http://a\t.test/x", "HTTP://a.test/x", "http://xn--bcher-kva.test/x", "http://a..test/",
            "http://a.test%20/x", "http://a.test:/x", "http://a.test./x", "http://a.test\x00/x",
            "https:// a.test/x", "http://a.test\x7f/x", "http://[::1/x", "http://a.test:8o/x"]
    for _ in range(2):  # the second time from the memo
        for url in urls:
            assert link_host_key(url) == host_key_or_none(url), url

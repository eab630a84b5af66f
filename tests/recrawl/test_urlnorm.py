"""Tests for recrawl.content.urlnorm: each normalization rule, invalid inputs, idempotence, host keys."""

from __future__ import annotations

import random
import string
from dataclasses import replace
from urllib.parse import urlsplit

import pytest

from recrawl.content.urlnorm import (
    DEFAULT_RULES,
    InvalidURL,
    NormalizeRules,
    host_key,
    normalize_url,
    registered_domain,
    try_normalize,
)

NORMALIZATION_TABLE = [
    # scheme and host case, trailing dot
    ("HTTP://WWW.Example.COM/Path", "http://www.example.com/Path"),
    ("http://example.com./", "http://example.com/"),
    # IDNA
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("http://BÜCHER.de/", "http://xn--bcher-kva.de/"),
    ("http://b%C3%BCcher.de/", "http://xn--bcher-kva.de/"),
    ("http://中文.com/x", "http://xn--fiq228c.com/x"),
    ("http://xn--bcher-kva.de/", "http://xn--bcher-kva.de/"),
    ("http://%65xample.com/", "http://example.com/"),
    # default ports
    ("http://example.com:80/", "http://example.com/"),
    ("https://example.com:443/", "https://example.com/"),
    ("http://example.com:443/", "http://example.com:443/"),
    ("https://example.com:80/", "https://example.com:80/"),
    ("http://example.com:8080/", "http://example.com:8080/"),
    ("http://example.com:0080/", "http://example.com/"),
    ("http://example.com:/", "http://example.com/"),
    # empty path
    ("http://example.com", "http://example.com/"),
    ("http://example.com?b=1", "http://example.com/?b=1"),
    # dot segments (RFC 3986 5.2.4)
    ("http://a.com/a/b/c/./../../g", "http://a.com/a/g"),
    ("http://a.com/./a/../a/x", "http://a.com/a/x"),
    ("http://a.com/a/b/..", "http://a.com/a/"),
    ("http://a.com/a/b/.", "http://a.com/a/b/"),
    ("http://a.com/../../x", "http://a.com/x"),
    ("http://a.com/a/%2E%2E/b", "http://a.com/b"),
    ("http://a.com/a/.../b", "http://a.com/a/.../b"),
    ("http://a.com/a/..b/c", "http://a.com/a/..b/c"),
    ("http://a.com/a//b", "http://a.com/a//b"),
    # percent-encoding
    ("http://a.com/%7Euser/", "http://a.com/~user/"),
    ("http://a.com/%7euser/", "http://a.com/~user/"),
    ("http://a.com/%41%42c", "http://a.com/ABc"),
    ("http://a.com/a%2fb", "http://a.com/a%2Fb"),
    ("http://a.com/a%2Fb", "http://a.com/a%2Fb"),
    ("http://a.com/%c3%bc", "http://a.com/%C3%BC"),
    ("http://a.com/ü", "http://a.com/%C3%BC"),
    ("http://a.com/a b", "http://a.com/a%20b"),
    ("http://a.com/a%20b", "http://a.com/a%20b"),
    ("http://a.com/?q=a b", "http://a.com/?q=a%20b"),
    ("http://a.com/?q=%e4%b8%ad", "http://a.com/?q=%E4%B8%AD"),
    ("http://a.com/?q=中", "http://a.com/?q=%E4%B8%AD"),
    ("http://a.com/?q=a+b", "http://a.com/?q=a+b"),
    ("http://a.com/?q=a%2Bb", "http://a.com/?q=a%2Bb"),
    ("http://a.com/?q=%26", "http://a.com/?q=%26"),
    ("http://a.com/100%", "http://a.com/100%25"),
    ("http://a.com/%zz", "http://a.com/%25zz"),
    ('http://a.com/"<x>"|^`{}', "http://a.com/%22%3Cx%3E%22%7C%5E%60%7B%7D"),
    ("http://a.com/a:b@c!$&'()*+,;=", "http://a.com/a:b@c!$&'()*+,;="),
    ("http://a.com/[x]", "http://a.com/[x]"),
    # fragment
    ("http://a.com/x#frag", "http://a.com/x"),
    ("http://a.com/x?y=1#frag", "http://a.com/x?y=1"),
    ("http://a.com/#", "http://a.com/"),
    # query: sorted by key then value, blank values kept, empty query removed
    ("http://a.com/?b=2&a=1", "http://a.com/?a=1&b=2"),
    ("http://a.com/?a=2&a=1&a", "http://a.com/?a&a=1&a=2"),
    ("http://a.com/?b=&a", "http://a.com/?a&b="),
    ("http://a.com/?b=1&&a=2&", "http://a.com/?a=2&b=1"),
    ("http://a.com/?", "http://a.com/"),
    ("http://a.com/x?&", "http://a.com/x"),
    ("http://a.com/?B=1&a=1", "http://a.com/?B=1&a=1"),
    # tracking parameters (glob, case-insensitive)
    ("http://a.com/?utm_source=x&utm_medium=y&id=3", "http://a.com/?id=3"),
    ("http://a.com/?UTM_Campaign=x&id=3", "http://a.com/?id=3"),
    ("http://a.com/?gclid=1&fbclid=2&msclkid=3&dclid=4&yclid=5", "http://a.com/"),
    ("http://a.com/?mc_cid=1&mc_eid=2&_ga=3&igshid=4&x=1", "http://a.com/?x=1"),
    ("http://a.com/?utm=1", "http://a.com/?utm=1"),
    ("http://a.com/?notgclid=1", "http://a.com/?notgclid=1"),
    # session ids, in the query and as path parameters
    ("http://a.com/?PHPSESSID=abc&page=2", "http://a.com/?page=2"),
    ("http://a.com/?jsessionid=abc&sid=1&sessionid=2", "http://a.com/"),
    ("http://a.com/?ASPSESSIONIDQQGGQGPC=abc&x=1", "http://a.com/?x=1"),
    ("http://a.com/?cfid=1&cftoken=2&x=1", "http://a.com/?x=1"),
    ("http://a.com/shop;jsessionid=0123ABC?item=7", "http://a.com/shop?item=7"),
    ("http://a.com/shop;JSESSIONID=0123ABC", "http://a.com/shop"),
    ("http://a.com/a;jsessionid=1/b", "http://a.com/a/b"),
    ("http://a.com/a;type=i;jsessionid=1", "http://a.com/a;type=i"),
    ("http://a.com/a;type=i", "http://a.com/a;type=i"),
    ("http://a.com/x/..;jsessionid=1/y", "http://a.com/y"),
    # userinfo is dropped
    ("http://user:pass@a.com/x", "http://a.com/x"),
    ("http://good.example@evil.example/", "http://evil.example/"),
    # whitespace and browser leniency
    ("  http://a.com/x  ", "http://a.com/x"),
    ("\thttp://a.com/x\n", "http://a.com/x"),
    ("http://a.com/a\n/b\t/c\r", "http://a.com/a/b/c"),
    ("http:\\\\a.com\\x\\y?q=\\", "http://a.com/x/y?q=%5C"),
    ("http:a.com/x", "http://a.com/x"),
    ("http:///a.com/x", "http://a.com/x"),
    # IP literals
    ("http://127.0.0.1:8080/x", "http://127.0.0.1:8080/x"),
    ("http://[2001:DB8:0:0::1]:80/", "http://[2001:db8::1]/"),
    ("http://[::1]:8080/", "http://[::1]:8080/"),
]


@pytest.mark.parametrize(("raw", "expected"), NORMALIZATION_TABLE)
def test_normalization_table(raw, expected):
    assert normalize_url(raw) == expected


@pytest.mark.parametrize(("raw", "expected"), NORMALIZATION_TABLE)
def test_normalization_table_is_idempotent(raw, expected):
    assert normalize_url(expected) == expected


RELATIVE_TABLE = [
    # RFC 3986 section 5.4.1 normal examples (base http://a/b/c/d;p?q), non-http ones left out
    ("g", "http://a/b/c/g"),
    ("./g", "http://a/b/c/g"),
    ("g/", "http://a/b/c/g/"),
    ("/g", "http://a/g"),
    ("//g", "http://g/"),
    ("?y", "http://a/b/c/d;p?y"),
    ("?", "http://a/b/c/d;p"),  # an empty query replaces the base's
    ("g?y", "http://a/b/c/g?y"),
    ("#s", "http://a/b/c/d;p?q"),
    ("g#s", "http://a/b/c/g"),
    ("g?y#s", "http://a/b/c/g?y"),
    (";x", "http://a/b/c/;x"),
    ("g;x", "http://a/b/c/g;x"),
    ("", "http://a/b/c/d;p?q"),
    (".", "http://a/b/c/"),
    ("./", "http://a/b/c/"),
    ("..", "http://a/b/"),
    ("../", "http://a/b/"),
    ("../g", "http://a/b/g"),
    ("../..", "http://a/"),
    ("../../g", "http://a/g"),
    # 5.4.2 abnormal examples
    ("../../../g", "http://a/g"),
    ("../../../../g", "http://a/g"),
    ("/./g", "http://a/g"),
    ("/../g", "http://a/g"),
    ("g.", "http://a/b/c/g."),
    (".g", "http://a/b/c/.g"),
    ("g..", "http://a/b/c/g.."),
    ("..g", "http://a/b/c/..g"),
    ("./../g", "http://a/b/g"),
    ("./g/.", "http://a/b/c/g/"),
    ("g/./h", "http://a/b/c/g/h"),
    ("g/../h", "http://a/b/c/h"),
    ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
    ("g;x=1/../y", "http://a/b/c/y"),
    ("http:g", "http://a/b/c/g"),  # non-strict parser, as browsers
    # browser leniency and absolute references
    ("..\\g", "http://a/b/g"),
    ("%2e%2E/g", "http://a/b/g"),  # WHATWG: percent-encoded dots are dot segments
    ("  g  ", "http://a/b/c/g"),
    ("https://Other.example/x", "https://other.example/x"),
    ("HTTP://a/x", "http://a/x"),
    ("https:g", "https://g/"),
]


@pytest.mark.parametrize(("ref", "expected"), RELATIVE_TABLE)
def test_relative_resolution_rfc3986(ref, expected):
    assert normalize_url(ref, base="http://a/b/c/d;p?q") == expected


def test_relative_against_base_with_empty_path_and_port():
    assert normalize_url("x", "http://a.com") == "http://a.com/x"
    assert normalize_url("?q=1", "http://a.com:8080") == "http://a.com:8080/?q=1"
    assert normalize_url("/p", "https://u@A.com:443/z") == "https://a.com/p"


def test_relative_result_is_normalized_too():
    assert (
        normalize_url("../Y/%7e?utm_source=z&b=2&a=1#f", "HTTP://Ex.COM/a/b/c")
        == "http://ex.com/a/Y/~?a=1&b=2"
    )


INVALID_TABLE = [
    ("mailto:someone@example.com", "unsupported scheme 'mailto'"),
    ("javascript:void(0)", "unsupported scheme 'javascript'"),
    ("JavaScript:alert(1)", "unsupported scheme 'javascript'"),
    ("ftp://example.com/file", "unsupported scheme 'ftp'"),
    ("data:text/html,hi", "unsupported scheme 'data'"),
    ("tel:+1234", "unsupported scheme 'tel'"),
    ("http://", "no host"),
    ("http:///", "no host"),
    ("https://:80/", "no host"),
    ("http://user@/", "no host"),
    ("http://exa mple.com/", "bad host"),
    ("http://exa<mple.com/", "bad host"),
    ("http://a..b/", "bad host"),
    ("http://.a.com/", "bad host"),
    ("http://a.com../", "bad host"),
    ("http://" + "a" * 64 + ".com/", "bad host"),
    ("http://" + "ü" * 70 + ".de/", "bad host (idna)"),
    ("http://[::g]/", "unparseable"),
    ("http://[::1/", "unparseable"),
    ("http://[::1]x/", "bad host"),
    ("http://example.com:99999/", "bad port"),
    ("http://example.com:65536/", "bad port"),
    ("http://example.com:8o/", "bad port"),
    ("http://example.com:-1/", "bad port"),
    ("http://example.com/" + "x" * 2100, "too long"),
    ("http://example.com/" + "x" * 100_000, "too long"),
    ("/relative/path", "relative URL without base"),
    ("example.com/path", "relative URL without base"),
    ("", "relative URL without base"),
]


@pytest.mark.parametrize(("raw", "reason"), INVALID_TABLE)
def test_invalid_urls_have_reasons(raw, reason):
    with pytest.raises(InvalidURL) as info:
        normalize_url(raw)
    assert info.value.reason == reason
    assert try_normalize(raw) == (None, reason)


def test_invalid_url_is_a_value_error():
    with pytest.raises(ValueError):
        normalize_url("mailto:x@y.z")


def test_unparseable_urls_do_not_crash():
    assert try_normalize(None) == (None, "not a string")  # type: ignore[arg-type]


def test_relative_with_bad_base():
    assert try_normalize("x", base="not a url") == (None, "bad base")
    assert try_normalize("x", base="mailto:a@b.c")[0] is None


def test_try_normalize_ok():
    assert try_normalize("HTTP://A.com") == ("http://a.com/", None)


def test_max_length_is_configurable():
    rules = NormalizeRules(max_length=30)
    assert normalize_url("http://a.com/" + "x" * 17, rules=rules) == "http://a.com/" + "x" * 17
    with pytest.raises(InvalidURL, match="too long"):
        normalize_url("http://a.com/" + "x" * 18, rules=rules)
    # stripping tracking parameters can bring a URL under the limit
    assert normalize_url("http://a.com/?utm_source=" + "x" * 30, rules=rules) == "http://a.com/"


# --- every rule can be switched off ------------------------------------------------------

RULE_OFF_TABLE = [
    ("lowercase_scheme_host", "HTTP://Ex.COM/", "http://Ex.COM/"),  # the scheme always is
    ("idna", "http://bücher.de/", "http://bücher.de/"),
    ("remove_default_port", "http://a.com:80/", "http://a.com:80/"),
    ("resolve_dot_segments", "http://a.com/a/./b/../c", "http://a.com/a/./b/../c"),
    ("normalize_percent_encoding", "http://a.com/%7e%2f a", "http://a.com/%7e%2f a"),
    ("drop_fragment", "http://a.com/x#f%7e g", "http://a.com/x#f~%20g"),
    ("sort_query", "http://a.com/?b=1&a=2", "http://a.com/?b=1&a=2"),
    ("strip_tracking_params", "http://a.com/?utm_x=1&b=2", "http://a.com/?b=2&utm_x=1"),
    ("strip_session_ids", "http://a.com/p;jsessionid=1?sid=2", "http://a.com/p;jsessionid=1?sid=2"),
    ("empty_path_slash", "http://a.com", "http://a.com"),
]


@pytest.mark.parametrize(("rule", "raw", "expected"), RULE_OFF_TABLE)
def test_each_rule_can_be_switched_off(rule, raw, expected):
    rules = replace(DEFAULT_RULES, **{rule: False})
    assert normalize_url(raw, rules=rules) == expected
    assert normalize_url(raw) != expected  # and the default does apply it


def test_custom_tracking_and_session_patterns():
    rules = NormalizeRules(tracking_params=("ref", "src_*"), session_params=("token",))
    assert (
        normalize_url("http://a.com/p;token=1?ref=x&src_a=1&utm_source=y&sid=1", rules=rules)
        == "http://a.com/p?sid=1&utm_source=y"
    )


def test_rules_are_hashable_and_frozen():
    assert hash(DEFAULT_RULES) == hash(NormalizeRules())
    with pytest.raises(AttributeError):
        DEFAULT_RULES.sort_query = False  # type: ignore[misc]


# --- idempotence over generated URLs -----------------------------------------------------

_PIECES = [
    "a", "B", "~", "%7E", "%7e", "%2F", "%2f", "%41", "%", "%zz", " ", "ü", "中", "..", ".",
    "//", ";jsessionid=X", ";v=1", "%2E", "a.html", "+", "&", "=", "[", "]", "@", ":", "!",
    "'", '"', "<", "|", "^", "\\", "\t", "%00", "\u3000", "%C3%BC",
]  # fmt: skip
_PARAMS = [
    "utm_source=x", "UTM_MEDIUM=y", "gclid=1", "PHPSESSID=abc", "a=1", "a=2", "b=", "b",
    "c=%7e", "c=%2f", "d=a b", "e=ü", "", "jsessionid=9", "aspsessionidxyz=1", "z=%", "q=a+b",
]  # fmt: skip
_HOSTS = [
    "example.com", "EXAMPLE.com", "www.Example.COM.", "bücher.de", "127.0.0.1", "[::1]",
    "[2001:DB8::1]", "a-b.c_d.example", "xn--bcher-kva.de", "%65xample.com",
]  # fmt: skip


def _random_url(rnd: random.Random) -> str:
    scheme = rnd.choice(["http", "https", "HTTP", "Https"])
    host = rnd.choice(_HOSTS)
    port = rnd.choice(["", "", ":80", ":443", ":8080", ":0080", ":"])
    user = rnd.choice(["", "", "u:p@", "user@"])
    path = "".join(
        "/" + "".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 3)))
        for _ in range(rnd.randint(0, 5))
    )
    query = ""
    if rnd.random() < 0.6:
        query = "?" + "&".join(rnd.choice(_PARAMS) for _ in range(rnd.randint(0, 5)))
    frag = rnd.choice(["", "", "#", "#top", "#a%20b"])
    return f"{scheme}://{user}{host}{port}{path}{query}{frag}"


def _random_ref(rnd: random.Random) -> str:
    segs = [rnd.choice(["..", ".", "x", "ü", "%7e", "a b", ";jsessionid=1", ""]) for _ in range(3)]
    ref = "/".join(segs)
    if rnd.random() < 0.3:
        ref = "/" + ref
    if rnd.random() < 0.5:
        ref += "?" + rnd.choice(_PARAMS)
    return ref


def test_idempotence_property_over_generated_urls():
    rnd = random.Random(20240601)
    checked = 0
    for _ in range(3000):
        raw = _random_url(rnd)
        out, reason = try_normalize(raw)
        if out is None:
            assert reason, raw
            continue
        checked += 1
        assert normalize_url(out) == out, raw
        assert out.isascii(), raw
        assert "#" not in out and " " not in out
        parts = urlsplit(out)
        assert parts.scheme in ("http", "https") and parts.hostname
        assert parts.path.startswith("/")
        assert "/./" not in parts.path + "/" and "/../" not in parts.path + "/"
        assert "utm_" not in parts.query.lower() and "phpsessid" not in parts.query.lower()
        assert "jsessionid" not in out.lower()
    assert checked > 2500


def test_idempotence_property_over_generated_relative_references():
    rnd = random.Random(7)
    resolved = 0
    for _ in range(1000):
        raw_base = _random_url(rnd)
        base = try_normalize(raw_base)[0]
        if base is None:
            continue
        ref = _random_ref(rnd)
        out, reason = try_normalize(ref, base)
        if out is None:  # e.g. "///x": a network-path reference with an empty host
            assert ref.startswith("//"), (base, ref, reason)
            continue
        resolved += 1
        assert normalize_url(out) == out, (base, ref)
        assert normalize_url(out, base) == out
        # resolving against the raw or the normalized base gives the same answer
        assert normalize_url(ref, raw_base) == out, (raw_base, ref)
    assert resolved > 800


def test_random_garbage_never_raises_anything_but_invalid_url():
    rnd = random.Random(99)
    alphabet = string.printable + "üß中\u3000\x00\x7f"
    for _ in range(2000):
        raw = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40)))
        if rnd.random() < 0.5:
            raw = "http://" + raw
        url, reason = try_normalize(raw, base=rnd.choice([None, "http://a.com/b/"]))
        assert (url is None) != (reason is None)
        assert reason is None or not reason.startswith("error"), (raw, reason)
        if url is not None:
            assert normalize_url(url) == url, raw


def test_normalize_is_fast_enough():
    """What keeps a link at ~10 us (timing is for benchmarks): what a page's links share is
    worked out once, not per link: the base URL is split once, the parameter globs are
    compiled once."""
    from recrawl.content import urlnorm

    urlnorm.split_base.cache_clear()
    urlnorm._glob_matcher.cache_clear()
    urls = [f"/news/{i}.html?utm_source=x&b=2&a={i}" for i in range(2000)]
    out = [normalize_url(u, "https://news.example/section/page.html") for u in urls]
    assert out[7] == "https://news.example/news/7.html?a=7&b=2"
    assert urlnorm.split_base.cache_info().misses == 1
    assert urlnorm._glob_matcher.cache_info().misses == 2  # tracking and session parameters


# --- host_key and registered_domain ------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://example.com/x", "http://example.com:80"),
        ("https://example.com/x", "https://example.com:443"),
        ("HTTP://Example.COM:80/", "http://example.com:80"),
        ("http://example.com:8080/a?b", "http://example.com:8080"),
        ("https://u:p@bücher.de./", "https://xn--bcher-kva.de:443"),
        ("http://[::1]/", "http://[::1]:80"),
        ("http://127.0.0.1:5000/x", "http://127.0.0.1:5000"),
    ],
)
def test_host_key(url, key):
    assert host_key(url) == key


@pytest.mark.parametrize("url", ["mailto:a@b.c", "http://", "/x", "http://a.com:99999/"])
def test_host_key_invalid(url):
    with pytest.raises(InvalidURL):
        host_key(url)


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("www.bbc.co.uk", "bbc.co.uk"),
        ("bbc.co.uk", "bbc.co.uk"),
        ("WWW.Example.COM.", "example.com"),
        ("a.b.c.example.com", "example.com"),
        ("xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("shop.xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("co.uk", "co.uk"),
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "[::1]"),
        ("localhost", "localhost"),
        ("a.b.internal", "b.internal"),  # unknown suffix: the PSL default rule "*"
        ("site1.sim.test", "sim.test"),
    ],
)
def test_registered_domain(host, domain):
    assert registered_domain(host) == domain


def test_registered_domain_never_touches_network_or_disk_cache(monkeypatch, tmp_path):
    import socket

    import recrawl.content.urlnorm as urlnorm

    def no_network(*args, **kwargs):
        raise AssertionError("network access")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(urlnorm, "_extractor", None)
    monkeypatch.setenv("TLDEXTRACT_CACHE", str(tmp_path / "cache"))
    assert registered_domain("news.bbc.co.uk") == "bbc.co.uk"
    assert not (tmp_path / "cache").exists()


def test_resolution_agrees_with_urljoin_on_generated_references():
    """The fast resolver must give what ``urllib.parse.urljoin`` gives (then normalized).

    Left out where urljoin departs from RFC 3986 and browsers: ``%2E%2E`` (a dot segment for
    us) and empty segments in the base path (urljoin drops them).
    """
    from urllib.parse import urljoin

    rnd = random.Random(3)
    segs = ["..", ".", "x", "y.html", "%7e", "a;b=1", ";jsessionid=2"]
    for _ in range(2000):
        base = try_normalize(_random_url(rnd))[0]
        if base is None or "//" in urlsplit(base).path:
            continue
        ref = "/".join(rnd.choice(segs) for _ in range(rnd.randint(0, 4)))
        ref = rnd.choice(["", "/", "//other.example/", "?q=1", "#f", "../"]) + ref
        ref += rnd.choice(["", "?a=1", "#x"])  # a bare "?" empties the query; urljoin ignores it
        expected = try_normalize(urljoin(base, ref))
        assert try_normalize(ref, base) == expected, (base, ref)

"""robots.txt matching: RFC 9309 examples and the behaviours Google's robots.txt test suite
checks, written from their descriptions, through our Protego wrapper."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fetcher.robots import (
    RobotsRules,
    decode_robots,
    from_cache,
    product_token,
    remove_dot_segments,
    request_target,
    status_policy,
)


def allowed(robots: str, path: str, token: str = "foobot") -> bool:
    return RobotsRules.parse(200, robots, token).allowed(path)


# -- RFC 9309 ------------------------------------------------------------------------------------
RFC_EXAMPLE = """\
User-agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-agent: barbot
User-agent: bazbot
Disallow: /example/page.html

User-agent: quxbot

EOF
"""


@pytest.mark.parametrize("token,path,ok", [
    ("foobot", "/example/page.html", True),
    ("foobot", "/example/allowed.gif", True),
    ("foobot", "/example/other.html", False),
    ("foobot", "/", False),
    ("barbot", "/example/page.html", False),
    ("bazbot", "/example/page.html", False),
    ("barbot", "/example/other.html", True),
    ("quxbot", "/example/page.html", True),  # empty group: everything allowed, no * fallback
    ("quxbot", "/x.gif", True),
    ("otherbot", "/x.gif", False),
    ("otherbot", "/example/x", False),
    ("otherbot", "/publications/x", True),
])
def test_rfc9309_section5_example(token, path, ok):
    assert allowed(RFC_EXAMPLE, path, token) is ok


def test_rfc_longest_match_wins():
    txt = "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
    assert allowed(txt, "/example/page/ok.html")
    assert not allowed(txt, "/example/page/disallowed.gif")


def test_rfc_groups_for_the_same_agent_are_merged():
    txt = ("user-agent: ExampleBot\ndisallow: /foo\ndisallow: /bar\n\n"
           "user-agent: ExampleBot\ndisallow: /baz\n")
    for path in ("/foo", "/bar", "/baz"):
        assert not allowed(txt, path, "examplebot")
    assert allowed(txt, "/qux", "examplebot")


def test_robots_txt_itself_is_always_allowed():
    assert allowed("User-agent: *\nDisallow: /\n", "/robots.txt")


# -- Google suite behaviours -----------------------------------------------------------------------
def test_empty_file_and_empty_rules_allow_everything():
    assert allowed("", "/x")
    assert allowed("user-agent: FooBot\nallow:\ndisallow:\n", "/x")


def test_line_syntax():
    assert not allowed("user-agent: FooBot\ndisallow: /\n", "/x/y")
    assert allowed("foo: FooBot\nbar: /\n", "/x/y")
    assert not allowed("user-agent FooBot\ndisallow /\n", "/x/y")  # missing colon accepted


GROUPS = """\
allow: /foo/bar/

user-agent: FooBot
disallow: /
allow: /x/
user-agent: BarBot
disallow: /
allow: /y/


allow: /w/
user-agent: BazBot

user-agent: FooBot
allow: /z/
disallow: /
"""


@pytest.mark.parametrize("token,path,ok", [
    ("foobot", "/x/b", True), ("foobot", "/z/d", True), ("foobot", "/y/c", False),
    ("foobot", "/foo/bar/", False),  # rules before any user-agent line apply to nobody
    ("barbot", "/y/c", True), ("barbot", "/w/a", True), ("barbot", "/z/d", False),
    ("bazbot", "/z/d", True), ("bazbot", "/x/b", False),  # consecutive UA lines share a group
])
def test_groups(token, path, ok):
    assert allowed(GROUPS, path, token) is ok


def test_sitemap_and_unknown_lines_do_not_end_a_group():
    with_sitemap = ("User-agent: BarBot\nSitemap: https://foo.bar/sitemap\n"
                    "User-agent: *\nDisallow: /\n")
    with_unknown = ("User-agent: FooBot\nInvalid-Unknown-Line: unknown\n"
                    "User-agent: *\nDisallow: /\n")
    for txt in (with_sitemap, with_unknown):
        assert not allowed(txt, "/x/y", "foobot")
        assert not allowed(txt, "/x/y", "barbot")


def test_directive_names_are_case_insensitive():
    for txt in ("USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
                "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n"):
        assert allowed(txt, "/x/y")
        assert not allowed(txt, "/a/b")


def test_user_agent_value_is_case_insensitive_and_only_the_product_token_counts():
    for ua in ("FOO BAR", "foo bar", "FoO bAr", "Foo/1.2 (compatible)"):
        txt = f"User-Agent: {ua}\nAllow: /x/\nDisallow: /\n"
        assert allowed(txt, "/x/y", "foo")
        assert not allowed(txt, "/a/b", "foo")


def test_group_for_another_token_never_applies_by_prefix():
    assert allowed("User-agent: foo\nDisallow: /\n", "/x", "foobot")  # bare Protego: denied
    assert allowed("User-agent: foobot-images\nDisallow: /\n", "/x", "foobot")


def test_specific_group_wins_over_global_and_global_is_the_fallback():
    txt = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
    assert not allowed(txt, "/x/y", "foobot")
    assert allowed(txt, "/x/y", "barbot")
    txt = "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\n"
    assert allowed(txt, "/x/y", "bazbot")  # no group applies: allowed


def test_paths_are_case_sensitive():
    txt = "user-agent: FooBot\ndisallow: /x/\n"
    assert allowed(txt, "/X/y")
    assert not allowed(txt, "/x/y")


@pytest.mark.parametrize("rules,path,ok", [
    ("disallow: /x/page.html\nallow: /x/page.html\n", "/x/page.html", True),  # tie: allow
    ("allow: /x/page.html\ndisallow: /x/\n", "/x/page.html", True),
    ("allow: /x/page.html\ndisallow: /x/\n", "/x/", False),
    ("allow: /\ndisallow: /\n", "/x", True),
    ("disallow: /x\nallow: /x/\n", "/x", False),
    ("disallow: /x\nallow: /x/\n", "/x/", True),
    ("allow: /page\ndisallow: /*.html\n", "/page.html", False),
    ("allow: /page\ndisallow: /*.html\n", "/page", True),
    ("allow: /x/page.\ndisallow: /*.html\n", "/x/page.html", True),
    ("allow: /folder\ndisallow: /folder\n", "/folder/page", True),
    ("allow: /$\ndisallow: /\n", "/", True),
    ("allow: /$\ndisallow: /\n", "/page.htm", False),
])
def test_longest_match(rules, path, ok):
    assert allowed("user-agent: FooBot\n" + rules, path) is ok


def test_percent_encoding_equivalence():
    txt = "user-agent: FooBot\ndisallow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n"
    assert not allowed(txt, "/foo/bar?qux=taz&baz=http://foo.bar?tar&par")
    # Non-ASCII in a rule equals its UTF-8 percent-encoding in the URL; escapes ignore case.
    assert not allowed("user-agent: FooBot\ndisallow: /foo/bar/ツ\n", "/foo/bar/%E3%83%84")
    assert not allowed("user-agent: FooBot\ndisallow: /foo/bar/%E3%83%84\n", "/foo/bar/%E3%83%84")
    assert not allowed("user-agent: FooBot\ndisallow: /foo/bar/%e3%83%84\n", "/foo/bar/%E3%83%84")
    # RFC 9309 2.2.2: escaped unreserved characters equal the characters (Google differs).
    assert not allowed("user-agent: FooBot\ndisallow: /foo/bar/%62%61%7A\n", "/foo/bar/baz")
    assert not allowed("user-agent: FooBot\ndisallow: /~joe/\n", "/%7Ejoe/x")


@pytest.mark.parametrize("rules,path,ok", [
    ("disallow: /foo/bar/quz\nallow: /foo/*/qux\n", "/foo/bar/quz", False),
    ("disallow: /foo/bar/quz\nallow: /foo/*/qux\n", "/foo/quz", True),
    ("disallow: /foo/bar/quz\nallow: /foo/*/qux\n", "/foo//quz", True),
    ("disallow: /foo/bar/quz\nallow: /foo/*/qux\n", "/foo/bax/quz", True),
    ("disallow: /foo/bar$\nallow: /foo/bar/qux\n", "/foo/bar", False),
    ("disallow: /foo/bar$\nallow: /foo/bar/qux\n", "/foo/bar/qux", True),
    ("disallow: /foo/bar$\nallow: /foo/bar/qux\n", "/foo/bar/", True),
    ("disallow: /foo/bar$\nallow: /foo/bar/qux\n", "/foo/bar/baz", True),
    ("# disallow: /\ndisallow: /foo/quz#qux\nallow: /\n", "/foo/bar", True),
    ("# disallow: /\ndisallow: /foo/quz#qux\nallow: /\n", "/foo/quz", False),
])
def test_special_characters(rules, path, ok):
    assert allowed("user-agent: FooBot\n" + rules, path) is ok


def test_index_html_allows_the_directory():
    txt = "user-agent: FooBot\ndisallow: /\nallow: /allowed-slash/index.html\n"
    assert allowed(txt, "/allowed-slash/")
    assert allowed(txt, "/allowed-slash/index.html")
    assert not allowed(txt, "/allowed-slash/index.htm")
    assert not allowed(txt, "/anyone-else/")


FISH = [
    ("allow: /\ndisallow: /fish", {
        "/bar": True, "/fish": False, "/fish.html": False, "/fish/salmon.html": False,
        "/fishheads": False, "/fishheads/yummy.html": False, "/fish.html?id=anything": False,
        "/Fish.asp": True, "/catfish": True, "/?id=fish": True, "/desert/fish": True}),
    ("allow: /\ndisallow: /fish*", {
        "/bar": True, "/fish": False, "/fish.html": False, "/fishheads/yummy.html": False,
        "/Fish.asp": True, "/catfish": True}),
    ("allow: /\ndisallow: /fish/", {
        "/fish/": False, "/fish/?id=anything": False, "/fish/salmon.htm": False,
        "/fish": True, "/fish.html": True, "/animals/fish/": True, "/Fish/Salmon.asp": True}),
    ("allow: /\ndisallow: /*.php", {
        "/filename.php": False, "/folder/filename.php": False,
        "/folder/filename.php?parameters": False, "/folder/any.php.file.html": False,
        "/filename.php/": False, "/": True, "/windows.PHP": True}),
    ("allow: /\ndisallow: /*.php$", {
        "/filename.php": False, "/folder/filename.php": False,
        "/filename.php?parameters": True, "/filename.php/": True, "/filename.php5": True,
        "/windows.PHP": True}),
    ("allow: /\ndisallow: /fish*.php", {
        "/fish.php": False, "/fishheads/catfish.php?parameters": False, "/Fish.PHP": True}),
]


@pytest.mark.parametrize("rules,cases", FISH)
def test_google_documentation_examples(rules, cases):
    txt = "user-agent: FooBot\n" + rules + "\n"
    assert {p: allowed(txt, p) for p in cases} == cases


def test_utf8_bom_is_skipped_whole_or_partial():
    for bom in (b"\xef\xbb\xbf", b"\xef\xbb"):
        txt = decode_robots(bom + b"User-Agent: foo\nDisallow: /AnyValue\n", 10_000)
        assert not allowed(txt, "/AnyValue", "foo")
    # A BOM in the middle of the file is not skipped: that line is garbage.
    txt = decode_robots(b"User-Agent: foo\n\xef\xbb\xbfDisallow: /AnyValue\n", 10_000)
    assert allowed(txt, "/AnyValue", "foo")


def test_line_endings():
    for sep in ("\n", "\r\n", "\r"):
        txt = sep.join(["User-Agent: foo", "Allow: /x/", "Disallow: /"]) + sep
        assert not allowed(txt, "/y", "foo") and allowed(txt, "/x/y", "foo")
    assert not allowed("User-Agent: foo\r\nAllow: /x/\rDisallow: /\n", "/y", "foo")


# -- our additions -------------------------------------------------------------------------------
def test_dot_segments_are_removed_before_matching():
    txt = "User-agent: *\nDisallow: /a/x\n"
    assert not allowed(txt, "/./a/../a/x")
    assert not allowed(txt, "/b/../a/x")
    assert not allowed(txt, "/a/%2E/x")
    assert allowed(txt, "/a/y")
    assert remove_dot_segments("/a/b/..") == "/a/"
    assert remove_dot_segments("/../x") == "/x"
    assert remove_dot_segments("") == "/"
    assert request_target("http://h.test/./a/../b?q=1#frag") == "/b?q=1"
    assert request_target("http://h.test") == "/"


def test_simweb_robotsrules_cases_agree_with_simweb_truth():
    from simweb.hostile import ROBOTS_RULES, ROBOTS_RULES_CASES

    rules = RobotsRules.parse(200, ROBOTS_RULES, "recrawlbot")
    got = {path: rules.allowed(path) for path in ROBOTS_RULES_CASES}
    assert got == ROBOTS_RULES_CASES


def test_product_token():
    assert product_token("FooBot/2.1 (+http://x)") == "foobot"
    assert product_token("*") == "*"
    assert product_token("*bot") == ""


def test_status_policy():
    assert RobotsRules.from_status(404, b"", "x", 100).allowed("/anything")
    assert RobotsRules.from_status(403, b"", "x", 100).allow_all  # RFC 9309 2.3.1.3
    for status in (500, 503, 429):
        assert not RobotsRules.from_status(status, b"", "x", 100).allowed("/")
    ok = RobotsRules.from_status(
        200, b"User-agent: *\nCrawl-delay: 2.5\nDisallow: /p\nSitemap: http://h/s.xml\n", "x",
        1000)
    assert ok.crawl_delay == 2.5 and ok.sitemaps == ["http://h/s.xml"]
    assert not ok.allowed("/p") and ok.allowed("/q")


def test_only_robots_max_bytes_are_parsed():
    body = b"User-agent: *\n" + b"# padding\n" * 100 + b"Disallow: /late\n"
    assert RobotsRules.from_status(200, body, "x", 50).allowed("/late")
    assert not RobotsRules.from_status(200, body, "x", 10_000).allowed("/late")


def test_cache_freshness():
    now = datetime(2026, 1, 2, tzinfo=UTC)
    row = RobotsRules.parse(200, "User-agent: *\nDisallow: /x\n", "bot").to_row(
        "http://h.test:80", now - timedelta(hours=1), 86400)
    rules = from_cache(row, now, 86400, "bot")
    assert rules is not None and not rules.allowed("/x")
    assert from_cache(row, now, 1800, "bot") is None  # older than the TTL
    naive = dict(row, fetched_at=row["fetched_at"].replace(tzinfo=None))
    assert from_cache(naive, now, 86400, "bot") is not None  # Spark hands back naive UTC
    assert from_cache(dict(row, http_status=503), now, 86400, "bot") is None  # retried
    four = from_cache(dict(row, http_status=404, rules=""), now, 86400, "bot")
    assert four is not None and four.allow_all
    # the row's own expiry (the TTL it was written with) ends it too, whichever comes first
    assert from_cache(dict(row, expires_at=now - timedelta(minutes=1)), now, 86400, "bot") is None
    assert from_cache(dict(row, expires_at=now + timedelta(days=5)), now, 1800, "bot") is None


@pytest.mark.parametrize(("status", "policy"), [
    (200, "rules"), (204, "rules"), (404, "allow_all"), (401, "allow_all"), (410, "allow_all"),
    (429, "disallow_all"), (500, "disallow_all"), (503, "disallow_all"), (None, "disallow_all"),
])
def test_one_status_policy_for_fresh_answers_and_cached_rows(status, policy):
    # RFC 9309 2.3.1: the same answer means the same whether just fetched or read from the table
    assert status_policy(status) == policy
    if status is None:
        return
    fresh = RobotsRules.from_status(status, b"User-agent: *\nDisallow: /x\n", "bot", 10_000)
    assert (fresh.allow_all, fresh.disallow_all) == (policy == "allow_all", policy == "disallow_all")
    now = datetime(2026, 1, 2, tzinfo=UTC)
    cached = from_cache(fresh.to_row("http://h.test:80", now, 3600), now, 3600, "bot")
    if policy == "disallow_all":
        assert cached is None  # retried, never reused
    else:
        assert cached is not None and cached.allowed("/x") == fresh.allowed("/x")

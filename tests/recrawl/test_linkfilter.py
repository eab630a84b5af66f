"""Tests for recrawl.content.linkfilter: each reason code, its limit, and switching checks off."""

from __future__ import annotations

from dataclasses import replace

import pytest

from recrawl.content.linkfilter import DEFAULT_FILTER_RULES, REASONS, LinkFilterRules, filter_reason, keep


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "https://example.com/a/b/c.html",
        "http://example.com/page.php?id=3",
        "http://example.com/a.html;jsessionid=1",
        "http://example.com/archive/2024/05/06/story",
        "http://example.com/sitemap.xml",
        "http://example.com/feed.rss",
        "http://example.com/file.HTML",
        "http://example.com/v1.2/docs",
        "http://example.com/a/b/a/b/a/b",  # each segment three times: the limit, not over it
        "http://example.com/?" + "&".join(f"p{i}=1" for i in range(8)),
        "http://example.com/" + "/".join(f"s{i}" for i in range(16)),
        "http://example.com/images/",  # a directory named like a type is fine
        "http://example.com/download.php?file=a.zip",  # only the path's extension counts
    ],
)
def test_kept(url):
    assert filter_reason(url) is None
    assert keep(url)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.com/x", "scheme"),
        ("mailto:a@example.com", "scheme"),
        ("http://example.com/" + "x" * 600, "too_long"),
        ("http://example.com/photo.jpg", "extension"),
        ("http://example.com/photo.JPEG", "extension"),
        ("http://example.com/a/b.png?w=100", "extension"),
        ("http://example.com/a/b.gif;v=2", "extension"),
        ("http://example.com/movie.mp4", "extension"),
        ("http://example.com/song.mp3", "extension"),
        ("http://example.com/dist.tar.gz", "extension"),
        ("http://example.com/x.zip", "extension"),
        ("http://example.com/report.pdf", "extension"),
        ("http://example.com/sheet.xlsx", "extension"),
        ("http://example.com/slides.pptx", "extension"),
        ("http://example.com/letter.docx", "extension"),
        ("http://example.com/style.css", "extension"),
        ("http://example.com/app.js", "extension"),
        ("http://example.com/font.woff2", "extension"),
        ("http://example.com/setup.exe", "extension"),
        ("http://example.com/icon.svg", "extension"),
        ("http://example.com/?" + "&".join(f"p{i}=1" for i in range(9)), "too_many_params"),
        ("http://example.com/" + "/".join(f"s{i}" for i in range(17)), "too_deep"),
        ("http://example.com/a/b/a/b/a/b/a", "repeated_segment"),
        ("http://example.com/cal/next/next/next/next", "repeated_segment"),
        ("http://example.com/x/x/x/x/", "repeated_segment"),
    ],
)
def test_rejected_with_reason(url, reason):
    assert filter_reason(url) == reason
    assert reason in REASONS
    assert not keep(url)


def test_unparseable_url_is_invalid():
    assert filter_reason("http://[::1/") == "invalid"


def test_limits_are_configurable():
    rules = LinkFilterRules(
        max_url_length=30, max_query_params=1, max_path_depth=2, max_repeated_segment=1
    )
    assert filter_reason("http://e.com/a/b?x=1", rules) is None
    assert filter_reason("http://e.com/a/bbbbbbbbbbbbbbbbbbbbbbbbbbbb", rules) == "too_long"
    assert filter_reason("http://e.com/?x=1&y=2", rules) == "too_many_params"
    assert filter_reason("http://e.com/a/b/c", rules) == "too_deep"
    assert filter_reason("http://e.com/a/a", rules) == "repeated_segment"


@pytest.mark.parametrize(
    ("field", "url"),
    [
        ("max_url_length", "http://example.com/" + "x" * 600),
        ("max_query_params", "http://example.com/?" + "&".join(f"p{i}" for i in range(20))),
        ("max_path_depth", "http://example.com/" + "/".join(f"s{i}" for i in range(30))),
        ("max_repeated_segment", "http://example.com/a/a/a/a/a"),
        ("blocked_extensions", "http://example.com/photo.jpg"),
    ],
)
def test_zero_or_empty_switches_a_check_off(field, url):
    assert filter_reason(url) is not None
    off = replace(DEFAULT_FILTER_RULES, **{field: () if field == "blocked_extensions" else 0})
    assert filter_reason(url, off) is None


def test_extensions_and_schemes_are_configurable():
    rules = LinkFilterRules(blocked_extensions=(".PHP", "asp"), allowed_schemes=("https",))
    assert filter_reason("https://e.com/index.php", rules) == "extension"
    assert filter_reason("https://e.com/x.ASP", rules) == "extension"
    assert filter_reason("https://e.com/photo.jpg", rules) is None
    assert filter_reason("http://e.com/", rules) == "scheme"


def test_empty_query_params_are_not_counted():
    assert filter_reason("http://e.com/?a=1&&&&&&&&&&&&&&&b=2") is None

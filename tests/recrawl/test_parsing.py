"""Tests for recrawl.content.parsing: charset detection, outlinks, text/metadata, hostile inputs.

Run as a script (``python tests/recrawl/test_parsing.py``) to print per-page timings of
:func:`parse_html` and the trafilatura variants compared in ``TRAFILATURA_OPTIONS``.
"""

from __future__ import annotations

import codecs
import os
import random
import time

import pytest

from recrawl.content.charset import decode_html, encoding_for_label
from recrawl.content.linkfilter import LinkFilterRules
from recrawl.content.parsing import (
    MAX_ANCHOR_CHARS,
    Outlink,
    ParsedPage,
    parse_html,
)
from recrawl.content.urlnorm import NormalizeRules

# --- charset ------------------------------------------------------------------------------

ZH = (
    "<html><head><title>新闻中心</title></head><body><p>这是一个中文网页，用于测试字符集检测。"
    "北京时间今天上午，记者从有关部门获悉，相关工作正在有序推进。</p></body></html>"
)
JA = (
    "<html><head><title>ニュース</title></head><body><p>これは日本語のウェブページです。"
    "文字コードの検出をテストします。東京の天気は晴れです。</p></body></html>"
)
FR = (
    "<html><head><title>Actualités</title></head><body><p>Le président de la République a "
    "annoncé mercredi une série de mesures destinées à réduire les dépenses publiques. À Paris, "
    "déjà «très» réputé — coût 5 €. Les syndicats ont réagi vivement.</p></body></html>"
)


def with_meta(html: str, charset: str) -> str:
    return html.replace("<head>", f'<head><meta charset="{charset}">')


def with_meta_http_equiv(html: str, charset: str) -> str:
    meta = f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">'
    return html.replace("<head>", "<head>" + meta)


ZH_META_GBK = with_meta(ZH, "gbk")
ZH_META_SJIS = with_meta(ZH, "shift_jis")
JA_META_SJIS = with_meta_http_equiv(JA, "Shift_JIS")
JA_META_XSJIS = with_meta(JA, "x-sjis")
JA_XML_DECL = '<?xml version="1.0" encoding="Shift_JIS"?>' + JA
FR_META_1252 = with_meta(FR, "windows-1252")
FR_META_UTF16 = with_meta(FR, "utf-16")
BOM8, BOM16LE, BOM16BE = codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE


def ct(charset: str) -> str:
    return f"text/html; charset={charset}"


DECODE_TABLE = [
    # (case, body, content type, expected text, expected codec)
    ("gbk in header", ZH.encode("gbk"), ct("GBK"), ZH, "gb18030"),
    ("gb2312 label", ZH.encode("gbk"), "text/html;charset=gb2312", ZH, "gb18030"),
    ("quoted label", ZH.encode("gbk"), ct('"gbk"'), ZH, "gb18030"),
    ("gbk in meta", ZH_META_GBK.encode("gbk"), "text/html", ZH_META_GBK, "gb18030"),
    ("gbk undeclared", ZH.encode("gbk"), None, ZH, "gb18030"),
    ("gbk served as utf-8", ZH.encode("gbk"), ct("utf-8"), ZH, "gb18030"),
    ("sjis in header", JA.encode("shift_jis"), ct("Shift_JIS"), JA, "cp932"),
    ("sjis in meta http-equiv", JA_META_SJIS.encode("shift_jis"), None, JA_META_SJIS, "cp932"),
    ("sjis label x-sjis", JA_META_XSJIS.encode("cp932"), None, JA_META_XSJIS, "cp932"),
    ("sjis undeclared", JA.encode("shift_jis"), None, JA, "cp932"),
    ("sjis in xml declaration", JA_XML_DECL.encode("shift_jis"), None, JA_XML_DECL, "cp932"),
    ("euc-jp in header", JA.encode("euc_jp"), ct("EUC-JP"), JA, "euc_jp"),
    ("latin1 in header", FR.encode("cp1252"), ct("ISO-8859-1"), FR, "cp1252"),
    ("cp1252 in meta", FR_META_1252.encode("cp1252"), None, FR_META_1252, "cp1252"),
    ("ascii label is cp1252", FR.encode("cp1252"), ct("us-ascii"), FR, "cp1252"),
    ("cp1252 undeclared", FR.encode("cp1252"), None, FR, "cp1252"),
    ("cp1252 served as utf-8", FR.encode("cp1252"), ct("utf-8"), FR, "cp1252"),
    ("utf-8 served as latin1", FR.encode("utf-8"), ct("iso-8859-1"), FR, "utf-8"),
    ("utf-8 undeclared", ZH.encode("utf-8"), None, ZH, "utf-8"),
    ("utf-8 bom beats header", BOM8 + JA.encode(), ct("shift_jis"), JA, "utf-8"),
    ("utf-8 bom beats meta", BOM8 + ZH_META_GBK.encode(), None, ZH_META_GBK, "utf-8"),
    ("utf-16le bom", BOM16LE + JA.encode("utf-16-le"), ct("gbk"), JA, "utf-16-le"),
    ("utf-16be bom", BOM16BE + JA.encode("utf-16-be"), None, JA, "utf-16-be"),
    ("header beats meta", ZH_META_SJIS.encode("gbk"), ct("gbk"), ZH_META_SJIS, "gb18030"),
    ("meta utf-16 means utf-8", FR_META_UTF16.encode(), None, FR_META_UTF16, "utf-8"),
    ("unknown label ignored", FR.encode(), ct("x-nonsense"), FR, "utf-8"),
    ("utf-7 is not a web encoding", FR.encode(), ct("utf-7"), FR, "utf-8"),
    ("base64 label ignored", FR.encode(), ct("base64"), FR, "utf-8"),
    (
        "c1 bytes as browsers",
        b"<p>a\x81b\x80</p>",
        ct("windows-1252"),
        "<p>a\x81b\u20ac</p>",
        "cp1252",
    ),
    ("ascii body", b"<p>hi</p>", None, "<p>hi</p>", "utf-8"),
    ("utf-16 in header, no bom", JA.encode("utf-16-le"), ct("utf-16"), JA, "utf-16-le"),
    ("utf-16be in header, no bom", JA.encode("utf-16-be"), ct("UTF-16BE"), JA, "utf-16-be"),
    ("utf-16 label on ascii page", b"<p>hi</p>", ct("utf-16"), "<p>hi</p>", "utf-8"),
]


@pytest.mark.parametrize(
    ("case", "body", "content_type", "text", "codec"),
    DECODE_TABLE,
    ids=[c[0] for c in DECODE_TABLE],
)
def test_decode_html(case, body, content_type, text, codec):
    assert decode_html(body, content_type) == (text, codec)


@pytest.mark.parametrize(("padding", "codec"), [(2000, "koi8_r"), (5000, "utf-8")])
def test_meta_charset_is_looked_for_in_the_first_4k(padding, codec):
    html = f'<html><head><!--{"x" * padding}--><meta charset="koi8-r"></head><body>Привет</body>'
    assert decode_html(html.encode("utf-8"), None)[1] == codec


def test_utf8_page_with_a_stray_latin1_byte_stays_utf8():
    body = (FR * 5).encode("utf-8").replace(b"mercredi", b"merc\xe9redi", 1)
    text, codec = decode_html(body, "text/html; charset=utf-8")
    assert codec == "utf-8"
    assert "déjà" in text and "\ufffd" in text


def test_utf8_body_cut_inside_a_character():
    body = ("<p>" + "中" * 100).encode("utf-8")[:-1]
    text, codec = decode_html(body, None)
    assert codec == "utf-8" and text.startswith("<p>中中")


@pytest.mark.parametrize(
    "body",
    [b"", b"\x00" * 100, os.urandom(5000), b"\xff\xfe", b"\xef\xbb\xbf", bytearray(b"<p>x</p>")],
)
@pytest.mark.parametrize(
    "content_type", [None, "", "text/html; charset=", "charset=gbk;;", "a" * 9999]
)
def test_decode_html_never_raises(body, content_type):
    text, codec = decode_html(body, content_type)
    assert isinstance(text, str) and codec


@pytest.mark.parametrize("body", [None, "<p>str</p>", 42, [1, 2]])
def test_decode_html_never_raises_on_wrong_types(body):
    text, codec = decode_html(body, None)  # type: ignore[arg-type]
    assert isinstance(text, str) and codec


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("GBK", "gb18030"),
        (" gb2312 ", "gb18030"),
        ("Shift_JIS", "cp932"),
        ("sjis", "cp932"),
        ("latin1", "cp1252"),
        ("ISO-8859-1", "cp1252"),
        ("ascii", "cp1252"),
        ("euc-kr", "cp949"),
        ("big5", "big5hkscs"),
        ("iso-8859-9", "cp1254"),
        ("utf8", "utf-8"),
        ("utf-7", None),
        ("rot13", None),
        ("", None),
        (None, None),
    ],
)
def test_encoding_for_label(label, codec):
    assert encoding_for_label(label) == codec


# --- outlinks -----------------------------------------------------------------------------

PAGE_URL = "http://example.com/dir/page.html"


def links(html: str | bytes, url: str = PAGE_URL, **kwargs) -> list[tuple[str, str, str]]:
    page = parse_html(html.encode() if isinstance(html, str) else html, None, url, **kwargs)
    assert page.error is None, page.error
    return [(o.url, o.anchor, o.kind) for o in page.outlinks]


def test_each_outlink_kind():
    html = """<html><head>
      <link rel="canonical" href="/canonical">
      <meta http-equiv="refresh" content="5; url=/refreshed">
      </head><body>
      <a href="a.html">A link</a>
      <map name="m"><area href="/area" alt="An area"></map>
      </body></html>"""
    assert links(html) == [
        ("http://example.com/canonical", "", "canonical"),
        ("http://example.com/refreshed", "", "refresh"),
        ("http://example.com/dir/a.html", "A link", "a"),
        ("http://example.com/area", "An area", "area"),
    ]


def test_frameset_frames_are_links():
    html = '<frameset><frame src="nav.html"><frame src="/main.html"></frameset>'
    assert links(html) == [
        ("http://example.com/dir/nav.html", "", "frame"),
        ("http://example.com/main.html", "", "frame"),
    ]


def test_base_href_is_used_for_resolution():
    html = """<head><base href="http://other.example/base/"></head>
      <body><a href="x">x</a><a href="/y">y</a><a href="//third.example/z">z</a></body>"""
    assert [u for u, _, _ in links(html)] == [
        "http://other.example/base/x",
        "http://other.example/y",
        "http://third.example/z",
    ]


def test_relative_base_href_resolves_against_page_url():
    html = '<base href="../sub/"><a href="x">x</a>'
    assert links(html)[0][0] == "http://example.com/sub/x"


def test_base_href_applies_to_links_before_it():
    html = '<a href="x">x</a><base href="/b/">'
    assert links(html)[0][0] == "http://example.com/b/x"


def test_invalid_base_href_is_ignored():
    html = '<base href="http://[bad"><a href="x">x</a>'
    assert links(html)[0][0] == "http://example.com/dir/x"


@pytest.mark.parametrize(
    "content",
    [
        "0; url=/r",
        "0;URL='/r'",
        '0; url="/r"',
        "0, /r",
        "  3 ;  URL = /r  ",
        "0.5; url=/r",
        "/r",
    ],
)
def test_meta_refresh_forms(content):
    html = (
        f'<meta http-equiv="Refresh" content="{content}">'
        if '"' not in content
        else (f"<meta http-equiv='Refresh' content='{content}'>")
    )
    assert links(html) == [("http://example.com/r", "", "refresh")]


def test_meta_refresh_without_url_is_no_link():
    assert links('<meta http-equiv="refresh" content="30">') == []


def test_nofollow_links_are_dropped():
    html = """<a href="/follow">f</a><a href="/no" rel="nofollow">n</a>
      <a href="/ugc" rel="UGC NoFollow">u</a><area href="/noarea" rel="nofollow">"""
    assert [u for u, _, _ in links(html)] == ["http://example.com/follow"]


@pytest.mark.parametrize("content", ["nofollow", "noindex, nofollow", "NONE", "noarchive,nofollow"])
def test_meta_robots_nofollow_drops_all_outlinks(content):
    html = f"""<head><meta name="robots" content="{content}"><link rel=canonical href="/c"></head>
      <body><a href="/x">x</a></body>"""
    page = parse_html(html.encode(), None, PAGE_URL)
    assert page.meta_robots_nofollow
    assert page.outlinks == []
    assert page.canonical_url == "http://example.com/c"  # still reported


def test_meta_robots_noindex():
    page = parse_html(b'<meta name="ROBOTS" content="NoIndex"><a href="/x">x</a>', None, PAGE_URL)
    assert page.meta_robots_noindex and not page.meta_robots_nofollow
    assert len(page.outlinks) == 1


def test_robots_meta_for_our_token_and_x_robots_tag():
    html = b'<meta name="recrawlbot" content="nofollow"><a href="/x">x</a>'
    assert parse_html(html, None, PAGE_URL).outlinks  # other crawlers' names are not ours
    page = parse_html(html, None, PAGE_URL, robots_names=("robots", "recrawlbot"))
    assert page.meta_robots_nofollow and not page.outlinks
    page = parse_html(b'<a href="/x">x</a>', None, PAGE_URL, x_robots_tag="noindex, nofollow")
    assert page.meta_robots_noindex and page.meta_robots_nofollow and not page.outlinks


def test_anchor_text_is_collapsed_and_truncated():
    long_text = "word " * 100
    html = f"""<a href="/a">  Hello
       <b>bold</b>\t<i>world</i> </a><a href="/b">{long_text}</a>"""
    got = links(html)
    assert got[0][1] == "Hello bold world"
    assert len(got[1][1]) == MAX_ANCHOR_CHARS and got[1][1].startswith("word word")


def test_image_alt_is_the_anchor_of_an_image_link():
    assert links('<a href="/home"><img src="logo.png" alt="Home page"></a>')[0][1] == "Home page"


def test_duplicates_keep_first_occurrence_and_first_nonempty_anchor():
    html = """<a href="/x#top"></a><a href="/x">Second</a><a href="/x?">Third</a>
      <a href="/y" >Y1</a><a href="http://EXAMPLE.com:80/y">Y2</a>"""
    assert links(html) == [
        ("http://example.com/x", "Second", "a"),
        ("http://example.com/y", "Y1", "a"),
    ]


def test_canonical_already_linked_keeps_its_first_kind():
    html = '<a href="/c">C</a><link rel="canonical" href="/c">'
    page = parse_html(html.encode(), None, PAGE_URL)
    assert page.canonical_url == "http://example.com/c"
    assert [(o.url, o.kind) for o in page.outlinks] == [("http://example.com/c", "a")]


def test_canonical_is_normalized_and_first_one_wins():
    html = """<link rel="canonical" href="HTTP://Example.com:80/Canon?utm_source=x&b=2&a=1#f">
      <link rel="canonical" href="/second">"""
    page = parse_html(html.encode(), None, PAGE_URL)
    assert page.canonical_url == "http://example.com/Canon?a=1&b=2"


def test_canonical_in_body_and_after_noscript_is_found():
    html = '<head><noscript><img src="p.gif"></noscript><link rel="canonical" href="/c"></head>'
    assert parse_html(html.encode(), None, PAGE_URL).canonical_url == "http://example.com/c"


def test_invalid_and_filtered_links_are_dropped():
    html = """<a href="mailto:a@b.c">m</a><a href="javascript:void(0)">j</a>
      <a href="tel:123">t</a><a href="ftp://x.example/">f</a><a href="http://">h</a>
      <a href="http://exa mple.com/">s</a><a href="http://x.example:99999/">p</a>
      <a href="/img.jpg">i</a><a href="/style.css">c</a><a href="/doc.pdf">d</a>
      <a href="/a/b/a/b/a/b/a/b">trap</a><a href="/ok">ok</a><a>no href</a><a href="">self</a>"""
    assert links(html) == [
        ("http://example.com/ok", "ok", "a"),
        ("http://example.com/dir/page.html", "self", "a"),
    ]


def test_self_links_are_kept():
    assert links('<a href="#top">top</a>') == [(PAGE_URL, "top", "a")]


def test_outlinks_are_normalized():
    html = '<a href="../Other/%7Euser/./x?utm_source=t&b=2&a=1&PHPSESSID=9#frag">x</a>'
    assert links(html)[0][0] == "http://example.com/Other/~user/x?a=1&b=2"


def test_rules_are_passed_through():
    html = '<a href="/x.jpg?utm_source=y">x</a>'
    assert links(html) == []
    got = links(
        html,
        norm_rules=NormalizeRules(strip_tracking_params=False),
        filter_rules=LinkFilterRules(blocked_extensions=()),
    )
    assert got == [("http://example.com/x.jpg?utm_source=y", "x", "a")]


def test_max_outlinks_cap():
    html = "".join(f'<a href="/p{i}">{i}</a>' for i in range(50))
    got = links(html, max_outlinks=10)
    assert [u for u, _, _ in got] == [f"http://example.com/p{i}" for i in range(10)]


def test_default_cap_is_1000():
    html = "".join(f'<a href="/p{i}">{i}</a>' for i in range(1500))
    assert len(links(html)) == 1000


def test_links_in_script_and_comments_are_not_links():
    html = """<script>document.write('<a href="/js">x</a>')</script><!-- <a href="/c">c</a> -->
      <noscript><a href="/noscript">ns</a></noscript><a href="/real">r</a>"""
    assert [u for u, _, _ in links(html)] == [
        "http://example.com/noscript",
        "http://example.com/real",
    ]


def test_legacy_encoded_page_links_encode_the_query_like_a_browser():
    html = with_meta('<head></head><a href="/新闻?q=中文#中">首页</a>', "gbk").encode("gbk")
    assert links(html, url="http://example.cn/") == [
        ("http://example.cn/%E6%96%B0%E9%97%BB?q=%D6%D0%CE%C4", "首页", "a")
    ]


def test_non_http_page_url_keeps_absolute_links():
    page = parse_html(b'<a href="/x">x</a><a href="http://y.example/">y</a>', None, "not a url")
    assert page.error is None
    assert [o.url for o in page.outlinks] == ["http://y.example/"]


# --- text and metadata --------------------------------------------------------------------

ARTICLE = """<!DOCTYPE html><html lang="de-AT"><head><meta charset="utf-8">
<title>  Ein   Titel | Zeitung </title>
<meta property="article:published_time" content="2023-11-05T10:00:00+01:00">
<style>body { color: red }</style><script>var tracking = "SCRIPT_TEXT";</script></head>
<body><nav><a href="/">Start</a> <a href="/politik">Politik</a></nav>
<article><h1>Ein Titel</h1>
<p>Die Bundesregierung hat am Mittwoch ein umfangreiches Maßnahmenpaket beschlossen. Nach
Angaben des Ministeriums sollen die Ausgaben für Bildung und Forschung deutlich steigen.</p>
<p>Kritiker bemängeln jedoch, dass die Finanzierung nicht gesichert sei. Über die Details
wird im Bundestag noch beraten, hieß es am Abend aus Regierungskreisen.</p>
<p>Die Opposition kündigte Widerstand an und verlangte eine ausführliche Debatte im Plenum,
bevor irgendein Gesetz verabschiedet werde.</p></article>
<footer>Impressum · Datenschutz</footer></body></html>"""


def test_article_text_title_lang_date():
    page = parse_html(ARTICLE.encode(), "text/html; charset=utf-8", "https://zeitung.example/a")
    assert page.error is None
    assert page.title == "Ein Titel | Zeitung"
    assert page.lang == "de"
    assert page.date == "2023-11-05"
    assert "Maßnahmenpaket beschlossen" in page.text
    assert "ausführliche Debatte" in page.text
    assert "SCRIPT_TEXT" not in page.text and "color: red" not in page.text
    assert page.encoding == "utf-8"


def test_without_text_extraction_text_is_visible_text():
    page = parse_html(ARTICLE.encode(), None, "https://zeitung.example/a", extract_text=False)
    assert page.error is None and page.date is None
    assert "Maßnahmenpaket" in page.text and "Impressum" in page.text
    assert "SCRIPT_TEXT" not in page.text and "color: red" not in page.text
    assert "Zeitung" not in page.text  # the <title> is not body text


def test_short_page_falls_back_to_visible_text():
    html = b"<html><head><title>T</title><script>x=1</script></head><body><p>Hi there.</p></body>"
    page = parse_html(html, None, PAGE_URL)
    assert page.error is None
    assert page.text == "Hi there."
    assert page.title == "T"


def test_og_title_when_there_is_no_title():
    html = b'<meta property="og:title" content="  OG  title "><p>x</p>'
    assert parse_html(html, None, PAGE_URL).title == "OG title"


@pytest.mark.parametrize(
    ("html", "lang"),
    [
        ('<html lang="EN-us"><p>x</p>', "en"),
        ('<html lang="zh_Hans"><p>x</p>', "zh"),
        ('<html lang=""><p>x</p>', None),
        ('<html lang="x-klingon"><p>x</p>', None),
        ('<meta http-equiv="content-language" content="fr-CA"><p>x</p>', "fr"),
        ('<html lang="es"><meta http-equiv="content-language" content="fr"><p>x</p>', "es"),
        ("<p>x</p>", None),
    ],
)
def test_language(html, lang):
    assert parse_html(html.encode(), None, PAGE_URL).lang == lang


def test_gbk_page_end_to_end():
    html = with_meta(ZH, "gb2312").replace("</p>", '</p><a href="/x">更多</a>').encode("gbk")
    page = parse_html(html, "text/html", "http://news.example.cn/")
    assert page.error is None
    assert page.encoding == "gb18030"
    assert page.title == "新闻中心"
    assert "有序推进" in page.text
    assert page.outlinks == [Outlink("http://news.example.cn/x", "更多", "a")]


def test_shift_jis_page_declared_in_header_only():
    page = parse_html(JA.encode("shift_jis"), "text/html; charset=shift_jis", "http://ex.jp/")
    assert page.title == "ニュース" and "東京の天気" in page.text


@pytest.mark.parametrize("name,fn", [("resiliparse", "extract_resiliparse"),
                                     ("trafilatura", "extract_main")])
def test_extractor_crash_is_recorded_and_text_falls_back(monkeypatch, name, fn):
    import recrawl.content.extract as extract

    def boom(text, url):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(extract, fn, boom)
    page = parse_html(ARTICLE.encode(), None, PAGE_URL, extractor=name)
    assert page.error.startswith("extract: RecursionError")
    assert "Maßnahmenpaket" in page.text
    assert page.title and page.outlinks  # the rest is still there


# --- hostile and broken inputs ------------------------------------------------------------


def _assert_sane(page: ParsedPage) -> None:
    assert isinstance(page, ParsedPage)
    assert isinstance(page.text, str)
    assert all(isinstance(o, Outlink) for o in page.outlinks)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", "empty body"),
        (None, "empty body"),
        (b"   \n\t  ", "empty document"),
        (b"\x00" * 5000, "binary content"),
        (b"\x89PNG\r\n\x1a\n" + random.Random(1).randbytes(5000), "binary content"),
        (b"\x1f\x8b\x08\x00" + random.Random(2).randbytes(5000), "binary content"),  # gzip
        (random.Random(3).randbytes(100_000), "binary content"),
    ],
)
def test_unparseable_bodies_record_an_error(body, error):
    page = parse_html(body, "text/html", PAGE_URL)
    _assert_sane(page)
    assert page.error == error
    assert page.text == "" and page.outlinks == []


def test_a_few_nul_bytes_are_tolerated():
    page = parse_html(b"<p>hi\x00 there</p><a href='/a'>x\x00y</a>", None, PAGE_URL)
    assert page.error is None
    assert "hi there" in page.text
    assert page.outlinks[0].anchor in ("xy", "x\ufffdy")


def _parser_inputs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts handed to Lexbor and to the main-text extraction (either extractor), recorded
    as they go."""
    import recrawl.content.extract
    import recrawl.content.parsing

    seen: list[str] = []
    lexbor = recrawl.content.parsing.LexborHTMLParser

    def parser(text, *args, **kwargs):
        seen.append(text)
        return lexbor(text, *args, **kwargs)

    def recording(original):
        def extract(text, *args, **kwargs):
            seen.append(text)
            return original(text, *args, **kwargs)
        return extract

    monkeypatch.setattr(recrawl.content.parsing, "LexborHTMLParser", parser)
    for name in ("extract_main", "extract_resiliparse"):
        monkeypatch.setattr(recrawl.content.extract, name,
                            recording(getattr(recrawl.content.extract, name)))
    return seen


def test_deep_nesting_is_cut_quickly(monkeypatch):
    """Lexbor's tree builder is quadratic in the nesting depth (~14 s for this page uncut,
    ~0.1 s cut): the page is cut before any parser sees it, at 2048 open elements."""
    seen = _parser_inputs(monkeypatch)
    body = b"<html><body>" + b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000
    page = parse_html(body, None, PAGE_URL)
    _assert_sane(page)
    assert page.error and page.error.startswith("nesting deeper than 2048")
    assert len(seen) == 2 and all(t.count("<") <= 2048 for t in seen)  # Lexbor and extraction


def test_deep_unclosed_nesting_keeps_what_came_before():
    body = b"<p>before</p><a href='/before'>b</a>" + b"<div>" * 50_000 + b"<a href='/x'>x</a>"
    page = parse_html(body, None, PAGE_URL, extract_text=False)
    assert page.error and "nesting" in page.error
    assert [o.url for o in page.outlinks] == ["http://example.com/before"]
    assert "before" in page.text


def test_moderately_deep_inline_nesting_is_parsed():
    body = b"<p>" + b"<b><i>" * 500 + b"text" + b"</i></b>" * 500 + b"<a href='/x'>x</a>"
    page = parse_html(body, None, PAGE_URL)
    assert page.error is None
    assert page.outlinks and "text" in page.text


def test_input_is_capped(monkeypatch):
    seen = _parser_inputs(monkeypatch)
    body = b"<html><body><p>" + b"word " * 1_000_000 + b"</p><a href='/end'>end</a></body></html>"
    page = parse_html(body, None, PAGE_URL, max_bytes=256 * 1024)
    assert len(seen) == 2 and all(len(t) <= 256 * 1024 for t in seen)  # no parser saw more
    _assert_sane(page)
    assert page.outlinks == []  # the link lies beyond the cap
    assert 0 < len(page.text) <= 256 * 1024


@pytest.mark.parametrize(
    "body",
    [
        b"<",
        b"<<<<>>>>",
        b"</a></b></html>",
        b"<a href='/x'",
        b'<a href="/x>unterminated',
        b"<html><head><title>t",
        b"<!-- never closed <a href='/x'>x</a>",
        b"<script>" + b"x" * 10000,
        b"<table><tr><td>" * 3000,
        b"<svg><a href='/svg'>s</a></svg><math><a href='/m'>m</a></math>",
        b"<a href='\x00/x'>z</a>",
        b"<a href='" + b"/x" * 5000 + b"'>long</a>",
        b'<?xml version="1.0" encoding="utf-8"?><html><body><p>x</p></body></html>',
        b'{"json": "<a href=/j>"}',
        b"\xff\xfe<\x00p\x00>\x00",
        b"\xef\xbb\xbf",
        b"<html>" + "é".encode("latin-1") * 1000,
        "<p>already a str</p>",
        bytearray(b"<p>bytearray</p>"),
        memoryview(b"<p>memoryview</p>"),
    ],
)
def test_broken_html_never_raises(body):
    page = parse_html(body, "text/html", PAGE_URL)
    _assert_sane(page)


def test_random_html_soup_never_raises():
    rnd = random.Random(42)
    tokens = [
        b"<a href='/x'>", b"</a>", b"<div>", b"</div>", b"<p>", b"<base href='//b/'>",
        b"<meta http-equiv=refresh content='0;url=", b"'>", b"<link rel=canonical href=",
        b"text ", b"\xe4\xb8\xad", b"\xff", b"\x00", b"&amp;", b"&#0;", b"&#xD800;", b"<!--",
        b"-->", b"<script>", b"</script>", b"<table>", b"<td>", b"<frame src=/f>", b"\"", b"'",
        b"<area href=../a>", b"<title>", b"</title>", b"<html lang=", b">", b"<", b"=",
    ]  # fmt: skip
    for _ in range(200):
        body = b"".join(rnd.choice(tokens) for _ in range(rnd.randint(0, 200)))
        page = parse_html(body, rnd.choice([None, "text/html; charset=gbk"]), PAGE_URL)
        _assert_sane(page)


# --- benchmark pages ----------------------------------------------------------------------

_WORDS = (
    "the of and to in is was for on that with as by at from his her new city said year "
    "government people market report week company police school water energy minister "
    "council health plan local million percent according officials announced project "
    "data research team players season match results public service workers election"
).split()


def bench_page(i: int) -> bytes:
    """A ~21 KB news-like page: nav, 100 links, 16 paragraphs, a table, comments, scripts."""
    rnd = random.Random(i)

    def sentence(n: int) -> str:
        return " ".join(rnd.choice(_WORDS) for _ in range(n)).capitalize() + "."

    nav = "".join(f'<li><a href="/section/{k}">Section {k}</a></li>' for k in range(60))
    paras = "".join(
        f"<p>{' '.join(sentence(rnd.randint(12, 25)) for _ in range(5))}</p>" for _ in range(16)
    )
    related = "".join(
        f'<li><a href="/news/{i}-{k}.html?ref=rel&utm_source=x">{sentence(6)}</a></li>'
        for k in range(30)
    )
    table = "<table>" + "".join(
        f"<tr><td>{sentence(3)}</td><td>{rnd.randint(1, 999)}</td></tr>" for _ in range(8)
    ) + "</table>"  # fmt: skip
    comments = "".join(f'<div class="comment"><p>{sentence(15)}</p></div>' for _ in range(6))
    footer = "".join(f'<a href="https://other{k}.example/">Partner {k}</a> ' for k in range(10))
    date_meta = (
        f'<meta property="article:published_time" content="2024-0{1 + i % 9}-1{i % 10}T08:00Z">'
        if i % 2
        else ""
    )
    scripts = "".join(
        f"<script>window.x{k} = {{{', '.join(f'a{j}: {j}' for j in range(40))}}};</script>"
        for k in range(10)
    )
    html = f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>{sentence(8)} | Example News</title>
<meta name="description" content="{sentence(20)}">{date_meta}
<link rel="canonical" href="https://news.example/article/{i}">
<link rel="stylesheet" href="/static/site.css"><script src="/static/app.js"></script>{scripts}
</head><body><header><nav><ul>{nav}</ul></nav></header>
<main><article><h1>{sentence(8)}</h1>
<p class="byline">By Jane Doe, published March {1 + i % 27}, 2024</p>{paras}{table}</article>
<section id="comments"><h2>Comments</h2>{comments}</section>
<aside><h2>Related</h2><ul>{related}</ul></aside></main>
<footer>{footer}<p>Copyright 2024</p></footer></body></html>"""
    return html.encode("utf-8")


def test_bench_page_parses_completely():
    page = parse_html(bench_page(1), "text/html", "https://news.example/article/1")
    assert page.error is None
    assert page.date == "2024-02-11"
    assert page.canonical_url == "https://news.example/article/1"
    assert len(page.outlinks) == 101  # 60 nav + 30 related + 10 partners + canonical
    assert len(page.text) > 5000


def _benchmark(n: int = 60, rounds: int = 3) -> None:  # pragma: no cover - manual tool
    import statistics

    import trafilatura
    from htmldate import find_date
    from trafilatura.utils import load_html

    pages = [bench_page(i) for i in range(n)]
    texts = [p.decode() for p in pages]
    url = "https://news.example/a"
    date_opts = {"extensive_search": False, "original_date": True}

    def traf(**kw):
        return lambda t: trafilatura.bare_extraction(t, url=url, **kw)

    def chosen(t):
        tree = load_html(t)
        find_date(tree, url=url, **date_opts)
        return trafilatura.bare_extraction(tree, url=url, fast=True, include_comments=False)

    variants = {
        "trafilatura defaults + with_metadata": traf(with_metadata=True),
        "fast, no comments, with_metadata": traf(
            fast=True, include_comments=False, with_metadata=True, date_extraction_params=date_opts
        ),
        "  + favor_precision": traf(
            fast=True,
            include_comments=False,
            with_metadata=True,
            favor_precision=True,
            date_extraction_params=date_opts,
        ),
        "fast, no comments, no metadata": traf(fast=True, include_comments=False),
        "chosen: no metadata + htmldate": chosen,
        "parse_html()": lambda t: parse_html(t.encode(), "text/html", url),
        "parse_html(extract_text=False)": lambda t: parse_html(
            t.encode(), "text/html", url, extract_text=False
        ),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for t in texts:
            for name, fn in variants.items():
                start = time.perf_counter()
                fn(t)
                times[name].append(time.perf_counter() - start)
    print(f"{n} pages, mean size {sum(map(len, pages)) / n / 1024:.1f} KiB, {rounds} rounds")
    for name, ts in times.items():
        mean, median = statistics.mean(ts) * 1000, statistics.median(ts) * 1000
        print(f"{name:40s} mean {mean:6.2f} ms   median {median:6.2f} ms")


if __name__ == "__main__":  # pragma: no cover
    _benchmark()

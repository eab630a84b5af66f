"""Hosts that are hostile through their content: charsets, malformed HTML and crawler traps.

Duplicates and changing pages live in :mod:`simweb.versions`; this module owns bytes that a
parser must survive and URL spaces that a link filter must refuse to explore forever.
"""

from __future__ import annotations

import itertools
from urllib.parse import parse_qsl, urlencode

from simweb import versions
from simweb.host import Host, Link
from simweb.response import Request, Response, html, not_found
from simweb.text import paragraph, rng_for, simple_page, stable_hash

ZH = "网络爬虫应当正确地解码这个页面上的中文文字。"
JA = "このページはシフトJISで書かれた日本語の文章です。"
FR = "Café crème, brûlée naïve à Noël : façade déjà vue."
DE = "Grüße aus Zürich — ein Text in UTF-8 mit Byte-Order-Mark."

#: path -> (sentence, real encoding, Content-Type header, declaration in the document)
CHARSET_PAGES: dict[str, tuple[str, str, str, str]] = {
    "/gbk-header.html": (ZH, "gbk", "text/html; charset=GBK", ""),
    "/gbk-meta.html": (ZH, "gbk", "text/html", '<meta charset="gbk">'),
    "/sjis-header.html": (JA, "shift_jis", "text/html; charset=Shift_JIS", ""),
    "/sjis-meta.html": (
        JA,
        "shift_jis",
        "text/html",
        '<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">',
    ),
    "/bom.html": (DE + " " + ZH, "utf-8-sig", "text/html; charset=ISO-8859-1", ""),
    "/latin1.html": (FR, "latin-1", "text/html; charset=ISO-8859-1", ""),
    "/latin1-meta.html": (FR, "latin-1", "text/html", '<meta charset="iso-8859-1">'),
    "/utf8-undeclared.html": (ZH + " " + JA, "utf-8", "text/html", ""),
}


class Charset(Host):
    """Pages in GBK, Shift_JIS, Latin-1 and UTF-8 (with BOM), declared in various places."""

    def pages(self) -> list[str]:
        return ["/", *CHARSET_PAGES]

    def links(self, path: str) -> list[Link]:
        return [(self.name, p) for p in CHARSET_PAGES] if path == "/" else []

    def handle(self, req: Request) -> Response:
        if req.path == "/":
            return html(simple_page("Charsets", list(CHARSET_PAGES), self.seed))
        if req.path not in CHARSET_PAGES:
            return not_found(req)
        sentence, encoding, ctype, decl = CHARSET_PAGES[req.path]
        filler = paragraph(rng_for("charset", self.seed, req.path), 60)
        doc = (
            f"<!DOCTYPE html>\n<html>\n<head>\n{decl}\n<title>{req.path}</title>\n</head>\n"
            f"<body>\n<h1>{sentence}</h1>\n"
            + f"<p>{sentence}</p>\n" * 3
            + f"<p>{filler}</p>\n</body>\n</html>\n"
        )
        return Response(200, doc.encode(encoding), ctype)


def _deep(n: int) -> bytes:
    return b"<!DOCTYPE html><html><body>" + b"<div>" * n + b"deep text" + b"</div>" * n


MALFORMED: dict[str, bytes] = {
    "/ok.html": b"<html><head><title>OK</title></head><body><p>Fine.</p></body></html>",
    "/unclosed.html": (
        b"<html><head><title>Unclosed<body><p>Some text <b>bold <i>italic <div><p>para "
        b'<a href="/ok.html">a link <table><tr><td>cell <td>cell <ul><li>one <li>two '
        b"<p>never closed"
    ),
    "/garbage.html": (
        b'<html><head><meta charset="utf-8"><title>Garbage \xff\xfe</title></head><body>'
        b"<p>Valid text \x80\x81\xc3\x28 invalid UTF-8 \xed\xa0\x80 surrogate \xf8\x88 "
        b'<a href="/ok.html">ok\xff</a></p></body></html>'
    ),
    "/nul.html": (
        b"<html><head><title>N\x00UL</title></head><body><p>Text with \x00 NUL \x00\x00 bytes"
        b' <a href="/ok\x00.html">nul link</a> <a href="/ok.html">ok</a></p></body></html>'
    ),
    "/deep.html": _deep(100_000),
    "/empty.html": b"",
    "/badattrs.html": (
        b"<HTML><BODY><A HREF=/ok.html?a=1&b=2>unquoted</A> <a href='/ok.html' href=\"/x\">"
        b'twice</a> <a href="  /ok.html  ">spaces</a> <a href="">empty</a> <a>none</a> '
        b'<script>document.write(\'<a href="/fake.html">\')</script> <a href="/ok.html\n">'
        b'newline</a> <!-- unterminated comment <a href="/hidden.html">'
    ),
}


class Malformed(Host):
    """Broken HTML: unclosed tags, invalid bytes, NULs, 100k-deep nesting, empty, binary."""

    def pages(self) -> list[str]:
        return ["/", *MALFORMED, "/binary.html"]

    def links(self, path: str) -> list[Link]:
        if path == "/":
            return [(self.name, p) for p in self.pages()[1:]]
        return [(self.name, "/ok.html")] if path == "/unclosed.html" else []

    def handle(self, req: Request) -> Response:
        if req.path == "/":
            return html(simple_page("Malformed", self.pages()[1:], self.seed))
        if req.path == "/binary.html":
            rng = rng_for("binary", self.seed)
            return Response(200, rng.randbytes(4096), "text/html")
        body = MALFORMED.get(req.path)
        return not_found(req) if body is None else Response(200, body, "text/html")


PARAMS = {
    "color": ["red", "green", "blue", "black"],
    "size": ["s", "m", "l", "xl"],
    "sort": ["price", "name", "date"],
}


class Trap(Host):
    """Infinite URL spaces: a calendar, session ids, ever-deeper paths, parameter combinations."""

    def __init__(self, name: str, seed: object) -> None:
        super().__init__(name, seed)
        self._counter = itertools.count()

    def _sid(self) -> str:
        """A new session id per request (deterministic in request order)."""
        return stable_hash("sid", self.seed, next(self._counter))[:26].upper()

    def kind(self, path: str) -> str | None:
        """Which trap a path belongs to, None for the home page and robots.txt."""
        if path.startswith("/cal/"):
            return "calendar"
        if path.startswith("/s/"):
            return "session"
        if path.startswith("/a/"):
            return "deep"
        if path.startswith("/filter"):
            return "params"
        return None

    def pages(self) -> list[str]:
        return ["/", "/cal/2026/11", "/s/page", "/s/cart", "/a/", "/filter?color=red"]

    def links(self, path: str) -> list[Link]:
        if path == "/":
            return [(self.name, p) for p in self.pages()[1:]]
        return []  # infinite: links depend on the request (session ids) or never end

    def handle(self, req: Request) -> Response:
        p = req.path
        if p == "/":
            sid = self._sid()
            links = [
                "/cal/2026/11",
                f"/s/page?PHPSESSID={sid}",
                f"/s/cart;jsessionid={sid}",
                "/a/",
                "/filter?color=red",
            ]
        elif p.startswith("/cal/"):
            links = self._calendar(p)
        elif p.startswith("/s/"):
            sid = self._sid()
            links = [f"/s/page?PHPSESSID={sid}", f"/s/cart;jsessionid={sid}", "/"]
        elif p.startswith("/a/") and set(p.strip("/").split("/")) == {"a"}:
            links = ["a/", "/"]
        elif p == "/filter":
            links = self._filters(req.query)
        else:
            links = None
        if links is None:
            return not_found(req)
        return html(simple_page(f"Trap {req.target}", links, self.seed, words=60))

    @staticmethod
    def _calendar(path: str) -> list[str] | None:
        try:
            _, _, y, m = path.rstrip("/").split("/")
            year, month = int(y), int(m)
        except ValueError:
            return None
        if not (1 <= month <= 12 and 1 <= year <= 99_999):
            return None
        prev = (year - 1, 12) if month == 1 else (year, month - 1)
        nxt = (year + 1, 1) if month == 12 else (year, month + 1)
        return [f"/cal/{prev[0]}/{prev[1]}", f"/cal/{nxt[0]}/{nxt[1]}", "/"]

    @staticmethod
    def _filters(query: str) -> list[str]:
        current = dict(parse_qsl(query))
        page = int(current.get("page", "1")) if current.get("page", "1").isdigit() else 1
        out = []
        for name, values in PARAMS.items():
            for v in values:
                if current.get(name) != v:
                    out.append("/filter?" + urlencode(current | {name: v}))
        out.append("/filter?" + urlencode(current | {"page": str(page + 1)}))
        return out


def hosts(seed: object) -> list[Host]:
    """All content-hostile hosts, including those of :mod:`simweb.versions`."""
    return [
        Charset("charset.sim.test", seed),
        Malformed("malformed.sim.test", seed),
        Trap("trap.sim.test", seed),
        *versions.hosts(seed),
    ]

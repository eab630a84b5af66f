"""Parse one fetched HTML response: charset, outlinks, main text and metadata.

The parse job calls :func:`parse_html` once per WARC response record; nothing here knows about
Spark, and nothing raises: a page that breaks a parser comes back as a :class:`ParsedPage` with
``error`` set and whatever could still be extracted.

Tools and why:

* outlinks with selectolax's Lexbor backend (the Modest backend is gone from selectolax 1.0;
  Lexbor builds the same tree as a browser), one CSS pass in document order;
* main text and date with trafilatura, or the main text alone with resiliparse, the fast path
  (`extractor`; recrawl/content/extract.py), under a CPU-time limit (recrawl/content/cpu_limit.py): a page over
  it keeps its outlinks and metadata, gets its visible text and a parse_error;
* the charset with the HTML Standard's precedence plus charset-normalizer as a detector
  (recrawl/content/charset.py, `decode_html`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

from recrawl.content import extract
from recrawl.content.charset import decode_html
from recrawl.content.cpu_limit import CpuLimitExceeded, cpu_limit
from recrawl.content.linkfilter import DEFAULT_FILTER_RULES, LinkFilterRules, filter_reason
from recrawl.content.linkmemo import base_scope, memo_for, reference_key, remember
from recrawl.content.urlnorm import DEFAULT_RULES, NormalizeRules, try_normalize

__all__ = [
    "MAX_PARSE_BYTES",
    "MAX_EXTRACT_MS",
    "MAX_OUTLINKS",
    "OUTLINK_KINDS",
    "Outlink",
    "ParsedPage",
    "parse_html",
]

MAX_PARSE_BYTES = 2 * 1024 * 1024  # bytes of a body that are parsed; the rest is ignored
MAX_OUTLINKS = 1000  # outlinks kept per page, in document order
MAX_ANCHOR_CHARS = 200
MAX_TITLE_CHARS = 1000
MAX_NESTING = 2048  # open elements; Lexbor's tree builder is quadratic in the nesting depth
# CPU ms the text extraction of one page may take (on the main thread; recrawl/content/cpu_limit.py).
# Real news and portal pages took at most ~300 ms with trafilatura on a busy machine.
MAX_EXTRACT_MS = 1000

#: every ``Outlink.kind``; parse_html emits the first five and "feed", the fetcher/robots steps
#: "redirect", the sitemap parse "sitemap"
OUTLINK_KINDS = ("a", "area", "frame", "canonical", "refresh", "redirect", "sitemap", "feed")
#: ``<link rel=alternate type=...>`` values announcing a feed (recrawl/content/feeds.py reads them)
_FEED_TYPES = frozenset(("application/rss+xml", "application/atom+xml", "application/rdf+xml"))


@dataclass
class Outlink:
    """A link found on a page: normalized target, anchor text and where it came from."""

    url: str
    anchor: str
    kind: str


@dataclass
class ParsedPage:
    """What the parse step keeps of one HTML page (the ``pages`` and ``links`` rows)."""

    title: str | None = None
    text: str = ""
    lang: str | None = None
    date: str | None = None
    canonical_url: str | None = None
    outlinks: list[Outlink] = field(default_factory=list)
    meta_robots_noindex: bool = False
    meta_robots_nofollow: bool = False
    error: str | None = None
    encoding: str | None = None  # the codec the body was decoded with
    text_extractor: str | None = None  # what found `text` (recrawl.content.extract.LABELS)


# --- HTML tree ----------------------------------------------------------------------------

_WS = re.compile(r"\s+")
_BAD_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_REFRESH = re.compile(
    r"""^\s*[\d.]*\s*[;,]?\s*(?:url\s*=\s*)?(?P<q>["']?)(?P<url>.*?)(?P=q)\s*$""",
    re.IGNORECASE | re.DOTALL,
)
_LANG = re.compile(r"^[a-zA-Z]{2,3}(?=$|[-_])")
# Tags that never stay open (void elements, and those an HTML parser closes implicitly): they are
# not counted when estimating the nesting depth.
_NOT_NESTING = frozenset(
    (
        "area base br col embed hr img input link meta source track wbr p li td th tr option dt dd"
    ).split()
)
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)")
# bytes that do not occur in text in any ASCII-compatible encoding (ESC is ISO-2022-JP's)
_CONTROL_BYTES = bytes([*range(0x00, 0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20)])
_NON_CONTROL_BYTES = bytes(b for b in range(256) if b not in _CONTROL_BYTES)
# bytes that are not a C0 control XML refuses (_BAD_XML_CHARS)
_XML_VALID_BYTES = bytes(b for b in range(256) if b >= 0x20 or b in (0x09, 0x0A, 0x0D))
_LINK_SELECTOR = "a[href], area[href], link[href], meta[content], frame[src]"
_INVISIBLE = "script, style, noscript, template, svg, head"


def _collapse(s: str) -> str:
    return _WS.sub(" ", s).strip()


def _tokens(value: str | None) -> set[str]:
    return set(value.lower().replace(",", " ").split()) if value else set()


def _lang(value: str | None) -> str | None:
    """Primary language subtag, lower case: ``en-US`` -> ``en``."""
    if not value:
        return None
    m = _LANG.match(value.strip())
    return m.group(0).lower() if m else None


def _looks_binary(body: bytes) -> bool:
    """More than 5% control bytes in the first 8 KiB: an image, a compressed body, random data."""
    sample = body[:8192]
    return len(sample.translate(None, _NON_CONTROL_BYTES)) > max(8, len(sample) // 20)


def _clean_utf8(body: bytes | str, encoding: str) -> bool:
    """UTF-8 (or ASCII) bytes without the bytes of an XML-invalid character (a C0 control,
    U+FFFE, U+FFFF): their text holds none. A quarter of the CPU of a regex over the text."""
    if isinstance(body, str) or not (encoding == "utf-8" or body.isascii()):
        return False
    return (not body.translate(None, _XML_VALID_BYTES)
            and b"\xef\xbf\xbe" not in body and b"\xef\xbf\xbf" not in body)


def _nesting_cut(text: str, limit: int) -> int | None:
    """Where the (estimated) element nesting first exceeds ``limit``, or ``None``.

    Lexbor takes 0.13 s for 10,000 nested ``<div>`` and 14 s for 100,000 (it rescans the stack
    of open elements per block start tag), so such a page is cut before it is parsed.  The scan
    costs about 1 ms per 35 KB and only runs on pages with more than ``limit`` tags.
    """
    if text.count("<") <= limit:
        return None
    depth = 0
    for m in _TAG.finditer(text):
        close, name = m.groups()
        if name.lower() in _NOT_NESTING:
            continue
        if close:
            if depth:
                depth -= 1
        else:
            depth += 1
            if depth > limit:
                return m.start()
    return None


def _visible_text(tree) -> str:
    """Fallback main text: all visible text of the body, one line per block-ish fragment."""
    for node in tree.css(_INVISIBLE):
        node.decompose()
    root = tree.body or tree.root
    if root is None:
        return ""
    lines = (_collapse(t) for t in root.text(separator="\n").split("\n"))
    return "\n".join(t for t in lines if t)


@dataclass(frozen=True)
class _Options:
    extract_text: bool
    extractor: str
    max_extract_ms: int
    norm_rules: NormalizeRules
    filter_rules: LinkFilterRules
    max_bytes: int
    max_outlinks: int
    max_nesting: int
    robots_names: tuple[str, ...]


def parse_html(
    body: bytes,
    content_type: str | None,
    url: str,
    *,
    extract_text: bool = True,
    extractor: str = extract.DEFAULT,
    max_extract_ms: int = MAX_EXTRACT_MS,
    norm_rules: NormalizeRules = DEFAULT_RULES,
    filter_rules: LinkFilterRules = DEFAULT_FILTER_RULES,
    max_bytes: int = MAX_PARSE_BYTES,
    max_outlinks: int = MAX_OUTLINKS,
    max_nesting: int = MAX_NESTING,
    robots_names: tuple[str, ...] = ("robots",),
    x_robots_tag: str | None = None,
) -> ParsedPage:
    """Parse one HTML response into text, metadata and normalized, filtered outlinks.

    Outlinks come from ``<a href>``, ``<area href>``, ``<frame src>``, ``<link rel=canonical>``,
    ``<meta http-equiv=refresh>`` (any delay) and feed autodiscovery ``<link rel=alternate
    type=application/{rss,atom,rdf}+xml>`` (kind "feed", anchor its title), resolved against
    ``<base href>`` (else ``url``), normalized with ``norm_rules`` and filtered with
    ``filter_rules``; invalid or filtered ones are dropped.  Each target appears once, at its
    first occurrence (which gives its kind), with the first non-empty anchor text (an ``<a>``
    without text falls back to its image's ``alt``).  Links with ``rel=nofollow`` are dropped
    (as Nutch's ``parser.html.outlinks.ignore_nofollow``);
    ``nofollow`` / ``none`` in meta robots or ``X-Robots-Tag`` drops all outlinks, the canonical
    URL is still reported.  Self-links are kept: the graph step removes them.  Links inside
    ``<noscript>`` count (the page is parsed as a browser without scripting would).

    Args:
        body: the raw HTTP body (already content-decoded); only ``max_bytes`` are parsed.
        content_type: the ``Content-Type`` header, for the charset.
        url: the final URL of the response (after redirects), the base for relative links.
        extract_text: run the extractor; when ``False``, or when the extractor finds nothing
            (short pages), fails or runs over ``max_extract_ms``, the text is the page's
            visible text (``text_extractor`` "selectolax").
        extractor: one of :data:`recrawl.content.extract.EXTRACTORS`: "resiliparse" (main text,
            the default), "trafilatura" (main text closer to the article, ~4-10x the CPU) or
            "selectolax" (the visible text); the first two also find the date (htmldate).
        max_extract_ms: CPU ms the extractor may use on this page (main thread only; 0 = no
            limit); over it ``error`` says so and the text is the visible text.
        norm_rules: URL normalization rules for outlinks and the canonical URL.
        filter_rules: outlink filter rules.
        max_bytes: cap on the bytes parsed.
        max_outlinks: cap on the outlinks kept (``<a>``/``<area>``/``<frame>``/feed, in document
            order; the canonical and refresh targets may come on top).
        max_nesting: a page nested deeper than this is parsed only up to that point.
        robots_names: ``<meta name=...>`` values obeyed as robots directives (``"robots"`` and
            the crawler's own token, lower case).
        x_robots_tag: the ``X-Robots-Tag`` response header, if any.

    Returns:
        A :class:`ParsedPage`; ``error`` is set (and fields are partial) when something failed.
        Never raises.
    """
    page = ParsedPage()
    errors: list[str] = []
    opts = _Options(
        extract_text, extractor, max_extract_ms, norm_rules, filter_rules, max_bytes, max_outlinks,
        max_nesting, robots_names,
    )
    try:
        for directive in _tokens(x_robots_tag):
            _apply_robots(page, directive)
        _parse_into(page, errors, body, content_type, url, opts)
    except Exception as exc:  # a bad page must not fail the whole Spark partition
        errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
    if errors:
        page.error = "; ".join(errors)
    return page


def _parse_into(page: ParsedPage, errors: list[str], body, content_type, url, opts) -> None:
    if not body:
        errors.append("empty body")
        return
    if isinstance(body, str):  # already decoded (tests, checkers)
        text, page.encoding = body[: opts.max_bytes], "utf-8"
    else:
        body = bytes(body[: opts.max_bytes])
        text, page.encoding = decode_html(body, content_type)
        if not page.encoding.startswith("utf-16") and _looks_binary(body):
            errors.append("binary content")
            return
    # NUL and other XML-invalid controls: the HTML parser maps NUL to U+FFFD anyway, and lxml
    # (inside trafilatura) refuses strings that contain them
    if not _clean_utf8(body, page.encoding) and _BAD_XML_CHARS.search(text):
        text = _BAD_XML_CHARS.sub("", text)
    if not text.strip():
        errors.append("empty document")
        return
    cut = _nesting_cut(text, opts.max_nesting)
    if cut is not None:
        errors.append(f"nesting deeper than {opts.max_nesting}: parsed the first {cut} chars")
        text = text[:cut]

    tree = LexborHTMLParser(text)
    html_node = tree.css_first("html")
    page.lang = _lang(html_node.attributes.get("lang")) if html_node is not None else None
    title_node = tree.css_first("title")
    if title_node is not None:
        page.title = _collapse(title_node.text())[:MAX_TITLE_CHARS] or None

    base = url
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        resolved, _ = try_normalize(base_node.attributes.get("href") or "", url, opts.norm_rules)
        base = resolved or url
    links = _Outlinks(base, opts, page.encoding)
    for node in tree.css(_LINK_SELECTOR):
        _visit(node, page, links, opts)
    if not page.meta_robots_nofollow:
        page.outlinks = links.values()

    page.text, page.text_extractor = _main_text(page, errors, tree, text, url, opts)


def _main_text(page: ParsedPage, errors: list[str], tree, text: str, url: str,
               opts: _Options) -> tuple[str, str]:
    """The page's text and the label of what found it: the extractor's, or the visible text when
    it finds none, fails or runs over the CPU limit."""
    name = opts.extractor if opts.extract_text else "selectolax"
    found = None
    if name != "selectolax":
        try:
            with cpu_limit(opts.max_extract_ms / 1000):
                if name == "trafilatura":
                    found, page.date = extract.extract_main(text, url)
                else:
                    found, page.date = extract.extract_resiliparse(text, url)
        except CpuLimitExceeded:
            errors.append(f"extract: {name} over the {opts.max_extract_ms} ms CPU limit; "
                          "the text is the visible text")
        except Exception as exc:  # lxml errors, RecursionError on odd trees, ...
            errors.append(f"extract: {type(exc).__name__}: {str(exc)[:200]}")
    if found:
        return found, extract.LABELS[name]
    return _visible_text(tree), extract.LABELS["selectolax"]


def _visit(node, page: ParsedPage, links: _Outlinks, opts: _Options) -> None:
    """Handle one ``a``/``area``/``frame``/``link``/``meta`` element, in document order."""
    attrs = node.attributes
    tag = node.tag
    if tag == "meta":
        name = (attrs.get("name") or "").strip().lower()
        equiv = (attrs.get("http-equiv") or "").strip().lower()
        content = attrs.get("content") or ""
        if name in opts.robots_names:
            for directive in _tokens(content):
                _apply_robots(page, directive)
        elif equiv == "refresh":
            m = _REFRESH.match(content)
            if m and m.group("url"):
                links.add(m.group("url"), "", "refresh")
        elif name in ("language", "content-language") or equiv == "content-language":
            page.lang = page.lang or _lang(content)
        elif not page.title and (attrs.get("property") or "").lower() == "og:title":
            page.title = _collapse(content)[:MAX_TITLE_CHARS] or None
    elif tag == "link":
        rel = _tokens(attrs.get("rel"))
        if page.canonical_url is None and "canonical" in rel:
            page.canonical_url = links.add(attrs.get("href") or "", "", "canonical")
        # a feed link: anywhere, not only in <head> (a stray character before <head> makes the
        # parser put the head's links in <body>); an hreflang alternate has no feed type
        elif ("alternate" in rel and "nofollow" not in rel and not links.full
              and (attrs.get("type") or "").split(";")[0].strip().lower() in _FEED_TYPES):
            title = _collapse(attrs.get("title") or "")[:MAX_ANCHOR_CHARS]
            links.add(attrs.get("href") or "", title, "feed")
    elif links.full or "nofollow" in _tokens(attrs.get("rel")):
        return
    elif tag == "a":
        links.add(attrs.get("href") or "", lambda: _anchor(node), "a")
    elif tag == "area":
        links.add(attrs.get("href") or "", _collapse(attrs.get("alt") or "")[:MAX_ANCHOR_CHARS],
                  "area")  # fmt: skip
    elif tag == "frame":
        links.add(attrs.get("src") or "", "", "frame")


def _anchor(node) -> str:
    """An ``<a>``'s text, else its image's ``alt``: collapsed and cut."""
    anchor = _collapse(node.text(deep=True, separator=" "))
    if not anchor:
        img = node.css_first("img[alt]")
        anchor = _collapse(img.attributes.get("alt") or "") if img is not None else ""
    return anchor[:MAX_ANCHOR_CHARS]


def _apply_robots(page: ParsedPage, directive: str) -> None:
    if directive in ("noindex", "none"):
        page.meta_robots_noindex = True
    if directive in ("nofollow", "none"):
        page.meta_robots_nofollow = True


class _Outlinks:
    """A page's outlinks: resolved, normalized, filtered, first occurrence wins, capped."""

    def __init__(self, base: str, opts: _Options, encoding: str):
        self._base = base
        self._opts = opts
        self._links: dict[str, Outlink] = {}
        # href -> (normalized target, kept by the filter): a third of a real page's hrefs
        # repeat one before them (menus, teasers), and normalizing is most of the links' CPU
        self._resolved: dict[str, tuple[str | None, bool]] = {}
        # and across the pages this process parses (recrawl.content.linkmemo)
        self._memo = memo_for(opts.norm_rules, opts.filter_rules)
        self._scope = base_scope(base)
        # browsers percent-encode non-ASCII in an href's query with the page's encoding
        self._query_encoding = None if encoding.startswith("utf") else encoding

    @property
    def full(self) -> bool:
        return len(self._links) >= self._opts.max_outlinks

    def add(self, href: str, anchor: str | Callable[[], str], kind: str) -> str | None:
        """Resolve and normalize ``href``; keep it unless filtered.  Returns the normalized URL
        (also for a filtered one, so a filtered canonical is still reported), or ``None``.
        ``anchor`` may be a function: it is called only when the anchor is wanted (a target
        seen before with an anchor needs none)."""
        resolved = self._resolved.get(href)
        if resolved is None:
            resolved = self._resolved[href] = self._resolve(href)
        target, kept = resolved
        if kept:
            seen = self._links.get(target)
            if seen is None:
                self._links[target] = Outlink(target, anchor() if callable(anchor) else anchor,
                                              kind)
            elif not seen.anchor:
                seen.anchor = anchor() if callable(anchor) else anchor
        return target

    def _resolve(self, href: str) -> tuple[str | None, bool]:
        key = reference_key(href, self._scope)
        if key is not None and (known := self._memo.get(key)) is not None:
            return known
        found = self._resolve_now(href)
        if key is not None:
            remember(self._memo, key, found)
        return found

    def _resolve_now(self, href: str) -> tuple[str | None, bool]:
        if self._query_encoding and not href.isascii() and "?" in href:
            href = _encode_query(href, self._query_encoding)
        target, _ = try_normalize(href, self._base, self._opts.norm_rules)
        if target is None:
            return None, False
        return target, filter_reason(target, self._opts.filter_rules) is None

    def values(self) -> list[Outlink]:
        return list(self._links.values())


_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _encode_query(href: str, encoding: str) -> str:
    """Percent-encode the non-ASCII characters of the query of ``href`` in ``encoding``.

    The WHATWG URL parser does this for the query of a link in a legacy-encoded document (a GBK
    page's ``?q=中文`` is sent as ``%D6%D0%CE%C4``, which is what the server expects); the path
    is always UTF-8.  Characters the encoding lacks become ``&#NNNN;`` as in a browser.
    """
    head, hash_, fragment = href.partition("#")
    path, qmark, query = head.partition("?")

    def enc(m: re.Match[str]) -> str:
        return "".join(f"%{b:02X}" for b in m.group().encode(encoding, "xmlcharrefreplace"))

    try:
        return path + qmark + _NON_ASCII.sub(enc, query) + hash_ + fragment
    except (LookupError, UnicodeError):
        return href

"""Parse one fetched HTML response: charset, outlinks, main text and metadata.

The parse job calls :func:`parse_html` once per WARC response record; nothing here knows about
Spark, and nothing raises: a page that breaks a parser comes back as a :class:`ParsedPage` with
``error`` set and whatever could still be extracted.

Tools and why:

* outlinks with selectolax's Lexbor backend (the Modest backend is gone from selectolax 1.0;
  Lexbor builds the same tree as a browser), one CSS pass in document order;
* main text, title and date with trafilatura (the options are chosen for throughput; see
  :data:`TRAFILATURA_OPTIONS` for the measured numbers);
* the charset with the HTML Standard's precedence plus charset-normalizer as a detector, see
  :func:`decode_html`.
"""

from __future__ import annotations

import codecs
import hashlib
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from recrawl.linkfilter import DEFAULT_FILTER_RULES, LinkFilterRules, filter_reason
from recrawl.urlnorm import DEFAULT_RULES, NormalizeRules, try_normalize

__all__ = [
    "MAX_PARSE_BYTES",
    "MAX_OUTLINKS",
    "OUTLINK_KINDS",
    "Outlink",
    "ParsedPage",
    "DATE_OPTIONS",
    "TRAFILATURA_OPTIONS",
    "content_hash",
    "decode_html",
    "encoding_for_label",
    "parse_html",
]

MAX_PARSE_BYTES = 2 * 1024 * 1024  # bytes of a body that are parsed; the rest is ignored
MAX_OUTLINKS = 1000  # outlinks kept per page, in document order
MAX_ANCHOR_CHARS = 200
MAX_TITLE_CHARS = 1000
MAX_NESTING = 2048  # open elements; Lexbor's tree builder is quadratic in the nesting depth
META_SCAN_BYTES = 4096  # where <meta charset> is looked for (the HTML Standard says 1024)
DETECT_BYTES = 64 * 1024  # how much of an undeclared body the charset detector reads

#: every ``Outlink.kind``; parse_html emits the first five, the fetcher/robots steps the others
OUTLINK_KINDS = ("a", "area", "frame", "canonical", "refresh", "redirect", "sitemap")


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


# --- charset ------------------------------------------------------------------------------

# WHATWG Encoding Standard labels -> the Python codec that decodes the same bytes.  Legacy labels
# map where browsers map them: ISO-8859-1 and ASCII are windows-1252, GB2312/GBK are GB18030,
# Shift_JIS is windows-31J (cp932), EUC-KR is windows-949.  Labels not listed are ignored (so a
# page cannot select UTF-7, base64 or other codecs Python knows but browsers do not).
_WHATWG_LABELS: dict[str, tuple[str, ...]] = {
    "utf-8": ("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8",
              "x-unicode20utf8"),
    "cp1252": ("ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819",
               "iso-8859-1", "iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1",
               "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252", "x-cp1252",
               "x-user-defined"),
    "gb18030": ("chinese", "csgb2312", "csiso58gb231280", "gb2312", "gb_2312", "gb_2312-80",
                "gbk", "iso-ir-58", "x-gbk", "gb18030"),
    "big5hkscs": ("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    "cp932": ("csshiftjis", "ms932", "ms_kanji", "shift-jis", "shift_jis", "sjis",
              "windows-31j", "x-sjis"),
    "euc_jp": ("cseucpkdfmtjapanese", "euc-jp", "x-euc-jp"),
    "iso2022_jp": ("csiso2022jp", "iso-2022-jp"),
    "cp949": ("cseuckr", "csksc56011987", "euc-kr", "iso-ir-149", "korean", "ks_c_5601-1987",
              "ks_c_5601-1989", "ksc5601", "ksc_5601", "windows-949"),
    "utf-16-le": ("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff", "utf-16",
                  "utf-16le"),
    "utf-16-be": ("unicodefffe", "utf-16be"),
    "cp866": ("866", "cp866", "csibm866", "ibm866"),
    "iso8859_2": ("csisolatin2", "iso-8859-2", "iso-ir-101", "iso8859-2", "iso88592",
                  "iso_8859-2", "iso_8859-2:1987", "l2", "latin2"),
    "iso8859_3": ("csisolatin3", "iso-8859-3", "iso-ir-109", "iso8859-3", "iso88593",
                  "iso_8859-3", "iso_8859-3:1988", "l3", "latin3"),
    "iso8859_4": ("csisolatin4", "iso-8859-4", "iso-ir-110", "iso8859-4", "iso88594",
                  "iso_8859-4", "iso_8859-4:1988", "l4", "latin4"),
    "iso8859_5": ("csisolatincyrillic", "cyrillic", "iso-8859-5", "iso-ir-144", "iso8859-5",
                  "iso88595", "iso_8859-5", "iso_8859-5:1988"),
    "iso8859_6": ("arabic", "asmo-708", "csiso88596e", "csiso88596i", "csisolatinarabic",
                  "ecma-114", "iso-8859-6", "iso-8859-6-e", "iso-8859-6-i", "iso-ir-127",
                  "iso8859-6", "iso88596", "iso_8859-6", "iso_8859-6:1987"),
    "iso8859_7": ("csisolatingreek", "ecma-118", "elot_928", "greek", "greek8", "iso-8859-7",
                  "iso-ir-126", "iso8859-7", "iso88597", "iso_8859-7", "iso_8859-7:1987",
                  "sun_eu_greek"),
    "iso8859_8": ("csiso88598e", "csisolatinhebrew", "hebrew", "iso-8859-8", "iso-8859-8-e",
                  "iso-ir-138", "iso8859-8", "iso88598", "iso_8859-8", "iso_8859-8:1988",
                  "visual", "csiso88598i", "iso-8859-8-i", "logical"),
    "iso8859_10": ("csisolatin6", "iso-8859-10", "iso-ir-157", "iso8859-10", "iso885910",
                   "l6", "latin6"),
    "iso8859_13": ("iso-8859-13", "iso8859-13", "iso885913"),
    "iso8859_14": ("iso-8859-14", "iso8859-14", "iso885914"),
    "iso8859_15": ("csisolatin9", "iso-8859-15", "iso8859-15", "iso885915", "iso_8859-15",
                   "l9"),
    "iso8859_16": ("iso-8859-16",),
    "koi8_r": ("cskoi8r", "koi", "koi8", "koi8-r", "koi8_r"),
    "koi8_u": ("koi8-ru", "koi8-u"),
    "mac_roman": ("csmacintosh", "mac", "macintosh", "x-mac-roman"),
    "mac_cyrillic": ("x-mac-cyrillic", "x-mac-ukrainian"),
    "cp874": ("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620", "windows-874"),
    "cp1250": ("cp1250", "windows-1250", "x-cp1250"),
    "cp1251": ("cp1251", "windows-1251", "x-cp1251"),
    "cp1253": ("cp1253", "windows-1253", "x-cp1253"),
    "cp1254": ("cp1254", "csisolatin5", "iso-8859-9", "iso-ir-148", "iso8859-9", "iso88599",
               "iso_8859-9", "iso_8859-9:1989", "l5", "latin5", "windows-1254", "x-cp1254"),
    "cp1255": ("cp1255", "windows-1255", "x-cp1255"),
    "cp1256": ("cp1256", "windows-1256", "x-cp1256"),
    "cp1257": ("cp1257", "windows-1257", "x-cp1257"),
    "cp1258": ("cp1258", "windows-1258", "x-cp1258"),
}  # fmt: skip
_LABEL_TO_CODEC = {label: codec for codec, labels in _WHATWG_LABELS.items() for label in labels}
# charset-normalizer answers with Python codec names; map the ones browsers would read otherwise
_DETECTED_TO_CODEC = {
    "ascii": "cp1252",
    "latin_1": "cp1252",
    "iso8859_1": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "euc_jis_2004": "euc_jp",
    "euc_jisx0213": "euc_jp",
    "euc_kr": "cp949",
    "big5": "big5hkscs",
    "utf_8": "utf-8",
    "utf_16": "utf-16-le",
}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_HEADER_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([^\s"';,]+)""", re.IGNORECASE)
# <meta charset=x> and <meta http-equiv=content-type content="...; charset=x"> alike
_META_CHARSET = re.compile(
    rb"""<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([a-zA-Z0-9_.:\-]+)""", re.IGNORECASE
)
_XML_DECL = re.compile(rb"""^\s*<\?xml[^>]*\bencoding\s*=\s*["']([a-zA-Z0-9_.:\-]+)""")
_ASCII_BYTES = bytes(range(128))
_MAX_ERROR_RATIO = 0.01  # declared charset accepted with at most 1% bad non-ASCII bytes


def _c1_passthrough(exc: UnicodeDecodeError) -> tuple[str, int]:
    """Decode the five bytes Python's cp1252 leaves undefined as C1 controls, as WHATWG does."""
    bad = exc.object[exc.start : exc.end]
    return "".join(chr(b) for b in bad), exc.end


codecs.register_error("recrawl.c1", _c1_passthrough)


def encoding_for_label(label: str | None) -> str | None:
    """The Python codec for a WHATWG charset label (``"GBK"`` -> ``"gb18030"``), or ``None``."""
    if not label:
        return None
    return _LABEL_TO_CODEC.get(label.strip().strip("\"'").lower())


def _decode(body: bytes, codec: str) -> str:
    if codec == "cp1252":
        return body.decode("cp1252", "recrawl.c1")
    if codec == "utf-8" and body.startswith(codecs.BOM_UTF8):
        return body[3:].decode("utf-8", "replace")
    if codec.startswith("utf-16") and body[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        body = body[2:]
    return body.decode(codec, "replace")


def _error_ratio(body: bytes, codec: str) -> float:
    """Share of non-ASCII bytes ``codec`` cannot decode (0.0 when it decodes cleanly)."""
    try:
        body.decode(codec, "recrawl.c1" if codec == "cp1252" else "strict")
        return 0.0
    except UnicodeDecodeError:
        pass
    except LookupError:
        return 1.0
    non_ascii = len(body.translate(None, _ASCII_BYTES)) or 1
    bad = body.decode(codec, "replace").count("\ufffd")
    return bad / non_ascii


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
        return True
    except UnicodeDecodeError:
        # a body cut at the size cap may end inside a character
        try:
            codecs.getincrementaldecoder("utf-8")().decode(body, final=False)
            return True
        except UnicodeDecodeError:
            return False


def _detect(body: bytes) -> str | None:
    """charset-normalizer on the start of the body, preferring windows-1252 on a tie."""
    sample = body[:DETECT_BYTES]
    if len(sample) < len(body):
        # cut at an ASCII '<' or newline: never a trail byte in GBK/Shift_JIS/EUC/UTF-8,
        # and a sample ending mid-character makes the detector give up
        cut = max(sample.rfind(b"<"), sample.rfind(b"\n"))
        if cut > 0:
            sample = sample[:cut]
    try:
        from charset_normalizer import from_bytes

        matches = list(from_bytes(sample))
    except Exception:
        return None
    if not matches:
        return None
    best = matches[0]
    # Single-byte Latin pages fit several code pages about equally well, and the detector's
    # first pick is often a Baltic or Central European one for French or German text (a "«" or
    # "—" costs cp1252 a little "chaos").  windows-1252 is what a browser in most locales assumes
    # for an undeclared page, so it wins a near tie.  On one paragraph each of fr/de/pt/es/cs/tr/
    # ru/el/he/ar/zh/zh-TW/ja/ko this gets all right but undeclared Polish cp1250 (read as cp1252).
    for m in matches:
        if m.chaos > best.chaos + 0.05 or m.coherence < best.coherence - 0.01:
            continue
        if "cp1252" in m.could_be_from_charset:
            return "cp1252"
    name = best.encoding
    return _DETECTED_TO_CODEC.get(name, name)


def decode_html(body: bytes, content_type: str | None) -> tuple[str, str]:
    """Decode an HTML body the way a browser would, with a detector for undeclared pages.

    Precedence: a byte-order mark; then the ``charset`` of the HTTP ``Content-Type``; then
    ``<meta charset>`` / ``<meta http-equiv=content-type>`` (or an XML declaration) in the first
    4 KiB; then, for undeclared pages, UTF-8 if the bytes are valid UTF-8, else
    charset-normalizer; finally UTF-8 with replacement characters.  Labels map per the WHATWG
    Encoding Standard (``gbk`` -> gb18030, ``iso-8859-1`` -> cp1252, ``shift_jis`` -> cp932).

    Two deliberate departures from a browser, both for mislabelled pages:

    * a declared charset under which more than 1% of the non-ASCII bytes are invalid is skipped
      (GBK served as ``charset=utf-8``); a few bad bytes are tolerated (a stray Latin-1 byte in a
      UTF-8 page, a body cut at the size cap);
    * a page declared windows-1252 / ISO-8859-1 (a common server default) whose non-ASCII bytes
      are valid UTF-8 is read as UTF-8: that is practically never an accident.

    Args:
        body: the raw (already content-decoded) HTTP body.
        content_type: the ``Content-Type`` header value, if any.

    Returns:
        ``(text, codec)``: the decoded text and the Python codec name used.  Never raises.
    """
    if isinstance(body, str):
        return body, "utf-8"
    try:
        return _decode_html(body, content_type)
    except Exception:  # defensive: this runs on arbitrary bytes from the web
        try:
            return bytes(body or b"").decode("utf-8", "replace"), "utf-8"
        except Exception:
            return "", "utf-8"


def _decode_html(body: bytes, content_type: str | None) -> tuple[str, str]:
    if not body:
        return "", "utf-8"
    body = bytes(body)
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return _decode(body, codec), codec

    declared: list[str] = []
    if content_type:
        m = _HEADER_CHARSET.search(content_type)
        if m:
            codec = encoding_for_label(m.group(1))
            if codec:
                declared.append(codec)
    head = body[:META_SCAN_BYTES]
    m = _META_CHARSET.search(head) or _XML_DECL.search(head)
    if m:
        codec = encoding_for_label(m.group(1).decode("ascii", "replace"))
        # a meta that claims UTF-16 is read as UTF-8: the bytes it sits in are ASCII-compatible
        if codec and codec.startswith("utf-16"):
            codec = "utf-8"
        if codec and codec not in declared:
            declared.append(codec)

    if declared and declared[0].startswith("utf-16"):
        # only the HTTP header can select UTF-16 without a BOM; believe it when the body has
        # the NUL bytes that UTF-16 markup is full of, not for an ASCII page mislabelled so
        if b"\x00" in body[:1024]:
            return _decode(body, declared[0]), declared[0]
        declared.pop(0)
    if body.isascii():
        return body.decode("ascii"), declared[0] if declared else "utf-8"

    best_codec, best_ratio = "utf-8", None
    for codec in declared:
        if codec == "cp1252" and _is_utf8(body):
            return _decode(body, "utf-8"), "utf-8"
        ratio = _error_ratio(body, codec)
        if ratio <= _MAX_ERROR_RATIO:
            return _decode(body, codec), codec
        if best_ratio is None or ratio < best_ratio:
            best_codec, best_ratio = codec, ratio

    if _is_utf8(body):
        return _decode(body, "utf-8"), "utf-8"
    detected = _detect(body)
    if detected:
        try:
            ratio = _error_ratio(body, detected)
        except Exception:
            ratio = 1.0
        if ratio <= _MAX_ERROR_RATIO:
            return _decode(body, detected), detected
        if best_ratio is None or ratio < best_ratio:
            best_codec, best_ratio = detected, ratio
    if best_ratio is not None and best_ratio < _error_ratio(body, "utf-8"):
        return _decode(body, best_codec), best_codec
    return body.decode("utf-8", "replace"), "utf-8"


# --- text extraction ----------------------------------------------------------------------

#: Keyword arguments for ``trafilatura.bare_extraction`` (and :data:`DATE_OPTIONS` for
#: ``htmldate.find_date``), chosen for throughput.  Measured here (2 shared cores, Python 3.11,
#: trafilatura 2.3.1, htmldate 1.11) with ``python tests/recrawl/test_parsing.py``: 60 generated
#: 20 KiB news-like pages (nav, 100 links, 16 paragraphs, a table, comments, inline scripts; half
#: with a ``published_time`` meta, all with a date in the byline), 3 rounds, mean per page:
#:
#: ==============================================================  =======
#: trafilatura defaults + ``with_metadata=True``                    6.3 ms
#: ``fast=True, include_comments=False`` + ``with_metadata=True``   4.9 ms
#: the same + ``favor_precision=True``                              5.0 ms
#: the same + ``extensive_search=True`` for the date (earlier run)  +0.1 ms
#: ``fast=True, include_comments=False``, no metadata               2.2 ms
#: chosen: that + ``htmldate.find_date`` on the same lxml tree      2.35 ms
#: whole :func:`parse_html` (decode, Lexbor, 101 outlinks, above)   4.5 ms
#: :func:`parse_html` with ``extract_text=False``                   2.2 ms
#: ==============================================================  =======
#:
#: ``with_metadata`` costs more than the text extraction itself (author, site name, categories,
#: tags, JSON-LD...) while we keep only title and date, so the tree is parsed once with
#: trafilatura's ``load_html``, the date comes from htmldate (what trafilatura calls inside)
#: with ``extensive_search=False`` (markup and URL only, no free-text scan), and the title from
#: ``<title>`` via selectolax.  ``fast`` skips the readability/jusText fallbacks.  All variants
#: found the same text and dates on these pages.  ``deduplicate`` stays off: it keeps a
#: process-wide cache, so results would depend on what else a Spark task parsed before.  Of the
#: 2.2 ms without extraction, about two thirds is URL normalization (~10 us per link).
TRAFILATURA_OPTIONS: dict[str, Any] = {
    "fast": True,
    "favor_precision": False,
    "favor_recall": False,
    "include_comments": False,
    "include_tables": True,
    "include_images": False,
    "include_links": False,
    "include_formatting": False,
    "deduplicate": False,
    "with_metadata": False,
}
DATE_OPTIONS: dict[str, Any] = {"extensive_search": False, "original_date": True}

_quieted = False


def _quiet_extractor_logs() -> None:
    """trafilatura and htmldate log a warning per discarded page; ParsedPage.error says enough."""
    global _quieted
    if not _quieted:
        for name in ("trafilatura", "htmldate", "courlan"):
            lg = logging.getLogger(name)
            if lg.level == logging.NOTSET:
                lg.setLevel(logging.CRITICAL)
        _quieted = True


def _extract_main(text: str, url: str) -> tuple[str | None, str | None]:
    """(main text, publication date) from trafilatura and htmldate, ``None`` when not found."""
    from htmldate import find_date
    from trafilatura import bare_extraction
    from trafilatura.utils import load_html

    _quiet_extractor_logs()
    tree = load_html(text)
    if tree is None:
        return None, None
    date = None
    try:
        date = find_date(tree, url=url, **DATE_OPTIONS)
    except Exception:  # htmldate bugs must not cost us the text
        pass
    doc = bare_extraction(tree, url=url, **TRAFILATURA_OPTIONS)
    return (doc.text or None) if doc is not None else None, date


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
    norm_rules: NormalizeRules = DEFAULT_RULES,
    filter_rules: LinkFilterRules = DEFAULT_FILTER_RULES,
    max_bytes: int = MAX_PARSE_BYTES,
    max_outlinks: int = MAX_OUTLINKS,
    max_nesting: int = MAX_NESTING,
    robots_names: tuple[str, ...] = ("robots",),
    x_robots_tag: str | None = None,
) -> ParsedPage:
    """Parse one HTML response into text, metadata and normalized, filtered outlinks.

    Outlinks come from ``<a href>``, ``<area href>``, ``<frame src>``, ``<link rel=canonical>``
    and ``<meta http-equiv=refresh>`` (any delay), resolved against ``<base href>`` (else
    ``url``), normalized with ``norm_rules`` and filtered with ``filter_rules``; invalid or
    filtered ones are dropped.  Each target appears once, at its first occurrence, with the first
    non-empty anchor text (an ``<a>`` without text falls back to its image's ``alt``).  Links
    with ``rel=nofollow`` are dropped (as Nutch's ``parser.html.outlinks.ignore_nofollow``);
    ``nofollow`` / ``none`` in meta robots or ``X-Robots-Tag`` drops all outlinks, the canonical
    URL is still reported.  Self-links are kept: the graph step removes them.  Links inside
    ``<noscript>`` count (the page is parsed as a browser without scripting would).

    Args:
        body: the raw HTTP body (already content-decoded); only ``max_bytes`` are parsed.
        content_type: the ``Content-Type`` header, for the charset.
        url: the final URL of the response (after redirects), the base for relative links.
        extract_text: run trafilatura (main text) and htmldate (date); when ``False``, or when
            trafilatura finds nothing (short pages), the text is the page's visible text.
        norm_rules: URL normalization rules for outlinks and the canonical URL.
        filter_rules: outlink filter rules.
        max_bytes: cap on the bytes parsed.
        max_outlinks: cap on the outlinks kept (``<a>``/``<area>``/``<frame>`` in document
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
        extract_text, norm_rules, filter_rules, max_bytes, max_outlinks, max_nesting, robots_names
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
    if _BAD_XML_CHARS.search(text):
        text = _BAD_XML_CHARS.sub("", text)
    if not text.strip():
        errors.append("empty document")
        return
    cut = _nesting_cut(text, opts.max_nesting)
    if cut is not None:
        errors.append(f"nesting deeper than {opts.max_nesting}: parsed the first {cut} chars")
        text = text[:cut]

    from selectolax.lexbor import LexborHTMLParser

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

    body_text = None
    if opts.extract_text:
        try:
            body_text, page.date = _extract_main(text, url)
        except Exception as exc:  # lxml errors, RecursionError on odd trees, ...
            errors.append(f"extract: {type(exc).__name__}: {str(exc)[:200]}")
    page.text = body_text or _visible_text(tree)


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
        if page.canonical_url is None and "canonical" in _tokens(attrs.get("rel")):
            page.canonical_url = links.add(attrs.get("href") or "", "", "canonical")
    elif links.full or "nofollow" in _tokens(attrs.get("rel")):
        return
    elif tag == "a":
        anchor = _collapse(node.text(deep=True, separator=" "))
        if not anchor:
            img = node.css_first("img[alt]")
            anchor = _collapse(img.attributes.get("alt") or "") if img is not None else ""
        links.add(attrs.get("href") or "", anchor[:MAX_ANCHOR_CHARS], "a")
    elif tag == "area":
        links.add(attrs.get("href") or "", _collapse(attrs.get("alt") or "")[:MAX_ANCHOR_CHARS],
                  "area")  # fmt: skip
    elif tag == "frame":
        links.add(attrs.get("src") or "", "", "frame")


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
        # browsers percent-encode non-ASCII in an href's query with the page's encoding
        self._query_encoding = None if encoding.startswith("utf") else encoding

    @property
    def full(self) -> bool:
        return len(self._links) >= self._opts.max_outlinks

    def add(self, href: str, anchor: str, kind: str) -> str | None:
        """Resolve and normalize ``href``; keep it unless filtered.  Returns the normalized URL
        (also for a filtered one, so a filtered canonical is still reported), or ``None``."""
        if self._query_encoding and not href.isascii() and "?" in href:
            href = _encode_query(href, self._query_encoding)
        target, _ = try_normalize(href, self._base, self._opts.norm_rules)
        if target is None:
            return None
        if filter_reason(target, self._opts.filter_rules) is None:
            seen = self._links.get(target)
            if seen is None:
                self._links[target] = Outlink(target, anchor, kind)
            elif anchor and not seen.anchor:
                seen.anchor = anchor
        return target

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


def content_hash(text: str) -> str:
    """SHA-1 hex of the text with all whitespace runs collapsed to one space (exact dedup key)."""
    return hashlib.sha1(" ".join(text.split()).encode("utf-8")).hexdigest()

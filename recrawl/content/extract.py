"""Main text and publication date of an HTML page, by the extractor `parse.extractor` names:
resiliparse's main-content text (the default: a quarter to a tenth of trafilatura's CPU) or
trafilatura (the closest to the article text; tuned for throughput: the measurements are
below); with either, the date by htmldate. Used by recrawl/content/parsing.py.

What each costs and how far they agree on real pages: docs/scale.md, "Parsing real-world pages".
"""

from __future__ import annotations

import logging
import re
from typing import Any

from recrawl.config import Config, ConfigError

#: `parse.extractor` values. "selectolax" is the visible text of the tree the outlinks come
#: from (recrawl.content.parsing), no main-content detection; it is also what `extract_text = false`
#: and a page trafilatura finds no text on get.
EXTRACTORS = ("trafilatura", "resiliparse", "selectolax")

#: The default `parse.extractor` (recrawl/defaults.toml) and `parsing.parse_html`'s: the round is
#: CPU-bound on parse and its text feeds change detection and dedup (docs/design-choices.md).
DEFAULT = "resiliparse"

#: The label pages.text_extractor and crawldb.text_extractor record with each page's text: the
#: text, content_hash and simhash of two captures are compared only under equal labels
#: (recrawl.rules.crawldb_rules.meaningful_change). Give an extractor a new label ("trafilatura.2")
#: when a change to its options changes the text it finds on unchanged pages.
LABELS = {"trafilatura": "trafilatura", "resiliparse": "resiliparse", "selectolax": "selectolax"}


def extractor(cfg: Config) -> str:
    """The crawl's `parse.extractor`, checked."""
    value = str(cfg.get("parse.extractor")).lower()
    if value not in EXTRACTORS:
        raise ConfigError(f"parse.extractor must be one of {', '.join(EXTRACTORS)}, got {value!r}")
    return value

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


def extract_main(text: str, url: str) -> tuple[str | None, str | None]:
    """(main text, publication date) from trafilatura and htmldate, ``None`` when not found."""
    from trafilatura import bare_extraction  # lazy: heavy (trafilatura)

    tree = _lxml_tree(text)
    if tree is None:
        return None, None
    date = _date(tree, url)
    doc = bare_extraction(tree, url=url, **TRAFILATURA_OPTIONS)
    return (doc.text or None) if doc is not None else None, date


def _lxml_tree(text: str):
    """trafilatura's lxml tree of `text` with scripts and styles cut (what trafilatura and
    htmldate read), ``None`` when lxml finds no document."""
    from trafilatura.utils import load_html  # lazy: heavy (trafilatura)

    _quiet_extractor_logs()
    return load_html(strip_raw_text(text))


def _date(tree, url: str) -> str | None:
    """htmldate's publication date from the page's lxml tree, ``None`` when not found."""
    from htmldate import find_date  # lazy: heavy (htmldate)

    try:
        return find_date(tree, url=url, **DATE_OPTIONS)
    except Exception:  # htmldate bugs must not cost us the text
        return None


def find_date_only(text: str, url: str) -> str | None:
    """The date :func:`extract_main` finds, for resiliparse's path: htmldate on the same tree,
    ~0.3 ms on a simweb page, 1.5 ms on a median real one."""
    tree = _lxml_tree(text)
    return None if tree is None else _date(tree, url)


# --- what the extractors are given -------------------------------------------------------------

# The contents of <script> and <style>: raw text no extractor keeps, and most of the bytes of
# the largest real pages (the 2.5-2.9 MB news pages are 84-89 % inline scripts and JSON). Opening tags are
# found by a regex and each element's end by a search from there, so one pass is linear in the
# page; comments are skipped whole, so a commented-out "<script>" is not taken for one. JSON-LD
# (type "application/ld+json") stays: htmldate reads dates from it, and it is small.
_RAW_OPEN = re.compile(r"<!--|<(script|style)\b", re.IGNORECASE)
_RAW_CLOSE = {
    "script": re.compile(r"</script[\s/>]", re.IGNORECASE),
    "style": re.compile(r"</style[\s/>]", re.IGNORECASE),
}
_KEEP_SCRIPT = re.compile(r"[^>]*?\+json", re.IGNORECASE)


def strip_raw_text(text: str) -> str:
    """`text` without its <script> (but JSON-LD) and <style> elements; an unclosed one runs to
    the end, as in a browser. On the 30 real pages of benchmarks/real_pages.py trafilatura found
    the same text on all and htmldate the same date on 29 (a front page's date came from an
    inline state script), for 13 % less CPU on the mean page and less than half on the three largest."""
    out: list[str] = []
    pos = 0
    while (m := _RAW_OPEN.search(text, pos)) is not None:
        if m.group(1) is None:  # a comment: kept as it is
            end = text.find("-->", m.end())
            if end < 0:
                break
            out.append(text[pos:end + 3])
            pos = end + 3
            continue
        close = _RAW_CLOSE[m.group(1).lower()].search(text, m.end())
        if close is None:
            out.append(text[pos:m.start()])
            return "".join(out)
        gt = text.find(">", close.end() - 1)
        end = len(text) if gt < 0 else gt + 1
        keep = _KEEP_SCRIPT.match(text, m.end(), close.start()) is not None
        out.append(text[pos:end] if keep else text[pos:m.start()])
        pos = end
    out.append(text[pos:])
    return "".join(out)


# --- resiliparse -------------------------------------------------------------------------------

#: ``resiliparse.extract.html2text.extract_plain_text`` options: its main-content heuristics,
#: and what trafilatura leaves out too (image alt texts, list bullets, comment sections).
RESILIPARSE_OPTIONS: dict[str, Any] = {
    "main_content": True,
    "preserve_formatting": True,
    "list_bullets": False,
    "alt_texts": False,
    "comments": False,
}


def extract_resiliparse(text: str, url: str) -> tuple[str | None, str | None]:
    """(main text by resiliparse -- its own Lexbor parse --, the publication date by htmldate as
    :func:`extract_main` finds it), ``None`` when not found; 2.6 ms on a median real page, 1.5 of
    them the date (docs/scale.md)."""
    from resiliparse.extract.html2text import extract_plain_text  # lazy: heavy (resiliparse)

    return extract_plain_text(text, **RESILIPARSE_OPTIONS).strip() or None, find_date_only(text, url)

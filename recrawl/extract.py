"""Main text and publication date of an HTML page: trafilatura and htmldate, tuned for
throughput (the measurements are below). Used by recrawl/parsing.py."""

from __future__ import annotations

import logging
from typing import Any

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
    from htmldate import find_date  # lazy: heavy (htmldate)
    from trafilatura import bare_extraction  # lazy: heavy (trafilatura)
    from trafilatura.utils import load_html  # lazy: heavy (trafilatura)

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

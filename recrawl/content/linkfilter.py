"""Outlink filters: which normalized URLs are worth adding to the crawldb at all.

The counterpart of Nutch's ``urlfilter-regex`` / ``urlfilter-suffix`` defaults: drop what the
parser cannot use (images, media, archives, office documents, style sheets, scripts, fonts) and
what looks like a crawler trap (endless calendars and session-looping paths show up as very long
URLs, many query parameters, deep paths and path segments that repeat, e.g. ``/a/b/a/b/a/b/a``;
Nutch's default rule for the latter is ``-.*(/[^/]+)/[^/]+\\1/[^/]+\\1/``).

Filters run on URLs that :func:`recrawl.content.urlnorm.normalize_url` already normalized.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

__all__ = ["DEFAULT_FILTER_RULES", "LinkFilterRules", "REASONS", "filter_reason", "keep"]

# images, audio/video, archives and binaries, office documents, style/script, fonts
_BLOCKED_EXTENSIONS: tuple[str, ...] = (
    # images
    "jpg", "jpeg", "jpe", "png", "gif", "bmp", "tif", "tiff", "ico", "svg", "svgz", "webp",
    "avif", "heic", "heif", "psd", "eps", "wmf", "emf", "raw", "cr2", "nef",
    # audio / video
    "mp3", "mp4", "m4a", "m4v", "aac", "ogg", "oga", "ogv", "opus", "wav", "flac", "mid", "midi",
    "avi", "mov", "qt", "wmv", "wma", "flv", "f4v", "mkv", "webm", "mpg", "mpeg", "3gp", "swf",
    "m3u", "m3u8", "ts",
    # archives, packages, binaries, disk images
    "zip", "gz", "tgz", "tar", "bz2", "tbz", "xz", "txz", "7z", "rar", "z", "lz", "lzma", "zst",
    "cab", "sit", "sitx", "iso", "img", "dmg", "jar", "war", "apk", "deb", "rpm", "msi", "exe",
    "bin", "dll", "so", "dat", "torrent",
    # documents (the parse step only understands HTML)
    "pdf", "ps", "doc", "docx", "dot", "xls", "xlsx", "xlsm", "ppt", "pptx", "pps", "ppsx",
    "odt", "ods", "odp", "odg", "rtf", "epub", "mobi", "csv", "tsv",
    # style, script, source maps, fonts
    "css", "js", "mjs", "map", "woff", "woff2", "ttf", "otf", "eot",
)  # fmt: skip


@dataclass(frozen=True)
class LinkFilterRules:
    """Limits of the outlink filter; each check is off when its limit is 0 / its tuple empty."""

    max_url_length: int = 512
    max_query_params: int = 8
    max_path_depth: int = 16
    max_repeated_segment: int = 3  # a path segment occurring more often than this is a trap sign
    blocked_extensions: tuple[str, ...] = _BLOCKED_EXTENSIONS
    allowed_schemes: tuple[str, ...] = ("http", "https")


DEFAULT_FILTER_RULES = LinkFilterRules()

#: every reason code :func:`filter_reason` can return
REASONS = (
    "invalid",
    "scheme",
    "too_long",
    "extension",
    "too_many_params",
    "too_deep",
    "repeated_segment",
)


@lru_cache(maxsize=32)
def _extension_set(extensions: tuple[str, ...]) -> frozenset[str]:
    return frozenset(e.lower().lstrip(".") for e in extensions)


def filter_reason(url: str, rules: LinkFilterRules = DEFAULT_FILTER_RULES) -> str | None:
    """Why ``url`` should not be crawled, or ``None`` to keep it.

    Args:
        url: a normalized absolute URL.
        rules: the limits to apply.

    Returns:
        ``None``, or one of :data:`REASONS`: ``"scheme"``, ``"too_long"``, ``"extension"``,
        ``"too_many_params"``, ``"too_deep"``, ``"repeated_segment"`` (``"invalid"`` when the
        string does not parse as a URL at all).  Checks run cheapest first.
    """
    if rules.max_url_length and len(url) > rules.max_url_length:
        return "too_long"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "invalid"
    if parts.scheme.lower() not in rules.allowed_schemes:
        return "scheme"
    path = parts.path
    if rules.blocked_extensions:
        last = path.rpartition("/")[2].partition(";")[0]
        dot = last.rfind(".")
        if dot >= 0 and last[dot + 1 :].lower() in _extension_set(rules.blocked_extensions):
            return "extension"
    if rules.max_query_params and parts.query:
        n = sum(1 for p in parts.query.split("&") if p)
        if n > rules.max_query_params:
            return "too_many_params"
    if rules.max_path_depth or rules.max_repeated_segment:
        segs = [s for s in path.split("/") if s]
        if rules.max_path_depth and len(segs) > rules.max_path_depth:
            return "too_deep"
        if rules.max_repeated_segment and len(segs) > rules.max_repeated_segment:
            if Counter(segs).most_common(1)[0][1] > rules.max_repeated_segment:
                return "repeated_segment"
    return None


def keep(url: str, rules: LinkFilterRules = DEFAULT_FILTER_RULES) -> bool:
    """``True`` when :func:`filter_reason` finds nothing against ``url``."""
    return filter_reason(url, rules) is None

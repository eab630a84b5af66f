"""The `captures` table's per-URL and per-payload fields, as Common Crawl's columnar URL index
names them (url_surtkey, url_host_registered_domain, content_mime_detected, ...).

Pure functions: the parse step calls :func:`sniff_mime` on each payload it reads, and
``spark_jobs.captures`` calls :func:`url_fields` once per capture.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from recrawl.content.urlnorm import registered_domain

_SIGNATURES = (  # (prefix, type), the WHATWG MIME Sniffing standard's unambiguous ones
    (b"%PDF-", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"RIFF", "image/webp"),  # refined below
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b\x08", "application/gzip"),
)
_HTML_TAGS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<script", b"<iframe",
              b"<h1", b"<div", b"<font", b"<table", b"<a ", b"<style", b"<title", b"<b ",
              b"<br", b"<p ", b"<p>", b"<!--")


def sniff_mime(body: bytes) -> str | None:
    """The content type the payload's bytes show (``None`` for an empty payload).

    After the WHATWG MIME Sniffing rules for the types a crawl meets: binary signatures,
    HTML by its first tag, XML (RSS / Atom / sitemaps by their root), JSON, else text/plain
    when no control bytes occur, application/octet-stream otherwise.
    """
    if not body:
        return None
    head = body[:1024]
    for prefix, kind in _SIGNATURES:
        if head.startswith(prefix):
            if kind == "image/webp" and head[8:12] != b"WEBP":
                break
            return kind
    text = head.lstrip(b"\xef\xbb\xbf").lstrip().lower()
    if text.startswith(b"<?xml"):
        for root, kind in ((b"<rss", "application/rss+xml"), (b"<feed", "application/atom+xml"),
                           (b"<html", "application/xhtml+xml")):
            if root in text:
                return kind
        return "application/xml"
    if any(text.startswith(t) for t in _HTML_TAGS):
        return "text/html"
    if text[:1] in (b"{", b"["):
        try:
            json.loads(body)
            return "application/json"
        except ValueError:
            pass
    if any(b < 9 or 13 < b < 32 and b != 27 for b in head):
        return "application/octet-stream"
    return "text/plain"


def url_fields(url: str) -> dict[str, str | int | None]:
    """SURT key, host, registered domain, TLD, scheme, port, path and query of ``url``."""
    from surt import surt  # lazy: heavy (surt loads tldextract)

    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    try:
        key = surt(url)
    except Exception:  # a URL surt cannot read still gets its other fields
        key = None
    return {
        "url_surtkey": key,
        "url_host_name": host or None,
        "url_host_registered_domain": registered_domain(host) if host else None,
        "url_host_tld": host.rsplit(".", 1)[-1] if "." in host else (host or None),
        "url_protocol": parts.scheme or None,
        "url_port": port,
        "url_path": parts.path or "/",
        "url_query": parts.query or None,
    }

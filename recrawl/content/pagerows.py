"""One captured response -> its `pages` row with nested outlinks: the single function both parse
paths call (docs/architecture.md, "Parsing inside the fetch").

The parse step reads a response record back from the round's WARC by offset
(`spark_jobs.parse`); the fetch task, with `parse.inline`, hands over the gzip member it has
just appended to that WARC (`recrawl.content.parsepool`). Either way :func:`parse_record` reads the
record with warcio from the same bytes, decodes the payload (chunked, Content-Encoding) up to
the decompressed-size cap and parses it with the same options, so the two paths give equal rows
by construction. Nothing here knows about Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

from recrawl.content import extract
from recrawl.content.captures import sniff_mime
from recrawl.content.linkfilter import filter_reason
from recrawl.content.linkmemo import link_host_key
from recrawl.content.parsing import MAX_EXTRACT_MS, parse_html
from recrawl.content.sitemaps import is_sitemap, sitemap_locs
from recrawl.content.urlnorm import host_key_or_none, try_normalize

__all__ = ["UnchangedPayload", "page_row", "parse_record", "record_payload"]


class UnchangedPayload(Exception):
    """The record is an identical-payload revisit: the page did not change."""


def record_payload(fh: IO[bytes], max_bytes: int) -> tuple[bytes, str | None, dict]:
    """The HTTP payload (decoded, capped at `max_bytes`) and content type of the first WARC
    record readable from `fh`; :class:`UnchangedPayload` for a revisit."""
    from warcio.archiveiterator import ArchiveIterator  # lazy: heavy (warcio)

    for record in ArchiveIterator(fh):
        if record.rec_type == "revisit":
            # identical payload to the previous capture: nothing new to parse
            raise UnchangedPayload(record.rec_headers.get_header("WARC-Refers-To-Target-URI"))
        headers = record.http_headers
        ctype = headers.get_header("Content-Type") if headers else None
        stream = record.content_stream()
        body = stream.read(max_bytes)
        return body, ctype, {"truncated": bool(stream.read(1))}
    raise ValueError("no WARC record")


def parse_record(meta: dict[str, Any], open_record: Callable[[], IO[bytes]],
                 opts: dict[str, Any]) -> dict[str, Any] | None:
    """The `pages` row (with `links`) of the fetched response `meta` names (a `fetches` row:
    round_id, url, final_url, content_type, warc_file, warc_offset, payload_digest), its
    record read from `open_record()`; None for an identical-payload revisit. An unreadable
    record becomes a row with `parse_error`, never an exception."""
    try:
        with open_record() as fh:
            body, ctype, _ = record_payload(fh, opts["max_bytes"])
    except UnchangedPayload:
        return None
    except Exception as exc:  # a corrupt or truncated WARC is recorded, not fatal
        out = _base(meta)
        out["parse_error"] = f"warc: {type(exc).__name__}: {exc}"[:500]
        return out
    return page_row(meta, body, ctype, opts)


def _base(meta: dict[str, Any]) -> dict[str, Any]:
    # src_host (the links' source host, not a `pages` column) comes with the page, so that no
    # Spark job calls Python per link for it (spark_jobs.parse).
    return {
        "round_id": meta["round_id"], "url": meta["url"], "warc_file": meta["warc_file"],
        "warc_offset": meta["warc_offset"], "payload_digest": meta["payload_digest"],
        "links": [], "text_len": 0, "outlink_count": 0, "src_host": host_key_or_none(meta["url"]),
    }


def _link(url: str, anchor: str, kind: str) -> dict[str, Any]:
    """A `links` row's part a page holds: target, anchor, kind and the target's host key."""
    return {"dst_url": url, "anchor": anchor, "kind": kind, "dst_host": link_host_key(url)}


def page_row(meta: dict[str, Any], body: bytes, ctype: str | None,
             opts: dict[str, Any]) -> dict[str, Any]:
    """bytes + headers + url -> the `pages` row, outlinks nested under `links`."""
    from recrawl.content.fingerprint import text_fingerprints  # lazy: heavy (simhash, numpy)

    out = _base(meta)
    out["mime_detected"] = sniff_mime(body)
    base = meta["final_url"] or meta["url"]
    ctype = ctype or meta["content_type"]
    if is_sitemap(body, ctype):
        links = []
        for loc in sitemap_locs(body, opts["max_sitemap_urls"]):
            url, _ = try_normalize(loc, rules=opts["norm_rules"])
            if url and filter_reason(url, opts["filter_rules"]) is None:
                links.append(_link(url, "", "sitemap"))
        out.update(title="sitemap", text="", links=links, outlink_count=len(links))
        return out
    page = parse_html(
        body, ctype, base,
        extract_text=opts["extract_text"], extractor=opts.get("extractor", extract.DEFAULT),
        max_extract_ms=opts.get("max_extract_ms", MAX_EXTRACT_MS), norm_rules=opts["norm_rules"],
        filter_rules=opts["filter_rules"], max_outlinks=opts["max_outlinks"],
    )
    text = page.text or ""
    content_hash, simhash = text_fingerprints(text)
    out.update(
        title=page.title, lang=page.lang, text=text, text_len=len(text), date=page.date,
        canonical_url=page.canonical_url, parse_error=page.error, charset=page.encoding,
        content_hash=content_hash, simhash=simhash, text_extractor=page.text_extractor,
    )
    links = [] if page.meta_robots_nofollow else page.outlinks
    out["links"] = [_link(o.url, o.anchor, o.kind) for o in links]
    out["outlink_count"] = len(out["links"])
    return out

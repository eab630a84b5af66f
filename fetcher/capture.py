"""Which WARC records one exchange becomes, and the `fetches` values that point at them.

The choices (documented in ``fetcher.warc``): a 304 is a ``revisit`` with the
``server-not-modified`` profile; a complete 2xx body whose digest equals the item's previous
payload digest is a ``revisit`` with the ``identical-payload-digest`` profile (the parse step
finds no body there and keeps the previous parse); a decompression bomb keeps only its request
and metadata; everything else is a ``response``. Each group ends with the ``request`` and a
``metadata`` record (timing, redirect chain, why a capture is cut short).
"""

from __future__ import annotations

from typing import Any

from warcio.recordloader import ArcWarcRecord

from fetcher import models as m
from fetcher import warc
from fetcher.classify import sha1_digest
from fetcher.http import Exchange
from fetcher.models import FetchItem


def exchange_records(ex: Exchange, status: str, *, chain: list[str],
                     item: FetchItem | None = None, error: str | None = None
                     ) -> tuple[list[ArcWarcRecord], dict[str, Any]]:
    """Records for ``ex`` (the first is the one a row points at, unless it is a request) and
    row values (``payload_digest``, ``content_length``) describing them."""
    rid = warc.new_record_id()
    fields = _metadata_fields(ex, status, chain, error)
    if status == m.TOO_LARGE:
        # Nothing in a bomb is worth parsing, and WARC readers that decode content would
        # inflate it: request and metadata record that it was fetched.
        fields.append(("content-encoding", ex.header("Content-Encoding") or ""))
        return [
            warc.request_record(ex.url, ex.started_at, ex.ip, ex.request, record_id=rid),
            warc.metadata_record(ex.url, ex.started_at, fields, concurrent_to=rid),
        ], {}
    digest = sha1_digest(ex.body)
    values: dict[str, Any] = {"payload_digest": digest, "content_length": len(ex.body)}
    if ex.status == 304:
        prev = item.prev_payload_digest if item else None
        main = warc.revisit_record(
            ex.url, ex.started_at, ex.ip, ex.head, record_id=rid,
            profile=warc.PROFILE_NOT_MODIFIED, payload_digest=prev,
            refers_to_uri=item.url if item else None,
            refers_to_date=item.prev_fetch_time if item else None)
        values = {"payload_digest": prev, "content_length": 0}
    elif (item is not None and status == m.FETCHED and not ex.truncated
          and item.prev_payload_digest == digest):
        main = warc.revisit_record(
            ex.url, ex.started_at, ex.ip, ex.head, record_id=rid,
            profile=warc.PROFILE_IDENTICAL, payload_digest=digest,
            refers_to_uri=item.url, refers_to_date=item.prev_fetch_time)
    else:
        main = warc.response_record(ex.url, ex.started_at, ex.ip, ex.head, ex.body,
                                    record_id=rid, truncated=ex.truncated,
                                    payload_digest=digest)
    return [
        main,
        warc.request_record(ex.url, ex.started_at, ex.ip, ex.request, concurrent_to=rid),
        warc.metadata_record(ex.url, ex.started_at, fields, concurrent_to=rid),
    ], values


def _metadata_fields(ex: Exchange, status: str, chain: list[str],
                     error: str | None) -> list[tuple[str, str]]:
    fields = [("fetch-status", status), ("fetchTimeMs", str(ex.duration_ms)), ("ip", ex.ip)]
    if chain:
        fields.append(("via", chain[-1]))  # Heritrix's name for the referring hop
        fields.extend(("redirect-chain", u) for u in chain)
    if ex.truncated:
        fields.append(("truncated", ex.truncated))
    if error or ex.error:
        fields.append(("error", error or ex.error or ""))
    if ex.decode_error:
        fields.append(("decode-error", ex.decode_error))
    return fields

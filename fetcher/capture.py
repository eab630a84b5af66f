"""Which WARC records one exchange becomes, and the `fetches` values that point at them.

The choices (documented in ``fetcher.warc``): a 304 is a ``revisit`` with the
``server-not-modified`` profile, an empty block and the 304 head in its metadata record; a
complete 2xx body whose digest equals the item's previous payload digest is a ``revisit`` with
the ``identical-payload-digest`` profile (the parse step finds no body there and keeps the
previous parse); a decompression bomb keeps only its request and metadata; everything else is
a ``response``. Each group ends with the ``request`` and a ``metadata`` record (timing,
redirect chain, why a capture is cut short).
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
    row values (``payload_digest``, ``content_length``, ``warc_record_id``, ``warc_type``,
    ``warc_target_uri``, ``warc_date``) describing them."""
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
    # The record holding the previous payload; without its id and date (a crawldb row from
    # before they were kept) a revisit could not be resolved, so an identical payload is
    # stored again in full and a 304 revisit names only the URI.
    original = _original(item)
    if ex.status == 304:
        prev = item.prev_payload_digest if item else None
        # The block is left empty (WARC 1.1 6.7.3 lets it hold the 304 head or nothing):
        # replay tools take an empty revisit's HTTP head from the original, so the capture
        # replays as the page, while a stored 304 head would replay as an empty 304 (pywb
        # serves a revisit's own 3xx head as is). The 304 head goes to the metadata record.
        fields.extend(("http-response-line", line.decode("latin-1"))
                      for line in ex.head.split(b"\r\n") if line.strip())
        main = warc.revisit_record(
            ex.url, ex.started_at, ex.ip, b"", record_id=rid,
            profile=warc.PROFILE_NOT_MODIFIED, payload_digest=prev, **original)
        values = {"payload_digest": prev, "content_length": 0}
    elif (item is not None and status == m.FETCHED and not ex.truncated
          and item.prev_payload_digest == digest and original.get("refers_to")):
        main = warc.revisit_record(
            ex.url, ex.started_at, ex.ip, ex.head, record_id=rid,
            profile=warc.PROFILE_IDENTICAL, payload_digest=digest, **original)
    else:
        main = warc.response_record(ex.url, ex.started_at, ex.ip, ex.head, ex.body,
                                    record_id=rid, truncated=ex.truncated,
                                    payload_digest=digest)
    values.update(warc_record_id=rid, warc_type=main.rec_type, warc_target_uri=ex.url,
                  warc_date=main.rec_headers.get_header("WARC-Date"))
    return [
        main,
        warc.request_record(ex.url, ex.started_at, ex.ip, ex.request, concurrent_to=rid),
        warc.metadata_record(ex.url, ex.started_at, fields, concurrent_to=rid),
    ], values


def _original(item: FetchItem | None) -> dict[str, str | None]:
    """Refers-To arguments naming the record that holds the item's previous payload."""
    if item is None:
        return {"refers_to": None, "refers_to_uri": None, "refers_to_date": None}
    if not (item.prev_record_id and item.prev_warc_date):
        return {"refers_to": None, "refers_to_uri": item.prev_target_uri or item.url,
                "refers_to_date": None}
    return {"refers_to": item.prev_record_id,
            "refers_to_uri": item.prev_target_uri or item.url,
            "refers_to_date": item.prev_warc_date}


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

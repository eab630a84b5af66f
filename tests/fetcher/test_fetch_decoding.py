"""The decompression-bomb guard and the small response classifiers."""

from __future__ import annotations

import gzip
import zlib
from email.utils import formatdate

import brotli
import pytest

from fetcher import models as m
from fetcher.classify import classify, retry_after_seconds, sha1_digest, type_allowed
from fetcher.decoding import BodyDecoder, DecodeLimitExceeded

MIB = 1 << 20


def feed_all(dec: BodyDecoder, data: bytes, step: int = 8192) -> int:
    fed = 0
    for i in range(0, len(data), step):
        dec.feed(data[i:i + step])
        fed += step
    return fed


@pytest.mark.parametrize("encoding,compress", [
    ("gzip", gzip.compress),
    ("x-gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("br", brotli.compress),
])
def test_bombs_stop_at_the_cap_after_little_input(encoding, compress):
    bomb = compress(bytes(16 * MIB))
    dec = BodyDecoder(encoding, limit=MIB)
    with pytest.raises(DecodeLimitExceeded):
        feed_all(dec, bomb)
    assert MIB < dec.decoded <= MIB + 128 * 1024  # never more than one step past the cap


def test_raw_deflate_is_accepted_and_stacked_codings_are_undone_in_reverse():
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = c.compress(b"raw deflate body") + c.flush()
    dec = BodyDecoder("deflate", limit=100, keep=100)
    dec.feed(raw)
    assert bytes(dec.kept) == b"raw deflate body"
    dec = BodyDecoder("gzip, br", limit=10**6, keep=5)
    feed_all(dec, brotli.compress(gzip.compress(b"x" * 100_000)), step=7)
    assert dec.decoded == 100_000 and bytes(dec.kept) == b"xxxxx"


def test_identity_counts_bytes_and_corrupt_data_is_not_a_bomb():
    dec = BodyDecoder(None, limit=10)
    dec.feed(b"12345")
    assert dec.decoded == 5
    with pytest.raises(DecodeLimitExceeded):
        dec.feed(b"123456")
    dec = BodyDecoder("gzip", limit=10)
    dec.feed(b"this is not gzip")
    assert dec.error and dec.decoded == 0


@pytest.mark.parametrize("status,kind,expected,failure", [
    (200, None, m.FETCHED, False),
    (304, None, m.NOT_MODIFIED, False),
    (404, None, m.GONE, False),
    (410, None, m.GONE, False),
    (403, None, m.HTTP_ERROR, False),
    (500, None, m.HTTP_ERROR, True),
    (429, None, m.RETRY_LATER, False),
    (503, None, m.RETRY_LATER, False),
    (301, None, m.REDIRECT, False),
    (None, "timeout", m.TIMEOUT, True),
    (200, "timeout", m.TIMEOUT, True),
    (None, "connect", m.CONNECT_ERROR, True),
    (None, "protocol", m.HTTP_ERROR, True),
    (200, "too_large", m.TOO_LARGE, False),
])
def test_classify(status, kind, expected, failure):
    v = classify(status, kind, "e")
    assert v.fetch_status == expected and v.host_failure is failure
    assert v.fetch_status in m.FETCH_STATUSES


def test_retry_after_seconds_and_http_date_capped():
    now = 1_700_000_000.0
    assert retry_after_seconds("2", now, 600) == 2
    assert retry_after_seconds("99999", now, 600) == 600
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now, 600) == pytest.approx(30)
    assert retry_after_seconds(formatdate(now - 30, usegmt=True), now, 600) == 0
    assert retry_after_seconds("soon", now, 600) is None
    assert retry_after_seconds(None, now, 600) is None


def test_content_type_filter_and_digest_format():
    allowed = ("text/html", "application/xhtml+xml")
    assert type_allowed("Text/HTML; charset=UTF-8", allowed)
    assert type_allowed(None, allowed)  # no type: the parser sniffs
    assert not type_allowed("application/pdf", allowed)
    assert sha1_digest(b"") == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"

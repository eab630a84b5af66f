"""Incremental Content-Encoding decoding with an output cap (the gzip / deflate / br bomb guard).

The WARC keeps the body exactly as it came over the wire (still content-encoded); this module
only *measures* what it decodes to, chunk by chunk, so that a 10 KB body that inflates to
10 GB is stopped after ``limit`` decoded bytes with at most one small buffer in memory.
zlib's ``max_length`` and brotli's ``output_buffer_limit`` bound every step's output.
Stacked encodings (``Content-Encoding: gzip, br``) are undone in reverse order, each stage
bounded. Optionally the first ``keep`` decoded bytes are retained (for robots.txt).
"""

from __future__ import annotations

import zlib

import brotli

_STEP = 64 * 1024  # most bytes any decoder stage produces per call


class DecodeLimitExceeded(Exception):
    """The body decodes to more than the allowed number of bytes."""


class _Zlib:
    def __init__(self, wbits: int, fallback_raw: bool = False) -> None:
        self._d = zlib.decompressobj(wbits)
        self._fallback_raw = fallback_raw
        self._started = False

    def step(self, data: bytes) -> bytes:
        try:
            out = self._d.decompress(data, _STEP)
        except zlib.error:
            if self._fallback_raw and not self._started:
                # "deflate" is meant to be zlib-wrapped (RFC 9110 8.4.1.2); some servers send
                # raw deflate. Decide on the first bytes, as browsers do.
                self._d = zlib.decompressobj(-zlib.MAX_WBITS)
                self._started = True
                return self._d.decompress(data, _STEP)
            raise
        self._started = True
        return out

    def pending(self) -> bytes:
        return self._d.unconsumed_tail

    def more(self) -> bytes:
        return self._d.decompress(self._d.unconsumed_tail, _STEP)


class _Brotli:
    def __init__(self) -> None:
        self._d = brotli.Decompressor()
        self._need_drain = False

    def step(self, data: bytes) -> bytes:
        out = self._d.process(data, output_buffer_limit=_STEP)
        self._need_drain = not self._d.can_accept_more_data()
        return out

    def pending(self) -> bytes:
        return b"x" if self._need_drain else b""

    def more(self) -> bytes:
        out = self._d.process(b"", output_buffer_limit=_STEP)
        self._need_drain = not self._d.can_accept_more_data()
        return out


def _stage(coding: str) -> _Zlib | _Brotli | None:
    coding = coding.strip().lower()
    if coding in ("gzip", "x-gzip"):
        return _Zlib(zlib.MAX_WBITS | 32)  # 32: gzip or zlib header, auto-detected
    if coding == "deflate":
        return _Zlib(zlib.MAX_WBITS, fallback_raw=True)
    if coding == "br":
        return _Brotli()
    return None  # identity, or an unknown coding we cannot decode (counted as is)


class BodyDecoder:
    """Feed raw body chunks; raises :class:`DecodeLimitExceeded` past ``limit`` decoded bytes."""

    def __init__(self, content_encoding: str | None, limit: int, keep: int = 0) -> None:
        codings = [c for c in (content_encoding or "").split(",") if c.strip()]
        stages = [_stage(c) for c in reversed(codings)]
        self._stages = [s for s in stages if s is not None]
        self.limit = limit
        self.keep = keep
        self.decoded = 0
        self.kept = bytearray()
        self.error: str | None = None

    def feed(self, data: bytes) -> None:
        """Decode ``data`` (a raw body chunk) and count, or keep, what it decodes to."""
        if self.error is not None or not data:
            return
        try:
            self._run(0, data)
        except DecodeLimitExceeded:
            raise
        except (zlib.error, brotli.error, ValueError) as exc:
            # A corrupt encoding is not a bomb: the capture stays; the parser will fail on it.
            self.error = f"decode: {exc}"

    def _run(self, i: int, data: bytes) -> None:
        if i == len(self._stages):
            self._emit(data)
            return
        stage = self._stages[i]
        out = stage.step(data)
        while True:
            if out:
                self._run(i + 1, out)
            if not stage.pending():
                return
            out = stage.more()
            if not out:
                return

    def _emit(self, data: bytes) -> None:
        self.decoded += len(data)
        if len(self.kept) < self.keep:
            self.kept += data[: self.keep - len(self.kept)]
        if self.decoded > self.limit:
            raise DecodeLimitExceeded(f"decoded body exceeds {self.limit} bytes")

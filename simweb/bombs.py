"""Decompression bombs and huge bodies, built cheaply and cached per process.

The gzip bomb inflates to 1 GiB but costs ~1 MiB on the wire. Compressing 1 GiB of zeros would
take seconds, so it is assembled instead: a raw-deflate segment for 1 MiB of zeros ending in a
full flush (byte-aligned, dictionary reset) is a self-contained piece, and 1024 copies of it
followed by an empty final block form one valid deflate stream. The gzip header and trailer
(CRC-32 and size) are written by hand. Brotli at quality 1 is fast enough to stream for real.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Iterator

import brotli

MIB = 1 << 20
BOMB_SIZE = 1 << 30  # inflated size of both bombs
_ZEROS = bytes(MIB)
_lock = threading.Lock()
_cache: dict[str, bytes] = {}


def gzip_bomb() -> bytes:
    """A single-member gzip stream of BOMB_SIZE zero bytes (~1 MiB compressed)."""
    with _lock:
        if "gzip" not in _cache:
            c = zlib.compressobj(9, zlib.DEFLATED, -15, 9)
            segment = c.compress(_ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
            final = c.flush(zlib.Z_FINISH)
            crc = 0
            for _ in range(BOMB_SIZE // MIB):
                crc = zlib.crc32(_ZEROS, crc)
            header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # no name, max compression
            trailer = struct.pack("<II", crc, BOMB_SIZE & 0xFFFFFFFF)
            _cache["gzip"] = header + segment * (BOMB_SIZE // MIB) + final + trailer
        return _cache["gzip"]


def brotli_bomb() -> bytes:
    """A brotli stream of BOMB_SIZE zero bytes (a few hundred KiB compressed)."""
    with _lock:
        if "br" not in _cache:
            c = brotli.Compressor(quality=1)
            parts = [c.process(_ZEROS) for _ in range(BOMB_SIZE // MIB)]
            _cache["br"] = b"".join(parts) + c.finish()
        return _cache["br"]


HUGE_SIZE = 50 * MIB
_HUGE_CHUNK = b"<p>" + b"All work and no play makes a crawler a dull crawler. " * 1200 + b"</p>\n"


def huge_html() -> Iterator[bytes]:
    """HUGE_SIZE bytes of HTML in 64 KiB-ish chunks, generated as sent (never held whole)."""
    head = b"<!DOCTYPE html><html><head><title>Huge</title></head><body>\n"
    yield head
    left = HUGE_SIZE - len(head)
    while left > 0:
        chunk = _HUGE_CHUNK[:left]
        left -= len(chunk)
        yield chunk

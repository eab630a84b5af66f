"""Which charset an HTML body is in, and its text: the HTML Standard's precedence (BOM, the
Content-Type header, <meta charset> / http-equiv in the first bytes, an XML declaration), its
label table, and charset-normalizer as the detector for undeclared bodies.

Used by recrawl/content/parsing.py (`parse_html` decodes every body with `decode_html`).
"""

from __future__ import annotations

import codecs
import re

from charset_normalizer import from_bytes

META_SCAN_BYTES = 4096  # where <meta charset> is looked for (the HTML Standard says 1024)
DETECT_BYTES = 64 * 1024  # how much of an undeclared body the charset detector reads

# --- charset ------------------------------------------------------------------------------

# WHATWG Encoding Standard labels -> the Python codec that decodes the same bytes.  Legacy labels
# map where browsers map them: ISO-8859-1 and ASCII are windows-1252, GB2312/GBK are GB18030,
# Shift_JIS is windows-31J (cp932), EUC-KR is windows-949.  Labels not listed are ignored (so a
# page cannot select UTF-7, base64 or other codecs Python knows but browsers do not).
_WHATWG_LABELS: dict[str, tuple[str, ...]] = {
    "utf-8": ("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8",
              "x-unicode20utf8"),
    "cp1252": ("ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819",
               "iso-8859-1", "iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1",
               "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252", "x-cp1252",
               "x-user-defined"),
    "gb18030": ("chinese", "csgb2312", "csiso58gb231280", "gb2312", "gb_2312", "gb_2312-80",
                "gbk", "iso-ir-58", "x-gbk", "gb18030"),
    "big5hkscs": ("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    "cp932": ("csshiftjis", "ms932", "ms_kanji", "shift-jis", "shift_jis", "sjis",
              "windows-31j", "x-sjis"),
    "euc_jp": ("cseucpkdfmtjapanese", "euc-jp", "x-euc-jp"),
    "iso2022_jp": ("csiso2022jp", "iso-2022-jp"),
    "cp949": ("cseuckr", "csksc56011987", "euc-kr", "iso-ir-149", "korean", "ks_c_5601-1987",
              "ks_c_5601-1989", "ksc5601", "ksc_5601", "windows-949"),
    "utf-16-le": ("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff", "utf-16",
                  "utf-16le"),
    "utf-16-be": ("unicodefffe", "utf-16be"),
    "cp866": ("866", "cp866", "csibm866", "ibm866"),
    "iso8859_2": ("csisolatin2", "iso-8859-2", "iso-ir-101", "iso8859-2", "iso88592",
                  "iso_8859-2", "iso_8859-2:1987", "l2", "latin2"),
    "iso8859_3": ("csisolatin3", "iso-8859-3", "iso-ir-109", "iso8859-3", "iso88593",
                  "iso_8859-3", "iso_8859-3:1988", "l3", "latin3"),
    "iso8859_4": ("csisolatin4", "iso-8859-4", "iso-ir-110", "iso8859-4", "iso88594",
                  "iso_8859-4", "iso_8859-4:1988", "l4", "latin4"),
    "iso8859_5": ("csisolatincyrillic", "cyrillic", "iso-8859-5", "iso-ir-144", "iso8859-5",
                  "iso88595", "iso_8859-5", "iso_8859-5:1988"),
    "iso8859_6": ("arabic", "asmo-708", "csiso88596e", "csiso88596i", "csisolatinarabic",
                  "ecma-114", "iso-8859-6", "iso-8859-6-e", "iso-8859-6-i", "iso-ir-127",
                  "iso8859-6", "iso88596", "iso_8859-6", "iso_8859-6:1987"),
    "iso8859_7": ("csisolatingreek", "ecma-118", "elot_928", "greek", "greek8", "iso-8859-7",
                  "iso-ir-126", "iso8859-7", "iso88597", "iso_8859-7", "iso_8859-7:1987",
                  "sun_eu_greek"),
    "iso8859_8": ("csiso88598e", "csisolatinhebrew", "hebrew", "iso-8859-8", "iso-8859-8-e",
                  "iso-ir-138", "iso8859-8", "iso88598", "iso_8859-8", "iso_8859-8:1988",
                  "visual", "csiso88598i", "iso-8859-8-i", "logical"),
    "iso8859_10": ("csisolatin6", "iso-8859-10", "iso-ir-157", "iso8859-10", "iso885910",
                   "l6", "latin6"),
    "iso8859_13": ("iso-8859-13", "iso8859-13", "iso885913"),
    "iso8859_14": ("iso-8859-14", "iso8859-14", "iso885914"),
    "iso8859_15": ("csisolatin9", "iso-8859-15", "iso8859-15", "iso885915", "iso_8859-15",
                   "l9"),
    "iso8859_16": ("iso-8859-16",),
    "koi8_r": ("cskoi8r", "koi", "koi8", "koi8-r", "koi8_r"),
    "koi8_u": ("koi8-ru", "koi8-u"),
    "mac_roman": ("csmacintosh", "mac", "macintosh", "x-mac-roman"),
    "mac_cyrillic": ("x-mac-cyrillic", "x-mac-ukrainian"),
    "cp874": ("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620", "windows-874"),
    "cp1250": ("cp1250", "windows-1250", "x-cp1250"),
    "cp1251": ("cp1251", "windows-1251", "x-cp1251"),
    "cp1253": ("cp1253", "windows-1253", "x-cp1253"),
    "cp1254": ("cp1254", "csisolatin5", "iso-8859-9", "iso-ir-148", "iso8859-9", "iso88599",
               "iso_8859-9", "iso_8859-9:1989", "l5", "latin5", "windows-1254", "x-cp1254"),
    "cp1255": ("cp1255", "windows-1255", "x-cp1255"),
    "cp1256": ("cp1256", "windows-1256", "x-cp1256"),
    "cp1257": ("cp1257", "windows-1257", "x-cp1257"),
    "cp1258": ("cp1258", "windows-1258", "x-cp1258"),
}  # fmt: skip
_LABEL_TO_CODEC = {label: codec for codec, labels in _WHATWG_LABELS.items() for label in labels}
# charset-normalizer answers with Python codec names; map the ones browsers would read otherwise
_DETECTED_TO_CODEC = {
    "ascii": "cp1252",
    "latin_1": "cp1252",
    "iso8859_1": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "euc_jis_2004": "euc_jp",
    "euc_jisx0213": "euc_jp",
    "euc_kr": "cp949",
    "big5": "big5hkscs",
    "utf_8": "utf-8",
    "utf_16": "utf-16-le",
}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_HEADER_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([^\s"';,]+)""", re.IGNORECASE)
# <meta charset=x> and <meta http-equiv=content-type content="...; charset=x"> alike
_META_CHARSET = re.compile(
    rb"""<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([a-zA-Z0-9_.:\-]+)""", re.IGNORECASE
)
_XML_DECL = re.compile(rb"""^\s*<\?xml[^>]*\bencoding\s*=\s*["']([a-zA-Z0-9_.:\-]+)""")
_ASCII_BYTES = bytes(range(128))
_MAX_ERROR_RATIO = 0.01  # declared charset accepted with at most 1% bad non-ASCII bytes


def _c1_passthrough(exc: UnicodeDecodeError) -> tuple[str, int]:
    """Decode the five bytes Python's cp1252 leaves undefined as C1 controls, as WHATWG does."""
    bad = exc.object[exc.start : exc.end]
    return "".join(chr(b) for b in bad), exc.end


codecs.register_error("recrawl.c1", _c1_passthrough)


def encoding_for_label(label: str | None) -> str | None:
    """The Python codec for a WHATWG charset label (``"GBK"`` -> ``"gb18030"``), or ``None``."""
    if not label:
        return None
    return _LABEL_TO_CODEC.get(label.strip().strip("\"'").lower())


def _decode(body: bytes, codec: str) -> str:
    if codec == "cp1252":
        return body.decode("cp1252", "recrawl.c1")
    if codec == "utf-8" and body.startswith(codecs.BOM_UTF8):
        return body[3:].decode("utf-8", "replace")
    if codec.startswith("utf-16") and body[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        body = body[2:]
    return body.decode(codec, "replace")


def _error_ratio(body: bytes, codec: str) -> float:
    """Share of non-ASCII bytes ``codec`` cannot decode (0.0 when it decodes cleanly)."""
    try:
        body.decode(codec, "recrawl.c1" if codec == "cp1252" else "strict")
        return 0.0
    except UnicodeDecodeError:
        pass
    except LookupError:
        return 1.0
    non_ascii = len(body.translate(None, _ASCII_BYTES)) or 1
    bad = body.decode(codec, "replace").count("\ufffd")
    return bad / non_ascii


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
        return True
    except UnicodeDecodeError:
        # a body cut at the size cap may end inside a character
        try:
            codecs.getincrementaldecoder("utf-8")().decode(body, final=False)
            return True
        except UnicodeDecodeError:
            return False


def _detect(body: bytes) -> str | None:
    """charset-normalizer on the start of the body, preferring windows-1252 on a tie."""
    sample = body[:DETECT_BYTES]
    if len(sample) < len(body):
        # cut at an ASCII '<' or newline: never a trail byte in GBK/Shift_JIS/EUC/UTF-8,
        # and a sample ending mid-character makes the detector give up
        cut = max(sample.rfind(b"<"), sample.rfind(b"\n"))
        if cut > 0:
            sample = sample[:cut]
    try:
        matches = list(from_bytes(sample))
    except Exception:
        return None
    if not matches:
        return None
    best = matches[0]
    # Single-byte Latin pages fit several code pages about equally well, and the detector's
    # first pick is often a Baltic or Central European one for French or German text (a "«" or
    # "—" costs cp1252 a little "chaos").  windows-1252 is what a browser in most locales assumes
    # for an undeclared page, so it wins a near tie.  On one paragraph each of fr/de/pt/es/cs/tr/
    # ru/el/he/ar/zh/zh-TW/ja/ko this gets all right but undeclared Polish cp1250 (read as cp1252).
    for m in matches:
        if m.chaos > best.chaos + 0.05 or m.coherence < best.coherence - 0.01:
            continue
        if "cp1252" in m.could_be_from_charset:
            return "cp1252"
    name = best.encoding
    return _DETECTED_TO_CODEC.get(name, name)


def decode_html(body: bytes, content_type: str | None) -> tuple[str, str]:
    """Decode an HTML body the way a browser would, with a detector for undeclared pages.

    Precedence: a byte-order mark; then the ``charset`` of the HTTP ``Content-Type``; then
    ``<meta charset>`` / ``<meta http-equiv=content-type>`` (or an XML declaration) in the first
    4 KiB; then, for undeclared pages, UTF-8 if the bytes are valid UTF-8, else
    charset-normalizer; finally UTF-8 with replacement characters.  Labels map per the WHATWG
    Encoding Standard (``gbk`` -> gb18030, ``iso-8859-1`` -> cp1252, ``shift_jis`` -> cp932).

    Two deliberate departures from a browser, both for mislabelled pages:

    * a declared charset under which more than 1% of the non-ASCII bytes are invalid is skipped
      (GBK served as ``charset=utf-8``); a few bad bytes are tolerated (a stray Latin-1 byte in a
      UTF-8 page, a body cut at the size cap);
    * a page declared windows-1252 / ISO-8859-1 (a common server default) whose non-ASCII bytes
      are valid UTF-8 is read as UTF-8: that is practically never an accident.

    Args:
        body: the raw (already content-decoded) HTTP body.
        content_type: the ``Content-Type`` header value, if any.

    Returns:
        ``(text, codec)``: the decoded text and the Python codec name used.  Never raises.
    """
    if isinstance(body, str):
        return body, "utf-8"
    try:
        return _decode_html(body, content_type)
    except Exception:  # defensive: this runs on arbitrary bytes from the web
        try:
            return bytes(body or b"").decode("utf-8", "replace"), "utf-8"
        except Exception:
            return "", "utf-8"


def _decode_html(body: bytes, content_type: str | None) -> tuple[str, str]:
    if not body:
        return "", "utf-8"
    body = bytes(body)
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return _decode(body, codec), codec

    declared: list[str] = []
    if content_type:
        m = _HEADER_CHARSET.search(content_type)
        if m:
            codec = encoding_for_label(m.group(1))
            if codec:
                declared.append(codec)
    head = body[:META_SCAN_BYTES]
    m = _META_CHARSET.search(head) or _XML_DECL.search(head)
    if m:
        codec = encoding_for_label(m.group(1).decode("ascii", "replace"))
        # a meta that claims UTF-16 is read as UTF-8: the bytes it sits in are ASCII-compatible
        if codec and codec.startswith("utf-16"):
            codec = "utf-8"
        if codec and codec not in declared:
            declared.append(codec)

    if declared and declared[0].startswith("utf-16"):
        # only the HTTP header can select UTF-16 without a BOM; believe it when the body has
        # the NUL bytes that UTF-16 markup is full of, not for an ASCII page mislabelled so
        if b"\x00" in body[:1024]:
            return _decode(body, declared[0]), declared[0]
        declared.pop(0)
    if body.isascii():
        return body.decode("ascii"), declared[0] if declared else "utf-8"

    best_codec, best_ratio = "utf-8", None
    for codec in declared:
        if codec == "cp1252" and _is_utf8(body):
            return _decode(body, "utf-8"), "utf-8"
        ratio = _error_ratio(body, codec)
        if ratio <= _MAX_ERROR_RATIO:
            return _decode(body, codec), codec
        if best_ratio is None or ratio < best_ratio:
            best_codec, best_ratio = codec, ratio

    if _is_utf8(body):
        return _decode(body, "utf-8"), "utf-8"
    detected = _detect(body)
    if detected:
        try:
            ratio = _error_ratio(body, detected)
        except Exception:
            ratio = 1.0
        if ratio <= _MAX_ERROR_RATIO:
            return _decode(body, detected), detected
        if best_ratio is None or ratio < best_ratio:
            best_codec, best_ratio = detected, ratio
    if best_ratio is not None and best_ratio < _error_ratio(body, "utf-8"):
        return _decode(body, best_codec), best_codec
    return body.decode("utf-8", "replace"), "utf-8"

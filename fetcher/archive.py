"""The run's WARC output: what each file's ``warcinfo`` says, and archiving one exchange.

``fetcher.capture`` decides which records an exchange becomes (pure); this writes them and adds
where the row's record landed.
"""

from __future__ import annotations

import socket
from importlib.metadata import version
from typing import Any

from fetcher import warc
from fetcher.capture import exchange_records
from fetcher.http import Exchange
from fetcher.models import FetchItem
from fetcher.settings import FetchSettings

SOFTWARE = f"recrawl-fetcher/0.1 (warcio {version('warcio')})"


def warcinfo(settings: FetchSettings, warc_prefix: str) -> dict[str, str]:
    """The ``warcinfo`` fields of the run's files (``isPartOf`` is the task attempt's prefix)."""
    s = settings
    return {
        "software": SOFTWARE,
        "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
                      "warc-format/warc-1.1/",
        "isPartOf": warc_prefix,
        "hostname": socket.gethostname(),
        "operator": s.operator or "",
        "http-header-user-agent": s.user_agent,
        "robots": f"classic (RFC 9309, product token {s.robots_token})",
    }


def write_exchange(writer: warc.WarcWriter, ex: Exchange, status: str, *, chain: list[str],
                   item: FetchItem | None = None, error: str | None = None,
                   keep: bool = False) -> dict[str, Any]:
    """Archive ``ex`` (see ``fetcher.capture``); returns the row values pointing at it, and
    with ``keep`` the gzip member of a ``response`` record as ``warc_member`` (not a row
    value: the caller pops it)."""
    records, values = exchange_records(ex, status, chain=chain, item=item, error=error)
    main = records[0].rec_type
    loc = writer.write(records, keep_first=keep and main == "response")[0]
    # A bomb keeps only request and metadata: no record for the row to point at.
    if main != "request":
        values.update(warc_file=loc.path, warc_offset=loc.offset, warc_length=loc.length)
    if loc.member is not None:
        values["warc_member"] = loc.member
    return values

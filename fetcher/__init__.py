"""Fetch core of the recrawler: politeness, robots.txt, DNS/SSRF, HTTP capture, WARC output.

Knows nothing of Spark: the fetch job calls ``Fetcher(settings, warc_dir, prefix).run(items)``
inside ``mapPartitions`` and writes the returned rows. Modules, one concern each:
``settings`` (configuration), ``models`` (items, rows, outcome), ``scheduler`` (Mercator back
queues), ``robots`` (RFC 9309 over Protego), ``dns`` (resolution and SSRF guard), ``http`` (one
captured exchange), ``decoding`` (bomb guard), ``classify`` (status decisions), ``warc`` (WARC
writer), ``run`` (the Fetcher).
"""

from fetcher.models import FetchItem, FetchOutcome
from fetcher.run import Fetcher
from fetcher.settings import FetchSettings

__all__ = ["FetchItem", "FetchOutcome", "FetchSettings", "Fetcher"]

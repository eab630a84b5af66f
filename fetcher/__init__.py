"""Fetch core of the recrawler: politeness, robots.txt, DNS/SSRF, HTTP capture, WARC output.

Knows nothing of Spark: the fetch job calls ``Fetcher(settings, warc_dir, prefix).run(items)``
inside ``mapPartitions`` and writes the returned rows. Modules, one concern each:

* ``settings`` -- configuration; ``models`` -- items, rows, outcome;
* ``scheduler`` -- Mercator back queues and the heap; ``run`` -- the Fetcher itself;
* ``robots`` -- RFC 9309 over Protego; ``dns`` -- resolution and the SSRF guard;
* ``http`` -- one captured exchange; ``decoding`` -- the bomb guard;
* ``classify`` -- status decisions; ``urls`` -- host keys and redirect targets;
* ``capture`` -- the records of one exchange; ``warc`` -- the WARC writer;
* ``storage`` -- where WARC files live: local paths or S3 (``s3a://``, fsspec + s3fs).
"""

from fetcher.models import FetchItem, FetchOutcome
from fetcher.run import Fetcher
from fetcher.settings import FetchSettings

__all__ = ["FetchItem", "FetchOutcome", "FetchSettings", "Fetcher"]

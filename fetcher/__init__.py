"""Fetch core of the recrawler: politeness, robots.txt, DNS/SSRF, HTTP capture, WARC output.

Knows nothing of Spark: the fetch job calls ``Fetcher(settings, warc_dir, prefix).run(items)``
inside ``mapPartitions`` and writes the returned rows. Modules, one concern each:

* ``settings`` -- configuration; ``models`` -- items, rows, outcome;
* ``scheduler`` -- Mercator back queues and the heap; ``run`` -- the Fetcher's worker loop;
* ``tasks`` -- queue tasks and slots; ``hosts`` -- the run's hosts (DNS once, robots state);
* ``robots`` -- RFC 9309 over Protego; ``robots_fetch`` -- fetching robots.txt, its redirects;
* ``pages`` -- one page request; ``redirects`` -- which page redirect is followed;
* ``client`` -- request headers and deadline; ``rows`` -- the `fetches` and `hosts` rows;
* ``dns`` -- resolution and the SSRF guard; ``archive`` -- writing exchanges to WARC;
* ``http`` -- one captured exchange; ``decoding`` -- the bomb guard;
* ``classify`` -- status decisions; ``urls`` -- host keys and redirect targets;
* ``capture`` -- the records of one exchange; ``warc`` -- the WARC writer;
* ``storage`` -- where WARC files live: local paths or S3 (``s3a://``, fsspec + s3fs).
* ``stats`` -- the fetch step's counts (statuses, requests, politeness, timing) the gates judge.
"""

from fetcher.models import FetchItem, FetchOutcome
from fetcher.run import Fetcher
from fetcher.settings import FetchSettings

__all__ = ["FetchItem", "FetchOutcome", "FetchSettings", "Fetcher"]

"""Fetch throughput against the politeness limit, memory by page size, and Scrapy side by side.

    .venv/bin/python benchmarks/fetch_throughput.py [--hosts 50 --pages 40 --delay 0.5
                                                     --page-kb 10,100,1000 --threads 16]

One SimWeb (normal sites only) serves every run on 127.0.0.1; each crawler runs in its own
subprocess so its peak RSS is its own (the child's ``ru_maxrss``). For every page size it prints:

* the politeness limit: sum over hosts of 1/delay (requests per second);
* "limit %": how close each crawler came to it, from the *server's* request log: per host,
  (requests - 1) / (last start - first start), summed over hosts, divided by the limit;
* pages/s: HTML pages fetched (200) per second of the crawler's wall time;
* CPU % of the crawler process (user + system time over wall time; 200 % = both cores of a
  2-core machine), to show when a run is CPU-bound rather than politeness-bound;
* peak RSS of the crawler process. Bodies are read in 64 KiB steps and kept up to the body cap
  (``max_body_bytes``, 2 MiB, the same cap given to Scrapy as DOWNLOAD_MAXSIZE), so memory
  grows with the page size only until the cap and is flat beyond it (try ``--page-kb
  1000,4000,16000``); below the cap it is about threads x a few copies of one page.

Scrapy runs with equivalent settings: ROBOTSTXT_OBEY, CONCURRENT_REQUESTS = --threads,
CONCURRENT_REQUESTS_PER_DOMAIN=1, DOWNLOAD_DELAY = --delay, RANDOMIZE_DOWNLOAD_DELAY=False,
AutoThrottle, retries, cookies and redirects off. ``*.sim.test`` names reach 127.0.0.1 through a
custom ``DNS_RESOLVER`` that answers only for ``.sim.test`` and fails every other name, so
nothing can leave the machine. Note the different delay semantics: Scrapy spaces request
*starts*, we space the previous response's *end* and the next start (Mercator/Nutch), so at
equal settings we are slower by one response time per request by design.

Sites whose robots.txt sets a Crawl-delay (simweb gives one site ``Crawl-delay: 1``) are left
out: Scrapy ignores Crawl-delay, so the two crawlers would not be doing the same job.

simweb has no page-size option; normal-site HTML responses are padded to the requested size
with generated prose in an HTML comment by a wrapper around ``SimWeb.dispatch`` (the pad is
built once per size, so serving stays cheap).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

USER_AGENT = "recrawlbot/0.1 (+https://example.invalid/recrawlbot; crawler@example.invalid)"

SCRAPY_SPIDER = textwrap.dedent('''
    import json, resource, sys, time
    import scrapy
    from scrapy.crawler import CrawlerProcess
    from scrapy.resolver import CachingThreadedResolver
    from twisted.internet import defer


    class SimOnlyResolver(CachingThreadedResolver):
        """Resolves *.sim.test to 127.0.0.1 and refuses every other name."""

        def getHostByName(self, name, timeout=()):
            if name.endswith(".sim.test"):
                return defer.succeed("127.0.0.1")
            return defer.fail(OSError(f"benchmark resolver refuses {name}"))


    class ListSpider(scrapy.Spider):
        name = "bench"
        custom_settings = {}

        def __init__(self, urls, **kw):
            super().__init__(**kw)
            self.urls = urls
            self.pages = 0

        async def start(self):
            for u in self.urls:
                yield scrapy.Request(u, callback=self.parse, dont_filter=True)

        def parse(self, response):
            if response.status == 200:
                self.pages += 1


    cfg = json.loads(sys.argv[1])
    urls = [line.strip() for line in open(cfg["urls"]) if line.strip()]
    process = CrawlerProcess({
        "ROBOTSTXT_OBEY": True,
        "USER_AGENT": cfg["ua"],
        "CONCURRENT_REQUESTS": cfg["threads"],
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": cfg["delay"],
        "RANDOMIZE_DOWNLOAD_DELAY": False,
        "AUTOTHROTTLE_ENABLED": False,
        "RETRY_ENABLED": False,
        "REDIRECT_ENABLED": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "ERROR",
        "DOWNLOAD_MAXSIZE": cfg["max_body"],
        "DOWNLOAD_WARNSIZE": 0,
        "DNS_RESOLVER": "__main__.SimOnlyResolver",
    })
    crawler = process.create_crawler(ListSpider)
    t0 = time.monotonic()
    process.crawl(crawler, urls=urls)
    process.start()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"pages": crawler.spider.pages, "elapsed": time.monotonic() - t0,
                      "peak_rss": ru.ru_maxrss * 1024, "cpu": ru.ru_utime + ru.ru_stime}))
''')


@functools.cache
def _pad_blob(kb: int) -> bytes:
    from simweb.text import paragraph

    rng = random.Random(kb)
    parts, n = [], 0
    while n < kb * 1024:
        p = paragraph(rng, 80) + "\n"
        parts.append(p)
        n += len(p)
    return ("<!-- " + "".join(parts)[: kb * 1024] + " -->\n").encode()


def _padding_dispatch(original, size: dict[str, int]):
    """Wrap a dispatch function so normal-site HTML 200 responses are ``size["kb"]`` KiB.

    The page is sent as a stream of its own bytes plus a slice of a shared pad (no per-request
    copy), so that serving big pages costs the server little CPU.
    """
    def dispatch(req):
        resp = original(req)
        kb = size["kb"]
        ctype = resp.content_type or ""
        if (kb and req.host.startswith("site") and resp.status == 200
                and ctype.startswith("text/html") and resp.stream is None
                and len(resp.body) < kb * 1024):
            pad = memoryview(_pad_blob(kb))[: kb * 1024 - len(resp.body)]
            resp.stream, resp.length = [resp.body, pad], len(resp.body) + len(pad)
            resp.body = b""
        return resp

    return dispatch


def _run_child(argv: list[str]) -> dict:
    """Run a crawler child process; returns the JSON result it prints last."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[1]} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")
    return json.loads([x for x in proc.stdout.splitlines() if x.startswith("{")][-1])


def _fetcher_child(cfg: dict) -> None:
    """Child mode: run our Fetcher over the URL list and print a JSON result line."""
    from fetcher import Fetcher, FetchItem, FetchSettings

    urls = [line.strip() for line in open(cfg["urls"]) if line.strip()]
    settings = FetchSettings(
        user_agent=cfg["ua"], min_delay_s=cfg["delay"], threads=cfg["threads"],
        time_budget_s=3600.0, static_hosts={"*.sim.test": "127.0.0.1"},
        allow_private_networks=("127.0.0.1/32",), max_body_bytes=cfg["max_body"],
        warc_gzip_level=cfg["gzip_level"])
    with tempfile.TemporaryDirectory() as d:
        t0 = time.monotonic()
        out = Fetcher(settings, d, "bench").run(FetchItem(u) for u in urls)
        elapsed = time.monotonic() - t0
        warc_bytes = sum(os.path.getsize(f) for f in out.warc_files)
    pages = sum(1 for r in out.rows if r["fetch_status"] == "fetched" and r["http_status"] == 200)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"pages": pages, "elapsed": elapsed, "peak_rss": ru.ru_maxrss * 1024,
                      "warc_bytes": warc_bytes, "cpu": ru.ru_utime + ru.ru_stime}))


def _limit_use(log: list[dict], delays: dict[str, float]) -> float:
    """Sum over hosts of achieved request rate (from the server log) / sum of 1/delay."""
    starts: dict[str, list[float]] = defaultdict(list)
    for e in log:
        starts[e["host"]].append(e["start"])
    achieved = 0.0
    for ts in starts.values():
        ts.sort()
        if len(ts) > 1 and ts[-1] > ts[0]:
            achieved += (len(ts) - 1) / (ts[-1] - ts[0])
    limit = sum(1.0 / d for d in delays.values())
    return achieved / limit if limit else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--page-kb", default="10,100,1000")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--gzip-level", type=int, default=None, help="WARC gzip level override")
    ap.add_argument("--no-scrapy", action="store_true")
    ap.add_argument("--child", choices=["fetcher"], help=argparse.SUPPRESS)
    ap.add_argument("--cfg", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        cfg = json.loads(args.cfg)
        _fetcher_child(cfg)
        return

    from fetcher import FetchSettings
    from simweb import SimWeb

    sizes = [int(x) for x in args.page_kb.split(",") if x]
    gzip_level = args.gzip_level if args.gzip_level is not None else FetchSettings().warc_gzip_level
    web = SimWeb(seed=42, n_sites=args.hosts, pages_per_site=args.pages)
    size = {"kb": 0}
    web.dispatch = _padding_dispatch(web.dispatch, size)  # the server binds it at start()
    web.start()
    try:
        hosts = [h for h in web.hosts() if h.startswith("site")]
        kept = [h for h in hosts if web.truth.crawl_delay(h) is None]
        urls = [u for h in kept for u in web.truth.pages(h)]
        delays = {h: args.delay for h in kept}
        limit = sum(1.0 / d for d in delays.values())
        print(f"simweb: {len(kept)} hosts x {args.pages} pages = {len(urls)} URLs "
              f"({len(hosts) - len(kept)} host(s) with a robots Crawl-delay left out); "
              f"delay {args.delay:g}s, {args.threads} threads/concurrency, "
              f"WARC gzip level {gzip_level}")
        print("simweb has no page-size option: normal-site HTML is padded to the size "
              "(HTML comment of generated prose)")
        print(f"politeness limit: sum(1/delay) = {limit:.1f} requests/s\n")
        header = (f"{'page':>7} | {'limit r/s':>9} | {'ours p/s':>8} {'limit %':>7} "
                  f"{'RSS MiB':>7} {'CPU %':>5} {'WARC MB':>7} | {'scrapy p/s':>10} "
                  f"{'limit %':>7} {'RSS MiB':>7} {'CPU %':>5}")
        print(header)
        print("-" * len(header))
        with tempfile.TemporaryDirectory() as tmp:
            url_file = os.path.join(tmp, "urls.txt")
            Path(url_file).write_text("\n".join(urls) + "\n")
            spider = os.path.join(tmp, "scrapy_bench.py")
            Path(spider).write_text(SCRAPY_SPIDER)
            for kb in sizes:
                size["kb"] = kb
                _pad_blob(kb)  # build the pad before any crawler waits on it
                cfg = {"urls": url_file, "ua": USER_AGENT, "delay": args.delay,
                       "threads": args.threads, "max_body": FetchSettings().max_body_bytes,
                       "gzip_level": gzip_level}
                me = [sys.executable, __file__, "--cfg", json.dumps(cfg), "--child"]
                web.clear_log()
                ours = _run_child([*me, "fetcher"])
                ours_rss = ours["peak_rss"]
                ours_use = _limit_use(web.request_log(), delays)
                line = (f"{kb:>5}KB | {limit:>9.1f} | {ours['pages'] / ours['elapsed']:>8.1f} "
                        f"{ours_use * 100:>6.1f}% {ours_rss / 2**20:>7.0f} "
                        f"{ours['cpu'] / ours['elapsed'] * 100:>5.0f} "
                        f"{ours['warc_bytes'] / 1e6:>7.1f} |")
                if args.no_scrapy:
                    print(line + f" {'-':>10} {'-':>7} {'-':>7} {'-':>5}", flush=True)
                    continue
                web.clear_log()
                sc = _run_child([sys.executable, spider, json.dumps(cfg)])
                sc_rss = sc["peak_rss"]
                sc_use = _limit_use(web.request_log(), delays)
                print(line + f" {sc['pages'] / sc['elapsed']:>10.1f} {sc_use * 100:>6.1f}% "
                      f"{sc_rss / 2**20:>7.0f} {sc['cpu'] / sc['elapsed'] * 100:>5.0f}",
                      flush=True)
    finally:
        web.stop()


if __name__ == "__main__":
    main()

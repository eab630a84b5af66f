"""SimHash CPU per page: this project's shingles and SimHash against the word-by-word
definition and the `simhash` package, side by side on the same texts.

    PYTHONPATH=. .venv/bin/python benchmarks/fingerprint_cost.py [--pages 400] [--reps 5]
        [--real .cache/real-pages]

The texts: the main text trafilatura extracts (`parse_html`, the parse step's default) from
simweb pages generated in this process (no server: each page's response is built by its
host), and with `--real` from the 30 real-world pages of benchmarks/real_pages.py where that
cache exists. Per text, the best of `--reps` runs (time.process_time) of:

* shingles: the word-by-word definition (`reference_shingles`, the code before this one)
  against `recrawl.content.fingerprint.shingles`;
* SimHash of those features: `simhash.Simhash(feats, f=64)` against `simhash_value`;
* the whole `simhash64` both ways.

Every value is checked equal both ways before it is timed. What a simweb page's parse costs in
all (`page_row` with each extractor, one pass over the pages: the extractors cache strings
they have seen) is printed for scale.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import threading
import time
import unicodedata
from collections import Counter
from urllib.parse import urlsplit

from recrawl.content.fingerprint import (  # noqa: I001
    _CJK,
    CJK_NGRAM,
    MAX_FEATURE_WEIGHT,
    shingles,
    simhash_value,
    to_signed64,
)

_TOKEN_RE = re.compile(rf"([{_CJK}]+)|([^\W{_CJK}]+)")


def reference_shingles(text: str, shingle: int = 3) -> Counter[str]:
    """The definition, word by word (the code before `shingles`' split and zip): a CJK run
    breaks the word sequence and gives its character 4-grams; a stretch shorter than
    `shingle` words is one feature."""
    feats: Counter[str] = Counter()
    words: list[str] = []

    def flush() -> None:
        if len(words) >= shingle:
            for i in range(len(words) - shingle + 1):
                feats[" ".join(words[i:i + shingle])] += 1
        elif words:
            feats[" ".join(words)] += 1
        words.clear()

    for m in _TOKEN_RE.finditer(unicodedata.normalize("NFKC", text).casefold()):
        if m.group(1) is None:
            words.append(m.group(2))
            continue
        flush()
        run = m.group(1)
        for i in range(max(1, len(run) - CJK_NGRAM + 1)):
            feats[run[i:i + CJK_NGRAM]] += 1
    flush()
    return feats


def package_simhash64(text: str) -> int | None:
    """simhash64 as it was: the word-by-word features, the `simhash` package's value."""
    from simhash import Simhash  # lazy: the reference only

    feats = reference_shingles(text)
    if not feats:
        return None
    capped = {f: min(w, MAX_FEATURE_WEIGHT) for f, w in feats.items()}
    return to_signed64(Simhash(capped, f=64).value)


def simweb_pages(n: int, seed: int = 7) -> list[tuple[str, bytes, str | None]]:
    """(url, body, content type) of up to `n` HTML pages of a generated simweb, breadth first
    from each host's home page, built in-process by the hosts (no sockets)."""
    from simweb.response import Request
    from simweb.web import SimWeb

    web = SimWeb(seed=seed, n_sites=max(1, n // 25), pages_per_site=30)
    todo = [f"http://{h}:8080/" for h in web.hosts()]
    seen, pages = set(todo), []
    while todo and len(pages) < n:
        url = todo.pop(0)
        parts = urlsplit(url)
        req = Request("GET", parts.hostname, parts.path, parts.path, "", {}, 8080, 0,
                      threading.Event())
        resp = web.dispatch(req)
        if resp.status != 200 or b"<html" not in resp.body[:500].lower():
            continue
        pages.append((url, resp.body, resp.content_type))
        for href in re.findall(rb'href="(/[^"#]*)"', resp.body):
            nxt = f"http://{parts.hostname}:8080{href.decode()}"
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return pages


def best_ms(fn, items, reps: int) -> list[float]:
    """Per item, the least CPU ms of `reps` runs."""
    out = []
    for item in items:
        best = None
        for _ in range(reps):
            t = time.process_time()
            fn(item)
            ms = (time.process_time() - t) * 1000
            best = ms if best is None else min(best, ms)
        out.append(best)
    return out


def compare(label: str, texts: list[str], reps: int) -> None:
    from simhash import Simhash  # lazy: the reference only

    from recrawl.content.fingerprint import simhash64

    for t in texts:  # equal both ways before anything is timed
        assert shingles(t) == reference_shingles(t)
        assert simhash64(t) == package_simhash64(t)
    feats = [shingles(t) for t in texts if t]
    capped = [{f: min(w, MAX_FEATURE_WEIGHT) for f, w in x.items()} for x in feats if x]
    rows = [
        ("shingles", best_ms(reference_shingles, texts, reps), best_ms(shingles, texts, reps)),
        ("SimHash of the features", best_ms(lambda f: Simhash(f, f=64).value, capped, reps),
         best_ms(simhash_value, capped, reps)),
        ("simhash64, the whole", best_ms(package_simhash64, texts, reps),
         best_ms(simhash64, texts, reps)),
    ]
    n_feats = statistics.mean(len(x) for x in feats) if feats else 0
    print(f"\n{label}: {len(texts)} texts, mean {statistics.mean(map(len, texts)):,.0f} "
          f"characters, {n_feats:,.0f} features")
    print(f"{'CPU ms per text':28s} {'before mean':>12s} {'now mean':>9s} {'ratio':>6s} "
          f"{'before p90':>11s} {'now p90':>8s}")
    for name, old, new in rows:
        p90 = (lambda v: statistics.quantiles(v, n=10)[-1]) if len(old) > 1 else max
        print(f"{name:28s} {statistics.mean(old):12.3f} {statistics.mean(new):9.3f} "
              f"{statistics.mean(new) / max(1e-9, statistics.mean(old)):6.2f} "
              f"{p90(old):11.3f} {p90(new):8.3f}")


def _meta(url: str) -> dict:
    return {"round_id": "r", "url": url, "final_url": url, "content_type": "text/html",
            "warc_file": "w", "warc_offset": 0, "payload_digest": "d"}


def page_costs(pages) -> None:
    from recrawl.config import load_config
    from recrawl.content.pagerows import page_row
    from spark_jobs.parse import parse_options

    # one pass: trafilatura and htmldate keep LRU caches of the strings they have seen, so a
    # second parse of the same page costs a fraction of the first
    print("\nthe whole parse of a simweb page, one pass, for scale "
          "(recrawl.content.pagerows.page_row):")
    for ex in ("trafilatura", "resiliparse"):
        opts = parse_options(load_config().with_overrides({"parse.extractor": ex}))
        ms = best_ms(lambda p, o=opts: page_row(_meta(p[0]), p[1], p[2], o), pages, 1)
        print(f"  parse.extractor = {ex:12s} {statistics.mean(ms):.3f} ms a page")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=400)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--real", help="the real pages' cache of benchmarks/real_pages.py")
    args = ap.parse_args(argv)

    from recrawl.content.parsing import parse_html

    pages = simweb_pages(args.pages)
    texts = [parse_html(body, ctype, url).text or "" for url, body, ctype in pages]
    compare("simweb pages (trafilatura's text)", texts, args.reps)
    if args.real:
        from pathlib import Path

        from benchmarks.real_pages import fetch_pages

        real = fetch_pages(Path(args.real))
        compare("real pages (trafilatura's text)",
                [parse_html(p.body, None, p.url).text or "" for p in real], args.reps)
    page_costs(pages)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

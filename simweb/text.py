"""Deterministic prose and small HTML helpers for generated pages.

Main-text extractors (trafilatura) and SimHash need pages that read like prose: sentences of
varied words in paragraphs of a few hundred words. Everything here is a pure function of a
``random.Random`` so that the same seed always yields the same bytes.
"""

from __future__ import annotations

import hashlib
import html
import random

WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no what "
    "more out up into do any your can only other new some could time these two may first then "
    "well like over such our also its after year most made many before must through back years "
    "where much way down should because long each just state people still those both city world "
    "river market garden library station harbour valley mountain forest village bridge museum "
    "engine signal network archive crawler schedule winter summer autumn spring morning evening "
    "history science music theatre festival council school harvest weather coast island road "
    "report policy research method result figure season region culture language tradition price "
    "quickly slowly quietly carefully recently rarely often always never together almost nearly "
    "bright quiet ancient modern local public private central northern southern eastern western "
    "small large early late simple careful open narrow wide green blue golden silver wooden stone "
    "build describe measure discover follow explain travel gather publish visit study improve "
    "change remember observe collect design repair support develop protect compare return record"
).split()

TOPICS = (
    "Harbour",
    "Valley",
    "Railway",
    "Library",
    "Garden",
    "Festival",
    "Market",
    "Observatory",
    "Museum",
    "Bridge",
    "Forest",
    "Council",
    "Archive",
    "Theatre",
    "Island",
    "Orchard",
)


def stable_hash(*parts: object) -> str:
    """Hex digest of the parts; used for ETags and seeds, stable across processes."""
    return hashlib.sha1("\x1f".join(map(str, parts)).encode()).hexdigest()


def unit(*parts: object) -> float:
    """A uniform number in [0, 1) that is a pure function of the parts."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest) / 2**64


def rng_for(*parts: object) -> random.Random:
    """A Random seeded from a hash of the parts, so it is stable across processes."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=16).digest()
    return random.Random(int.from_bytes(digest))


def sentence(rng: random.Random) -> str:
    """One sentence of 8-18 words, capitalised and full-stopped."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def paragraph(rng: random.Random, n_words: int) -> str:
    """Sentences until at least ``n_words`` words."""
    out: list[str] = []
    count = 0
    while count < n_words:
        s = sentence(rng)
        out.append(s)
        count += s.count(" ") + 1
    return " ".join(out)


def title(rng: random.Random) -> str:
    """A short page title."""
    return f"{rng.choice(TOPICS)} {rng.choice(WORDS).capitalize()} {rng.choice(WORDS)}"


def esc(s: str) -> str:
    """HTML-escape text and attribute values."""
    return html.escape(s, quote=True)


def page(
    title_text: str,
    body: str,
    head_extra: str = "",
    charset: str | None = "utf-8",
    lang: str = "en",
) -> str:
    """Wrap a body fragment in a complete HTML document."""
    meta = f'<meta charset="{charset}">\n' if charset else ""
    return (
        f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n{meta}'
        f"<title>{esc(title_text)}</title>\n{head_extra}</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def link_list(links: list[tuple[str, str]]) -> str:
    """A <ul> of (href, anchor) pairs."""
    items = "\n".join(f'<li><a href="{esc(h)}">{esc(a)}</a></li>' for h, a in links)
    return f"<ul>\n{items}\n</ul>"


def simple_page(name: str, links: list[str], seed: object = 0, words: int = 180) -> str:
    """A plain page with prose and a list of links (anchor text = the href)."""
    rng = rng_for("simple", seed, name)
    body = f"<h1>{esc(name)}</h1>\n<p>{paragraph(rng, words)}</p>\n" + link_list(
        [(h, h) for h in links]
    )
    return page(name, body)

"""Content fingerprints: exact hashes, 64-bit SimHash, and the block keys of the near-dup join.

Owns the pure, per-record logic of the dedup step (docs/design.md step 5): the parse job calls
`text_hash` / `simhash64` per page, the dedup job's block join (recrawl.content.nearjoin) builds
`block_keys` as Spark columns and joins on them, and `bucket_pairs` is what it computes inside
one join bucket. No Spark import here.

SimHash (Charikar, STOC 2002) maps a weighted feature set to a 64-bit fingerprint whose
Hamming distance tracks the cosine distance of the feature vectors. Manku, Jain & Das Sarma
("Detecting Near-Duplicates for Web Crawling", WWW 2007) showed that, over 8 billion pages,
64-bit SimHash with k = 3 is a good near-duplicate threshold, and gave the block ("pigeonhole")
tables that find all pairs within distance k without comparing all pairs.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from math import comb

BITS = 64
MASK64 = (1 << BITS) - 1
_SIGN_BIT = 1 << (BITS - 1)

# Scripts written without spaces between words. A run of them is one `\w+` token, so word
# shingles would turn a whole CJK paragraph into a single feature (any edit flips the whole
# fingerprint); character 4-grams are the usual substitute (Broder-style shingling of chars).
_CJK = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf"  # CJK Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\U00020000-\U0002fa1f"  # CJK Extensions B..F, Compatibility Supplement
)
# One alternation: a run of CJK characters, or a run of other word characters (any script).
_CJK_RUN_RE = re.compile(rf"([{_CJK}]+)")
_WORD_RE = re.compile(rf"[^\W{_CJK}]+")
CJK_NGRAM = 4


# --- exact hashes --------------------------------------------------------------------------


def payload_hash(body: bytes) -> str:
    """SHA-1 hex of the raw payload (exact-duplicate key, like Nutch's MD5Signature)."""
    return hashlib.sha1(body).hexdigest()


def _fold(text: str) -> str:
    """NFKC, case-folded: what both `text_hash` and the SimHash's shingles read."""
    return unicodedata.normalize("NFKC", text).casefold()


def normalize_text(text: str) -> str:
    """NFKC, case-folded, whitespace-collapsed text: the form `text_hash` digests."""
    return " ".join(_fold(text).split())


def text_hash(text: str) -> str:
    """SHA-1 hex of the normalized main text.

    Like Nutch's TextMD5Signature: hashing extracted text rather than bytes makes pages that
    differ only in markup, whitespace or letter case exact duplicates.
    """
    return _sha1_of_folded(_fold(text))


def _sha1_of_folded(folded: str) -> str:
    return hashlib.sha1(" ".join(folded.split()).encode("utf-8")).hexdigest()


def text_fingerprints(text: str | None, shingle: int = 3) -> tuple[str | None, int | None]:
    """(`text_hash`, `simhash64`) of `text`, the pair every parsed page gets, with its NFKC and
    case folding done once for both; (None, None) for an empty text."""
    if not text:
        return None, None
    folded = _fold(text)
    feats = _shingles_of_folded(folded, shingle)
    return _sha1_of_folded(folded), (to_signed64(simhash_value(feats)) if feats else None)


# --- SimHash --------------------------------------------------------------------------------


def to_signed64(x: int) -> int:
    """Unsigned 64-bit value -> two's-complement signed (Spark LongType / Delta bigint)."""
    x &= MASK64
    return x - (1 << BITS) if x & _SIGN_BIT else x


def to_unsigned64(x: int) -> int:
    """Signed (or unsigned) 64-bit value -> unsigned 0 .. 2**64-1."""
    return x & MASK64


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit fingerprints (signed or unsigned)."""
    return ((a ^ b) & MASK64).bit_count()


def shingles(text: str, shingle: int = 3) -> Counter[str]:
    """Weighted features of `text`: word w-grams, and character 4-grams inside CJK runs.

    Why shingles and not single words: a bag of words is blind to word order and to which
    words moved; w-grams (Broder's shingles) make the fingerprint sensitive to order while a
    small edit still only touches the `w` shingles that overlap it, so near-identical pages
    keep most features and land within a few bits of each other.

    A CJK run breaks the word sequence; a stretch with fewer than `shingle` words is one
    feature. The stretches are found by one split and their words by `findall`, and the
    w-grams are joined from zipped slices: the per-word loop in Python cost a third of a
    simweb page's parse (benchmarks/fingerprint_cost.py).
    """
    return _shingles_of_folded(_fold(text), shingle)


def _shingles_of_folded(folded: str, shingle: int) -> Counter[str]:
    if shingle < 1:
        raise ValueError(f"shingle must be at least 1, got {shingle!r}")
    feats: Counter[str] = Counter()
    parts = _CJK_RUN_RE.split(folded)
    for i, part in enumerate(parts):
        if i % 2:  # split's captured group: a CJK run
            if len(part) <= CJK_NGRAM:
                feats[part] += 1
            else:
                feats.update(part[j : j + CJK_NGRAM] for j in range(len(part) - CJK_NGRAM + 1))
            continue
        words = _WORD_RE.findall(part)
        if not words:
            continue
        if len(words) < shingle:  # too short for one full shingle: keep it as one feature
            feats[" ".join(words)] += 1
        else:
            # the slices have different lengths on purpose: zip stops at the last full w-gram
            grams = zip(*(words[k:] for k in range(shingle)), strict=False)
            feats.update(map(" ".join, grams))
    return feats


MAX_FEATURE_WEIGHT = 255

try:
    # CPython's own MD5 (HACL*), the same digest: on a feature of a few words it costs less than
    # half of OpenSSL's through hashlib (84 against 179 us for a simweb page's 344 features),
    # whose per-call set-up dominates such short inputs. A build without it uses hashlib's.
    from _md5 import md5 as _md5
except ImportError:  # pragma: no cover - CPython builds it unless told not to
    _md5 = hashlib.md5


def simhash64(text: str | None, shingle: int = 3) -> int | None:
    """64-bit SimHash of `text` as a signed int (fits Spark LongType).

    None (a SQL NULL) when the text has no word at all: every empty page would otherwise
    get the same fingerprint and the dedup join would call them all near duplicates.
    """
    feats = shingles(text, shingle) if text else None
    if not feats:
        return None
    return to_signed64(simhash_value(feats))


def simhash_value(feats: Mapping[str, int]) -> int:
    """Unsigned 64-bit SimHash of weighted features: the value of the `simhash` package's
    ``Simhash(feats, f=64)`` (Charikar's construction: each feature hashed with md5, low 64
    bits; bit i set when the weighted majority of feature hashes has bit i set), computed
    with one matrix product instead of the package's per-feature numpy arrays (a third of the
    time; tests/recrawl/test_fingerprint.py checks the two agree).

    Weights are capped at MAX_FEATURE_WEIGHT: simhash 2.1 multiplies a uint8 bit array by
    weights above its large_weight_cutoff, which overflows under numpy 2 for weights > 255 (a
    shingle repeated 1200 times on a boilerplate or trap page); the cap keeps such a feature
    dominant without the overflow, and keeps the two computations equal."""
    import numpy as np  # lazy: heavy (numpy)

    md5 = _md5
    digests = np.frombuffer(b"".join([md5(f.encode()).digest() for f in feats]),
                            dtype=np.uint8).reshape(-1, 16)
    bits = np.unpackbits(digests[:, 16 - BITS // 8:], axis=1)  # the low 64 bits, MSB first
    weights = np.minimum(np.fromiter(feats.values(), dtype=np.int64, count=len(feats)),
                         MAX_FEATURE_WEIGHT)
    # float64 sums are exact (integers far below 2**53) and take BLAS's product, five times
    # numpy's integer one; the majority is against half the total weight, as the package
    # compares its sums with count / 2
    sums = weights.astype(np.float64) @ bits.astype(np.float64)
    majority = sums * 2 > float(weights.sum())
    return int.from_bytes(np.packbits(majority).tobytes(), "big")


# --- block (pigeonhole) keys ----------------------------------------------------------------


@dataclass(frozen=True)
class BlockLayout:
    """`n_blocks` contiguous bit blocks; a key is the value of `match` of them.

    If two fingerprints differ in at most k bits, at most k blocks differ, so at least
    n_blocks - k blocks agree: with match <= n_blocks - k, one of the C(n_blocks, match) block
    combinations ("tables") is entirely equal and the pair shares that table's key.
    """

    n_blocks: int
    match: int

    def __post_init__(self) -> None:
        if not 1 <= self.n_blocks <= BITS:
            raise ValueError(f"n_blocks must be in 1..{BITS}, got {self.n_blocks}")
        if not 1 <= self.match <= self.n_blocks:
            raise ValueError(f"match must be in 1..n_blocks, got {self.match}")

    @property
    def n_tables(self) -> int:
        """Keys emitted per fingerprint: C(n_blocks, match)."""
        return comb(self.n_blocks, self.match)

    def max_distance(self) -> int:
        """Largest Hamming distance whose pairs are guaranteed to share a key."""
        return self.n_blocks - self.match

    def name(self) -> str:
        """Canonical layout string, e.g. '6c3'."""
        return f"{self.n_blocks}c{self.match}"


def parse_layout(layout: str | BlockLayout | tuple[int, int], k: int = 3) -> BlockLayout:
    """Turn a layout spec into a BlockLayout valid for distance `k`.

    "NxB" - N blocks of ~B bits, keyed on N - k of them (the most selective valid choice;
            "4x16" with k = 3 keys on a single 16-bit block).
    "NcM" - N blocks, keyed on every combination of M of them ("6c3": C(6,3) = 20 keys).
    (N, M) tuples and BlockLayout objects are taken as "NcM".
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if isinstance(layout, BlockLayout):
        bl = layout
    elif isinstance(layout, tuple):
        bl = BlockLayout(*layout)
    else:
        m = re.fullmatch(r"\s*(\d+)\s*([xXcC])\s*(\d+)\s*", str(layout))
        if not m:
            raise ValueError(f"unknown block layout {layout!r}: expected 'NxB' or 'NcM'")
        n, kind, b = int(m.group(1)), m.group(2).lower(), int(m.group(3))
        if kind == "x":
            if n * b != BITS:
                raise ValueError(f"layout {layout!r}: {n} x {b} bits != {BITS}")
            if k >= n:
                raise ValueError(f"layout {layout!r} cannot guarantee distance {k} (< {n})")
            bl = BlockLayout(n, n - k)
        else:
            bl = BlockLayout(n, b)
    if bl.max_distance() < k:
        raise ValueError(
            f"layout {bl.name()} only guarantees distance <= {bl.max_distance()}, not {k}"
        )
    return bl


@lru_cache(maxsize=64)
def _block_masks(n_blocks: int) -> tuple[int, ...]:
    """Bit masks of n contiguous blocks covering 64 bits (sizes differ by at most one)."""
    base, extra = divmod(BITS, n_blocks)
    masks, start = [], 0
    for i in range(n_blocks):
        width = base + (1 if i < extra else 0)
        masks.append(((1 << width) - 1) << start)
        start += width
    return tuple(masks)


@lru_cache(maxsize=64)
def _table_masks(n_blocks: int, match: int) -> tuple[int, ...]:
    """One mask per table: the union of that table's `match` blocks."""
    blocks = _block_masks(n_blocks)
    out = []
    for combo in combinations(range(n_blocks), match):
        m = 0
        for i in combo:
            m |= blocks[i]
        out.append(m)
    return tuple(out)


def table_masks(
    layout: str | BlockLayout | tuple[int, int] = "6c3", k: int = 3
) -> tuple[int, ...]:
    """Each table's bit mask as a signed 64-bit int, by table id.

    `to_signed64(fp & mask)` is the table's key (what `block_keys` returns): a Spark job can
    compute keys as `simhash & mask` on the LongType column without a Python UDF.
    """
    bl = parse_layout(layout, k)
    return tuple(to_signed64(m) for m in _table_masks(bl.n_blocks, bl.match))


def block_keys(
    fp: int, k: int = 3, layout: str | BlockLayout | tuple[int, int] = "6c3"
) -> list[tuple[int, int]]:
    """(table_id, key) pairs such that fingerprints within distance k share at least one.

    The key is the fingerprint masked to the table's blocks, as a signed 64-bit int so Spark
    can join on (table_id: int, key: long). Trade-off (Manku et al. 2007, section 3):
      "4x16": 4 keys per fingerprint, each 16 bits -> ~4 * C(N,2) / 2**16 candidate pairs;
      "6c3": 20 keys per fingerprint, each ~32 bits -> ~20 * C(N,2) / 2**32 candidate pairs.
    4x16 writes 5x fewer key rows but its 16-bit buckets get large (N = 10M gives ~150 pages
    per bucket and ~3e9 candidates); 6c3 pays 20 rows per page for buckets that stay tiny.
    """
    bl = parse_layout(layout, k)
    u = fp & MASK64
    return [(t, to_signed64(u & m)) for t, m in enumerate(_table_masks(bl.n_blocks, bl.match))]


def expected_candidates(
    n: int, layout: str | BlockLayout | tuple[int, int] = "6c3", k: int = 3
) -> float:
    """Expected candidate pairs (summed over tables) for n uniformly random fingerprints.

    Each table with b key bits puts a random pair in the same bucket with probability 2**-b,
    so E = sum over tables of C(n, 2) / 2**b. Real crawls are not uniform (boilerplate
    clusters), so treat this as the background cost; dedup.max_bucket guards the clusters.
    """
    bl = parse_layout(layout, k)
    pairs = n * (n - 1) / 2
    return sum(pairs / 2.0 ** m.bit_count() for m in _table_masks(bl.n_blocks, bl.match))


def first_shared_table(
    a: int, b: int, k: int = 3, layout: str | BlockLayout | tuple[int, int] = "6c3"
) -> int | None:
    """Lowest table id in which a and b share a key, or None.

    A pair close enough is found in several tables; a join keeps it only where
    table_id == first_shared_table(...) and so emits each pair once without a distinct().
    """
    bl = parse_layout(layout, k)
    x = (a ^ b) & MASK64
    for t, m in enumerate(_table_masks(bl.n_blocks, bl.match)):
        if not x & m:
            return t
    return None


def bucket_pairs(members: Iterable[tuple[str, int]], k: int = 3) -> Iterator[tuple[str, str, int]]:
    """All (id_a, id_b, distance) with id_a < id_b and distance <= k inside one join bucket."""
    items = sorted(members)
    for i in range(len(items)):
        ida, fa = items[i]
        for idb, fb in items[i + 1 :]:
            if ida == idb:
                continue
            d = hamming(fa, fb)
            if d <= k:
                yield ida, idb, d


def near_duplicate_pairs(
    fps: Mapping[str, int], k: int = 3, layout: str | BlockLayout | tuple[int, int] = "6c3"
) -> set[tuple[str, str]]:
    """Reference near-dup finder through the block tables: {(a, b): a < b, distance <= k}."""
    buckets: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for doc_id, fp in fps.items():
        for tk in block_keys(fp, k, layout):
            buckets.setdefault(tk, []).append((doc_id, fp))
    out: set[tuple[str, str]] = set()
    for members in buckets.values():
        if len(members) > 1:
            out.update((a, b) for a, b, _ in bucket_pairs(members, k))
    return out


def brute_force_pairs(fps: Mapping[str, int], k: int = 3) -> set[tuple[str, str]]:
    """All-pairs near-dup finder, O(N^2): only for tests of `near_duplicate_pairs`."""
    return {(a, b) for a, b, _ in bucket_pairs(fps.items(), k)}

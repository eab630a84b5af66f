"""Fingerprints: exact hashes, SimHash, and the pigeonhole invariant of the block keys."""

from __future__ import annotations

import hashlib
import random
from itertools import combinations
from math import comb

import pytest
from simhash import Simhash

from recrawl.content.fingerprint import (
    BlockLayout,
    block_keys,
    brute_force_pairs,
    bucket_pairs,
    expected_candidates,
    first_shared_table,
    hamming,
    near_duplicate_pairs,
    parse_layout,
    payload_hash,
    shingles,
    simhash64,
    simhash_value,
    table_masks,
    text_hash,
    to_signed64,
    to_unsigned64,
)

ARTICLE = (
    "The city council met on Tuesday to discuss the new budget for public transport. "
    "After a long debate the members agreed to extend the tram line to the northern "
    "districts and to buy twenty electric buses before the end of next year. Residents "
    "who attended the meeting welcomed the plan but asked for more frequent night services "
    "and better lighting at the stops. The mayor said the work would start in spring."
)


def flip_bits(x: int, d: int, rng: random.Random) -> int:
    """x with d distinct random bits flipped (unsigned 64-bit)."""
    for b in rng.sample(range(64), d):
        x ^= 1 << b
    return x


# --- exact hashes ------------------------------------------------------------------------------


def test_payload_hash_is_sha1_hex():
    assert payload_hash(b"") == "da39a3ee5e6b4b0d3255bfef95601890afd80709"
    assert payload_hash(b"<html>") == hashlib.sha1(b"<html>").hexdigest()


def test_text_hash_ignores_case_and_whitespace():
    assert text_hash("Hello   World\n") == text_hash("hello world")
    assert text_hash("  hello\tworld ") == hashlib.sha1(b"hello world").hexdigest()
    assert text_hash("hello world") != text_hash("hello worlds")
    # NFKC: a full-width letter and its ASCII form are the same text
    assert text_hash("ＡＢＣ") == text_hash("abc")


# --- signed / unsigned, hamming ----------------------------------------------------------------


@pytest.mark.parametrize(
    "u, s",
    [(0, 0), (1, 1), (2**63 - 1, 2**63 - 1), (2**63, -(2**63)), (2**64 - 1, -1)],
)
def test_signed_unsigned_roundtrip(u, s):
    assert to_signed64(u) == s
    assert to_unsigned64(s) == u
    assert to_signed64(to_unsigned64(s)) == s


def test_hamming_works_on_signed_values():
    assert hamming(0, -1) == 64
    assert hamming(-1, 2**64 - 1) == 0
    assert hamming(0b1011, 0b0001) == 2
    assert hamming(to_signed64(2**63), 0) == 1


# --- SimHash -----------------------------------------------------------------------------------


def test_shingles_are_word_trigrams():
    feats = shingles("The quick brown fox jumps")
    assert feats == {"the quick brown": 1, "quick brown fox": 1, "brown fox jumps": 1}
    assert shingles("Hi there") == {"hi there": 1}  # shorter than one shingle
    assert shingles("   ...  ") == {}


def test_shingles_use_char_ngrams_for_cjk():
    feats = shingles("网络爬虫设计")
    assert set(feats) == {"网络爬虫", "络爬虫设", "爬虫设计"}
    mixed = shingles("Apache Nutch 是一个网络爬虫 written in Java")
    assert "apache nutch" in mixed  # word run cut by the CJK run
    assert "一个网络" in mixed and "written in java" in mixed


def test_simhash64_matches_library_and_is_signed():
    fp = simhash64(ARTICLE)
    assert -(2**63) <= fp < 2**63
    assert to_unsigned64(fp) == Simhash(shingles(ARTICLE), f=64).value
    assert simhash64(ARTICLE) == fp  # deterministic
    assert simhash64("") is None  # no features: NULL, so empty pages never match each other
    assert simhash64(None) is None
    assert simhash64(" -- ") is None


def test_simhash64_near_and_far():
    other = (
        "Heavy rain is expected over the weekend in the mountains, with snow above two "
        "thousand metres; hikers are advised to postpone their trips and check the forecast."
    )
    base = simhash64(ARTICLE)
    assert hamming(base, simhash64(ARTICLE.upper())) == 0
    assert hamming(base, simhash64("  ".join(ARTICLE.split()))) == 0
    assert hamming(base, simhash64(ARTICLE.replace("twenty", "thirty"))) <= 6
    assert hamming(base, simhash64(other)) > 12


def test_small_edits_mostly_stay_within_three_bits():
    """On page-length text (400 words) one edited word or an appended timestamp stays within
    k = 3 bits most of the time; unrelated texts are ~32 bits apart (never near 3)."""
    vocab_rng = random.Random(5)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = [
        "".join(vocab_rng.choice(letters) for _ in range(vocab_rng.randint(2, 9)))
        for _ in range(2000)
    ]
    near_edit = near_stamp = 0
    far = []
    prev = None
    trials = 60
    for seed in range(trials):
        rng = random.Random(seed)
        words = [rng.choice(vocab) for _ in range(400)]
        text = " ".join(words)
        fp = simhash64(text)
        words[rng.randrange(400)] = "changed"
        near_edit += hamming(fp, simhash64(" ".join(words))) <= 3
        near_stamp += hamming(fp, simhash64(text + " Last updated 2024-05-01 10:31")) <= 3
        if prev is not None:
            far.append(hamming(fp, prev))
        prev = fp
    assert near_edit >= 0.6 * trials
    assert near_stamp >= 0.6 * trials
    assert min(far) > 12
    assert 26 <= sum(far) / len(far) <= 38


def test_simhash64_is_sensitive_to_word_order():
    words = ARTICLE.split()
    rng = random.Random(7)
    rng.shuffle(words)
    assert hamming(simhash64(ARTICLE), simhash64(" ".join(words))) > 12


# --- block layouts -----------------------------------------------------------------------------


def test_parse_layout_variants():
    assert parse_layout("4x16", 3) == BlockLayout(4, 1)
    assert parse_layout("4x16", 2) == BlockLayout(4, 2)
    assert parse_layout("6c3", 3) == BlockLayout(6, 3)
    assert parse_layout((8, 5), 3).n_tables == comb(8, 5)
    assert parse_layout("6c3").max_distance() == 3


@pytest.mark.parametrize(
    "layout, k",
    [("6c3", 4), ("4x16", 4), ("5x13", 3), ("6y3", 3), ("", 3), ("7c0", 3), ((4, 5), 1)],
)
def test_parse_layout_rejects(layout, k):
    with pytest.raises(ValueError):
        parse_layout(layout, k)


def test_block_key_counts_and_widths():
    fp = simhash64(ARTICLE)
    assert len(block_keys(fp, 3, "4x16")) == 4
    keys = block_keys(fp, 3, "6c3")
    assert len(keys) == 20
    assert [t for t, _ in keys] == list(range(20))
    # "6c3" splits 64 bits as 11+11+11+11+10+10; a key keeps 31..33 bits of the fingerprint
    widths = sorted(to_unsigned64(k).bit_count() for _, k in block_keys(-1, 3, "6c3"))
    assert widths[0] == 31 and widths[-1] == 33
    assert block_keys(-1, 3, "4x16")[3] == (3, to_signed64(0xFFFF << 48))


@pytest.mark.parametrize("layout", ["4x16", "6c3"])
def test_table_masks_give_the_block_keys(layout):
    """`fp & mask` on signed longs (what the Spark job computes) equals block_keys."""
    rng = random.Random(5)
    masks = table_masks(layout, 3)
    for fp in [0, -1, to_signed64(1 << 63)] + [to_signed64(rng.getrandbits(64)) for _ in range(50)]:
        assert [(t, fp & m) for t, m in enumerate(masks)] == block_keys(fp, 3, layout)


@pytest.mark.parametrize(
    "layout, k", [("4x16", 3), ("6c3", 3), ("6c3", 2), ((7, 4), 3), ((8, 5), 3), ("4x16", 1)]
)
def test_pigeonhole_invariant(layout, k):
    """Any two fingerprints within distance k share a (table, key): random pairs at 0..k."""
    rng = random.Random(hash((str(layout), k)) & 0xFFFF)
    for _ in range(1500):
        a = rng.getrandbits(64)
        d = rng.randint(0, k)
        b = flip_bits(a, d, rng)
        assert hamming(a, b) == d
        shared = set(block_keys(to_signed64(a), k, layout)) & set(block_keys(b, k, layout))
        assert shared, (layout, k, d)
        assert first_shared_table(a, b, k, layout) == min(t for t, _ in shared)


def test_adjacent_bits_across_block_boundaries():
    # worst case for contiguous blocks: k flips each in a different block
    bl = parse_layout("6c3", 3)
    starts = [0, 11, 22, 33, 44, 54]
    for trio in combinations(range(bl.n_blocks), 3):
        a = 0x0123456789ABCDEF
        b = a
        for i in trio:
            b ^= 1 << starts[i]
        assert set(block_keys(a)) & set(block_keys(b))


def test_far_pairs_can_be_missed_but_are_filtered():
    a = 0
    b = (1 << 64) - 1  # distance 64: shares no block
    assert first_shared_table(a, b) is None
    assert near_duplicate_pairs({"a": a, "b": b}) == set()


def test_expected_candidates_formula():
    n = 10_000
    pairs = n * (n - 1) / 2
    assert expected_candidates(n, "4x16") == pytest.approx(4 * pairs / 2**16)
    # 6 blocks of 11,11,11,11,10,10 bits; each 3-block table keys on 31..33 bits
    widths = [11, 11, 11, 11, 10, 10]
    want = sum(pairs / 2 ** sum(c) for c in combinations(widths, 3))
    assert expected_candidates(n, "6c3") == pytest.approx(want)
    assert expected_candidates(n, "6c3") < expected_candidates(n, "4x16") / 1000


def test_expected_candidates_matches_random_fingerprints():
    rng = random.Random(3)
    fps = [rng.getrandbits(64) for _ in range(3000)]
    buckets: dict = {}
    for i, fp in enumerate(fps):
        for tk in block_keys(fp, 3, "4x16"):
            buckets.setdefault(tk, []).append(i)
    observed = sum(len(v) * (len(v) - 1) / 2 for v in buckets.values())
    expected = expected_candidates(len(fps), "4x16")  # ~275
    assert 0.75 * expected < observed < 1.25 * expected


# --- pairs -------------------------------------------------------------------------------------


def planted(seed: int, clusters: int = 80, spread: int = 6) -> dict[str, int]:
    """Random cluster centres, each with variants at distance 0..spread."""
    rng = random.Random(seed)
    fps: dict[str, int] = {}
    for c in range(clusters):
        centre = rng.getrandbits(64)
        fps[f"c{c}"] = to_signed64(centre)
        for v in range(rng.randint(1, 4)):
            fps[f"c{c}v{v}"] = to_signed64(flip_bits(centre, rng.randint(0, spread), rng))
    return fps


@pytest.mark.parametrize("layout", ["4x16", "6c3"])
@pytest.mark.parametrize("k", [0, 2, 3])
def test_near_duplicate_pairs_equal_brute_force(layout, k):
    fps = planted(11 + k)
    want = brute_force_pairs(fps, k)
    assert near_duplicate_pairs(fps, k, layout) == want
    if k == 3:
        assert len(want) > 50  # the fixture really has close pairs


def test_bucket_pairs_orders_ids_and_reports_distance():
    got = list(bucket_pairs([("b", 0b111), ("a", 0b100), ("c", -1)], k=3))
    assert got == [("a", "b", 2)]


def test_simhash_of_heavily_repeated_shingle_does_not_overflow():
    # simhash 2.1 + numpy 2 overflowed a uint8 array for feature weights above 255
    text = "calendar next month " * 1500 + "a little unique text here"
    fp = simhash64(text)
    assert isinstance(fp, int)
    assert -(2**63) <= fp < 2**63
    assert hamming(fp, simhash64(text + " more")) <= 3


_ALPHABET = ["the", "Nutch", "crawler", "ÉTÉ", "ﬁle", "网络", "爬虫设计", "ー", "・", "x1",
             "  ", ", ", "... ", "\n", "ß", "İstanbul", "κόσμε", "日本語のページ", "a", "_"]


@pytest.mark.parametrize("shingle", [1, 2, 3, 5])
def test_shingles_equal_the_word_by_word_definition(shingle):
    # the definition as it was written before (kept in the benchmark that times the two)
    from benchmarks.fingerprint_cost import reference_shingles

    rng = random.Random(shingle)
    for _ in range(300):
        text = "".join(rng.choice(_ALPHABET) + rng.choice(["", " "])
                       for _ in range(rng.randrange(0, 40)))
        assert shingles(text, shingle) == reference_shingles(text, shingle), repr(text)
    with pytest.raises(ValueError, match="shingle"):
        shingles("a b c", 0)


def test_simhash_value_equals_the_simhash_package():
    # one matrix product instead of the package's per-feature arrays: the same value, for
    # weights on both sides of the package's large_weight_cutoff (50) and up to the cap
    rng = random.Random(5)
    for n in [1, 2, 3, 17, 64, 300, 2000]:
        for _ in range(10):
            feats = {f"f{rng.randrange(10**9)} {i}": rng.choice([1, 1, 2, 3, 49, 50, 51, 200, 255])
                     for i in range(n)}
            assert simhash_value(feats) == Simhash(feats, f=64).value, (n, feats)
    heavy = {"x": 1000, "y": 3}  # capped to 255 on both sides of the comparison
    assert simhash_value(heavy) == Simhash({"x": 255, "y": 3}, f=64).value
    assert to_unsigned64(simhash64(ARTICLE)) == Simhash(shingles(ARTICLE), f=64).value


def test_text_fingerprints_are_text_hash_and_simhash64_with_one_folding():
    from recrawl.content.fingerprint import text_fingerprints

    for text in (ARTICLE, "ＡＢＣ Straße İstanbul ﬁne", "网络爬虫设计 Apache Nutch 是一个网络爬虫",
                 "   ", "...", "Hi there", "x\u0130\u0307 \u1e9b\u0323 K\u212a"):
        assert text_fingerprints(text) == (text_hash(text), simhash64(text)), repr(text)
    assert text_fingerprints("") == (None, None) and text_fingerprints(None) == (None, None)

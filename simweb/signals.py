"""Change signals: what a normal site's sitemap (and feed) says about when its pages changed.

Real sitemaps' <lastmod> values range from exact to useless: some sites stamp every URL with the
build date, some never update a date after first publication, some publish late, some in the
future, many publish none. A site's *signal kind* fixes which of these it does, so a crawler's
use of the signal can be judged against the truth (the page's change process, PoissonPage).
A *mix* spreads kinds over the normal sites in fixed shares.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from simweb.changes import PoissonPage
from simweb.response import sim_datetime
from simweb.text import stable_hash

ACCURATE = "accurate"  # date of the last change on or before the day (the default)
NONE = "none"  # <loc> only, no <lastmod>
TODAY = "today"  # every URL stamped with the served day, changed or not
FROZEN = "frozen"  # the date as of sim day 0, never updated
LAG = "lag"  # the right dates, LAG_DAYS late
FUTURE = "future"  # the served day + FUTURE_DAYS
KINDS = (ACCURATE, NONE, TODAY, FROZEN, LAG, FUTURE)

LAG_DAYS = 3
FUTURE_DAYS = 30

#: A mix: a preset name (below, or any kind name) or (kind, share) pairs summing to 1.
Mix = str | Sequence[tuple[str, float]] | Mapping[str, float]

PRESETS: dict[str, tuple[tuple[str, float], ...]] = {
    "mixed": ((ACCURATE, 0.4), (NONE, 0.2), (TODAY, 0.2), (FROZEN, 0.2)),
    "lying": ((TODAY, 0.34), (FROZEN, 0.33), (FUTURE, 0.33)),
    **{k: ((k, 1.0),) for k in KINDS},  # "accurate", "none", "lag", ...: all sites that kind
}


def _error(msg: str) -> ValueError:
    return ValueError(f"{msg}; a mix is one of {sorted(PRESETS)} or (kind, share) pairs of {KINDS}")


def resolve(mix: Mix) -> list[tuple[str, float]]:
    """The (kind, share) pairs of a mix, validated; ValueError naming the presets otherwise."""
    if isinstance(mix, str):
        if mix not in PRESETS:
            raise _error(f"unknown signal mix {mix!r}")
        return list(PRESETS[mix])
    try:
        pairs = [(k, float(s)) for k, s in (mix.items() if isinstance(mix, Mapping) else mix)]
    except (TypeError, ValueError):
        raise _error(f"bad signal mix {mix!r}") from None
    for kind, share in pairs:
        if kind not in KINDS:
            raise _error(f"unknown signal kind {kind!r}")
        if not 0 <= share <= 1:
            raise _error(f"share of {kind!r} must be in [0, 1], got {share!r}")
    if not math.isclose(sum(s for _, s in pairs), 1.0, abs_tol=1e-6):
        raise _error(f"shares must sum to 1, got {sum(s for _, s in pairs)!r}")
    return pairs


def parse_mix(text: str) -> Mix:
    """A mix from the command line, validated: a preset name or ``kind=share,kind=share``."""
    mix: Mix = text
    if "=" in text:
        try:
            mix = [(k.strip(), float(v)) for k, v in (p.split("=") for p in text.split(","))]
        except ValueError:
            raise _error(f"bad signal mix {text!r}") from None
    resolve(mix)
    return mix


def apportion(shares: Sequence[float], n: int) -> list[int]:
    """Largest-remainder rounding of ``shares`` (summing to ~1) of ``n``; ties go to the
    earlier share, so the result is exact when the quotas are whole (2/1/1/1 of 5 for 'mixed')."""
    total = sum(shares) or 1.0
    quotas = [s / total * n for s in shares]
    counts = [math.floor(q + 1e-9) for q in quotas]  # 1e-9: 2.9999999 is a whole 3
    by_remainder = sorted(range(len(shares)), key=lambda j: (-(quotas[j] - counts[j]), j))
    for j in by_remainder[: n - sum(counts)]:
        counts[j] += 1
    return counts


def hash_order(salt: str, names: Iterable[str], seed: object) -> list[str]:
    """``names`` in a stable pseudo-random order: which sites get which behaviour must not
    follow the site index, which already decides robots kinds and feed formats."""
    return sorted(names, key=lambda name: stable_hash(salt, seed, name))


def assign(mix: Mix, site_names: Sequence[str], seed: object) -> dict[str, str]:
    """Site name -> signal kind, the kinds apportioned over the sites by their shares."""
    pairs = resolve(mix)
    counts = apportion([s for _, s in pairs], len(site_names))
    kinds = [k for (k, _), c in zip(pairs, counts, strict=True) for _ in range(c)]
    order = hash_order("signals", site_names, seed)
    return dict(zip(order, kinds, strict=True))


def choose(share: float, site_names: Sequence[str], seed: object) -> set[str]:
    """The ``share`` of the sites picked by their own hash order (independent of ``assign``)."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be in [0, 1], got {share!r}")
    n = apportion([share, 1 - share], len(site_names))[0]
    return set(hash_order("feeds", site_names, seed)[:n])


def lastmod(kind: str, clock: PoissonPage, day: int) -> datetime | None:
    """The <lastmod> a site of ``kind`` publishes for a page on ``day``, at full precision (the
    sitemap writes its UTC date, feeds the whole time); None when the kind publishes none."""
    if kind == ACCURATE:
        return clock.last_modified(day)
    if kind == NONE:
        return None
    if kind == TODAY:
        return sim_datetime(day)
    if kind == FROZEN:
        return clock.last_modified(0)
    if kind == LAG:
        return clock.last_modified(day - LAG_DAYS)  # before day 0: EPOCH
    if kind == FUTURE:
        return sim_datetime(day + FUTURE_DAYS)
    raise ValueError(f"unknown signal kind {kind!r}; one of {KINDS}")

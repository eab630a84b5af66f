"""Which URL of a duplicate group survives: a configurable comparator, as in Nutch.

Nutch's DeduplicationJob.DedupReducer walks `deduplication.compare.order` (score, fetchTime,
httpsOverHttp, urlLength) and the first criterion that differs decides. We express the same
idea as a sort key (smaller is better) so that a Python caller takes `min()` and a Spark job
gets the equivalent `orderBy` from `spark_order_columns` for a `row_number()` window, or one
struct column from `rank_key_column` that compares in the same order (min() per group).

A candidate is a mapping (dict or pyspark Row) with these fields (CANDIDATE_FIELDS):
  url        - normalized URL (required)
  score      - PageRank / crawldb score; missing counts as the lowest
  first_seen - when we first knew the URL (crawldb.discovered_at, else its first fetch time)
  fetch_time - time of the fetch that produced the content (only for "fetch_time")
Times may be datetimes, dates, ISO strings or numbers (epoch seconds / logical days); a
missing time always loses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import unquote

DEFAULT_ORDER: tuple[str, ...] = ("score", "https", "url_length", "first_seen")
CANDIDATE_FIELDS: tuple[str, ...] = ("url", "score", "first_seen", "fetch_time")

# Why each criterion (Nutch DeduplicationJob):
#   score      - higher wins: the page the link graph values most is the one to keep indexed.
#   https      - https wins (Nutch "httpsOverHttp"). Nutch only applies it when the two URLs
#                are equal apart from the scheme; a sort key must be a total order, so we
#                prefer https in general - within a group of duplicates that is the intent.
#   url_length - shorter wins, measured after percent-decoding as Nutch does ("urlLength"):
#                short URLs are usually the canonical ones (no tracking/session params).
#   first_seen - earliest wins: the original is usually older than its copies, and keeping
#                the long-known URL keeps its history and links stable.
#   fetch_time - latest wins: Nutch's "fetchTime" criterion (keep the freshest capture).
# A final, always-present tie-break on the URL string makes the choice deterministic, so
# re-running dedup for a round picks the same survivor (idempotency, docs/design.md).
_DESCENDING = {
    "score": True,
    "https": True,
    "url_length": False,
    "first_seen": False,
    "fetch_time": True,
}
_ALIASES = {
    "httpsOverHttp": "https",
    "urlLength": "url_length",
    "fetchTime": "fetch_time",
    "firstSeen": "first_seen",
}

# Spark SQL for each criterion over CANDIDATE_FIELDS columns. try_url_decode (Spark >= 4.0)
# returns NULL on a malformed escape, where we fall back to the raw URL like Python's unquote
# leaves it; both agree on well-formed URLs.
_SPARK_EXPR = {
    "score": "score",
    "https": "CASE WHEN lower(url) LIKE 'https://%' THEN 1 ELSE 0 END",
    "url_length": "length(coalesce(try_url_decode(url), url))",
    "first_seen": "first_seen",
    "fetch_time": "fetch_time",
}


def validate_order(order: str | Iterable[str] = DEFAULT_ORDER) -> tuple[str, ...]:
    """Normalize an order (sequence or comma-separated string, Nutch names accepted)."""
    names = order.split(",") if isinstance(order, str) else list(order)
    out: list[str] = []
    for raw in names:
        name = _ALIASES.get(raw.strip(), raw.strip())
        if name not in _DESCENDING:
            valid = ", ".join(sorted(_DESCENDING))
            raise ValueError(f"unknown survivor order criterion {raw!r}; valid: {valid}")
        if name in out:
            raise ValueError(f"survivor order criterion {name!r} given twice")
        out.append(name)
    return tuple(out)


def _get(cand: Any, field: str) -> Any:
    """Field of a dict or a pyspark Row (Row supports item access but not .get)."""
    try:
        return cand[field]
    except (KeyError, ValueError, IndexError):
        return None


def _as_number(v: Any) -> float | None:
    """Comparable number for a score or a time; None when missing or unparseable."""
    if v is None:
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return None if v != v else float(v)  # NaN counts as missing
    if isinstance(v, str):
        try:
            f = float(v)
            return None if f != f else f
        except ValueError:
            pass
        try:
            v = datetime.fromisoformat(v)
        except ValueError:
            return None
    if isinstance(v, datetime):
        if v.tzinfo is None:  # Spark hands out naive datetimes in session time; compare as UTC
            v = v.replace(tzinfo=UTC)
        return v.timestamp()
    if isinstance(v, date):
        return float(v.toordinal() * 86400)
    return None


def _url_length(url: str) -> int:
    """URL length after percent-decoding (Nutch urlLength)."""
    return len(unquote(url))


def sort_key(candidate: Mapping[str, Any], order: Sequence[str] = DEFAULT_ORDER) -> tuple:
    """Key whose minimum over a group is the survivor (validate `order` first for speed)."""
    url = _get(candidate, "url") or ""
    key: list[Any] = []
    for name in order:
        if name == "https":
            key.append(0 if url.lower().startswith("https://") else 1)
        elif name == "url_length":
            key.append(_url_length(url))
        else:
            v = _as_number(_get(candidate, name))
            if v is None:
                key.append((1, 0.0))  # missing loses whatever the direction
            else:
                key.append((0, -v if _DESCENDING[name] else v))
    key.append(url)
    return tuple(key)


def choose_survivor(
    cands: Sequence[Mapping[str, Any]], order: str | Iterable[str] = DEFAULT_ORDER
) -> Mapping[str, Any]:
    """The candidate to keep among duplicates (deterministic for any input order)."""
    if not cands:
        raise ValueError("choose_survivor needs at least one candidate")
    names = validate_order(order)
    return min(cands, key=lambda c: sort_key(c, names))


def split_survivor(
    cands: Sequence[Mapping[str, Any]], order: str | Iterable[str] = DEFAULT_ORDER
) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
    """(survivor, duplicates in survivor order) for one duplicate group."""
    if not cands:
        raise ValueError("split_survivor needs at least one candidate")
    names = validate_order(order)
    ranked = sorted(cands, key=lambda c: sort_key(c, names))
    return ranked[0], ranked[1:]


def spark_order_columns(order: str | Iterable[str] = DEFAULT_ORDER) -> list[tuple[str, bool]]:
    """[(Spark SQL expression, descending?)] equal to `sort_key`, ending with the URL.

    Use as `F.expr(e).desc_nulls_last()` / `.asc_nulls_last()` in a window ordered per group;
    nulls must sort last in both directions to match the Python key. Plain criteria are bare
    column names (score, first_seen, fetch_time), so the job selects or aliases them first.
    """
    cols = [(_SPARK_EXPR[name], _DESCENDING[name]) for name in validate_order(order)]
    cols.append(("url", False))
    return cols


def rank_key_column(order):
    """A struct that sorts ascending in survivor order: smaller wins, as with `sort_key`.

    Built from `spark_order_columns`, one (is_null, value) field per criterion with the value
    negated for descending ones, so that nulls lose in both directions as in the Python key;
    the URL ends it, which makes it a total order. Criteria columns must be numeric (times as
    epoch micros). Comparing two such structs orients a pair without a global sort.
    """
    from pyspark.sql import functions as F  # lazy: pyspark (the comparator is used without it)

    fields = []
    for i, (expr, desc) in enumerate(spark_order_columns(order)):
        if expr == "url":
            fields.append(F.col("url").alias("url"))
            continue
        v = F.expr(expr)
        fields.append(
            F.struct(
                v.isNull().alias("missing"),
                F.coalesce(-v if desc else v, F.lit(0)).alias("v"),
            ).alias(f"c{i}")
        )
    return F.struct(*fields)

"""Small pieces every Spark job shares: config → rule objects, time helpers, SQL literals."""

from __future__ import annotations

import datetime as dt

from recrawl.config import Config
from recrawl.linkfilter import LinkFilterRules
from recrawl.urlnorm import DEFAULT_RULES, NormalizeRules


def norm_rules(cfg: Config) -> NormalizeRules:
    u = cfg.section("urlnorm")
    return NormalizeRules(
        strip_tracking_params=u["strip_tracking_params"],
        strip_session_ids=u["strip_session_ids"],
        sort_query=u["sort_query"],
        drop_fragment=u["drop_fragment"],
    ) if u else DEFAULT_RULES


def filter_rules(cfg: Config) -> LinkFilterRules:
    p = cfg.section("parse")
    return LinkFilterRules(
        max_url_length=p["max_url_length"],
        max_query_params=p["max_query_params"],
        max_path_depth=p["max_path_depth"],
        max_repeated_segment=p["max_repeated_segment"],
    )


def naive_utc(t: dt.datetime) -> dt.datetime:
    """Spark's TimestampType takes naive UTC datetimes (session time zone is UTC)."""
    return t.astimezone(dt.UTC).replace(tzinfo=None) if t.tzinfo else t




def ts_lit(t: dt.datetime) -> str:
    return f"timestamp'{naive_utc(t).isoformat(sep=' ')}'"



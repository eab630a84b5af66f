"""Small pieces every Spark job shares: configuration -> rule objects (SQL literals and
time helpers are recrawl.tables' `sql_str`, `ts_lit`, `naive_utc`)."""

from __future__ import annotations

from recrawl.config import Config
from recrawl.linkfilter import LinkFilterRules
from recrawl.urlnorm import DEFAULT_RULES, NormalizeRules

# The configuration keys each rule object takes from its section (the rest keep their defaults).
NORMALIZE_KEYS = ("strip_tracking_params", "strip_session_ids", "sort_query", "drop_fragment")
FILTER_KEYS = ("max_url_length", "max_query_params", "max_path_depth", "max_repeated_segment")


def norm_rules(cfg: Config) -> NormalizeRules:
    u = cfg.section("urlnorm")
    return NormalizeRules(**{k: u[k] for k in NORMALIZE_KEYS}) if u else DEFAULT_RULES


def filter_rules(cfg: Config) -> LinkFilterRules:
    p = cfg.section("parse")
    return LinkFilterRules(**{k: p[k] for k in FILTER_KEYS})




"""Small pieces every Spark job shares: configuration -> rule objects (SQL literals and
time helpers are recrawl.store.tables' `sql_str`, `ts_lit`, `naive_utc`)."""

from __future__ import annotations

import json
from pathlib import Path

from recrawl.config import Config, ConfigError
from recrawl.content.linkfilter import LinkFilterRules
from recrawl.content.urlnorm import DEFAULT_RULES, NormalizeRules

# The configuration keys each rule object takes from its section (the rest keep their defaults).
NORMALIZE_KEYS = ("strip_tracking_params", "strip_session_ids", "sort_query", "drop_fragment")
FILTER_KEYS = ("max_url_length", "max_query_params", "max_path_depth", "max_repeated_segment")


def norm_rules(cfg: Config) -> NormalizeRules:
    u = cfg.section("urlnorm")
    return NormalizeRules(**{k: u[k] for k in NORMALIZE_KEYS}) if u else DEFAULT_RULES


def filter_rules(cfg: Config) -> LinkFilterRules:
    p = cfg.section("parse")
    return LinkFilterRules(**{k: p[k] for k in FILTER_KEYS})





def with_trust_oracle(spark, cfg: Config, hosts):
    """Benchmarks only (signals.trust_oracle, a JSON object host -> bool): `hosts`' learned
    signal_trusted and signal_defer replaced by the oracle's word: honest hosts trusted for
    precision and recall, every other host for neither."""
    from pyspark.sql import functions as F  # lazy: pyspark

    path = str(cfg.get("signals.trust_oracle") or "")
    if not path:
        return hosts
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ConfigError(f"signals.trust_oracle: {path} must hold a JSON object host -> bool")
    honest = spark.createDataFrame([(str(h), bool(v)) for h, v in data.items()] or [("", False)],
                                   "host string, honest boolean")
    flag = F.coalesce(F.col("honest"), F.lit(False))
    return (hosts.join(F.broadcast(honest), "host", "left")
            .withColumn("signal_trusted", flag).withColumn("signal_defer", flag).drop("honest"))

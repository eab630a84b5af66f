"""The hosts table's owner: every write to `hosts` is one of the functions here.

Nutch's HostDb idea: fetch (politeness state), updatedb (page counters, traps), dedup
(near-duplicate floods) and pagerank (host graph) each know something about a host; each
writes its own columns through one function here and leaves the others' alone, so a row is
never reset by a step that does not own a column. A host first seen by any of them gets the
defaults a later step expects (no trap, no pages counted).
"""

from __future__ import annotations

from recrawl.config import Config
from recrawl.rules.signal_trust import host_trust_sql, lm_trusted_sql
from recrawl.store.tables import Insert, Update, merge_into

HOST_RANK_COLUMNS = ("host_rank", "component_root", "component_hosts", "scc_root", "scc_hosts")


def record_fetch(spark, cfg: Config, rows) -> None:
    """The fetcher's per-host state after a round (`rows`: host, ip, backoff_until,
    consecutive_failures, updated_at)."""
    politeness = ("ip", "backoff_until", "consecutive_failures", "updated_at")
    merge_into(
        spark, cfg, "hosts", rows, "t.host = s.host",
        Update({c: f"s.{c}" for c in politeness}),
        Insert({"host": "s.host", **{c: f"s.{c}" for c in politeness}, "pages_known": "0",
                "trap": "false", "pages_fetched": "0"}),
        portable=True,
    )


def record_counts(spark, cfg: Config, stats) -> None:
    """updatedb's per-host counters and trap verdict (`stats`: host, pages_known,
    pages_fetched, trap, trap_reason, updated_at). A trap flag set by dedup is kept."""
    merge_into(
        spark, cfg, "hosts", stats, "t.host = s.host",
        Update({
            "pages_known": "s.pages_known", "pages_fetched": "s.pages_fetched",
            "trap": "s.trap OR coalesce(t.trap, false)",
            "trap_reason": "coalesce(s.trap_reason, t.trap_reason)",
            "updated_at": "s.updated_at",
        }),
        Insert({
            "host": "s.host", "pages_known": "s.pages_known", "pages_fetched": "s.pages_fetched",
            "trap": "s.trap", "trap_reason": "s.trap_reason", "consecutive_failures": "0",
            "updated_at": "s.updated_at",
        }),
        portable=True,
    )


def flag_traps(spark, cfg: Config, traps) -> None:
    """Dedup's verdict: hosts whose new pages are mostly near-duplicates (`traps`: host, trap,
    trap_reason)."""
    merge_into(
        spark, cfg, "hosts", traps, "t.host = s.host",
        Update({"trap": "s.trap", "trap_reason": "s.trap_reason"}),
        Insert({"host": "s.host", "trap": "s.trap", "trap_reason": "s.trap_reason"}),
        portable=True,
    )


def set_ranks(spark, cfg: Config, rows) -> None:
    """The host graph's rank and components (`rows`: host and HOST_RANK_COLUMNS)."""
    cols = {c: f"s.{c}" for c in HOST_RANK_COLUMNS}
    merge_into(spark, cfg, "hosts", rows, "t.host = s.host",
               Update(cols), Insert({"host": "s.host", **cols}), portable=True)


def record_signal_reads(spark, cfg: Config, rows) -> None:
    """The signals step: when each host's sources last answered (`rows`: host,
    signals_read_at)."""
    merge_into(spark, cfg, "hosts", rows, "t.host = s.host",
               Update({"signals_read_at": "s.signals_read_at"}),
               Insert({"host": "s.host", "signals_read_at": "s.signals_read_at",
                       "pages_known": "0", "trap": "false", "pages_fetched": "0"}),
               portable=True)


def record_signal_checks(spark, cfg: Config, checks, rule) -> None:
    """updatedb's verdicts on the hosts' signals (`checks`: host, tp, fp, fn, tn, lm_agree,
    lm_disagree: this round's counts; `rule` a recrawl.rules.signal_trust.TrustRule): the stored
    counts decay by `rule.decay` and take the new ones, and precision, recall and the trust
    verdicts are recomputed from the updated counts. Every checked host has a row already
    (the fetch step wrote it)."""
    d = repr(float(rule.decay))
    counts = {f"signal_{k}": f"(coalesce(t.signal_{k}, 0.0) * {d} + s.{k})"
              for k in ("tp", "fp", "fn", "tn")}
    counts.update({k: f"(coalesce(t.{k}, 0.0) * {d} + s.{k})" for k in ("lm_agree", "lm_disagree")})
    trust = host_trust_sql(rule, counts["signal_tp"], counts["signal_fp"], counts["signal_fn"])
    verdicts = {"signal_precision": trust["precision"], "signal_recall": trust["recall"],
                "signal_trusted": trust["trusted"], "signal_defer": trust["defer"],
                "lm_trusted": lm_trusted_sql(rule, counts["lm_agree"], counts["lm_disagree"])}
    merge_into(spark, cfg, "hosts", checks, "t.host = s.host", Update({**counts, **verdicts}),
               portable=True)

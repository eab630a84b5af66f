"""Each step's metrics for Prometheus, with its official client library.

After every step (app/cli.run_step) the step's counts, timing and gate results become one
registry, written as a textfile-collector file `<metrics.dir>/recrawl_<step>.prom` (node
exporter's `--collector.textfile.directory` reads it) and pushed to `metrics.pushgateway` when
one is set. Each file holds the step's latest run; the round is a label, so every round is its
own series. Names follow Prometheus' conventions: the `recrawl_` prefix, `_total` for
counters, base units (`_seconds`, `_bytes`). The values are the rounds table's: a metric and
`crawl.rounds` never disagree. docs/grafana/recrawl.json is a dashboard over them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    push_to_gateway,
    write_to_textfile,
)

from recrawl.config import Config

log = logging.getLogger(__name__)
# Counters here hold one round's totals, written once: their `_created` series says nothing.
disable_created_metrics()

# Families the exporter writes (the dashboard test holds the dashboard's queries to these).
FAMILIES = (
    "recrawl_step_duration_seconds",
    "recrawl_step_driver_cpu_seconds",
    "recrawl_step_last_run_timestamp_seconds",
    "recrawl_step_items",
    "recrawl_gate_failed",
    "recrawl_fetch_urls_total",
    "recrawl_fetch_requests_total",
    "recrawl_fetch_bytes_total",
    "recrawl_fetch_hosts",
    "recrawl_fetch_robots_unavailable_hosts",
    "recrawl_fetch_requests_per_host",
    "recrawl_fetch_politeness_wait_seconds_total",
    "recrawl_fetch_politeness_violations_total",
)

# Fetch counts that are not URL outcomes (the rest of the fetch step's counts are statuses).
_FETCH_STATS = {"urls", "executors", "warc_files", "warc_orphans_removed", "resumed",
                "cdxj_lines", "pages_inline", "requests", "bytes", "hosts", "robots_unavailable_hosts",
                "politeness_wait_ms", "politeness_violations", "politeness_worst_short_ms",
                "requests_per_host_p50", "requests_per_host_p90", "requests_per_host_p99",
                "requests_per_host_max", "task_max_ms", "polite_floor_ms"}
_QUANTILES = (("0.5", "requests_per_host_p50"), ("0.9", "requests_per_host_p90"),
              ("0.99", "requests_per_host_p99"), ("1", "requests_per_host_max"))


def registry_for(step: str, round_id: str, counts: Mapping[str, int], seconds: float,
                 cpu_seconds: float, finished_at: float,
                 gates: Mapping[str, str] | None = None) -> CollectorRegistry:
    """The metrics of one run of `step` in round `round_id`."""
    reg = CollectorRegistry()
    labels = {"step": step, "round": round_id}
    Gauge("recrawl_step_duration_seconds", "Wall time of the step's last run",
          ["step", "round"], registry=reg).labels(**labels).set(seconds)
    Gauge("recrawl_step_driver_cpu_seconds", "CPU time of the driver process during the step",
          ["step", "round"], registry=reg).labels(**labels).set(cpu_seconds)
    Gauge("recrawl_step_last_run_timestamp_seconds", "When the step's last run ended (Unix time)",
          ["step"], registry=reg).labels(step=step).set(finished_at)
    items = Gauge("recrawl_step_items", "The step's counts as the rounds table records them "
                  "(rounds.counts `<step>.<key>`)", ["step", "round", "key"], registry=reg)
    for key, value in counts.items():
        items.labels(step=step, round=round_id, key=key).set(value)
    failed = Gauge("recrawl_gate_failed", "1 when the health gate failed the step, 0 when it "
                   "passed", ["step", "round", "gate"], registry=reg)
    for gate, result in (gates or {}).items():
        failed.labels(step=step, round=round_id, gate=gate).set(0 if result == "ok" else 1)
    if step == "fetch":
        _fetch_metrics(reg, round_id, counts)
    return reg


def _fetch_metrics(reg: CollectorRegistry, round_id: str, c: Mapping[str, int]) -> None:
    urls = Counter("recrawl_fetch_urls", "URLs of the fetch list by outcome (fetch_status)",
                   ["round", "status"], registry=reg)
    for status, n in c.items():
        if status not in _FETCH_STATS:
            urls.labels(round=round_id, status=status).inc(n)
    Counter("recrawl_fetch_requests", "HTTP requests made (robots.txt and redirects included)",
            ["round"], registry=reg).labels(round=round_id).inc(c.get("requests", 0))
    Counter("recrawl_fetch_bytes", "Response bytes received (head and body, as on the wire)",
            ["round"], registry=reg).labels(round=round_id).inc(c.get("bytes", 0))
    Gauge("recrawl_fetch_hosts", "Hosts of the fetch", ["round"], registry=reg) \
        .labels(round=round_id).set(c.get("hosts", 0))
    Gauge("recrawl_fetch_robots_unavailable_hosts", "Hosts whose robots.txt was unavailable "
          "(5xx, unreachable)", ["round"], registry=reg).labels(round=round_id) \
        .set(c.get("robots_unavailable_hosts", 0))
    per_host = Gauge("recrawl_fetch_requests_per_host", "Requests per host, quantiles over the "
                     "fetch's hosts (1 = the busiest host)", ["round", "quantile"], registry=reg)
    for q, key in _QUANTILES:
        per_host.labels(round=round_id, quantile=q).set(c.get(key, 0))
    Counter("recrawl_fetch_politeness_wait_seconds", "Seconds hosts waited between a response "
            "and their next request (their delays)", ["round"], registry=reg) \
        .labels(round=round_id).inc(c.get("politeness_wait_ms", 0) / 1000)
    Counter("recrawl_fetch_politeness_violations", "Requests started sooner than their host's "
            "delay after the previous response (never expected)", ["round"], registry=reg) \
        .labels(round=round_id).inc(c.get("politeness_violations", 0))


def metrics_dir(cfg: Config) -> str | None:
    """The textfile collector's folder: `metrics.dir`, under a local crawl home when relative;
    None when no file is written (off, or a relative folder on an object-store home: node
    exporter reads a local disk)."""
    folder = str(cfg.get("metrics.dir"))
    if not folder:
        return None
    if os.path.isabs(folder):
        return folder
    home = cfg.local_home
    return None if home is None else os.path.join(str(home), folder)


def export(cfg: Config, step: str, reg: CollectorRegistry) -> str | None:
    """Write `reg` to `recrawl_<step>.prom` (atomically) and push it when a pushgateway is set;
    returns the file's path. A failed push is logged, never fails the step."""
    path = None
    folder = metrics_dir(cfg)
    if folder is not None:
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"recrawl_{step}.prom")
        write_to_textfile(path, reg)  # a temporary file renamed over the old one
    gateway = str(cfg.get("metrics.pushgateway"))
    if gateway:
        try:
            push_to_gateway(gateway, job=str(cfg.get("metrics.job")), registry=reg,
                            grouping_key={"step": step}, timeout=10)
        except OSError as exc:
            log.warning("metrics: push to %s failed: %s", gateway, exc)
    return path

"""recrawl.sparkenv.metrics: the textfile-collector file and the pushgateway push, read back with the
Prometheus client's own parser; the Grafana dashboard queries only what the exporter writes."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from recrawl.config import load_config
from recrawl.sparkenv import metrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana" / "recrawl.json"
FETCH = {"urls": 12, "fetched": 7, "not_modified": 2, "timeout": 3, "requests": 15,
         "bytes": 40_000, "hosts": 4, "robots_unavailable_hosts": 1, "politeness_wait_ms": 2500,
         "politeness_violations": 0, "requests_per_host_p50": 3, "requests_per_host_p90": 5,
         "requests_per_host_p99": 6, "requests_per_host_max": 6}
GATES = {"politeness": "ok", "error_share": "error share 60%"}


def _cfg(home, **overrides):
    env = {"RECRAWL_CRAWL__HOME": str(home)}
    env.update({f"RECRAWL_{k.replace('.', '__').upper()}": v for k, v in overrides.items()})
    return load_config(environ=env)


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_textfile_holds_the_steps_counts_timing_and_gates(tmp_path):
    cfg = _cfg(tmp_path)
    reg = metrics.registry_for("fetch", "20261101", FETCH, 42.5, 3.5, 1.7e9, GATES)
    path = metrics.export(cfg, "fetch", reg)
    assert path == str(tmp_path / "metrics" / "recrawl_fetch.prom")
    got = _samples(Path(path).read_text())
    r = {("round", "20261101")}

    def val(name, **labels):
        return got[(name, frozenset(r | set(labels.items())))]

    assert val("recrawl_step_duration_seconds", step="fetch") == 42.5
    assert val("recrawl_step_driver_cpu_seconds", step="fetch") == 3.5
    assert got[("recrawl_step_last_run_timestamp_seconds", frozenset({("step", "fetch")}))] == 1.7e9
    for status in ("fetched", "not_modified", "timeout"):
        assert val("recrawl_fetch_urls_total", status=status) == FETCH[status]
    # statistics are not outcomes
    assert not any(n == "recrawl_fetch_urls_total" and ("status", "requests") in lb for n, lb in got)
    assert val("recrawl_fetch_requests_total") == 15 and val("recrawl_fetch_bytes_total") == 40_000
    assert val("recrawl_fetch_requests_per_host", quantile="0.9") == 5
    assert val("recrawl_fetch_requests_per_host", quantile="1") == 6
    assert val("recrawl_fetch_politeness_wait_seconds_total") == 2.5
    assert val("recrawl_fetch_politeness_violations_total") == 0
    assert val("recrawl_gate_failed", step="fetch", gate="politeness") == 0
    assert val("recrawl_gate_failed", step="fetch", gate="error_share") == 1
    # every count of the step, as the rounds table has it
    for key, n in FETCH.items():
        assert val("recrawl_step_items", step="fetch", key=key) == n
    assert {n for n, _ in got} <= set(metrics.FAMILIES)


def test_metrics_folder_is_configurable_and_a_pushgateway_gets_the_same(tmp_path):
    pushed = []

    class Gateway(BaseHTTPRequestHandler):
        def do_PUT(self):  # noqa: N802 (http.server's naming)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            pushed.append((self.path, body.decode()))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        out = tmp_path / "collector"
        cfg = _cfg(tmp_path / "home", **{"metrics.dir": str(out),
                                         "metrics.pushgateway": f"127.0.0.1:{server.server_port}"})
        reg = metrics.registry_for("parse", "r1", {"pages": 9}, 1.0, 0.5, 1.7e9)
        assert metrics.export(cfg, "parse", reg) == str(out / "recrawl_parse.prom")
    finally:
        server.shutdown()
        server.server_close()
    assert [p for p, _ in pushed] == ["/metrics/job/recrawl/step/parse"]
    assert _samples(pushed[0][1]) == _samples((out / "recrawl_parse.prom").read_text())
    assert not (tmp_path / "home" / "metrics").exists()


def test_no_file_when_the_folder_is_off_or_relative_to_an_object_store_home(tmp_path):
    reg = metrics.registry_for("parse", "r1", {"pages": 9}, 1.0, 0.5, 1.7e9)
    assert metrics.export(_cfg(tmp_path, **{"metrics.dir": '""'}), "parse", reg) is None
    assert metrics.metrics_dir(_cfg("s3a://bucket/crawl")) is None
    assert metrics.metrics_dir(_cfg("s3a://bucket/crawl", **{"metrics.dir": "/var/lib/prom"})) \
        == "/var/lib/prom"


def _dashboard_queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


def test_dashboard_is_a_grafana_dashboard():
    board = json.loads(DASHBOARD.read_text())
    assert isinstance(board["schemaVersion"], int) and board["title"] and board["uid"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) >= 8
    for p in board["panels"]:
        assert p["type"] in ("timeseries", "stat", "bargauge", "table", "row"), p["title"]
        assert {"x", "y", "w", "h"} <= set(p["gridPos"]), p["title"]
        assert p["type"] == "row" or p["targets"], p["title"]
        assert all(t["refId"] and t["expr"] for t in p.get("targets", []))
    names = [v["name"] for v in board["templating"]["list"]]
    assert "datasource" in names and "round" in names


def test_dashboard_queries_only_what_the_exporter_writes(tmp_path):
    written = set()
    for step, counts in (("fetch", FETCH), ("parse", {"pages": 1})):
        reg = metrics.registry_for(step, "r1", counts, 1.0, 1.0, 1.0, GATES)
        written |= {n for n, _ in _samples(Path(metrics.export(_cfg(tmp_path), step, reg)).read_text())}
    used = {m for q in _dashboard_queries() for m in re.findall(r"\brecrawl_[a-z0-9_]+", q)}
    assert used and used <= written, used - written
    # every family the exporter writes is on the dashboard
    assert {re.sub(r"_total$", "", n) for n in written} <= {re.sub(r"_total$", "", n) for n in used}

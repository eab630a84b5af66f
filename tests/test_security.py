"""Hostile input never reaches a shell, a file path or a SQL string; credentials stay out of
WARC metadata. (SSRF: tests/fetcher/test_fetch_dns.py and the redirect cases of
tests/fetcher/test_fetch_simweb.py; DAG shell quoting: tests/dags/test_dags.py.)"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = [p for d in ("recrawl", "spark_jobs", "fetcher", "dags") for p in (ROOT / d).rglob("*.py")]


def test_no_shell_is_ever_spawned_from_crawler_code():
    bad = []
    for p in CODE:
        text = p.read_text()
        for pat in (r"shell\s*=\s*True", r"os\.system\(", r"os\.popen\("):
            if re.search(pat, text):
                bad.append(f"{p.relative_to(ROOT)}: {pat}")
    assert bad == []


def test_sql_built_from_strings_only_quotes_escaped_values():
    """Every f-string SQL literal in the jobs goes through sql_str/_sql_str or is a constant,
    a checked round id or a timestamp we formatted; URLs only travel in DataFrames."""
    offenders = []
    for p in (ROOT / "spark_jobs").rglob("*.py"):
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"'\{(?!now|naive_utc|s\}|round_id\}|rid)[^}]*\}'", line) \
                    and "sql_str" not in line:
                offenders.append(f"{p.name}:{n}: {line.strip()}")
    assert offenders == []


def test_sql_str_escapes_quotes_and_backslashes():
    from recrawl.store.tables import sql_str

    assert sql_str("a'b\\c") == "'a\\'b\\\\c'"


def test_warc_file_names_never_come_from_urls(tmp_path):
    from fetcher import Fetcher, FetchItem, FetchSettings
    from simweb import SimWeb

    web = SimWeb(seed=2, n_sites=1, pages_per_site=2)
    web.start()
    secret = "S3CR3T-do-not-leak-1234"
    try:
        s = FetchSettings(min_delay_s=0.1, static_hosts={"*.sim.test": "127.0.0.1"},
                          allow_private_networks=("127.0.0.1/32",), time_budget_s=20.0,
                          request_deadline_s=5.0)
        hostile = web.truth.url("site0.sim.test", "/../../etc/passwd;rm -rf ~'$(id)'?a=`x`")
        out = Fetcher(s, str(tmp_path / "warc"), "r1-p0").run(
            [FetchItem(web.truth.url("site0.sim.test", "/")), FetchItem(hostile)])
    finally:
        web.stop()
    files = list((tmp_path / "warc").iterdir())
    assert files and all(f.name.startswith("r1-p0-") for f in files)
    assert {r["fetch_status"] for r in out.rows} <= {"fetched", "gone", "http_error", "connect_error"}
    assert not (tmp_path / "etc").exists()
    # credentials in the environment of the task never end up in WARC metadata
    blob = b"".join(gzip.decompress(f.read_bytes()) for f in files)
    assert secret.encode() not in blob
    assert b"AWS_SECRET" not in blob and b"secret.key" not in blob

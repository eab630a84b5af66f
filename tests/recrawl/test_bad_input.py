"""Bad input is refused clearly: one line naming the problem and what to do, exit code 2, no
data touched. (Unknown/mistyped config keys, missing Java, missing jars and bad dates are in
tests/app/test_cli.py and test_config.py; seed-file line errors in
tests/spark_jobs/test_inject.py.)"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys

import pytest

from recrawl.rules.rounds import BadInput

CRAWLER = [sys.executable, "-m", "app.cli"]


def _run(args, home, **env):
    e = dict(os.environ, RECRAWL_CRAWL__HOME=str(home))
    e.update(env)
    return subprocess.run(CRAWLER + args, capture_output=True, text=True, env=e, timeout=120)


def _one_line_error(out, *needles):
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.strip().count("\n") == 0, out.stderr
    assert "Traceback" not in out.stderr
    for n in needles:
        assert n in out.stderr, out.stderr


# -- seed files ------------------------------------------------------------------------------

def test_a_seed_file_without_one_valid_url_is_refused_before_spark_starts(tmp_path):
    seeds = tmp_path / "seeds.bin"
    seeds.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00garbage\nnot a url\nftp://x/\n" * 50)
    out = _run(["inject", str(seeds)], tmp_path / "home")
    _one_line_error(out, "has no valid URL", "expected one http(s) URL per line")
    assert not (tmp_path / "home" / "tables").exists()  # nothing written


def test_check_seeds_accepts_files_with_some_invalid_lines(tmp_path):
    from recrawl.content.urlnorm import DEFAULT_RULES
    from spark_jobs.common import norm_rules  # noqa: F401  (import check: no JVM needed)
    from spark_jobs.inject import check_seeds, read_seeds

    f = tmp_path / "s.txt"
    f.write_text("# only comments\n\n")
    check_seeds(read_seeds(f, DEFAULT_RULES), f)  # empty is fine (nothing to do)
    f.write_text("http://a.test/\nnot a url\n")
    check_seeds(read_seeds(f, DEFAULT_RULES), f)
    f.write_text("not a url\n")
    with pytest.raises(BadInput, match="line 1"):
        check_seeds(read_seeds(f, DEFAULT_RULES), f)


# -- Java ------------------------------------------------------------------------------------

@pytest.mark.parametrize("script, message", [
    ("echo 'openjdk version \"1.8.0_402\"' >&2", "Java 8 found but Spark 4 needs Java 17+"),
    ("echo nonsense", "cannot read the version"),
], ids=["java8", "broken"])
def test_unusable_java_is_explained(tmp_path, script, message):
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    java = java_home / "bin" / "java"
    java.write_text(f"#!/bin/sh\n{script}\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    out = _run(["init"], tmp_path / "home", JAVA_HOME=str(java_home))
    _one_line_error(out, message, "JAVA_HOME")


# -- corrupt and truncated WARC at parse time -----------------------------------------------

def _warc(path, url, body):
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="1.1")
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body),
                                            http_headers=http))


def test_corrupt_truncated_or_missing_warc_is_a_recorded_parse_error(tmp_path):
    from app.demo import demo_config
    from spark_jobs.common import filter_rules, norm_rules
    from spark_jobs.parse import parse_rows

    cfg = demo_config(tmp_path)
    opts = {"max_bytes": 1 << 20, "extract_text": True, "norm_rules": norm_rules(cfg),
            "filter_rules": filter_rules(cfg), "max_outlinks": 100, "max_sitemap_urls": 100}
    good = tmp_path / "good.warc.gz"
    body = b"<html><head><title>T</title></head><body><p>" + b"words " * 2000 + \
           b'<a href="/x">x</a></p></body></html>'
    _warc(good, "http://a.test/", body)
    data = good.read_bytes()
    truncated = tmp_path / "truncated.warc.gz"
    truncated.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / "garbage.warc.gz"
    # a gzip header, then a deflate block of reserved type: fails the same way every run
    # (random bytes occasionally decoded to an empty record instead)
    garbage.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + b"\xff" * 2000)
    cases = {
        "good": (str(good), 0), "truncated": (str(truncated), 0),
        "garbage": (str(garbage), 0), "missing": (str(tmp_path / "gone.warc.gz"), 0),
        "bad-offset": (str(good), 7),
    }
    rows = [{"round_id": "r", "url": f"http://a.test/{k}", "final_url": None,
             "content_type": "text/html", "warc_file": f, "warc_offset": off,
             "payload_digest": None} for k, (f, off) in cases.items()]
    out = {r["url"].rsplit("/", 1)[-1]: r for r in parse_rows(rows, opts)}
    assert set(out) == set(cases)  # one row each, no exception escapes
    assert out["good"].get("parse_error") is None and out["good"]["title"] == "T"
    for k in ("truncated", "garbage", "missing", "bad-offset"):
        assert (out[k].get("parse_error") or "").startswith("warc: "), (k, out[k])


# -- Delta tables: missing, or an unexpected schema -----------------------------------------

@pytest.mark.spark
def test_table_with_unexpected_schema_is_refused_before_any_write(spark, tmp_path, monkeypatch,
                                                                   capsys):
    from app import cli

    home = tmp_path / "home"
    monkeypatch.setenv("RECRAWL_CRAWL__HOME", str(home))
    assert cli.main(["generate", "--date", "2026-11-01"]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0
    assert "table crawldb not found" in err and "crawler init" in err

    path = str(home / "tables" / "crawldb")
    spark.createDataFrame([("http://a.test/", 1)], "url string, status int") \
        .write.format("delta").save(path)
    assert cli.main(["generate", "--date", "2026-11-01"]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0
    assert "table crawldb does not match the declared schema" in err
    assert "status is int, expected string" in err
    # untouched: still one version, same row
    assert spark.read.format("delta").load(path).collect()[0]["status"] == 1
    hist = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count()
    assert hist == 1

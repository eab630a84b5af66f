"""Tables and WARCs on s3a://, against moto's S3 in server mode on 127.0.0.1.

* ``test_warc_storage_on_s3`` (no Spark): the WARC writer through ``fetcher.storage`` -- nothing
  is visible under a file's name before it is closed, records read back by ranged GET, listing
  and deleting; and that the endpoint settings come from the s3a keys of ``spark.extra``.
* ``test_round_on_s3a`` (Spark): ``crawl.home = s3a://bucket/home`` -- ``init`` (Delta
  creates), inject twice (a MERGE into crawldb, then one that finds every URL known), generate,
  fetch (WARCs uploaded by the fetch tasks; MERGEs into robots and hosts; orphan WARCs listed
  and deleted through s3a) and parse (WARC records read back by ranged GET) over a 2-site
  simulated web. The Spark side runs in a
  subprocess (this file run as a script): the s3a jars are put on the JVM's class path at
  launch, which a test session that already started a JVM without them could not do. The
  test then checks the bucket itself with boto3 and warcio.

Delta uses its default S3 log store here (S3SingleDriverLogStore: one writer at a time).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
import time
from io import BytesIO

import pytest

BUCKET = "crawl-test"
KEY_ID = "testing-key-id"
SECRET = "testing-secret-never-logged"


@pytest.fixture(scope="module")
def s3():
    """moto's S3 on a free port of 127.0.0.1, one bucket, dummy credentials in the env."""
    pytest.importorskip("moto")
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
           "AWS_DEFAULT_REGION": "us-east-1", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    try:
        yield {"endpoint": endpoint, "client": client, "env": env}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def spark_extra(endpoint: str) -> dict[str, str]:
    """The s3a settings an operator would put in spark.extra (docker-compose.yml does)."""
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        # fail fast instead of s3a's long default retry ladder if the server is gone
        "spark.hadoop.fs.s3a.attempts.maximum": "2",
        "spark.hadoop.fs.s3a.retry.limit": "2",
    }


def _keys(client, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for p in pages for o in p.get("Contents", [])]


def test_s3_options_come_from_the_s3a_settings():
    from fetcher.storage import S3Options

    opts = S3Options.from_spark_conf({
        "spark.hadoop.fs.s3a.endpoint": "minio:9000",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.access.key": "AKIDEXAMPLE",
        "spark.hadoop.fs.s3a.secret.key": "very-secret",
    })
    assert opts.endpoint_url == "http://minio:9000" and opts.path_style
    kw = opts.s3fs_kwargs()
    assert kw["config_kwargs"] == {"s3": {"addressing_style": "path"}}
    assert kw["client_kwargs"] == {"region_name": "us-east-1"}
    assert kw["key"] == "AKIDEXAMPLE"
    assert "very-secret" not in repr(opts) and "AKIDEXAMPLE" not in repr(opts)
    assert S3Options.from_spark_conf({"spark.hadoop.fs.s3a.endpoint": "s3.example:443"}
                                     ).endpoint_url == "https://s3.example:443"
    assert S3Options.from_spark_conf({}).s3fs_kwargs() == {}


def test_warc_storage_on_s3(s3, tmp_path):
    from fetcher import warc
    from fetcher.storage import S3Options, Storage
    from spark_jobs.parse import read_payload

    storage = Storage(S3Options.from_spark_conf(spark_extra(s3["endpoint"])))
    directory = f"s3a://{BUCKET}/unit/warc/r1"
    w = warc.WarcWriter(directory, "t", max_bytes=10**9, gzip_level=1,
                        info={"software": "test"}, storage=storage)
    rid = warc.new_record_id()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
    body = b"<html><title>on s3</title>hello</html>"
    date = warc.datetime.now(warc.UTC)
    locs = w.write([
        warc.response_record("http://h.test/", date, "127.0.0.1", head, body, record_id=rid),
        warc.request_record("http://h.test/", date, "127.0.0.1",
                            b"GET / HTTP/1.1\r\nHost: h.test\r\n\r\n", concurrent_to=rid),
    ])
    # Not uploaded yet: no object under the final name, nor any partial one.
    assert _keys(s3["client"], "unit/") == []
    files = w.close()
    assert files == [f"{directory}/t-00000.warc.gz"]
    assert _keys(s3["client"], "unit/") == ["unit/warc/r1/t-00000.warc.gz"]
    assert locs[0].path == files[0]

    # ranged read (what parse does) and a sequential read from the offset
    payload, ctype, meta = read_payload(files[0], locs[0].offset, 1 << 20,
                                        length=locs[0].length, storage=storage)
    assert payload == body and ctype == "text/html" and not meta["truncated"]
    payload2, _, _ = read_payload(files[0], locs[0].offset, 1 << 20, storage=storage)
    assert payload2 == body
    # the whole object is a valid multi-member gzip WARC
    raw = s3["client"].get_object(Bucket=BUCKET, Key="unit/warc/r1/t-00000.warc.gz")["Body"].read()
    text = gzip.decompress(raw)
    assert text.startswith(b"WARC/1.1") and b"WARC-Type: warcinfo" in text
    assert KEY_ID.encode() not in text and SECRET.encode() not in text

    assert storage.listdir(directory) == files and storage.exists(files[0])
    storage.delete(files[0])
    storage.delete(files[0])  # missing: not an error
    assert storage.listdir(directory) == [] and not storage.exists(files[0])

    # an aborted file leaves nothing behind, locally or in the bucket
    f = storage.create(f"{directory}/aborted.warc.gz")
    f.write(b"partial")
    f.abort()
    assert _keys(s3["client"], "unit/") == []


def test_large_file_goes_up_in_parts(s3):
    """Files of two parts or more go up as multipart uploads; the object is whole."""
    from fetcher.storage import S3Options, Storage

    storage = Storage(S3Options.from_spark_conf(spark_extra(s3["endpoint"])))
    storage.part_size = 5 * 1024 * 1024  # S3's minimum, to keep the test small
    uri = f"s3a://{BUCKET}/big/one.warc.gz"
    f = storage.create(uri)
    chunk = bytes(range(256)) * 4096  # 1 MiB
    for _ in range(12):
        f.write(chunk)
    f.commit()
    head = s3["client"].head_object(Bucket=BUCKET, Key="big/one.warc.gz")
    assert head["ContentLength"] == 12 * len(chunk)
    assert head["ETag"].strip('"').endswith("-3")  # 5 + 5 + 2 MiB
    assert storage.read_range(uri, 11 * len(chunk) + 3, 4) == chunk[3:7]
    storage.delete(uri)


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_round_on_s3a(s3, tmp_path):
    from warcio.archiveiterator import ArchiveIterator

    home = f"s3a://{BUCKET}/home"
    env = dict(os.environ)
    env.update(s3["env"])
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
        + [p for p in [env.get("PYTHONPATH")] if p])
    args = json.dumps({"home": home, "extra": spark_extra(s3["endpoint"]), "work": str(tmp_path)})
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), args], env=env,
                          capture_output=True, text=True, timeout=840)
    elapsed = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    assert SECRET not in log and KEY_ID not in log
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"s3a round: {elapsed:.1f} s; steps {json.dumps(result['times'])}")

    client = s3["client"]
    keys = _keys(client, "home/")
    # Delta tables with their logs in the bucket
    for table in ("crawldb", "fetch_list", "fetches", "pages", "links", "rounds"):
        assert f"home/tables/{table}/_delta_log/00000000000000000000.json" in keys, table
    # inject twice: a MERGE of the seeds, then one that finds every seed known; fetch MERGEs
    # robots and hosts
    first, second = result["inject"]
    assert first["new"] == first["valid"] == 2
    assert second["new"] == 0 and second["known"] == 2
    assert result["merged"] == {"crawldb": 2, "robots": 2, "hosts": 2}
    for table in ("crawldb", "robots", "hosts"):
        assert f"home/tables/{table}/_delta_log/00000000000000000001.json" in keys, table

    # every fetched row points at a WARC object that exists, and the record is readable there
    fetched = [r for r in result["fetches"] if r["fetch_status"] == "fetched"]
    assert len(fetched) == 2  # the two seeds (their outlinks are the next round's)
    warc_keys = {k for k in keys if k.startswith("home/warc/")}
    assert warc_keys and not any(k.endswith(".open") for k in warc_keys)
    # beside the WARCs, the round's CDXJ index (written through fetcher.storage): a line per
    # response, naming the WARC object's base name and the record's offset
    index_keys = {k for k in warc_keys if k.endswith("/index.cdxj")}
    assert len(index_keys) == 1
    warc_keys -= index_keys
    cdxj = client.get_object(Bucket=BUCKET, Key=index_keys.pop())["Body"].read().decode()
    lines = [json.loads(line.split(" ", 2)[2]) for line in cdxj.splitlines()]
    assert {(e["filename"], int(e["offset"])) for e in lines} >= {
        (r["warc_file"].rsplit("/", 1)[1], r["warc_offset"]) for r in fetched}
    referenced = set()
    for r in fetched:
        assert r["warc_file"].startswith(f"s3a://{BUCKET}/home/warc/"), r
        key = r["warc_file"].split(f"s3a://{BUCKET}/", 1)[1]
        assert key in warc_keys, key
        referenced.add(key)
        end = r["warc_offset"] + r["warc_length"] - 1
        raw = client.get_object(Bucket=BUCKET, Key=key,
                                Range=f"bytes={r['warc_offset']}-{end}")["Body"].read()
        rec = next(iter(ArchiveIterator(BytesIO(raw))))
        assert rec.rec_type == "response"
        assert rec.rec_headers.get_header("WARC-Target-URI") in (r["url"], r["final_url"])
    # the unreferenced WARC put there before fetch was deleted (through s3a), no other one was
    assert result["counts"]["fetch"]["warc_orphans_removed"] == 1
    assert warc_keys == referenced
    for key in warc_keys:  # whole files are valid WARC/1.1
        body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        records = list(ArchiveIterator(BytesIO(body)))
        assert records[0].rec_type == "warcinfo"
        assert records[0].rec_headers.get_header("WARC-Type") == "warcinfo"
        assert SECRET.encode() not in body and KEY_ID.encode() not in body

    # parse read them back from the bucket
    assert result["counts"]["parse"]["pages"] == len(fetched)
    assert result["counts"]["parse"]["parse_errors"] == 0
    assert result["pages_with_text"] == len(fetched)


def _drive(args: dict) -> dict:
    """The Spark side of test_round_on_s3a (run in its own process)."""
    from pathlib import Path

    from app.cli import run_step
    from app.demo import demo_config
    from fetcher.storage import S3Options, Storage
    from recrawl.rules.rounds import parse_date, round_id_for
    from recrawl.sparkenv.spark import get_spark
    from recrawl.store.tables import init_tables, read
    from simweb import SimWeb
    from spark_jobs import inject

    web = SimWeb(seed=11, n_sites=2, pages_per_site=4)
    web.start()
    try:
        cfg = demo_config(args["home"], **{
            "spark.extra": args["extra"], "spark.shuffle_partitions": 2,
            "generate.partitions": 1, "generate.max_per_host": 4,
            "fetcher.min_delay_s": 0.1, "fetcher.time_budget_s": 20.0,
            "parse.extract_text": True,
        })
        times = {}
        t = time.monotonic()
        spark = get_spark(cfg, app_name="recrawl-s3a-test")
        times["spark"] = time.monotonic() - t
        t = time.monotonic()
        init_tables(spark, cfg)
        times["init"] = time.monotonic() - t
        seeds = Path(args["work"]) / "seeds.txt"
        seeds.write_text("\n".join(f"{web.base(h)}/" for h in web.hosts() if h.startswith("site")))
        logical = parse_date("2026-11-01")
        t = time.monotonic()
        injected = [inject.run(spark, cfg, str(seeds), logical) for _ in range(2)]
        times["inject"] = time.monotonic() - t
        rid = round_id_for(cfg, logical)
        counts = {}
        for step in ("generate", "fetch", "parse"):
            if step == "fetch":  # a WARC no row will reference: fetch must delete it
                stale = Storage(S3Options.from_spark_conf(args["extra"])).create(
                    f"{cfg.warc_dir(rid)}/stale-00000.warc.gz")
                stale.write(b"left by an earlier, failed attempt")
                stale.commit()
            t = time.monotonic()
            counts[step] = run_step(spark, cfg, step, rid, logical)
            times[step] = time.monotonic() - t
        fetches = [r.asDict() for r in read(spark, cfg, "fetches").select(
            "url", "final_url", "fetch_status", "warc_file", "warc_offset", "warc_length").collect()]
        pages_with_text = read(spark, cfg, "pages").where("text_len > 0").count()
        merged = {t: read(spark, cfg, t).count() for t in ("crawldb", "robots", "hosts")}
        spark.stop()
    finally:
        web.stop()
    return {"inject": injected, "counts": counts, "fetches": fetches, "times": times,
            "pages_with_text": pages_with_text, "merged": merged}


if __name__ == "__main__":
    print(json.dumps(_drive(json.loads(sys.argv[1])), default=str))

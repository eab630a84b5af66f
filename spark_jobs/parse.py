"""parse: read the round's responses back from WARC by offset, extract text, metadata, outlinks.

Per task, records are read file by file in offset order (one sequential pass per WARC file).
The payload is decoded by warcio (chunked and Content-Encoding) but never beyond the
decompressed-size cap, so a stored bomb cannot blow a task's memory at parse time either. A page
that breaks the parser becomes a row with `parse_error` set, never a failed task.
Outputs: `pages` (one row per parsed response; the round's partition replaced) and `links`
(the *latest* outlinks of each page: the page's rows from earlier rounds are removed).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from io import BytesIO

from recrawl.config import Config
from recrawl.content.captures import sniff_mime
from recrawl.content.extract import extractor
from recrawl.content.linkfilter import filter_reason
from recrawl.content.parsing import MAX_EXTRACT_MS, parse_html
from recrawl.content.sitemaps import is_sitemap, sitemap_locs
from recrawl.content.urlnorm import host_key_or_none, try_normalize
from recrawl.sparkenv.joblabels import stage
from spark_jobs import captures
from spark_jobs.common import filter_rules, norm_rules

LINK_STRUCT = "array<struct<dst_url:string,anchor:string,kind:string>>"


class UnchangedPayload(Exception):
    """The record is an identical-payload revisit: the page did not change."""


def read_payload(warc_file: str, offset: int, max_bytes: int, *, length: int | None = None,
                 storage=None) -> tuple[bytes, str | None, dict]:
    """The HTTP payload (decoded, capped) and content type of the record at `offset`.

    On S3 (`s3a://`) with the record's `length` (fetches.warc_length) exactly that byte range
    is read, one ranged GET; otherwise the file is opened and read from `offset` on.
    """
    from warcio.archiveiterator import ArchiveIterator  # lazy: heavy (warcio)

    from fetcher.storage import Storage, is_remote  # lazy: heavy (fetcher: warcio, urllib3, fsspec)

    storage = storage or Storage()
    if length and is_remote(warc_file):
        fh = BytesIO(storage.read_range(warc_file, offset, length))
    else:
        fh = storage.open_read(warc_file)
        fh.seek(offset)
    with fh:
        for record in ArchiveIterator(fh):
            if record.rec_type == "revisit":
                # identical payload to the previous capture: nothing new to parse
                raise UnchangedPayload(record.rec_headers.get_header("WARC-Refers-To-Target-URI"))
            headers = record.http_headers
            ctype = headers.get_header("Content-Type") if headers else None
            stream = record.content_stream()
            body = stream.read(max_bytes)
            meta = {"truncated": bool(stream.read(1))}
            return body, ctype, meta
    raise ValueError(f"no WARC record at {warc_file}:{offset}")


def parse_rows(rows: Iterable[dict], opts: dict) -> Iterator[dict]:
    """Parse one partition's fetched rows; yields `pages` rows with nested outlinks."""
    from fetcher.storage import Storage  # lazy: heavy (fetcher: warcio, urllib3, fsspec)
    from recrawl.content.fingerprint import simhash64, text_hash  # lazy: heavy (simhash, numpy)

    storage = Storage(opts.get("s3"))
    for r in sorted(rows, key=lambda x: (x["warc_file"] or "", x["warc_offset"] or 0)):
        out = {
            "round_id": r["round_id"], "url": r["url"], "warc_file": r["warc_file"],
            "warc_offset": r["warc_offset"], "payload_digest": r["payload_digest"],
            "links": [], "text_len": 0, "outlink_count": 0,
        }
        try:
            body, ctype, _ = read_payload(r["warc_file"], r["warc_offset"], opts["max_bytes"],
                                          length=r.get("warc_length"), storage=storage)
        except UnchangedPayload:
            continue
        except Exception as exc:  # a corrupt or truncated WARC is recorded, not fatal
            out["parse_error"] = f"warc: {type(exc).__name__}: {exc}"[:500]
            yield out
            continue
        out["mime_detected"] = sniff_mime(body)
        base = r["final_url"] or r["url"]
        if is_sitemap(body, ctype or r["content_type"]):
            links = []
            for loc in sitemap_locs(body, opts["max_sitemap_urls"]):
                url, _ = try_normalize(loc, rules=opts["norm_rules"])
                if url and filter_reason(url, opts["filter_rules"]) is None:
                    links.append({"dst_url": url, "anchor": "", "kind": "sitemap"})
            out.update(title="sitemap", text="", links=links, outlink_count=len(links))
            yield out
            continue
        page = parse_html(
            body, ctype or r["content_type"], base,
            extract_text=opts["extract_text"], extractor=opts.get("extractor", "trafilatura"),
            max_extract_ms=opts.get("max_extract_ms", MAX_EXTRACT_MS), norm_rules=opts["norm_rules"],
            filter_rules=opts["filter_rules"], max_outlinks=opts["max_outlinks"],
        )
        text = page.text or ""
        out.update(
            title=page.title, lang=page.lang, text=text, text_len=len(text), date=page.date,
            canonical_url=page.canonical_url, parse_error=page.error, charset=page.encoding,
            content_hash=text_hash(text) if text else None,
            simhash=simhash64(text) if text else None, text_extractor=page.text_extractor,
        )
        links = [] if page.meta_robots_nofollow else page.outlinks
        out["links"] = [{"dst_url": o.url, "anchor": o.anchor, "kind": o.kind} for o in links]
        out["outlink_count"] = len(out["links"])
        yield out


def run(spark, cfg: Config, round_id: str, logical: dt.datetime) -> dict[str, int]:
    from pyspark.sql import functions as F  # lazy: pyspark
    from pyspark.sql.types import StructField, StructType  # lazy: pyspark

    from fetcher.storage import S3Options  # lazy: heavy (fetcher: warcio, urllib3, fsspec)
    from recrawl.store.schemas import PAGES  # lazy: pyspark (via recrawl.store.schemas)
    from recrawl.store.tables import read, replace_round, sql_str  # lazy: pyspark (via recrawl.store.tables)

    p = cfg.section("parse")
    opts = {
        "max_bytes": int(cfg.get("fetcher.max_decompressed_bytes")),
        "extract_text": bool(p["extract_text"]),
        "extractor": extractor(cfg),
        "max_extract_ms": int(p["max_extract_ms"]),
        "norm_rules": norm_rules(cfg),
        "filter_rules": filter_rules(cfg),
        "max_outlinks": int(p["max_outlinks"]),
        "max_sitemap_urls": int(p["max_sitemap_urls"]),
        # WARCs on s3a:// are read by Python (s3fs) with the same endpoint settings as Spark's.
        "s3": S3Options.from_spark_conf(cfg.get("spark.extra")),
    }
    fetched = (
        read(spark, cfg, "fetches")
        .where(f"round_id = {sql_str(round_id)} AND fetch_status = 'fetched'")
        .where("warc_file IS NOT NULL")
        .select("round_id", "url", "final_url", "content_type", "warc_file", "warc_offset",
                "warc_length", "payload_digest")
    )
    from pyspark.sql.types import ArrayType, StringType  # lazy: pyspark

    link_t = ArrayType(StructType([
        StructField("dst_url", StringType()), StructField("anchor", StringType()),
        StructField("kind", StringType()),
    ]))
    out_schema = StructType(list(PAGES.fields) + [StructField("links", link_t)])
    cols = [f.name for f in out_schema.fields]
    n_parts = max(1, int(cfg.get("spark.shuffle_partitions")))
    rdd = (
        fetched.repartition(n_parts, "warc_file").rdd
        .mapPartitions(lambda it: parse_rows((r.asDict() for r in it), opts))
        .map(lambda d: tuple(d.get(c) for c in cols))
    )
    stage(spark, "parsing the round's WARC records")
    parsed = spark.createDataFrame(rdd, out_schema).cache()
    replace_round(parsed.drop("links"), cfg, "pages", round_id)

    host_udf = F.udf(lambda u: host_key_or_none(u), "string")  # noqa: PLW0108 - no hint inference
    links = (
        parsed.where("parse_error IS NULL OR size(links) > 0")
        .select(F.col("url").alias("src_url"), F.explode("links").alias("l"))
        .select("src_url", "l.dst_url", "l.anchor", "l.kind")
        .where("src_url != dst_url OR kind = 'canonical'")
        .dropDuplicates(["src_url", "dst_url"])
        .withColumn("round_id", F.lit(round_id))
        .withColumn("src_host", host_udf("src_url"))
        .withColumn("dst_host", host_udf("dst_url"))
    )
    stage(spark, "writing outlinks")
    write_latest_outlinks(spark, cfg, round_id, parsed.select("url"), links)
    stats = parsed.agg(
        F.count("*").alias("pages"),
        F.sum(F.when(F.col("parse_error").isNotNull(), 1).otherwise(0)).alias("parse_errors"),
        F.sum("outlink_count").alias("outlinks"),
    ).first()
    parsed.unpersist()
    link_count = read(spark, cfg, "links").where(f"round_id = {sql_str(round_id)}").count()
    # The round's captures with URL-index columns (they need this parse's MIME and language).
    stage(spark, "indexing captures")
    n_captures = captures.run(spark, cfg, round_id)
    return {
        "pages": int(stats["pages"] or 0),
        "parse_errors": int(stats["parse_errors"] or 0),
        "outlinks": link_count,
        "captures": n_captures,
    }


def write_latest_outlinks(spark, cfg: Config, round_id: str, parsed_urls, links) -> None:
    """`links` holds each page's latest outlinks: drop what earlier rounds said for the pages
    parsed now (`parsed_urls`, a `url` column), then replace the round's partition."""
    from pyspark.sql import functions as F  # lazy: pyspark

    from recrawl.store.tables import (  # lazy: pyspark (via recrawl.store.tables)
        Delete,
        merge_into,
        replace_round,
        sql_str,
    )

    srcs = parsed_urls.select(F.col("url").alias("src_url")).distinct()
    merge_into(spark, cfg, "links", srcs, f"t.src_url = s.src_url AND t.round_id != {sql_str(round_id)}",
               Delete(), portable=True)
    replace_round(links, cfg, "links", round_id)

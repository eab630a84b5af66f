"""parse: read the round's responses back from WARC by offset, extract text, metadata, outlinks.

Per task, records are read file by file in offset order (one sequential pass per WARC file).
The payload is decoded by warcio (chunked and Content-Encoding) but never beyond the
decompressed-size cap, so a stored bomb cannot blow a task's memory at parse time either. A page
that breaks the parser becomes a row with `parse_error` set, never a failed task.
Outputs: `pages` (one row per parsed response; the round's partition replaced) and `links`
(the *latest* outlinks of each page: the page's rows from earlier rounds are removed).

With `parse.inline` the round's fetch already parsed its responses from the records it wrote
and left the rows under `inline_dir`: this step then commits those, reads from the WARCs only
the fetched responses they lack, and deletes the folder, so that a re-run (or a re-parse of a
past round after an extractor upgrade) reads the WARCs. Both paths call
`recrawl.content.pagerows.parse_record` on the same record bytes (docs/architecture.md, "Parsing
inside the fetch").
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Iterator
from io import BytesIO

from recrawl.config import Config
from recrawl.content.extract import extractor
from recrawl.content.pagerows import UnchangedPayload, parse_record, record_payload
from recrawl.sparkenv.joblabels import stage
from spark_jobs import captures
from spark_jobs.common import filter_rules, norm_rules

__all__ = ["UnchangedPayload", "inline_dir", "parse_options", "parse_rows", "read_payload", "run"]


def _opener(warc_file: str, offset: int, length: int | None, storage):
    """A function opening the record at `offset`: on S3 (`s3a://`) with the record's `length`
    (fetches.warc_length) exactly that byte range, one ranged GET; otherwise the file, from
    `offset` on."""
    from fetcher.storage import is_remote  # lazy: heavy (fetcher: warcio, urllib3, fsspec)

    def open_record():
        if length and is_remote(warc_file):
            return BytesIO(storage.read_range(warc_file, offset, length))
        fh = storage.open_read(warc_file)
        fh.seek(offset)
        return fh

    return open_record


class _Files:
    """The partition's WARC files, each opened once: records come sorted by (file, offset), so
    one handle serves a file's records in turn and is closed when the next file starts (an
    open per record cost as much as warcio's reading of it). Records on S3 are one ranged GET
    each (`_opener`)."""

    def __init__(self, storage) -> None:
        from fetcher.storage import is_remote  # lazy: heavy (fetcher: warcio, urllib3, fsspec)

        self.storage = storage
        self._is_remote = is_remote
        self._path: str | None = None
        self._fh = None

    def opener(self, warc_file: str, offset: int, length: int | None):
        if not warc_file or (length and self._is_remote(warc_file)):
            return _opener(warc_file, offset, length, self.storage)

        def open_record():
            if warc_file != self._path:
                self.close()
                self._fh, self._path = self.storage.open_read(warc_file), warc_file
            self._fh.seek(offset)
            return contextlib.nullcontext(self._fh)

        return open_record

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
        self._fh = self._path = None


def read_payload(warc_file: str, offset: int, max_bytes: int, *, length: int | None = None,
                 storage=None) -> tuple[bytes, str | None, dict]:
    """The HTTP payload (decoded, capped) and content type of the record at `offset`
    (`recrawl.content.pagerows.record_payload`); :class:`UnchangedPayload` for a revisit."""
    from fetcher.storage import Storage  # lazy: heavy (fetcher: warcio, urllib3, fsspec)

    with _opener(warc_file, offset, length, storage or Storage())() as fh:
        try:
            return record_payload(fh, max_bytes)
        except ValueError:
            raise ValueError(f"no WARC record at {warc_file}:{offset}") from None


def parse_rows(rows: Iterable[dict], opts: dict) -> Iterator[dict]:
    """Parse one partition's fetched rows from their WARC records; yields `pages` rows with
    nested outlinks (`recrawl.content.pagerows.parse_record`, which the fetch's inline parse calls too)."""
    from fetcher.storage import Storage  # lazy: heavy (fetcher: warcio, urllib3, fsspec)

    files = _Files(Storage(opts.get("s3")))
    try:
        for r in sorted(rows, key=lambda x: (x["warc_file"] or "", x["warc_offset"] or 0)):
            out = parse_record(r, files.opener(r["warc_file"], r["warc_offset"],
                                               r.get("warc_length")), opts)
            if out is not None:
                yield out
    finally:
        files.close()


def by_record_ranges(fetched, n_parts: int):
    """`fetched` in `n_parts` ranges of (WARC file, offset): tasks of equal size, each reading
    stretches of a file in order. Hashed by file, a round's few WARCs (one per fetch task up to
    `fetcher.warc_max_bytes`) could all land in one partition, and one core parsed the round
    while the others waited (docs/scale.md, issue 42)."""
    return fetched.repartitionByRange(n_parts, "warc_file", "warc_offset")


def parse_options(cfg: Config) -> dict:
    """What a page's parse depends on (`recrawl.content.pagerows`), for both paths: the parse step's
    tasks and the fetch's inline parse."""
    from fetcher.storage import S3Options  # lazy: heavy (fetcher: warcio, urllib3, fsspec)

    p = cfg.section("parse")
    return {
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


def inline_dir(cfg: Config, round_id: str) -> str:
    """Where the round's fetch leaves the pages it parsed inline (`parse.inline`) for this
    step to commit: Parquet rows of `pages` with nested `links`."""
    return f"{cfg.home}/staging/parsed/{round_id}"


def parsed_schema():
    """The rows both parse paths produce: `pages` columns plus the page's host key
    (`src_host`) and its nested `links` with their targets' host keys."""
    from pyspark.sql.types import ArrayType, StringType, StructField, StructType  # lazy: pyspark

    from recrawl.store.schemas import PAGES  # lazy: pyspark (via recrawl.store.schemas)

    link_t = ArrayType(StructType([
        StructField("dst_url", StringType()), StructField("anchor", StringType()),
        StructField("kind", StringType()), StructField("dst_host", StringType()),
    ]))
    return StructType(list(PAGES.fields) + [StructField("src_host", StringType()),
                                            StructField("links", link_t)])


def inline_parsed(spark, cfg: Config, round_id: str):
    """The pages the round's fetch parsed inline, or None when it left none (`parse.inline`
    off, a fetch from before it, or this step committed them already: a re-run parses the
    WARCs)."""
    from spark_jobs.fetch import fs_exists  # lazy: spark_jobs.fetch imports this module

    folder = inline_dir(cfg, round_id)
    if not fs_exists(spark, f"{folder}/_SUCCESS"):
        return None
    return spark.read.schema(parsed_schema()).parquet(folder)


def run(spark, cfg: Config, round_id: str, logical: dt.datetime) -> dict[str, int]:
    from pyspark.sql import functions as F  # lazy: pyspark

    from recrawl.store.tables import read, replace_round, sql_str  # lazy: pyspark (via recrawl.store.tables)
    from spark_jobs.fetch import fs_delete  # lazy: spark_jobs.fetch imports this module

    opts = parse_options(cfg)
    fetched = (
        read(spark, cfg, "fetches")
        .where(f"round_id = {sql_str(round_id)} AND fetch_status = 'fetched'")
        .where("warc_file IS NOT NULL")
        .select("round_id", "url", "final_url", "content_type", "warc_file", "warc_offset",
                "warc_length", "payload_digest", "warc_type")
    )
    # Responses with a payload to parse (an identical payload is a revisit record): what the
    # round's pages_parsed gate expects pages of (recrawl.rules.gates.round_pages).
    responses = fetched.where("coalesce(warc_type, 'response') != 'revisit'").count()
    out_schema = parsed_schema()
    cols = [f.name for f in out_schema.fields]
    inline = inline_parsed(spark, cfg, round_id)
    if inline is not None:
        # The fetch parsed its responses as it fetched them (parse.inline); only what it left
        # (none, unless a task's parse pool failed) is read back from the WARCs. A revisit
        # has no payload to parse either way.
        fetched = (fetched.where("coalesce(warc_type, 'response') != 'revisit'")
                   .join(inline.select("url"), "url", "left_anti"))
    fetched = fetched.drop("warc_type")
    n_parts = max(1, int(cfg.get("spark.shuffle_partitions")))
    rdd = (
        by_record_ranges(fetched, n_parts).rdd
        .mapPartitions(lambda it: parse_rows((r.asDict() for r in it), opts))
        .map(lambda d: tuple(d.get(c) for c in cols))
    )
    stage(spark, "parsing the round's WARC records")
    parsed = spark.createDataFrame(rdd, out_schema)
    if inline is not None:
        parsed = inline.where(F.col("round_id") == round_id).select(*cols).unionByName(parsed)
    parsed = parsed.cache()
    replace_round(parsed.drop("links", "src_host"), cfg, "pages", round_id)

    # Host keys came with the parse (recrawl.content.pagerows): no Python call per link here.
    links = (
        parsed.where("parse_error IS NULL OR size(links) > 0")
        .select(F.col("url").alias("src_url"), "src_host", F.explode("links").alias("l"))
        .select("src_url", "l.dst_url", "l.anchor", "l.kind", "src_host", "l.dst_host")
        .where("src_url != dst_url OR kind = 'canonical'")
        .dropDuplicates(["src_url", "dst_url"])
        .withColumn("round_id", F.lit(round_id))
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
    n_inline = 0
    if inline is not None:
        n_inline = inline.count()
        fs_delete(spark, inline_dir(cfg, round_id))  # committed: a re-run parses the WARCs
    return {
        "parsed_inline": n_inline,  # the others were read back from the WARCs
        "responses": responses,
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

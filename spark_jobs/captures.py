"""captures: the round's WARC captures with Common Crawl's URL-index columns (run by parse).

One row per `fetches` row that points at a `response` or `revisit` record. URL columns come
from the captured URI (``recrawl.content.captures.url_fields``: SURT key, host, registered domain by
the bundled Public Suffix List, TLD, path); detected MIME, charset and language from the
parse of that payload (`pages` joined on url and payload digest, so a revisit gets its
original's parse); WARC filename / offset / length and record id from `fetches`. Replaces the
round's rows: a re-run leaves one copy.
"""

from __future__ import annotations

from recrawl.config import Config
from recrawl.content.captures import url_fields


def run(spark, cfg: Config, round_id: str) -> int:
    from pyspark.sql import Window  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType  # lazy: pyspark

    from recrawl.store.tables import read, replace_round, sql_str  # lazy: pyspark (via recrawl.store.tables)

    fetches = read(spark, cfg, "fetches").where(
        f"round_id = {sql_str(round_id)} AND warc_type IS NOT NULL AND warc_file IS NOT NULL")
    # The latest parse of each (url, payload): identical payloads are parsed once.
    latest = Window.partitionBy("url", "payload_digest").orderBy(F.col("p_round").desc())
    parses = (
        read(spark, cfg, "pages").where("payload_digest IS NOT NULL")
        .select("url", "payload_digest", F.col("round_id").alias("p_round"), "lang", "charset",
                "mime_detected")
        .withColumn("n", F.row_number().over(latest)).where("n = 1").drop("n", "p_round")
    )
    fields_t = StructType([
        StructField(n, IntegerType() if n == "url_port" else StringType())
        for n in ("url_surtkey", "url_host_name", "url_host_tld", "url_host_registered_domain",
                  "url_protocol", "url_port", "url_path", "url_query")
    ])
    fields_udf = F.udf(lambda u: url_fields(u), fields_t)  # noqa: PLW0108 - no hint inference
    declared = F.lower(F.trim(F.split(F.col("content_type"), ";").getItem(0)))
    rows = (
        fetches.join(parses, ["url", "payload_digest"], "left")
        .withColumn("u", fields_udf("warc_target_uri"))
        .select(
            "u.*",
            F.col("warc_target_uri").alias("url"),
            "fetch_time",
            F.col("http_status").alias("fetch_status"),
            F.col("fetch_status").alias("crawl_status"),
            F.col("payload_digest").alias("content_digest"),
            F.when(declared != "", declared).alias("content_mime_type"),
            F.col("mime_detected").alias("content_mime_detected"),
            F.col("charset").alias("content_charset"),
            F.col("lang").alias("content_languages"),
            F.when(F.col("fetch_status") == "filtered_type", F.lit("unspecified"))
            .when(F.col("truncated"), F.lit("length")).alias("content_truncated"),
            F.col("warc_file").alias("warc_filename"),
            F.col("warc_offset").alias("warc_record_offset"),
            F.col("warc_length").alias("warc_record_length"),
            "warc_record_id", "warc_type",
            F.col("url").alias("fetch_url"),
            F.to_date(F.coalesce("fetch_time", F.current_timestamp())).alias("fetch_date"),
            F.lit(round_id).alias("round_id"),
        )
    )
    replace_round(rows, cfg, "captures", round_id)
    return read(spark, cfg, "captures").where(f"round_id = {sql_str(round_id)}").count()

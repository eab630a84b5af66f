"""The table contract: every Delta table's schema, declared once.

Names and columns follow docs/design.md ("Table contract"). Columns may be added; renaming
or removing one is a breaking change announced in docs/tables.md. Jobs build DataFrames with
these schemas and `crawler init` creates the tables from them; a test checks that what Delta
stores equals what is declared here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from recrawl.rules.crawldb_rules import CRAWLDB_STATUSES, FETCH_STATUSES  # noqa: F401 (the contract)

S, L, I, D, B, T = StringType(), LongType(), IntegerType(), DoubleType(), BooleanType(), TimestampType()


def _schema(*fields: tuple[str, DataType] | tuple[str, DataType, bool]) -> StructType:
    out = []
    for f in fields:
        name, dtype = f[0], f[1]
        nullable = f[2] if len(f) > 2 else True
        out.append(StructField(name, dtype, nullable))
    return StructType(out)


HISTORY = ArrayType(
    StructType([StructField("interval_d", D, True), StructField("changed", B, True)]), True
)

CRAWLDB = _schema(
    ("url", S, False),
    ("host", S, False),
    ("status", S, False),
    ("depth", I),
    ("discovered_at", T),
    ("last_fetch_time", T),
    ("next_fetch_time", T),
    ("fetch_interval_s", L),
    ("retries", I),
    ("http_status", I),
    ("etag", S),
    ("last_modified", S),
    ("content_hash", S),
    ("simhash", L),
    ("fetch_count", I),
    ("change_count", I),
    ("change_rate", D),
    ("score", D),
    ("redirect_to", S),
    # additions beyond the contract
    ("payload_digest", S),
    # Legacy generation mark, no longer written (marks are the open rounds' fetch_list rows,
    # spark_jobs/generate.live_marks); still honoured until updatedb clears it or it expires.
    ("generated_round", S),
    ("generated_at", T),
    ("last_round", S),  # last round whose updatedb applied a fetch to this row (idempotency)
    ("scheduled_round", S),  # last round whose schedule step set next_fetch_time
    ("last_changed", B),  # did the last fetch find a meaningful change
    ("last_change_time", T),
    ("change_history", HISTORY),
    ("parse_failures", I),
    ("inlink_score", D),
    # The WARC record holding payload_digest's payload (a `response`): its WARC-Record-ID,
    # exact WARC-Date and WARC-Target-URI (a redirect chain's final URI). Revisit records of
    # later fetches refer to it (WARC-Refers-To, -Date, -Target-URI).
    ("payload_record_id", S),
    ("payload_warc_date", S),
    ("payload_target_uri", S),
    # Change signals (recrawl/rules/signal_trust.py): the newest date a sitemap or feed published for
    # the URL (start of the interval it denotes, signal_precision_s wide), which kind of source,
    # and the logical time it was last read. lm_changes / lm_exposure_d: the last-modified
    # estimator's counts (recrawl.rules.changerate.lm_rate).
    ("signal_time", T),
    ("signal_precision_s", L),
    ("signal_kind", S),
    ("signal_read_at", T),
    ("lm_changes", D),
    ("lm_exposure_d", D),
    # What found the text content_hash and simhash were made of (recrawl.content.extract.LABELS): the
    # change rule compares fingerprints only under equal labels. NULL: before the column.
    ("text_extractor", S),
)

FETCH_LIST = _schema(
    ("round_id", S, False),
    ("url", S, False),
    ("host", S, False),
    ("partition", I, False),
    ("priority", D),
    ("etag", S),
    ("last_modified", S),
    ("depth", I),
    ("payload_digest", S),
    ("last_fetch_time", T),
    ("payload_record_id", S),
    ("payload_warc_date", S),
    ("payload_target_uri", S),
    # Why generate chose the URL: signal (a trusted or probed change signal), new (never
    # fetched), due (the policy's revisit) or fill (a not-yet-due page filling the round).
    ("reason", S),
)

FETCHES = _schema(
    ("round_id", S, False),
    ("url", S, False),
    ("final_url", S),
    ("fetch_time", T),
    ("http_status", I),
    ("fetch_status", S, False),
    ("error", S),
    ("content_type", S),
    ("content_length", L),
    ("payload_digest", S),
    ("warc_file", S),
    ("warc_offset", L),
    ("warc_length", L),
    ("etag", S),
    ("last_modified", S),
    ("duration_ms", L),
    ("redirect_chain", ArrayType(S, True)),
    ("truncated", B),
    ("ip", S),
    # The record warc_file/offset points at: its WARC-Record-ID, WARC-Type (response /
    # revisit), WARC-Target-URI (the last hop requested; for a cut-short redirect chain
    # neither url nor final_url) and WARC-Date as written (docs/tables.md).
    ("warc_record_id", S),
    ("warc_type", S),
    ("warc_target_uri", S),
    ("warc_date", S),
    # The Spark executor whose task fetched the URL ("driver" in local mode): which process
    # held the host's politeness queue (recrawl.sparkenv.cluster.executor_id).
    ("executor_id", S),
)

PAGES = _schema(
    ("round_id", S, False),
    ("url", S, False),
    ("title", S),
    ("lang", S),
    ("text", S),
    ("text_len", I),
    ("content_hash", S),
    ("simhash", L),
    ("canonical_url", S),
    ("warc_file", S),
    ("warc_offset", L),
    ("date", S),
    ("payload_digest", S),
    ("outlink_count", I),
    ("parse_error", S),  # set when the parser failed; such rows carry no text
    ("charset", S),  # the codec the HTML was decoded with (recrawl.content.parsing.decode_html)
    ("mime_detected", S),  # the type the payload's bytes show (recrawl.content.captures.sniff_mime)
    ("text_extractor", S),  # what found `text` (recrawl.content.extract.LABELS; parse.extractor)
)

# One row per capture (a `response` or `revisit` record) of a round, with the columns of
# Common Crawl's columnar URL index (docs/analysts.md). Partitioned by the capture's UTC date
# and the round: "all captures of a host in a month" reads only that month's folders.
CAPTURES = _schema(
    ("url_surtkey", S),
    ("url", S, False),  # the captured URI (WARC-Target-URI)
    ("url_host_name", S),
    ("url_host_tld", S),
    ("url_host_registered_domain", S),
    ("url_protocol", S),
    ("url_port", I),
    ("url_path", S),
    ("url_query", S),
    ("fetch_time", T),
    ("fetch_status", I),  # HTTP status (304 for a server-not-modified revisit)
    ("crawl_status", S),  # fetches.fetch_status
    ("content_digest", S),
    ("content_mime_type", S),  # declared: Content-Type without parameters
    ("content_mime_detected", S),
    ("content_charset", S),
    ("content_languages", S),
    ("content_truncated", S),  # WARC-Truncated of the payload's record, if cut short
    ("warc_filename", S),  # path of the WARC file (base name = pywb's / the CDXJ's filename)
    ("warc_record_offset", L),
    ("warc_record_length", L),
    ("warc_record_id", S),
    ("warc_type", S),
    ("fetch_url", S),  # the fetch-list URL this capture belongs to (fetches.url)
    ("fetch_date", DateType()),
    ("round_id", S, False),
)

LINKS = _schema(
    ("src_url", S, False),
    ("dst_url", S, False),
    ("anchor", S),
    ("round_id", S, False),
    ("kind", S),
    ("src_host", S),
    ("dst_host", S),
)

DUPLICATES = _schema(
    ("round_id", S, False),
    ("url", S, False),
    ("canonical_url", S, False),
    ("kind", S, False),
    ("distance", I),
)

ROBOTS = _schema(
    ("host", S, False),
    ("fetched_at", T),
    ("http_status", I),
    ("crawl_delay", D),
    ("sitemaps", ArrayType(S, True)),
    ("rules", S),
    ("expires_at", T),
)

HOSTS = _schema(
    ("host", S, False),
    ("ip", S),
    ("backoff_until", T),
    ("consecutive_failures", I),
    ("pages_known", L),
    ("trap", B),
    ("trap_reason", S),
    ("pages_fetched", L),
    ("host_rank", D),
    ("updated_at", T),
    # Host graph structure from the pagerank job: the component's smallest host name and size.
    ("component_root", S),
    ("component_hosts", L),
    ("scc_root", S),
    ("scc_hosts", L),
    # Change-signal trust (recrawl/rules/signal_trust.py): decayed counts of revisits that checked the
    # host's signals, the precision / recall they give, and the verdicts; when its sources were
    # last read; whether its Last-Modified moves with content.
    ("signal_tp", D),
    ("signal_fp", D),
    ("signal_fn", D),
    ("signal_tn", D),
    ("signal_precision", D),
    ("signal_recall", D),
    ("signal_trusted", B),
    ("signal_defer", B),
    ("signals_read_at", T),
    ("lm_agree", D),
    ("lm_disagree", D),
    ("lm_trusted", B),
)

# One row per change-signal source (a sitemap or a feed), re-read by the signals step.
SIGNAL_SOURCES = _schema(
    ("source_url", S, False),
    ("host", S, False),
    ("kind", S, False),  # sitemap | feed
    ("etag", S),
    ("last_modified", S),
    ("http_status", I),
    ("fetch_status", S),
    ("read_at", T),  # logical time of the last read that answered (200 or 304)
    ("fetched_at", T),  # wall-clock time of the last request (politeness across steps)
    ("next_read_at", T),
    ("entries", L),  # entries in the last 200 answer
    ("dated_entries", L),  # ... of them with a date (a source without dates is read seldom)
    ("error", S),
    ("round_id", S),
)

SCORES = _schema(
    ("url", S, False),
    ("pagerank", D),
    ("computed_at", T),
)

ROUNDS = _schema(
    ("round_id", S, False),
    ("logical_date", DateType()),
    ("started_at", T),
    ("finished_at", T),
    ("counts", MapType(S, L, True)),
    ("steps_done", ArrayType(S, True)),
    # Per step of the round's last run of it (recrawl.rules.rounds.StepRun): when it started, its
    # wall seconds and the driver process's CPU seconds; the health gates it ran
    # (`<step>.<gate>` -> "ok" or the failure line) and the gate that failed the round, if any.
    ("step_started_at", MapType(S, T, True)),
    ("step_seconds", MapType(S, D, True)),
    ("step_cpu_seconds", MapType(S, D, True)),
    ("gates", MapType(S, S, True)),
    ("failed_gate", S),
)


@dataclass(frozen=True)
class TableSpec:
    name: str
    schema: StructType
    partition_by: tuple[str, ...] = ()
    comment: str = ""
    # The one module that writes the table (Nutch's CrawlDb / HostDb: a table with several
    # producers has one owner holding every MERGE); tests/test_table_owners.py checks it.
    writer: str = ""


# spark_jobs.maintenance may also rewrite any table: compaction, VACUUM, WARC retention.
HOUSEKEEPING = "spark_jobs.maintenance"

TABLES: dict[str, TableSpec] = {
    t.name: t
    for t in (
        TableSpec("crawldb", CRAWLDB, (), "one row per known (normalized) URL",
                  "recrawl.store.crawldb"),
        TableSpec("fetch_list", FETCH_LIST, ("round_id",), "URLs generated in a round",
                  "spark_jobs.generate"),
        TableSpec("fetches", FETCHES, ("round_id",), "fetch attempt in a round",
                  "spark_jobs.fetch"),
        TableSpec("captures", CAPTURES, ("fetch_date", "round_id"),
                  "WARC capture (response / revisit) with URL-index columns",
                  "spark_jobs.captures"),
        TableSpec("pages", PAGES, ("round_id",), "parsed page in a round", "spark_jobs.parse"),
        TableSpec("links", LINKS, ("round_id",), "latest outlinks of fetched pages",
                  "spark_jobs.parse"),
        TableSpec("duplicates", DUPLICATES, ("round_id",), "URL found duplicate in a round",
                  "spark_jobs.dedup"),
        TableSpec("robots", ROBOTS, (), "robots.txt per host", "spark_jobs.fetch"),
        TableSpec("hosts", HOSTS, (), "per-host state", "recrawl.store.hostdb"),
        TableSpec("scores", SCORES, (), "PageRank per URL", "spark_jobs.pagerank"),
        TableSpec("rounds", ROUNDS, (), "one row per round with per-step counts",
                  "recrawl.store.roundsdb"),
        TableSpec("signal_sources", SIGNAL_SOURCES, (), "sitemap or feed read for change signals",
                  "spark_jobs.signals"),
    )
}

# fetches.fetch_status and crawldb.status enumerations: recrawl.rules.crawldb_rules
# links.kind: where parse found the link (recrawl.content.parsing.OUTLINK_KINDS) — all but "redirect":
# redirect targets go from fetches.final_url to crawldb, never through links.
LINK_KINDS = ("a", "area", "frame", "canonical", "refresh", "sitemap", "feed")
DUPLICATE_KINDS = ("exact", "near")  # duplicates.kind: same content hash / SimHash neighbour
SIGNAL_KINDS = ("sitemap", "feed")  # signal_sources.kind, crawldb.signal_kind
FETCH_REASONS = ("signal", "new", "due", "fill")  # fetch_list.reason

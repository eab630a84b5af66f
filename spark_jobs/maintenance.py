"""maintenance: the crawl's housekeeping — WARC retention, OPTIMIZE, VACUUM.

* **warc** — retention of raw captures: the `warc/<round_id>` folder of a round whose logical
  date is more than `warc_retention_days` before this run's logical date is deleted. Rows that
  still point into it (`fetches`, `pages`, the `captures` URL index) are flagged first: their
  WARC pointers (`warc_file`/`warc_offset`/`warc_length`; `warc_filename`/`warc_record_offset`/
  `warc_record_length` in `captures`) become NULL, which reads "capture expired". Flag, then delete: at no committed
  point does a row reference a missing file, and a run that dies in between is finished by the
  next. Folders that are no round of the `rounds` table are left alone (and counted).
* **optimize** — compaction of small files (every round adds some to every table); crawldb is
  Z-ordered by `host`, the column generate, updatedb and analysts filter and join on.
* **vacuum** — deletes data files no table version younger than `retain_hours` needs. Never
  below Delta's 7-day safety window: a shorter one can delete files a running job (or a time-
  travel query) still reads.

Idempotent: a second run for the same date finds nothing left to delete and re-compacts nothing
new. WARC ages use the logical date (backfills and tests can age data), VACUUM the wall clock
(it is about files on disk, as Delta defines it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence

from recrawl.config import Config
from recrawl.rules.rounds import BadInput

STEPS = ("warc", "optimize", "vacuum")
MIN_RETAIN_HOURS = 168.0
DEFAULT_WARC_RETENTION_DAYS = 90.0
# Columns that point into a WARC file, per table.
WARC_POINTERS = {
    "fetches": ("warc_file", "warc_offset", "warc_length"),
    "pages": ("warc_file", "warc_offset"),
    "captures": ("warc_filename", "warc_record_offset", "warc_record_length"),
}


def expired_rounds(
    folders: Iterable[str], round_dates: Mapping[str, dt.date], cutoff: dt.date
) -> tuple[list[str], list[str]]:
    """Split WARC round folders into (expired: known round older than cutoff, unknown)."""
    expired, unknown = [], []
    for name in sorted(folders):
        when = round_dates.get(name)
        if when is None:
            unknown.append(name)
        elif when < cutoff:
            expired.append(name)
    return expired, unknown


def check_args(steps: Sequence[str], retain_hours: float, warc_retention_days: float) -> None:
    """Refuse bad maintenance arguments (BadInput) before anything runs."""
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        raise BadInput(f"unknown maintenance step(s) {', '.join(unknown)}; known: {', '.join(STEPS)}")
    if retain_hours < MIN_RETAIN_HOURS:
        raise BadInput(f"VACUUM retention {retain_hours:g} h is below Delta's safe minimum of "
                       f"{MIN_RETAIN_HOURS:g} h (7 days); a shorter one can break running jobs")
    if warc_retention_days < 1:
        raise BadInput(f"WARC retention {warc_retention_days:g} days: must be at least 1 day")


def run(
    spark,
    cfg: Config,
    logical: dt.datetime,
    *,
    steps: Sequence[str] = STEPS,
    retain_hours: float = MIN_RETAIN_HOURS,
    warc_retention_days: float = DEFAULT_WARC_RETENTION_DAYS,
    tables: Sequence[str] | None = None,
) -> dict[str, int]:
    """Run the chosen maintenance steps; returns counts per step (`step.name → n`).

    `tables` limits OPTIMIZE and VACUUM to some tables (default: every contract table).
    """
    check_args(steps, retain_hours, warc_retention_days)
    counts: dict[str, int] = {}
    if "warc" in steps:
        counts.update(_prefixed("warc", _warc_retention(spark, cfg, logical, warc_retention_days)))
    if "optimize" in steps:
        counts.update(_prefixed("optimize", _optimize(spark, cfg, tables)))
    if "vacuum" in steps:
        counts.update(_prefixed("vacuum", _vacuum(spark, cfg, retain_hours, tables)))
    return counts


def _prefixed(step: str, counts: Mapping[str, int]) -> dict[str, int]:
    return {f"{step}.{k}": int(v) for k, v in counts.items()}


def _fs(spark, target: str):
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(target)
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())


def _subfolders(spark, directory: str) -> list[str]:
    """Names of the folders directly under `directory` (Hadoop FileSystem: local or s3a)."""
    path, fs = _fs(spark, directory)
    if not fs.exists(path):
        return []
    return [s.getPath().getName() for s in fs.listStatus(path) if s.isDirectory()]


def _count_files(spark, directory: str) -> int:
    path, fs = _fs(spark, directory)
    it = fs.listFiles(path, True)
    n = 0
    while it.hasNext():
        it.next()
        n += 1
    return n


def _warc_retention(spark, cfg: Config, logical: dt.datetime, days: float) -> dict[str, int]:
    from recrawl.store.tables import read, sql_str, update_where  # lazy: pyspark (via recrawl.store.tables)

    cutoff = (logical - dt.timedelta(days=days)).date()
    round_dates = {r["round_id"]: r["logical_date"]
                   for r in read(spark, cfg, "rounds").select("round_id", "logical_date").collect()}
    warc_root = f"{cfg.home}/warc"
    expired, unknown = expired_rounds(_subfolders(spark, warc_root), round_dates, cutoff)
    flagged = 0
    if expired:
        rounds = ", ".join(sql_str(r) for r in expired)
        for table, cols in WARC_POINTERS.items():
            in_rounds = f"round_id IN ({rounds}) AND {cols[0]} IS NOT NULL"
            flagged += read(spark, cfg, table).where(in_rounds).count()
            update_where(spark, cfg, table, in_rounds, {c: "NULL" for c in cols})
    files = 0
    for name in expired:
        target = f"{warc_root}/{name}"
        files += _count_files(spark, target)
        path, fs = _fs(spark, target)
        fs.delete(path, True)
    return {"rounds_deleted": len(expired), "files_deleted": files, "rows_flagged": flagged,
            "unknown_folders": len(unknown)}


def _optimize(spark, cfg: Config, names: Sequence[str] | None) -> dict[str, int]:
    from recrawl.store.schemas import TABLES  # lazy: pyspark (via recrawl.store.schemas)
    from recrawl.store.tables import delta_table, table_exists  # lazy: pyspark (via recrawl.store.tables)

    added = removed = tables = 0
    for name in names or TABLES:
        path = cfg.table_path(name)
        if not table_exists(spark, path):
            continue
        builder = delta_table(spark, cfg, name).optimize()
        result = builder.executeZOrderBy("host") if name == "crawldb" else builder.executeCompaction()
        m = result.select("metrics.numFilesAdded", "metrics.numFilesRemoved").first()
        added += int(m[0] or 0)
        removed += int(m[1] or 0)
        tables += 1
    return {"tables": tables, "files_added": added, "files_removed": removed}


def _vacuum(spark, cfg: Config, retain_hours: float, names: Sequence[str] | None) -> dict[str, int]:
    from recrawl.store.schemas import TABLES  # lazy: pyspark (via recrawl.store.schemas)
    from recrawl.store.tables import delta_table, table_exists  # lazy: pyspark (via recrawl.store.tables)

    tables = 0
    for name in names or TABLES:
        path = cfg.table_path(name)
        if not table_exists(spark, path):
            continue
        # Delta prints how many files it deleted; its Python API returns no count.
        delta_table(spark, cfg, name).vacuum(retain_hours)
        tables += 1
    return {"tables": tables}

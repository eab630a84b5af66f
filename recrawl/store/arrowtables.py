"""Whole tables to and from the driver's Arrow: the in-driver PageRank step's reads and writes
(spark_jobs/pagerank.py, recrawl.store.crawldb.set_scores).

On a local crawl home delta-rs (the `deltalake` package) reads a table's Parquet files and
commits a new version without the JVM, as one more client of the same Delta log; a table
whose protocol delta-rs cannot read or write, and object storage (its credentials live in
Hadoop's configuration), keep Spark. Every write is one atomic commit by the table's owner
(tests/test_table_owners.py holds the call sites); the crawl lock keeps other writers out
between a read and the commit.
"""

from __future__ import annotations

from contextlib import suppress

from recrawl.config import Config
from recrawl.store.tables import (
    _checkpoint_like_spark,
    _rs_rows,
    _rs_table,
    local_rows_supported,
    overwrite,
    read,
)


def arrow_columns(spark, cfg: Config, name: str, columns: list[str] | None = None):
    """`columns` (None: all) of a table's current version as one Arrow table in the driver: read
    by delta-rs from the files on a local crawl home (3.6M links in 1.4 s where Spark's toArrow
    took 10.7 s), by Spark elsewhere or for a protocol delta-rs cannot read."""
    if local_rows_supported(cfg):
        from deltalake.exceptions import DeltaProtocolError  # lazy: heavy (delta-rs)

        with suppress(DeltaProtocolError):  # a reader feature delta-rs lacks: Spark's read
            return _rs_table(cfg, name).to_pyarrow_table(columns=columns)
    df = read(spark, cfg, name)
    return (df if columns is None else df.select(*columns)).toArrow()


def arrow_batches(spark, cfg: Config, name: str, columns: list[str] | None = None,
                  rows: int = 2_000_000, *, find: tuple[str, object] | None = None):
    """`arrow_columns` as a stream (a pyarrow RecordBatchReader of batches of about `rows`
    rows), so that the driver holds one batch of a large table at a time (delta-rs on a local
    crawl home; elsewhere Spark's `toArrow`, whole, then batched).

    `find` = (column, values): each batch gains a column `_found`, the position of the row's
    `column` among the Arrow array `values` (null where absent), looked up once over the whole
    column: a lookup per batch would build the hash set of `values` again for every batch."""
    import pyarrow as pa  # lazy: heavy

    if local_rows_supported(cfg):
        from deltalake.exceptions import DeltaProtocolError  # lazy: heavy (delta-rs)

        with suppress(DeltaProtocolError):  # a reader feature delta-rs lacks: Spark's read
            ds = _rs_table(cfg, name).to_pyarrow_dataset()
            # no read-ahead beyond the next file: Arrow's scanner defaults (16 batches, 4
            # files) would hold most of a large table in memory before it is consumed
            reader = _regrouped(ds.scanner(columns=columns, batch_size=rows, batch_readahead=1,
                                           fragment_readahead=1).to_reader(), rows)
            return reader if find is None else _found(
                reader, find[0], ds.to_table(columns=[find[0]]).column(find[0]), find[1])
    table = arrow_columns(spark, cfg, name, columns)
    reader = pa.Table.from_batches(table.to_batches(max_chunksize=rows)).to_reader()
    return reader if find is None else _found(reader, find[0], table[find[0]], find[1])


def _found(reader, column: str, keys, values):
    """`reader` with `_found` (see arrow_batches): `keys` is `column` read whole, in the
    reader's row order (a dataset scans its files in order), which each batch checks."""
    import pyarrow as pa  # lazy: heavy
    import pyarrow.compute as pc  # lazy: heavy

    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    at = pc.index_in(keys, value_set=values)

    def batches():
        offset = 0
        for b in reader:
            mine = keys.slice(offset, len(b))
            if not pc.all(pc.equal(b[column], mine)).as_py():
                raise RuntimeError(f"{column}: the table's rows came back in another order")
            yield b.append_column("_found", at.slice(offset, len(b)))
            offset += len(b)
    schema = reader.schema.append(pa.field("_found", at.type))
    return pa.RecordBatchReader.from_batches(schema, batches())


def _regrouped(reader, rows: int):
    """`reader`'s batches concatenated up to about `rows` rows each: a file's row groups are
    often far smaller, and every batch costs its consumer a fixed share (the URL graph's
    numbering keeps each batch's own dictionary, so fewer batches repeat fewer URLs)."""
    import pyarrow as pa  # lazy: heavy

    def batches():
        held: list = []
        count = 0
        for b in reader:
            held.append(b)
            count += len(b)
            if count >= rows:
                yield pa.concat_batches(held)
                held, count = [], 0
        if held:
            yield pa.concat_batches(held)
    return pa.RecordBatchReader.from_batches(reader.schema, batches())


def overwrite_arrow(spark, cfg: Config, name: str, data) -> None:
    """`overwrite` from Arrow in the driver (a table, or a RecordBatchReader streamed batch by
    batch; the table's columns, any order): one delta-rs commit on a local crawl home, no JVM
    round trip; Spark's elsewhere."""
    import pyarrow as pa  # lazy: heavy

    if local_rows_supported(cfg):
        from deltalake import write_deltalake  # lazy: heavy (delta-rs)
        from deltalake.exceptions import DeltaProtocolError  # lazy: heavy (delta-rs)

        table = _rs_table(cfg, name)
        target = pa.schema(table.schema().to_arrow())
        if isinstance(data, pa.RecordBatchReader):
            source = pa.RecordBatchReader.from_batches(
                target, (b.select(target.names).cast(target) for b in data))
        else:
            source = data.select(target.names).cast(target)
        # delta-rs checks the protocol before it reads the source
        with suppress(DeltaProtocolError):  # a writer feature delta-rs lacks: Spark's write
            write_deltalake(table, source, mode="overwrite")
            return _checkpoint_like_spark(table)
    if isinstance(data, pa.RecordBatchReader):
        data = data.read_all()
    overwrite(spark.createDataFrame(data), cfg, name)


def row_count(spark, cfg: Config, name: str) -> int:
    """Rows of a table's current version: from its log's file statistics on a local crawl
    home (no data read), else (or when a file was written without statistics) Spark's count."""
    n = _rs_rows(cfg, name) if local_rows_supported(cfg) else None
    return read(spark, cfg, name).count() if n is None else n

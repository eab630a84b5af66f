"""What analysts run: SQL over the crawl's Delta tables through DuckDB (fastsql) and the
printers, the analytics queries, charts and the `crawler report`. Never imports Spark
(tests/test_layers.py): the Spark SQL path lives in app.sparksql."""

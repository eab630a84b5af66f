"""One module per crawl step; each `run()` is a thin Spark entry point over pure functions."""

"""The crawl home's storage: table schemas (the one place they live), Delta reads and writes,
crawldb and hostdb updates, the rounds table, the crawl home's lock. Below recrawl.sparkenv."""

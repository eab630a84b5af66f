"""What a page holds: URL normalisation and filters, charsets, HTML parsing and text extraction,
sitemaps and feeds, SimHash fingerprints (and their near-duplicate join), capture URLs. Imports
recrawl.config and recrawl.rules only, so the fetch core can use it without Spark."""

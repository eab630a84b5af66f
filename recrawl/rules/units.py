"""Units the rules share: one spelling of a day in seconds (Spark and DuckDB intervals, crawldb's
`fetch_interval_s`, the politeness capacity), so that no module keeps its own copy."""

from __future__ import annotations

SECONDS_PER_DAY = 86400

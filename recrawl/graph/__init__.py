"""The link graph: PageRank and host components on three engines, in the driver (local),
GraphX (graphx) and Spark DataFrames (pagerank, which also picks the engine)."""

"""Where Spark runs: the session (local or a standalone cluster), the shipped code and
environment, class data sharing, JIT settings, job labels and stage lines, Prometheus metrics."""

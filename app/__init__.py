"""The application layer: what a person or a scheduler runs on top of the crawler.

`app.cli` (the `crawler` command, and the round runner that calls the jobs in
`recrawl.rules.rounds.STEPS` order), `app.demo` (the README's demo crawl over the simulated web) and
`app.airflow_demo` (the same through Airflow). The layers below never import this package:
recrawl/ (core) -> fetcher/ (fetch core) -> spark_jobs/ (jobs) -> app/ -> dags/ (docs/architecture.md).
"""

#!/usr/bin/env bash
# The main job: set up, then crawl the project's simulated web for several logical days through
# the real stack (Spark + Delta + WARC), print a summary and the server-side politeness audit.
# Arguments go to `python -m recrawl.demo` (e.g. --rounds 5 --home var/demo).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m recrawl.demo "$@"

"""spark-submit's main file for any `crawler` verb (docs/cluster.md, "spark-submit").

`spark-submit [options] scripts/submit_main.py round --date 2026-11-01` runs `crawler round
--date 2026-11-01` as a Spark application: the master, deploy mode, environment archive
(--archives ...#env) and code zip (--py-files) come from spark-submit, not from recrawl's
configuration (recrawl/sparkenv/spark.py). A file of its own, in a folder without Python modules, so
that nothing here shadows a package when Python puts this folder first on sys.path.
"""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())

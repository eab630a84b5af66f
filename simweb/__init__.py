"""A simulated multi-host web served on 127.0.0.1 for tests, benchmarks and the demo crawl.

One port serves many virtual hosts (chosen by the ``Host`` header): normal sites with a link
graph, and hostile hosts for robots.txt edge cases, redirects, errors, throttling, slowness,
bombs, charsets, malformed HTML, traps, duplicates and changing pages; ``SimWeb.set_fault``
breaks chosen hosts at run time (simweb.faults). Everything is generated
from a seed, and ``SimWeb.truth`` answers what a perfect crawler would conclude.
"""

from simweb.faults import Fault
from simweb.web import CONTROL_HOST, SimWeb

__all__ = ["CONTROL_HOST", "Fault", "SimWeb"]

"""The virtual-host interface every simulated host implements.

A host answers requests and also describes itself for ground truth: its pages, each page's
outlinks, and its robots policy. Keeping both on one object means the served bytes and the
truth cannot drift apart.
"""

from __future__ import annotations

from simweb import robots
from simweb.response import EPOCH, Request, Response, cached, not_found, text
from simweb.text import simple_page, stable_hash

ALLOW_ALL = "User-agent: *\nDisallow:\n"

#: A link target: (host, path-with-query). URLs get the server port only when formatted.
Link = tuple[str, str]


class Host:
    """Base class: allow-all robots.txt, 404 for everything else."""

    #: robots.txt body (``{base}`` is replaced by http://host:port); None means 404.
    robots_text: str | None = ALLOW_ALL

    def __init__(self, name: str, seed: object) -> None:
        self.name = name
        self.seed = seed

    # -- serving -------------------------------------------------------------------------
    def respond(self, req: Request) -> Response:
        """Route robots.txt to :meth:`robots`, everything else to :meth:`handle`."""
        if req.path == "/robots.txt":
            return self.robots(req)
        return self.handle(req)

    def robots(self, req: Request) -> Response:
        """Serve robots.txt."""
        if self.robots_text is None:
            return not_found(req)
        return text(self.robots_text.format(base=req.base()))

    def handle(self, req: Request) -> Response:
        """Serve a non-robots path."""
        return not_found(req)

    # -- ground truth --------------------------------------------------------------------
    def pages(self) -> list[str]:
        """Paths of the pages this host generates (finite entry points for infinite hosts)."""
        return ["/"]

    def links(self, path: str) -> list[Link]:
        """Outlinks of the page at ``path`` as generated (normalised, no fragment/tracking)."""
        return []

    def robots_paths(self) -> set[str]:
        """Paths a crawler legitimately fetches while reading robots (robots.txt and redirects)."""
        return {"/robots.txt"}

    def effective_robots(self) -> str | None:
        """The robots.txt a correct crawler ends up applying; None = no rules (allow all)."""
        return self.robots_text

    def disallowed(self, path: str, token: str) -> bool:
        """Whether ``token`` must not fetch ``path`` on this host."""
        rules = self.effective_robots()
        return rules is not None and not robots.allowed(rules, path, token)

    def crawl_delay(self, token: str) -> float | None:
        """Crawl-delay that applies to ``token``, if any."""
        rules = self.effective_robots()
        return None if rules is None else robots.crawl_delay(rules, token)


class SimpleHost(Host):
    """A host of plain generated pages given as ``{path: [linked paths]}`` (same host).

    Paths are looked up after robots-style normalisation, so ``/%7Ejoe/`` and ``/~joe/`` are
    the same page, as they are for any URL normaliser.
    """

    def __init__(
        self,
        name: str,
        seed: object,
        graph: dict[str, list[str]],
        robots_text: str | None = ALLOW_ALL,
    ) -> None:
        super().__init__(name, seed)
        self.robots_text = robots_text
        self.graph = {robots.normalize_path(p): links for p, links in graph.items()}

    def pages(self) -> list[str]:
        return list(self.graph)

    def links(self, path: str) -> list[Link]:
        out = [
            (self.name, robots.normalize_path(p))
            for p in self.graph.get(robots.normalize_path(path), [])
        ]
        return list(dict.fromkeys(out))

    def handle(self, req: Request) -> Response:
        key = robots.normalize_path(req.target)
        if key not in self.graph:
            return not_found(req)
        body = simple_page(f"{self.name}{key}", self.graph[key], self.seed).encode()
        return cached(req, body, f'"{stable_hash(body)[:16]}"', EPOCH)

"""Command line: ``python -m simweb serve|seeds|day|audit``.

``serve`` runs the simulated web in the foreground for the demo crawl (until SIGTERM/SIGINT);
``seeds`` and ``day`` talk to a running server through the control host; ``audit`` checks a
request-log file offline against the same world (same seed and sizes).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from simweb.audit import politeness_violations, robots_violations
from simweb.signals import Mix, parse_mix
from simweb.site import World
from simweb.truth import DEFAULT_TOKEN, Truth
from simweb.web import SimWeb, control


def _control(port: int, path: str) -> str:
    try:
        return control(port, path)
    except (RuntimeError, OSError) as e:
        raise SystemExit(f"control request failed: {e}") from None


def _mix(text: str) -> Mix:
    try:
        return parse_mix(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _share(text: str) -> float:
    share = float(text)
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return share


def _world_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--sites", type=int, default=20)
    p.add_argument("--pages", type=int, default=30)


def serve(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT."""
    web = SimWeb(
        seed=args.seed,
        n_sites=args.sites,
        pages_per_site=args.pages,
        log_path=args.log,
        port=args.port,
        signals=args.signals,
        feeds=args.feeds,
    )
    web.set_day(args.day)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    port = web.start()
    if args.warm:
        web.warm()
    print(
        f"simweb serving {len(web.hosts())} hosts on http://127.0.0.1:{port} "
        f"(seed {args.seed}, day {web.day})",
        flush=True,
    )
    try:
        done.wait()
    finally:
        web.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(prog="python -m simweb", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve", help="serve the simulated web in the foreground")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--log", default=None, help="append the request log (JSON lines) here")
    p.add_argument("--day", type=int, default=0)
    p.add_argument("--warm", action="store_true",
                   help="render every page before serving (a benchmark's first crawl then does "
                   "not pay the rendering its second gets from the cache)")
    p.add_argument(
        "--signals",
        default="accurate",
        type=_mix,
        metavar="MIX",
        help="sitemap <lastmod> behaviour of normal sites: accurate, none, mixed, lying, lag, "
        "a kind name (today, frozen, future) or kind=share,kind=share",
    )
    p.add_argument(
        "--feeds",
        type=_share,
        default=0.0,
        metavar="SHARE",
        help="share of normal sites that publish /feed.xml",
    )
    _world_args(p)
    p = sub.add_parser("seeds", help="print the seed URLs of a running server")
    p.add_argument("--port", type=int, required=True)
    p = sub.add_parser("day", help="print or set the simulated day of a running server")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("set", nargs="?", type=int)
    p = sub.add_parser("audit", help="check a request-log file for politeness and robots")
    p.add_argument("log")
    p.add_argument("--min-delay", type=float, default=1.0)
    p.add_argument("--max-crawl-delay", type=float, default=30.0)
    p.add_argument("--token", default=DEFAULT_TOKEN)
    _world_args(p)
    args = ap.parse_args(argv)

    if args.cmd == "serve":
        return serve(args)
    if args.cmd == "seeds":
        sys.stdout.write(_control(args.port, "/__sim/seeds"))
        return 0
    if args.cmd == "day":
        query = "" if args.set is None else f"?set={args.set}"
        print(json.loads(_control(args.port, "/__sim/day" + query))["day"])
        return 0
    truth = Truth(World(args.seed, args.sites, args.pages), lambda: 0)
    with open(args.log, encoding="utf-8") as f:
        log = [json.loads(line) for line in f if line.strip()]
    delays = {h: min(d, args.max_crawl_delay) for h, d in truth.crawl_delays(args.token).items()}
    problems = politeness_violations(log, args.min_delay, delays)
    problems += robots_violations(log, truth, args.token)
    print("\n".join(problems) or f"{len(log)} requests, no violations")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

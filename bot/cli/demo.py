"""``signoff demo``: start a run of the refund-demo workflow and print its approval link
(``bot.console.demo``, imported only when the command runs)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot.cli.checks import EXIT_CONFIG, add_config, load, require_migrated


def add_parser(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo", help="start a run of the refund-demo workflow and print its approval link"
    )
    add_config(demo)
    demo.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds to wait for the run to reach its approval (default 30)",
    )
    demo.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    import asyncio

    from bot.console.demo import DEMO_WORKFLOW, has_demo, run_demo

    config = load(args.config)
    if not has_demo(config):  # a refusal: exit 2 with one line, as every other command's
        print(
            f"error: {config.source} has no {DEMO_WORKFLOW} workflow (the starter app.yaml of "
            "signoff init has one); no run started",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    require_migrated(config)
    return asyncio.run(run_demo(config, timeout=args.timeout, out=sys.stdout))

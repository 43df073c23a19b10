"""``signoff cards render``: print a card or notice, to paste into Slack's Block Kit Builder or
the Adaptive Cards designer.

The main CLI (``bot.cli``) calls ``add_cards_parser(subparsers)``; the ``render`` parser's
``func`` default is the handler, ``(argparse.Namespace) -> int`` (the exit status).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from cards.render import NoticeKind, card_channels, render_card, render_notice
from cards.samples import SAMPLE_NOTICES, STATES, sample_view


def add_cards_parser(subparsers: Any) -> None:
    """Register ``cards render`` on an ``argparse`` subparsers object."""
    cards: argparse.ArgumentParser = subparsers.add_parser("cards", help="approval cards")
    commands = cards.add_subparsers(dest="cards_command", required=True)
    render = commands.add_parser(
        "render",
        help="print a card or notice for one platform",
        description="Print the approval card (or a thread notice) for a built-in sample "
        "request, in a channel's format: JSON to paste into its designer, or an HTML fragment.",
    )
    render.add_argument("--state", choices=STATES, default="pending")
    render.add_argument("--platform", choices=card_channels(), required=True)
    render.add_argument(
        "--args",
        metavar="FILE",
        help="a JSON file with the pending arguments ('-' reads stdin); default: a sample",
    )
    render.add_argument(
        "--notice",
        choices=[k.value for k in NoticeKind],
        help="print this thread notice (sample data) instead of the card",
    )
    render.set_defaults(func=cards_render)


def _load_args(name: str, stdin: TextIO) -> Any:
    text = stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    return json.loads(text)


def cards_render(
    args: argparse.Namespace, *, stdout: TextIO | None = None, stdin: TextIO | None = None
) -> int:
    """Print the rendering ``args`` asks for; 2 when the arguments file is unreadable."""
    out = stdout or sys.stdout
    if args.notice:
        rendered: Any = render_notice(
            args.notice, args.platform, **SAMPLE_NOTICES[NoticeKind(args.notice)]
        )
    else:
        view = sample_view(args.state)
        if args.args:
            try:
                view = sample_view(args.state, _load_args(args.args, stdin or sys.stdin))
            except (OSError, ValueError) as exc:
                message = f"signoff cards render: cannot read --args {args.args}: {exc}"
                print(message, file=sys.stderr)
                return 2
        rendered = render_card(args.platform, view)
    if isinstance(rendered, str):
        out.write(rendered if rendered.endswith("\n") else rendered + "\n")
    else:
        out.write(json.dumps(rendered, indent=2, ensure_ascii=False) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m cards.cli render ...`` until ``bot.cli`` mounts the command."""
    parser = argparse.ArgumentParser(prog="signoff")
    add_cards_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["cards", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

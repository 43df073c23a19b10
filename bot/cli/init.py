"""``signoff init``: write a starter ``app.yaml`` to edit, the one the repository ships
(``starter.yaml`` beside this module, package data), so that a first run needs no checkout.

It never overwrites: an existing file is left as it is and the command exits 2."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot.cli.checks import EXIT_CONFIG, add_config, config_option


def add_parser(sub: Any) -> None:
    init = sub.add_parser("init", help="write a starter app.yaml to edit")
    add_config(init)
    init.set_defaults(func=cmd_init)


def starter_config() -> str:
    """The text ``signoff init`` writes: the repository's ``app.yaml``."""
    from importlib.resources import files

    return files("bot.cli").joinpath("starter.yaml").read_text(encoding="utf-8")


def cmd_init(args: argparse.Namespace) -> int:
    path: str = args.config
    try:
        with open(path, "x", encoding="utf-8") as out:  # "x": never replace a file
            out.write(starter_config())
    except FileExistsError:
        print(
            f"error: {path} already exists and was left as it is: edit it, or pass "
            "--config PATH to write the starter somewhere else",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    except FileNotFoundError:
        print(
            f"error: cannot write {path}: its folder does not exist (create it first)",
            file=sys.stderr,
        )
        return EXIT_CONFIG  # a refusal, as when the file exists: nothing was written
    except OSError as exc:
        print(f"error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    option = config_option(path)
    print(f"wrote {path}: edit it, then run `signoff migrate{option}` and `signoff serve{option}`")
    return 0

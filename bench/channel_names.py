"""Which modules name a channel outside that channel's own packages; print them and the counts.

    python bench/channel_names.py [--quiet]

DESIGN's second seam: "a channel is a plug-in". A channel (slack, teams, web, webhook, email) owns
``bot/<channel>/`` and ``cards/<channel>/``; every other module under ``engine/``, ``bot/`` and
``cards/`` should ask the registry instead of naming it. This script lists, per channel, the
modules outside those packages that name the channel *in code*: an identifier, an import or a
string literal holding the channel's name as a word (``SlackSink``, ``post_to_slack``,
``"teams:"``, ``bot.web``). Comments and docstrings do not count: they are read with
``tokenize`` and ``ast``, never grepped. The target is at most 2 per channel: the registry
(``bot/channels.py``) and the configuration's one unit for channels, the package
``engine/config/channels/`` (addresses, ``people:`` ids and each channel's own section of
``app.yaml``), which counts once as a whole: its modules are one config unit split for size.

Libraries are not channels although they spell them: imports from outside engine/bot/cards,
the names they bind and their attributes (``from aiohttp import web``, ``web.Response``,
``slack_sdk.web``) do not count; a module of ours (``bot.slack``) does. Words are split on
``_``, case changes and non-letters, so ``webhook`` is never the word ``web``; the plural
``webhooks`` is the webhook channel.

Email is also a ``people:`` field (a person's address, which Slack looks people up by, and
which the away words accept): the word names the field far more often than the channel. So
the email channel is counted by what only the channel is: an import of ``bot.email`` or
``cards.email`` (``from bot import email`` included), and a string holding an address of it
(``"email:"``).

A name our code binds to a library's object straight from the library (``x = LibName(...)`` or
``x = lib.Thing(...)``, ``LibName`` imported from outside engine/bot/cards) is the library's
too, with its attributes. So in ``bot/slack/api.py``, ``webhook = AsyncWebhookClient(...)`` is
slack_sdk's client for a Slack ``response_url`` (Slack calls those incoming webhooks), not our
webhook channel, and does not count; the same word as any other identifier, attribute or string
(``webhook_sink``, ``"webhook:"``, ``config.webhooks``) does.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("engine", "bot", "cards")
CHANNELS = ("slack", "teams", "web", "webhook", "email")
# The words that name each channel (after splitting an identifier or a string into words).
WORDS: dict[str, frozenset[str]] = {
    "slack": frozenset({"slack"}),
    "teams": frozenset({"teams"}),
    "web": frozenset({"web"}),
    "webhook": frozenset({"webhook", "webhooks"}),
    "email": frozenset(),  # counted by imports and addresses (FIELD_NAMED)
}
# Channels whose name is also a ``people:`` field: named only by an import of their packages
# or a string holding one of their addresses (module docstring).
FIELD_NAMED = ("email",)
TARGET = 2
# Packages that count as one module (their modules are one unit split for size).
UNITS = ("engine/config/channels",)

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


def words(text: str) -> Iterator[str]:
    """The lower-case words of an identifier or a string: ``SlackSink`` gives slack, sink."""
    for match in _WORD.finditer(text):
        yield match.group(0).lower()


def docstring_lines(tree: ast.Module) -> set[int]:
    """The first line of every docstring (a string statement opening a module, class or def)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                lines.add(body[0].lineno)
    return lines


def third_party_imports(tree: ast.Module) -> tuple[set[int], set[str]]:
    """The lines of imports from outside engine/bot/cards, and the names they bind.

    ``from aiohttp import web`` or ``from slack_sdk.web.async_client import AsyncWebClient``
    name a library, not a channel; the names they bind are the library's too.
    """
    lines: set[int] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        if all(module.split(".")[0] in TREES for module in modules):
            continue
        lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        for alias in node.names:
            names.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):  # names bound to a library's object, straight from it
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            while isinstance(func, ast.Attribute):
                func = func.value
            if isinstance(func, ast.Name) and func.id in names:
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return lines, names


def field_named(tree: ast.Module, docstrings: set[int]) -> set[str]:
    """The ``FIELD_NAMED`` channels a module imports, or holds an address of in a string."""
    found: set[str] = set()
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        for name in FIELD_NAMED:
            if any(m.split(".")[:2] in (["bot", name], ["cards", name]) for m in modules):
                found.add(name)
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.lineno not in docstrings
                and f"{name}:" in node.value
            ):
                found.add(name)
    return found


def named_channels(source: str) -> set[str]:
    """The channels a module's code (not its comments or docstrings) names."""
    tree = ast.parse(source)
    docstrings = docstring_lines(tree)
    library_lines, library_names = third_party_imports(tree)
    found: set[str] = field_named(tree, docstrings)
    previous: list[str] = []  # the last two significant tokens, to see ``aiohttp.web``
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.start[0] in library_lines or (
            tok.type == tokenize.STRING and tok.start[0] in docstrings
        ):
            previous = []
            continue
        if tok.type == tokenize.NAME:
            library = tok.string in library_names or (
                len(previous) == 2 and previous[0] in library_names and previous[1] == "."
            )
            text = "" if library else tok.string
        elif tok.type in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)):
            text = tok.string.replace("aiohttp.web", "")
        else:
            text = ""
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
            previous = [*previous[-1:], tok.string]
        if text:
            seen = set(words(text))
            found.update(name for name in CHANNELS if seen & WORDS[name])
    return found


def own_package(path: Path, channel: str) -> bool:
    """Whether ``path`` (relative to the repo) lies in the channel's own packages."""
    parts = path.parts
    return len(parts) > 2 and parts[0] in ("bot", "cards") and parts[1] == channel


def count(root: Path = ROOT) -> dict[str, list[str]]:
    """Per channel, the sorted modules outside its packages that name it in code."""
    hits: dict[str, list[str]] = {name: [] for name in CHANNELS}
    for tree_name in TREES:
        for path in sorted((root / tree_name).rglob("*.py")):
            relative = path.relative_to(root)
            shown = relative.as_posix()
            shown = next((f"{u}/" for u in UNITS if shown.startswith(f"{u}/")), shown)
            for name in sorted(named_channels(path.read_text(encoding="utf-8"))):
                if not own_package(relative, name) and shown not in hits[name]:
                    hits[name].append(shown)
    return hits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="print the counts only")
    args = parser.parse_args(argv)
    hits = count()
    for name in CHANNELS:
        if not args.quiet:
            print(f"== {name}")
            for module in hits[name]:
                print(f"   {module}")
    print("channel   modules naming it outside bot/<channel>/ and cards/<channel>/")
    for name in CHANNELS:
        mark = "" if len(hits[name]) <= TARGET else f"   (target <= {TARGET})"
        print(f"{name:<9} {len(hits[name]):>3}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``signoff teams package``: the Teams app package to side-load (``signoff-teams.zip``).

The zip holds ``manifest.json`` (schema v1.17: one bot in personal, team and group-chat scope,
with the command list Teams suggests when someone types to the bot) and its two icons, drawn
here as PNGs (no binary files in the repository): ``color.png`` 192x192, ``outline.png`` 32x32
white on transparent, as Teams requires. Side-loading steps: ``docs/teams.md``.

``signoff teams package`` (``bot.teams.cli``) calls ``teams_package``. Like the CLI it is the top
of the program, so it is where the environment is read (for ``${VAR}`` in app.yaml).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import struct
import sys
import zipfile
import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from engine.config import load_config
from engine.domain.errors import ConfigError

MANIFEST_VERSION = "1.17"
SCHEMA = (
    "https://developer.microsoft.com/en-us/json-schemas/teams/"
    f"v{MANIFEST_VERSION}/MicrosoftTeams.schema.json"
)
ACCENT = (0x2B, 0x59, 0xC3)  # the colour behind the check mark
SCOPES = ["personal", "team", "groupChat"]
# What Teams offers as you type to the bot (at most 10 per list; title <= 32, description
# <= 128 characters). The grammar itself is engine.gate.commands.
COMMANDS = [
    ("pending", "Your approval requests waiting for a decision (in your personal chat)"),
    ("subscribe", "Name this conversation for approval cards: subscribe <name> (admins)"),
    ("gate status", "Show the confidence gate's settings and where each comes from"),
    ("gate on", "Switch the confidence gate on (admins)"),
    ("gate off", "Switch the confidence gate off (admins)"),
    ("gate threshold", "Set the minimum score: gate threshold <0..1> [agent=|node=] (admins)"),
    ("gate estimator", "gate estimator verbalization|self-consistency (admins)"),
    ("gate samples", "gate samples <1..9> (admins)"),
    ("gate calibrate", "gate calibrate on|off (admins)"),
    ("help", "List the commands"),
]
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")


class PackageError(ValueError):
    """The package cannot be built as asked (a missing app id, a non-https website)."""


def teams_package(args: argparse.Namespace) -> int:
    """Write the package; 2 for a configuration or argument problem."""
    try:
        config = load_config(args.config, os.environ)
        app_id = args.app_id or config.teams.app_id
        website = args.website_url or config.server.public_url
        data = build_package(app_id, website, name=args.name)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"config error: {problem}", file=sys.stderr)
        return 2
    except PackageError as exc:
        print(f"signoff teams package: {exc}", file=sys.stderr)
        return 2
    with open(args.output, "wb") as out:
        out.write(data)
    print(f"wrote {args.output} (bot {app_id}); side-load it as docs/teams.md describes")
    return 0


def manifest(
    app_id: str, website_url: str, *, name: str = "Signoff", version: str = "1.0.0"
) -> dict[str, Any]:
    """The app manifest for the bot ``app_id``, with developer links under ``website_url``."""
    if not _GUID.match(app_id or ""):
        raise PackageError(
            "the bot's app id must be its Microsoft App ID, a GUID: set teams.appId "
            f"(TEAMS_APP_ID) or pass --app-id (got {app_id!r})"
        )
    parts = urlsplit(website_url)
    if parts.scheme != "https" or not parts.hostname:
        raise PackageError(
            f"Teams needs https developer links; {website_url!r} is not: pass --website-url"
        )
    base = website_url.rstrip("/")
    return {
        "$schema": SCHEMA,
        "manifestVersion": MANIFEST_VERSION,
        "version": version,
        "id": app_id,
        "developer": {
            "name": "Signoff",
            "websiteUrl": base,
            "privacyUrl": f"{base}/privacy",
            "termsOfUseUrl": f"{base}/terms",
        },
        "name": {"short": name[:30], "full": f"{name}: a person in the loop of AI agents"[:100]},
        "description": {
            "short": "Approve, deny or take over what AI agents are about to do."[:80],
            "full": (
                "Signoff parks an agent's run at an approval and posts a card with the exact "
                "pending arguments into this conversation. Approve, deny with a reason, or "
                "take over and release; the card updates for everyone and the run resumes. "
                "Admins tune the confidence gate by writing to the bot."
            ),
        },
        "icons": {"color": "color.png", "outline": "outline.png"},
        "accentColor": "#{:02X}{:02X}{:02X}".format(*ACCENT),
        "bots": [
            {
                "botId": app_id,
                "scopes": SCOPES,
                "isNotificationOnly": False,
                "supportsFiles": False,
                "commandLists": [
                    {
                        "scopes": SCOPES,
                        "commands": [{"title": t, "description": d} for t, d in COMMANDS],
                    }
                ],
            }
        ],
        "permissions": ["identity", "messageTeamMembers"],
        "validDomains": [parts.hostname],
    }


def build_package(app_id: str, website_url: str, *, name: str = "Signoff") -> bytes:
    """The zip's bytes: manifest.json, color.png, outline.png at its root."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        text = json.dumps(manifest(app_id, website_url, name=name), indent=2)
        archive.writestr("manifest.json", text + "\n")
        archive.writestr("color.png", color_icon())
        archive.writestr("outline.png", outline_icon())
    return buffer.getvalue()


def color_icon(size: int = 192) -> bytes:
    """The full-colour icon: a white check mark on the accent colour."""

    def pixel(x: float, y: float) -> tuple[int, ...]:
        return (255, 255, 255) if _on_check(x, y) else ACCENT

    return png(size, size, pixel, alpha=False)


def outline_icon(size: int = 32) -> bytes:
    """The outline icon: a white check mark on transparency (Teams' rule for this icon)."""

    def pixel(x: float, y: float) -> tuple[int, ...]:
        return (255, 255, 255, 255) if _on_check(x, y) else (0, 0, 0, 0)

    return png(size, size, pixel, alpha=True)


def _on_check(x: float, y: float) -> bool:
    """Whether (x, y), both in 0..1, lies on a check mark's two strokes."""

    def near(ax: float, ay: float, bx: float, by: float) -> bool:
        dx, dy = bx - ax, by - ay
        t = max(0.0, min(1.0, ((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy)))
        return (x - ax - t * dx) ** 2 + (y - ay - t * dy) ** 2 <= 0.075**2

    return near(0.22, 0.52, 0.42, 0.72) or near(0.42, 0.72, 0.8, 0.3)


def png(
    width: int, height: int, pixel: Callable[[float, float], tuple[int, ...]], *, alpha: bool
) -> bytes:
    """A PNG (8-bit RGB or RGBA) from ``pixel(x, y)``, with x and y scaled to 0..1."""
    rows = bytearray()
    for j in range(height):
        rows.append(0)  # filter: none
        for i in range(width):
            rows.extend(pixel((i + 0.5) / width, (j + 0.5) / height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 6 if alpha else 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + chunk(b"IEND", b"")
    )

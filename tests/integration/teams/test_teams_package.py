"""``signoff teams package`` writes a side-loadable Teams app: a manifest valid against
Microsoft's v1.17 schema, and two real PNG icons of the sizes Teams asks for."""

from __future__ import annotations

import json
import os
import struct
import zipfile
import zlib
from pathlib import Path

import jsonschema
import pytest

from bot.cli import main

ROOT = Path(__file__).parents[3]
APP_ID = "5d2f1e0a-3b4c-4d5e-8f90-a1b2c3d4e5f6"
# Microsoft's manifest schemas ship in an npm package, installed beside the playground.
SCHEMA = (
    ROOT / "tests/e2e/teams/node_modules/@microsoft/app-manifest/build/json-schemas/teams"
    "/v1.17/MicrosoftTeams.schema.json"
)


def package(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "signoff-teams.zip"
    code = main(
        ["teams", "package", "--config", str(ROOT / "app.yaml"), "--output", str(out), *extra]
    )
    assert code == 0
    return out


def decode_png(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """(width, height, colour type, rows) of an unfiltered 8-bit PNG, checking every CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body)
        chunks[kind] = body
        pos += 12 + length
    width, height, depth, colour, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = 1 + width * (4 if colour == 6 else 3)
    rows = [raw[i * stride + 1 : (i + 1) * stride] for i in range(height)]
    return width, height, colour, rows


def test_the_package_holds_a_valid_manifest_and_its_icons(tmp_path):
    out = package(tmp_path, "--app-id", APP_ID, "--website-url", "https://signoff.example.com")
    with zipfile.ZipFile(out) as archive:
        assert sorted(archive.namelist()) == ["color.png", "manifest.json", "outline.png"]
        manifest = json.loads(archive.read("manifest.json"))
        color, outline = archive.read("color.png"), archive.read("outline.png")

    assert manifest["manifestVersion"] == "1.17"
    (bot,) = manifest["bots"]
    assert bot["botId"] == manifest["id"] == APP_ID
    assert set(bot["scopes"]) == {"personal", "team", "groupChat"}
    titles = [c["title"] for c in bot["commandLists"][0]["commands"]]
    assert "subscribe" in titles and "gate threshold" in titles and "gate status" in titles
    assert "pending" in titles and len(titles) <= 10  # Teams' limit per command list
    assert manifest["validDomains"] == ["signoff.example.com"]

    width, height, colour, _ = decode_png(color)
    assert (width, height, colour) == (192, 192, 2)
    width, height, colour, rows = decode_png(outline)
    assert (width, height, colour) == (32, 32, 6)
    pixels = {bytes(row[i : i + 4]) for row in rows for i in range(0, len(row), 4)}
    assert pixels == {b"\xff\xff\xff\xff", b"\x00\x00\x00\x00"}  # white on transparent only

    if not SCHEMA.exists():
        if os.environ.get("SIGNOFF_REQUIRE_PLAYGROUND") == "1":
            pytest.fail(f"{SCHEMA} is missing: npm ci --prefix tests/e2e/teams")
        pytest.skip("the manifest schema is not installed: npm ci --prefix tests/e2e/teams")
    schema = json.loads(SCHEMA.read_text("utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert [e.message for e in validator.iter_errors(manifest)] == []


def test_without_an_app_id_or_https_it_says_what_to_set(tmp_path, capsys):
    out = tmp_path / "x.zip"
    base = ["teams", "package", "--config", str(ROOT / "app.yaml"), "--output", str(out)]
    assert main([*base, "--app-id", "", "--website-url", "https://a.example"]) == 2
    assert "set teams.appId (TEAMS_APP_ID) or pass --app-id" in capsys.readouterr().err
    assert main([*base, "--app-id", APP_ID, "--website-url", "http://127.0.0.1:8080"]) == 2
    assert "pass --website-url" in capsys.readouterr().err
    assert not out.exists()

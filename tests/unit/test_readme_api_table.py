"""The README's REST API table lists every route the server declares (``bot.api.route_tables``),
so a new endpoint cannot ship undocumented; and every route it lists exists."""

from __future__ import annotations

import re
from pathlib import Path

from bot.api import route_tables

README = Path(__file__).resolve().parents[2] / "README.md"


def _table_rows() -> list[list[str]]:
    section = README.read_text().split("## The REST API", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| method | path | role |"), "the API table's header moved"
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[1:]]


def documented() -> set[tuple[str, str]]:
    """(method, path) for every method and every backticked path of every row."""
    found: set[tuple[str, str]] = set()
    for method_cell, path_cell, *_ in _table_rows():
        methods = [m.strip() for m in method_cell.split("/")]
        paths = [p.split("?", 1)[0] for p in re.findall(r"`([^`]+)`", path_cell)]
        assert methods and paths, f"a row without a method or a path: {method_cell} {path_cell}"
        found |= {(m, p) for m in methods for p in paths}
    return found


def declared() -> set[tuple[str, str]]:
    return {(r.method, r.path) for table in route_tables() for r in table.routes}


def test_every_declared_route_is_in_the_readme_table() -> None:
    missing = sorted(declared() - documented())
    assert not missing, f"README.md's API table lacks {missing}"


def test_the_readme_table_lists_no_route_that_does_not_exist() -> None:
    extra = sorted(documented() - declared())
    assert not extra, f"README.md's API table lists routes the server lacks: {extra}"

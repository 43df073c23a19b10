"""Tests move a ``ManualClock`` instead of sleeping: the non-zero ``asyncio.sleep`` and
``time.sleep`` calls under ``tests/`` stay few (at most ``MOST``), and each says why real time
is needed, in a comment on its line or the line above. Polls and pauses go through
``tests/support/waiting.py``, which counts once."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
MOST = 10


def _is_zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0


def real_sleeps(path: Path) -> list[tuple[int, bool]]:
    """The non-zero sleep calls in ``path``: (line, whether a comment says why)."""
    source = path.read_text()
    commented = {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        func = node.func
        if not (
            func.attr == "sleep"
            and isinstance(func.value, ast.Name)
            and func.value.id in ("asyncio", "time")
        ):
            continue
        if node.args and _is_zero(node.args[0]):
            continue
        lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        why = node.lineno - 1 in commented or any(line in commented for line in lines)
        found.append((node.lineno, why))
    return sorted(found)


def test_few_real_sleeps_each_with_a_reason() -> None:
    sleeps = {
        f"{path.relative_to(TESTS.parent)}:{line}": why
        for path in sorted(TESTS.rglob("*.py"))
        for line, why in real_sleeps(path)
    }
    unexplained = sorted(site for site, why in sleeps.items() if not why)
    assert not unexplained, f"real sleeps without a comment saying why: {unexplained}"
    assert len(sleeps) <= MOST, f"{len(sleeps)} real sleeps in tests/: {sorted(sleeps)}"


def test_the_count_sees_what_it_should(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import asyncio, time\n"
        "async def f():\n"
        "    await asyncio.sleep(0)\n"
        "    await asyncio.sleep(0.1)\n"
        "    # a real process\n"
        "    time.sleep(1)\n"
        "    await asyncio.sleep(x)  # why\n"
    )
    assert real_sleeps(sample) == [(4, False), (6, True), (7, True)]

"""Every third-party module that the service's code imports comes with ``pip install signoff``:
its distribution is a runtime dependency in pyproject.toml or one of theirs, not only a dev
extra's (jsonschema once was, and ``signoff serve`` failed in a plain install)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWN = {"engine", "bot", "cards"}


def imported_top_level_modules() -> dict[str, str]:
    """Top-level module -> a file importing it, for engine/, bot/ and cards/."""
    found: dict[str, str] = {}
    for package in OWN:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalized(re.split(r"[\[<>=!~; (]", requirement.strip(), maxsplit=1)[0])


def with_their_dependencies(names: set[str]) -> set[str]:
    """The installed closure of ``names`` (requirements under an extra are left out)."""
    closure, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        try:
            found = requires(name) or []
        except PackageNotFoundError:
            continue
        todo += [requirement_name(r) for r in found if "extra ==" not in r]
    return closure


def test_every_imported_distribution_is_a_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = with_their_dependencies({requirement_name(r) for r in project["dependencies"]})
    distributions = packages_distributions()
    missing = {}
    for module, where in imported_top_level_modules().items():
        if module in OWN or module in sys.stdlib_module_names or module == "__future__":
            continue
        names = {normalized(d) for d in distributions.get(module, [])}
        if not names & runtime:
            missing[module] = (where, sorted(names))
    assert not missing, f"imported but not runtime dependencies: {missing}"

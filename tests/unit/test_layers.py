"""The layers hold (docs/architecture.md): the import contracts of ``pyproject.toml``, no import
cycle anywhere (imports under ``TYPE_CHECKING`` count), none between engine's subpackages
either, small modules, and no status spelled out in the SQL adapter: the store takes statuses
from the domain's tables."""

from __future__ import annotations

import ast
import statistics
import subprocess
import sys
from enum import StrEnum
from pathlib import Path

import grimp

from engine.domain import model

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "bot", "cards")
MAX_LINES = 400


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(imports):
        if start in index:
            continue
        work = [(start, iter(sorted(imports[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(imports[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_cycles_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_there_is_no_import_cycle():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    ours = {m for m in graph.modules if m.split(".")[0] in PACKAGES}
    imports = {m: set(graph.find_modules_directly_imported_by(m)) & ours for m in ours}
    assert cycles(imports) == []


# engine's subpackages (and its top-level modules), the units the ``layers`` contract orders.
ENGINE_PARTS = (
    "engine.domain",
    "engine.ports",
    "engine.config",
    "engine.services",
    "engine.gate",
    "engine.adapters",
    "engine.assembly",
    "engine.background",
)


def part_of(module: str) -> str | None:
    """The engine subpackage ``module`` belongs to (None: not one of ``ENGINE_PARTS``)."""
    return next((p for p in ENGINE_PARTS if module == p or module.startswith(p + ".")), None)


def test_there_is_no_import_cycle_between_engine_subpackages():
    """A module-level acyclic graph may still tie two packages both ways (a.x -> b.y and
    b.z -> a.w): collapse every module into its subpackage and look again."""
    graph = grimp.build_graph("engine", cache_dir=None)
    imports: dict[str, set[str]] = {part: set() for part in ENGINE_PARTS}
    for module in graph.modules:
        source = part_of(module)
        if source is None:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            target = part_of(imported)
            if target is not None and target != source:
                imports[source].add(target)
    assert imports["engine.assembly"], "no edges at all: the check would prove nothing"
    assert cycles(imports) == []


# DESIGN.md's two confinements, at the paths the layering gave them: SQLAlchemy only in the SQL
# store adapter (in engine/, bot/ and cards/ alike), jinja2 only in the expression sandbox inside
# engine (split in three modules to stay under MAX_LINES). The import-linter contracts say the
# same for SQLAlchemy; this also keeps jinja2 out of config, gate, assembly and the adapters.
CONFINED = {
    "sqlalchemy": ("engine.adapters.store.",),
    "jinja2": (
        "engine.domain.expressions",
        "engine.domain.expression_sandbox",
        "engine.domain.expression_scan",
    ),
    "re2": ("engine.domain.patterns",),  # the linear-time engine of re: conditions, in one place
}


def test_sqlalchemy_and_jinja2_stay_where_design_puts_them():
    graph = grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)
    for package, allowed in CONFINED.items():
        importers = graph.find_modules_that_directly_import(package)
        assert importers, f"nothing imports {package}: the check would prove nothing"
        # The front ends render with jinja2 (cards/, bot/console/): that confinement is engine's.
        scope = ("engine",) if package == "jinja2" else PACKAGES
        strays = {m for m in importers if m.split(".")[0] in scope and not m.startswith(allowed)}
        assert strays == set(), f"{package} imported outside {allowed}"


def modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_modules_stay_small():
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in modules()}
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}
    assert statistics.median(sizes.values()) < 200


def status_values() -> set[str]:
    lifecycles = [v for v in vars(model).values() if isinstance(v, type) and issubclass(v, StrEnum)]
    return {
        member.value for enum in lifecycles if enum.__name__.endswith("Status") for member in enum
    }


def test_the_store_spells_no_status():
    statuses = status_values()
    assert {"pending", "waiting", "granted"} <= statuses
    spelled = []
    for path in sorted((ROOT / "engine" / "adapters" / "store").glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and any(node.value == s or f"'{s}'" in node.value for s in statuses)
            ):
                spelled.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert spelled == []

"""The shape of the code: the passes in order (and run so), no import cycle, no module too
long to read."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dpsql
from dpsql import pipeline
from dpsql.engines import Engine
from dpsql.planner import Planner

PACKAGE = Path(dpsql.__file__).parent
#: Modules outside the wire server stay short enough to read in one sitting.
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:`` (imports for annotations only, which
    never run)."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and \
                node.test.id == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _imports(path: Path) -> set[str]:
    """Every dpsql module ``path`` imports when it runs, at the top or inside a function."""
    found: set[str] = set()
    package = _module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else \
        _module_name(path)
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            if module.startswith("dpsql"):
                # ``from pkg import sub`` depends on the module pkg.sub; a package's own
                # __init__ runs first for any of its modules, which is no cycle of ours.
                subs = {f"{module}.{a.name}" for a in node.names}
                modules = subs & _MODULES
                found.update(modules or {module})
                if len(modules) < len(subs):
                    found.add(module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("dpsql"))
    return found


_MODULES = {_module_name(p) for p in PACKAGE.rglob("*.py")}


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: _imports(path) & set(paths) - {name} for name, path in paths.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_no_import_cycle_among_dpsql_modules() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_modules_outside_the_server_stay_short() -> None:
    long = {_module_name(p): n for p in PACKAGE.rglob("*.py")
            if "server" not in p.parts and (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules: {long}"


def test_every_pass_is_the_main_function_of_a_module_of_its_own() -> None:
    modules = [f.__module__ for f in pipeline.PASSES]
    assert len(set(modules)) == len(modules), modules
    for f, module in zip(pipeline.PASSES, modules, strict=True):
        assert module.startswith("dpsql.") and module != "dpsql.pipeline", f


def test_docs_and_docstrings_number_the_passes_as_the_pipeline_runs_them() -> None:
    """docs/architecture.md's table lists ``PASSES`` in order, and each pass module's docstring
    opens with its number ("Pass 3, check: ...")."""
    table = (PACKAGE.parent / "docs" / "architecture.md").read_text().split(
        "## The passes and what flows between them")[1].split("\n\n")[1]
    rows = [line.split("|")[1:4] for line in table.splitlines()[2:]]
    functions = [f.__qualname__ for f in pipeline.PASSES]
    assert [fn.strip().strip("`") for _, _, fn in rows] == functions
    for number, ((name, module, _), f) in enumerate(zip(rows, pipeline.PASSES, strict=True), 1):
        if f is Engine.execute:
            continue
        doc = sys.modules[f.__module__].__doc__ or ""
        assert module.strip().startswith(f"`{f.__module__.split('.')[-1]}.py`"), (name, module)
        assert doc.startswith(f"Pass {number}, {name.strip()}:"), (f.__module__, doc[:40])


def test_the_pipeline_runs_its_passes_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PASSES`` is what :mod:`dpsql.pipeline` calls, in that order, to prepare and answer a
    query (the engine's execute included)."""
    ran: list[str] = []

    def recorded(f: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            ran.append(f.__qualname__)
            return f(*args, **kwargs)
        return run

    with dpsql.Database() as db:
        for f in pipeline.PASSES:
            if f is not Engine.execute:
                monkeypatch.setattr(pipeline, f.__name__, recorded(f))
        monkeypatch.setattr(db.engine, "execute", recorded(db.engine.execute))
        p = Planner(db.metadata).prepare("SELECT sex, COUNT(*) FROM people GROUP BY sex")
        pipeline.answer(p, db.engine, db.randomness)
    assert [name.split(".")[-1] for name in ran] == [f.__name__ for f in pipeline.PASSES]


def test_every_package_is_installed() -> None:
    """`pip install .` (the README's Quickstart) ships every package of dpsql/: an editable
    install finds a package that pyproject.toml forgot, a real install does not."""
    import tomllib

    declared = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"][
        "setuptools"]["packages"])
    found = {_module_name(p.parent / "__init__.py") for p in PACKAGE.rglob("__init__.py")}
    assert found <= declared, f"add to [tool.setuptools] packages: {sorted(found - declared)}"

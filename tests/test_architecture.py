"""The shape of the code: the layers, the passes in order, no import cycle, no module too long
to read."""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dpsql
from dpsql import pipeline
from dpsql.engines import Engine
from dpsql.planner import Planner

PACKAGE = Path(dpsql.__file__).parent
#: A backstop, not the design rule. Modules are split by what they do, one concept each, named
#: for it (the review rule: docs/architecture.md, "The layout"); a line cap made modules split
#: by length instead (bind_joins, owner_settings, the neighbour_* files). This generous guard
#: only flags a module that has grown into several concepts without anyone noticing: over
#: twice the longest module (450 lines of code) when the cap was lifted.
MAX_CODE_LINES = 1000

#: The layers of dpsql, lowest first, by path under dpsql/ (a folder ends in /; a module is in
#: the layer of its longest matching entry). A module imports from its own layer and the layers
#: below, never from a layer above: the layer order of docs/architecture.md, in one place.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors.py", "cache.py", "texttable.py"),  # used by every layer
    ("metadata/",),  # what the data owner declares
    ("engines/",),  # the engines, each with its dialect of the engine IR
    ("query/",),  # parse -> bind -> check -> fold -> cost, and what the checker reads
    ("privacy/",),  # the plan: sensitivities, key release, mechanisms, samplers, accounting
    ("execution/",),  # the plan run: rewrite, perturb, post-process, public reads, time limits
    ("ledger/",),  # budgets charged durably, stored answers
    ("bias.py", "pipeline.py", "routes.py", "series.py", "releases.py", "planner.py",
     "explain.py", "skeleton.py", "retention.py", "shortcut.py",
     "database.py"),
    ("audit/",),  # `dpsql audit`: the command line alone imports it
    ("server/wire/",),  # bytes <-> messages and values
    ("server/catalog/",),  # pg_catalog and information_schema
    ("server/machine/",),  # one session's state machine, no I/O
    # The front doors: the package itself (dpsql.connect, dpsql.Database), the command line,
    # DB-API, the server's I/O and the integrations.
    ("__init__.py", "__main__.py", "cli/", "dbapi.py", "server/", "integrations/"),
)

#: Imports up the layers that the code still makes (importer, imported), each with its reason.
#: Never add to it: move the code down, or the import the other way.
CROSSINGS: frozenset[tuple[str, str]] = frozenset({
    # The engine reads the physical tables a joined relation names (physical) and dry-runs on
    # empty ones (empty_tables, with_empty): those belong with the engines.
    ("dpsql.engines.postgres.engine", "dpsql.query.joins"),
    ("dpsql.engines.postgres.engine", "dpsql.query.dry_runs"),
    # The owner's [budget] section is read into accounting's Allowance: the value type belongs
    # below metadata/.
    ("dpsql.metadata.owner_settings", "dpsql.privacy.accounting"),
    # The checker sorts aggregates by the privacy argument each gets (AggregateCall, kind_of):
    # the vocabulary of aggregates belongs in query/, their privacy argument in privacy/.
    ("dpsql.query.check", "dpsql.privacy.aggregates"),
})


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


def _code_lines(text: str) -> int:
    """The lines that hold code: not blank, not comments, not docstrings (a string that is a
    statement of its own). A line of a multi-line expression or string literal is code."""
    prose: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str) and node.end_lineno is not None:
            prose.update(range(node.lineno, node.end_lineno + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER, tokenize.ENCODING}
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in skip and token.start[0] not in prose:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines)


def test_code_lines_counted_without_docstrings_comments_or_blanks() -> None:
    text = '"""Doc\n\nstring."""\n\n# a comment\nx = (1,\n     2)  # trailing\n\n\n' \
        'def f() -> str:\n    """Doc."""\n    return """a\nb"""\n'
    assert _code_lines(text) == 5  # x = (1, / 2) / def / return """a / b"""


def test_no_module_has_grown_into_several() -> None:
    """The backstop of :data:`MAX_CODE_LINES`: a module this long holds several concepts; split
    it by what each does, not by its length."""
    long = {_module_name(p): n for p in PACKAGE.rglob("*.py")
            if (n := _code_lines(p.read_text(encoding="utf-8"))) > MAX_CODE_LINES}
    assert not long, f"one concept per module (code lines, guard {MAX_CODE_LINES}): {long}"


def _layer(module: str) -> int | None:
    """The index in LAYERS of a module: the longest entry that its path under dpsql/ starts
    with (a folder ends in /)."""
    parts = module.split(".")[1:]
    path = "/".join(parts) + ("/" if _is_package(module) else ".py") if parts else "__init__.py"
    best: tuple[int, int] | None = None
    for index, layer in enumerate(LAYERS):
        for entry in layer:
            hit = path == entry or (entry.endswith("/") and path.startswith(entry))
            if hit and (best is None or len(entry) > best[0]):
                best = (len(entry), index)
    return None if best is None else best[1]


def _is_package(module: str) -> bool:
    return (PACKAGE.parent.joinpath(*module.split(".")) / "__init__.py").exists()


def test_every_module_has_a_layer() -> None:
    loose = sorted(m for m in _MODULES if _layer(m) is None)
    assert not loose, f"place these modules in LAYERS (tests/test_architecture.py): {loose}"


def _crossings() -> set[tuple[str, str]]:
    """Every import of a module in a higher layer than the importer's."""
    out = set()
    for module, imported in _graph().items():
        for other in imported:
            low, high = _layer(module), _layer(other)
            if low is not None and high is not None and high > low:
                out.add((module, other))
    return out


def test_imports_go_down_the_layers() -> None:
    """A module imports its own layer and the layers below it (LAYERS), never one above. An
    entry of CROSSINGS that no longer crosses fails too, so the list only shrinks."""
    crossings = _crossings()
    new = sorted(crossings - set(CROSSINGS))
    gone = sorted(set(CROSSINGS) - crossings)
    assert not new, f"imports up the layers (move the code, or import the other way): {new}"
    assert not gone, f"remove from CROSSINGS, they no longer cross: {gone}"


def test_only_the_command_line_imports_the_audit() -> None:
    """The audit mutates the library to measure it (seeded samplers, patched passes): nothing
    that answers queries may import it."""
    audit = LAYERS.index(("audit/",))
    importers = sorted(m for m, imported in _graph().items()
                       if _layer(m) != audit and any(_layer(i) == audit for i in imported))
    assert importers == ["dpsql.cli.auditing"], importers


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
        path = "/".join(f.__module__.split(".")[1:])
        assert module.strip().startswith(f"`{path}.py`"), (name, module)
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


#: Third-party imports that an extra provides, each with the reason it is not a dependency;
#: every other one must be in [project] dependencies (what the Quickstart's install brings).
OPTIONAL_IMPORTS = {
    "psycopg": "the postgres extra: --database postgresql://",
    "pyspark": "the spark extras",
    "pandas": "local_estimates.estimate_counts, an analysis helper for pandas users",
    "sqlalchemy": "integrations/, loaded by SQLAlchemy itself",
    "superset": "integrations/, loaded by Superset itself",
}


def test_every_import_is_a_dependency() -> None:
    """`pip install .` runs every command: `dpsql audit` once needed scipy from the test
    extra alone."""
    import re
    import tomllib

    declared = {re.split(r"[<>=\[ ;]", d)[0].replace("-", "_") for d in tomllib.loads(
        (PACKAGE.parent / "pyproject.toml").read_text())["project"]["dependencies"]}
    imported: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"dpsql"}
    missing = sorted(third_party - declared - set(OPTIONAL_IMPORTS))
    assert not missing, f"add to [project] dependencies in pyproject.toml: {missing}"

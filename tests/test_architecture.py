"""The shape of the code: the layers, the passes in order and named for what they do, no import
cycle at any level, every import counted (those for annotations under ``TYPE_CHECKING`` too)."""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import pkgutil
import sys
import tokenize
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import dpsql
import dpsql.routes
from dpsql.engines import Engine
from dpsql.execution.public import PublicRead
from dpsql.privacy.plan import Plan
from dpsql.routes import pipeline, series
from dpsql.routes.route import Route
from dpsql.routes.series import TwoReleases

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
    # The library: the explanations (explain, bias), the routes (the passes in order, the
    # planner, each way of answering), Database, the command line's shortcut to a stored
    # answer, and the owner's commands on its own data (metadata init, check).
    ("explanation/", "routes/", "shortcut.py", "database.py", "owner/"),
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
CROSSINGS: frozenset[tuple[str, str]] = frozenset()

#: Imports that close a cycle (importer, imported), each with its reason; dropped from the graph
#: before cycles are looked for. Never add to it; an entry that no longer exists fails too.
CYCLE_EDGES: frozenset[tuple[str, str]] = frozenset()


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every dpsql module ``path`` imports: at the top, inside a function, or under ``if
    TYPE_CHECKING:`` (an annotation's import is a dependency too: it hid cycles)."""
    found: set[str] = set()
    package = _module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else \
        _module_name(path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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


def _acyclic_graph() -> dict[str, set[str]]:
    """The import graph without the edges of :data:`CYCLE_EDGES`."""
    return {name: {i for i in imported if (name, i) not in CYCLE_EDGES}
            for name, imported in _graph().items()}


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
    cycle = _cycle(_acyclic_graph())
    assert cycle is None, " -> ".join(cycle or [])
    edges = {(m, i) for m, imported in _graph().items() for i in imported}
    gone = sorted(CYCLE_EDGES - edges)
    assert not gone, f"remove from CYCLE_EDGES, these imports are gone: {gone}"


def _packages_graphs() -> dict[str, dict[str, set[str]]]:
    """For each package, the graph of its direct children (modules and subpackages): an edge
    where a module under one imports a module under another. The package's own __init__ is
    its face, not a child. The allowed crossings and cycle edges are left out."""
    allowed = set(CROSSINGS) | CYCLE_EDGES
    packages = {m for m in _MODULES if _is_package(m)}
    graphs: dict[str, dict[str, set[str]]] = {p: {} for p in packages}

    def child(package: str, module: str) -> str | None:
        if not module.startswith(package + ".") or module == package:
            return None
        return package + "." + module[len(package) + 1:].split(".")[0]

    for module, imported in _graph().items():
        for package in packages:
            source = child(package, module)
            if source is None:
                continue
            graphs[package].setdefault(source, set())
            for other in imported:
                target = child(package, other)
                if target is not None and target != source and (module, other) not in allowed:
                    graphs[package][source].add(target)
                    graphs[package].setdefault(target, set())
    return graphs


def test_no_import_cycle_among_packages() -> None:
    """No cycle at any level: within each package, its modules and subpackages, each taken as
    one, import one another in one direction (``engines`` never imports ``privacy`` through
    one module while ``privacy`` imports ``engines`` through another)."""
    cycles = {p: c for p, g in _packages_graphs().items() if (c := _cycle(g)) is not None}
    assert not cycles, {p: " -> ".join(c) for p, c in cycles.items()}


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


def _route_types() -> set[type]:
    """What says which kind of route a query took: every class of the route package (the
    routes, their parts), every :class:`Route` subclass wherever defined, and what each route
    prepared (the return type of its ``prepared``: a Plan, a public read, ...)."""
    found: set[type] = set()
    for info in pkgutil.iter_modules(dpsql.routes.__path__):
        module = importlib.import_module(f"dpsql.routes.{info.name}")
        found.update(o for o in vars(module).values()
                     if inspect.isclass(o) and o.__module__ == module.__name__)
    routes, todo = set(), [Route]
    while todo:
        cls = todo.pop()
        routes.add(cls)
        todo.extend(set(cls.__subclasses__()) - routes)
    found |= routes
    for cls in routes:
        prepared = typing.get_type_hints(cls.prepared.fget).get("return")  # type: ignore[attr-defined]
        if inspect.isclass(prepared) and prepared is not object:
            found.add(prepared)
    return found


def _type_expressions(tree: ast.AST) -> Iterator[tuple[int, ast.expr]]:
    """Each class a module tests a value against, with its line: the second argument of
    ``isinstance``/``issubclass`` (``A | B`` and tuples spelled out), a side of a comparison
    with ``type(x)`` (``is``, ``==``, ``in``), a ``case A(...)`` pattern."""
    def spelled(node: ast.expr) -> Iterator[ast.expr]:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            yield from spelled(node.left)
            yield from spelled(node.right)
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            for element in node.elts:
                yield from spelled(element)
        else:
            yield node

    def is_type_call(node: ast.expr) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "type"

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
            yield from ((node.lineno, n) for n in spelled(node.args[1]))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(is_type_call(side) for side in sides):
                yield from ((node.lineno, n) for side in sides if not is_type_call(side)
                            for n in spelled(side))
        elif isinstance(node, ast.MatchClass):
            yield node.lineno, node.cls


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.C`` as ["a", "b", "C"]; None for anything else."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else [*base, node.attr]
    return None


def _route_type_tests(source: str, namespace: Callable[[], dict[str, Any]],
                      route_types: set[type]) -> list[tuple[int, str]]:
    """(line, name) of each test of a value against a route type in ``source``; a name is
    resolved in the module's ``namespace`` (imported only when a name is one of theirs)."""
    names = {t.__name__ for t in route_types}
    found = []
    for line, node in _type_expressions(ast.parse(source)):
        dotted = _dotted(node)
        if dotted is None or dotted[-1] not in names:
            continue
        value: Any = namespace().get(dotted[0])
        for attr in dotted[1:]:
            value = getattr(value, attr, None)
        if value in route_types or value is None:  # unresolved: a route type's name
            found.append((line, ".".join(dotted)))
    return sorted(found)


def test_no_module_outside_the_route_package_asks_which_route_it_has() -> None:
    """Outside dpsql/routes/, nothing asks which kind of route a query took (``isinstance``,
    ``type(x) is``, ``case``): it asks the route (:class:`dpsql.routes.route.Route`: its cost,
    what it measures, whether it answers the query as written, ...). The route types are
    found from the route package itself, not listed here."""
    route_types = _route_types()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        if name == "dpsql.routes" or name.startswith("dpsql.routes."):
            continue
        tests = _route_type_tests(path.read_text(encoding="utf-8"),
                                  lambda n=name: vars(importlib.import_module(n)), route_types)
        found += [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}" for line, what in tests]
    assert not found, "ask the route instead (dpsql/routes/route.py):\n" + "\n".join(found)


def test_the_route_type_check_sees_every_spelling() -> None:
    """The check above finds each way of asking, and only route types."""
    route_types = _route_types()
    assert {Plan, PublicRead, TwoReleases, Route} <= route_types
    namespace = {"Plan": Plan, "PublicRead": PublicRead, "TwoReleases": TwoReleases,
                 "series": series, "exp": ast}
    asking = ["isinstance(p, Plan)", "isinstance(p, int | PublicRead)",
              "isinstance(p, (int, series.TwoReleases))", "type(p) is Plan",
              "Plan == type(p)", "type(p) in (int, PublicRead)", "issubclass(t, Plan)",
              "match p:\n    case TwoReleases(inner=i): pass"]
    for source in asking:
        assert _route_type_tests(source, lambda: namespace, route_types), source
    others = ["isinstance(p, int)", "isinstance(p, exp.Expression)", "p is Plan",
              "class Plan: pass\nisinstance(p, Plan)"]
    assert not _route_type_tests(others[0], lambda: namespace, route_types)
    assert not _route_type_tests(others[1], lambda: namespace, route_types)
    assert not _route_type_tests(others[2], lambda: namespace, route_types)
    assert not _route_type_tests(others[3], lambda: {"Plan": type("Plan", (), {})},
                                 route_types)


def test_every_pass_is_the_main_function_of_a_module_named_for_it() -> None:
    """The review rule where it can be checked: each pass is a module of its own, named for the
    pass (sqlglot's optimizer/ is the model), and its function says what it does with that
    name (``parse_query`` in ``parse.py``, ``check_cost`` in ``cost.py``); the engine's
    ``execute`` is the one pass that is a method."""
    modules = [f.__module__ for f in pipeline.PASSES]
    assert len(set(modules)) == len(modules), modules
    for f, module in zip(pipeline.PASSES, modules, strict=True):
        assert module.startswith("dpsql.") and module != "dpsql.routes.pipeline", f
        if f is Engine.execute:
            continue
        stem = module.rsplit(".", 1)[1]
        assert stem in f.__name__.split("_") or stem == f.__name__, (module, f.__name__)


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
        assert name.strip() == path.rsplit("/", 1)[1], ("the pass is named for its module", name)
        assert doc.startswith(f"Pass {number}, {name.strip()}:"), (f.__module__, doc[:40])


def test_database_run_enters_each_pass_once_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PASSES`` is what :meth:`dpsql.Database.run` calls, each once and in that order, to
    answer a private query (the engine's execute included). Each pass is recorded wherever a
    module of dpsql holds it, so the test follows the passes whichever module calls them."""
    ran: list[str] = []

    def recorded(f: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            ran.append(f.__name__)
            return f(*args, **kwargs)
        return run

    with dpsql.Database() as db:
        for f in pipeline.PASSES:
            if f is Engine.execute:
                continue
            wrapped = recorded(f)
            for module in list(sys.modules.values()):
                if getattr(module, "__name__", "").startswith("dpsql") and \
                        getattr(module, f.__name__, None) is f:
                    monkeypatch.setattr(module, f.__name__, wrapped)
        monkeypatch.setattr(db.engine, "execute", recorded(db.engine.execute))
        db.run("SELECT sex, COUNT(*) FROM people GROUP BY sex", 1.0)
    assert ran == [f.__name__ for f in pipeline.PASSES]


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

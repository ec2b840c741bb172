"""The documentation: the site builds, and what the docs name exists.

The README and every page under docs/ are read, and each of these must hold (docs/development.md,
"The documentation site"):

- `mkdocs build --strict` succeeds (links, anchors, the nav, the API reference's docstrings);
  every page under docs/ is in mkdocs.yml's nav;
- every repository path named in code exists (`dpsql/query/parse.py`, `tests/...`, a module of
  `dpsql/` by its path inside the package, `query/parse.py`, or a bare `cache.py`);
- every dotted name of dpsql (`dpsql.engines.spark.footer`, an inline `pipeline.answer`,
  `execution/rewrite.shape_rows`) imports, or is an attribute of what it names;
- every `dpsql ...` command line names a command whose `--help` parses, and each option it uses
  appears in that help;
- every relative link of the README resolves in a clone (the site's own links are mkdocs's);
- every code block marked ```` ```console {.runnable} ```` runs on the sample database: each
  `$ dpsql ...` line exits 0, or, when the next line is an error (`dpsql: ClassName: ...`), fails
  with that class.

Pages are written by many hands: each failure names the file, the line and what was not found.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from dpsql.cli import main
from dpsql.server.machine.settings import DPSQL as SERVER_SETTINGS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: Dotted names that are not modules or attributes, with what they are.
NOT_MODULES = {
    "dpsql.owner": "the owner's logger",
    "dpsql.spending": "a ledger view in the server's schema `dpsql` (dpsql/ledger/spending.py)",
    "dpsql.queries": "a ledger view in the server's schema `dpsql` (dpsql/ledger/spending.py)",
    "dpsql.budgets": "a ledger view in the server's schema `dpsql` (dpsql/ledger/spending.py)",
    "dpsql.psycopg2": "a SQLAlchemy dialect name (pyproject.toml's entry points)",
    "dpsql.sample_data": "the bundled sample data's package (pyproject.toml's package-dir)",
    "public.people": "a table in the server's schema `public`, not dpsql.execution.public",
    "sqlalchemy.dialects": "an entry-point group (pyproject.toml)",
    "superset.db_engine_specs": "an entry-point group (pyproject.toml)",
}
#: Options named alone in inline code that belong to other programs, with whose they are.
OTHER_OPTIONS = {
    "--master": "spark-submit's and start-connect-server.sh's",
    "--packages": "spark-submit's",
    "--option": "a placeholder in docs/development.md",
}
#: Paths that a run creates (git-ignored), named in the docs as where things go.
GENERATED = ("benchmarks/data/", ".ci/superset-venv", ".ci/dbt-venv", ".ci/test-venv", "site/")
FILE_SUFFIXES = (".py", ".md", ".toml", ".sql", ".txt", ".sh", ".yml", ".yaml", ".json",
                 ".parquet", ".duckdb", ".sqlite", ".csv", ".cfg", ".jar", ".conf", ".out")
SHELL_FENCES = {"", "sh", "bash", "shell", "console"}
#: The info string's attribute that marks a block as runnable (```console {.runnable}: GitHub
#: reads the language, MkDocs's superfences the class).
RUNNABLE = ".runnable"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


@dataclass(frozen=True)
class Code:
    """A piece of code in a doc: an inline span, or one line of a fenced block."""

    path: Path
    line: int
    text: str
    fence: str | None  # the block's info string; None for an inline span
    next_line: str = ""

    @property
    def lang(self) -> str:
        return (self.fence or "").split()[0] if self.fence else ""


def code_of(path: Path) -> Iterator[Code]:
    lines = path.read_text().splitlines()
    fence: str | None = None
    marker = ""
    joined = ""  # a shell line continued with a backslash, and the line it started on
    start = 0
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        following = lines[number] if number < len(lines) else ""
        if fence is not None and (joined or stripped.endswith("\\")):
            start = start or number
            joined += stripped.removesuffix("\\").rstrip() + " "
            if stripped.endswith("\\"):
                continue
            line, number, joined, start = joined.strip(), start, "", 0
        if fence is None and re.match(r"^(`{3,}|~{3,})", stripped):
            marker = re.match(r"^(`{3,}|~{3,})", stripped).group(1)  # type: ignore[union-attr]
            fence = stripped[len(marker):].strip()
            continue
        if fence is not None:
            if stripped.startswith(marker) and stripped.strip("`~") == "":
                fence = None
                continue
            yield Code(path, number, line, fence, following)
            continue
        for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", line):
            yield Code(path, number, span, None)


def all_code() -> list[Code]:
    return [code for path in doc_files() for code in code_of(path)]


# ------------------------------------------------------------------ the site


def test_every_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    in_nav = set(re.findall(r":\s*([\w./-]+\.md)\s*$", config, re.M))
    missing = [str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md")
               if str(page.relative_to(DOCS)) not in in_nav]
    assert not missing, f"pages under docs/ missing from mkdocs.yml's nav: {missing}"
    absent = [name for name in in_nav if not (DOCS / name).exists()]
    assert not absent, f"mkdocs.yml's nav names pages that do not exist: {absent}"


def test_site_builds_without_warnings(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "api" / "index.html").exists()


# ------------------------------------------------------------------ paths and names


@cache
def top_level() -> frozenset[str]:
    """First segments a repository path may start with: the checkout's and dpsql's folders."""
    names = {entry.name for entry in ROOT.iterdir() if not entry.name.startswith(".git")}
    names |= {entry.name for entry in (ROOT / "dpsql").iterdir() if entry.is_dir()}
    return frozenset(names - {"__pycache__", "build", "site"})


@cache
def python_files() -> frozenset[str]:
    return frozenset(path.name for folder in ("dpsql", "tests", "grammar_tests", "benchmarks",
                                              "scripts", "sample_data")
                     for path in (ROOT / folder).rglob("*.py"))


def tokens(text: str) -> list[str]:
    return [token.strip("\"'(),;:[]`.") for token in re.split(r"[\s=]+", text) if token]


def path_problem(token: str) -> str | None:
    """Why a path-like token names nothing in the repository, or None."""
    token = token.split("#")[0].split("::")[0]
    if "://" in token or token.startswith(("~", "/", "$")) or re.search(r"[<>{}$?]", token):
        return None
    if "/" in token:
        first = token.split("/")[0]
        if first not in top_level() or token.startswith(GENERATED):
            return None
        bare = token.rstrip("/")
        candidates = [ROOT / bare, ROOT / "dpsql" / bare]
        if "*" in bare:
            if any(next(base.glob(bare), None) for base in (ROOT, ROOT / "dpsql")):
                return None
            return f"no file matches {token}"
        if any(candidate.exists() for candidate in candidates):
            return None
        module, dot, _ = bare.partition(".")
        if dot and any((base / f"{module}.py").exists() for base in (ROOT, ROOT / "dpsql")):
            return None  # `path/module.attribute`: dotted_problem checks the attribute
        return f"no such path: {token}"
    if re.fullmatch(r"[\w-]+\.py", token) and token not in python_files():
        return f"no such Python file anywhere in the repository: {token}"
    return None


def resolve(dotted: str) -> bool:
    """Whether `dpsql.a.b.c` is a module or an attribute chain of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(target, name):
                annotations = getattr(target, "__annotations__", {})
                fields = getattr(target, "__dataclass_fields__", {})
                return name in annotations or name in fields  # a field an instance holds
            target = getattr(target, name)
        return True
    return False


@cache
def modules_by_stem() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in (ROOT / "dpsql").rglob("*.py"):
        if path.stem == "__main__":
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        if path.stem == "__init__":  # a package, by its folder's name
            parts = parts[:-1]
        found.setdefault(parts[-1], []).append(".".join(parts))
    return found


def dotted_problem(token: str, whole_span: bool) -> str | None:
    token = token.removesuffix("()")
    if token.endswith(FILE_SUFFIXES) or not re.fullmatch(r"[\w/]+(\.\w+)+", token):
        return None
    if token.startswith("dpsql."):
        if token in NOT_MODULES or token in SERVER_SETTINGS or resolve(token):
            return None
        return f"{token} is neither a module nor an attribute of one"
    if not whole_span or token in NOT_MODULES or token.startswith("spark."):  # Spark's settings
        return None
    head, _, rest = token.partition(".")
    if "/" in head:  # a module by its path inside dpsql/, then attributes
        module = "dpsql." + head.replace("/", ".")
        if not (ROOT / (module.replace(".", "/") + ".py")).exists():
            return None  # path_problem names a missing file
        return None if resolve(f"{module}.{rest}") else f"{token}: {module} has no {rest}"
    modules = modules_by_stem().get(head)
    if not modules:
        return None  # not a module of dpsql: a SQL alias, an object in an example
    if any(resolve(f"{module}.{rest}") for module in modules):
        return None
    return f"{token}: no {rest} in {' or '.join(modules)}"


def test_paths_and_module_names_exist() -> None:
    problems = []
    for code in all_code():
        # An inline span that is just `module.attribute` names dpsql; `[tables.t.local]` is TOML.
        whole = code.fence is None and bool(re.fullmatch(r"[\w/]+(\.\w+)+(\(\))?", code.text))
        for token in tokens(code.text):
            problem = path_problem(token) or dotted_problem(token, whole)
            if problem:
                problems.append(f"{where(code.path, code.line)}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_walk_through_names_files_that_exist() -> None:
    """docs/architecture.md's life of one query names a file for each step, in its diagram
    too (a Mermaid block, whose labels the span check above does not read as paths): each is
    a file under dpsql/ (or the repository's)."""
    page = (DOCS / "architecture.md").read_text()
    section = page.split("## The life of one query")[1].split("\n## ")[0]
    named = set(re.findall(r"(?<![\w/.])((?:[a-z_]+/)*[a-z_]+\.py)\b", section))
    missing = sorted(name for name in named
                     if not (ROOT / "dpsql" / name).exists() and not (ROOT / name).exists())
    assert len(named) > 20, f"the walk-through names few files: {sorted(named)}"
    assert not missing, f"docs/architecture.md, the life of one query: no such file {missing}"


def test_readme_links_resolve_in_a_clone() -> None:
    problems = []
    readme = ROOT / "README.md"
    for number, line in enumerate(readme.read_text().splitlines(), 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"\w+:", target):
                continue
            file, _, anchor = target.partition("#")
            path = (readme.parent / file) if file else readme
            if not path.exists():
                problems.append(f"{where(readme, number)}: link to {target}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                problems.append(f"{where(readme, number)}: link to {target}: no heading "
                                f"#{anchor} in {path.relative_to(ROOT)}")
    assert not problems, "\n".join(problems)


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings, as GitHub and MkDocs make them."""
    found = set()
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and (heading := re.match(r"^#{1,6}\s+(.*)", line)):
            text = re.sub(r"[^\w\- ]", "", heading.group(1).lower())
            found.add(text.replace(" ", "-"))
    return found


# ------------------------------------------------------------------ commands and options


def command_lines() -> Iterator[tuple[Code, list[str]]]:
    """Each `dpsql ...` command in the docs, as its arguments after `dpsql`."""
    for code in all_code():
        if code.fence is not None and code.lang not in SHELL_FENCES:
            continue
        text = code.text.strip()
        if code.fence is None and not text.startswith("dpsql "):
            continue
        for match in re.finditer(r"(?:^|[\s;&|(`])(?:\$ )?dpsql\s+(?=[a-z-])", text):
            rest = re.split(r"\s(?:\||&&|;|>|2>|#|&)(?:\s|$)", text[match.end():])[0]
            rest = rest.split("`")[0]  # `dpsql budget` quoted inside a line of output
            try:
                args = shlex.split(rest.replace("...", ""), comments=True)
            except ValueError:
                args = rest.split()
            yield code, args


@cache
def help_of(path: tuple[str, ...]) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*path, "--help"])
    return result.exit_code, result.output


def command_path(args: list[str]) -> tuple[tuple[str, ...], list[str]]:
    command: click.Command = main
    path: list[str] = []
    for index, arg in enumerate(args):
        if isinstance(command, click.Group) and arg in command.commands:
            command = command.commands[arg]
            path.append(arg)
            continue
        return tuple(path), args[index:]
    return tuple(path), []


def command_problems(args: list[str]) -> list[str]:
    """What is wrong with `dpsql ARGS`: an unknown command, a --help that fails, an option."""
    path, rest = command_path(args)
    if not path:
        return [f"`dpsql {' '.join(args[:1])}`: no such command"]
    status, text = help_of(path)
    if status != 0:
        return [f"`dpsql {' '.join(path)} --help` exits {status}"]
    problems = []
    for arg in rest:
        option = arg.split("=")[0]
        if re.fullmatch(r"--?[a-zA-Z][\w-]*", option) and not re.search(
                rf"(?<![\w-]){re.escape(option)}(?![\w-])", text):
            problems.append(f"`dpsql {' '.join(path)}` has no option {option}")
    return problems


@cache
def every_option() -> frozenset[str]:
    """The options of every dpsql command."""
    found: set[str] = set()
    commands: list[click.Command] = [main]
    while commands:
        command = commands.pop()
        for param in command.params:
            found.update(param.opts, param.secondary_opts)
        if isinstance(command, click.Group):
            commands.extend(command.commands.values())
    return frozenset(found)


def lone_option_problem(code: Code) -> str | None:
    """An inline span that starts with an option (`--max-rows`) names an option of dpsql."""
    option = re.match(r"(--[a-z][\w-]*)(?![\w-])", code.text)
    if code.fence is not None or option is None:
        return None
    name = option.group(1)
    if name in every_option() or name in OTHER_OPTIONS:
        return None
    return f"no dpsql command has an option {name}"


def test_commands_and_options_exist() -> None:
    problems = [f"{where(code.path, code.line)}: {problem}"
                for code, args in command_lines() for problem in command_problems(args)]
    problems += [f"{where(code.path, code.line)}: {problem}" for code in all_code()
                 if (problem := lone_option_problem(code))]
    assert not problems, "\n".join(problems)


def test_the_checks_find_what_is_missing(tmp_path: Path) -> None:
    """Each check names what it did not find (and accepts what exists)."""
    assert path_problem("dpsql/query/parse.py") is None
    assert path_problem("query/parse.py") is None  # a module by its path inside dpsql/
    missing = "dpsql/engines/duckdb_sql.py"
    assert path_problem(missing) == f"no such path: {missing}"
    assert path_problem("tests/nothing*.py") == "no file matches tests/nothing*.py"
    assert path_problem("postgres_sql.py") is not None
    assert path_problem("my-metadata.toml") is None  # a user's file, not the repository's
    assert dotted_problem("dpsql.engines.spark.footer", whole_span=False) is None
    assert dotted_problem("dpsql.epsilon", whole_span=False) is None  # a server setting
    assert dotted_problem("dpsql.engines.nothing", whole_span=False) is not None
    assert dotted_problem("pipeline.answer", whole_span=True) is None
    assert "no empty_tables" in str(dotted_problem("joins.empty_tables", whole_span=True))
    assert dotted_problem("execution/rewrite.shape_rows", whole_span=True) is None
    assert dotted_problem("execution/rewrite.nothing", whole_span=True) is not None
    assert command_problems(["query", "SELECT 1", "--epsilon", "1"]) == []
    assert command_problems(["budget", "reset", "alice"]) == []
    assert command_problems(["qeury"]) == ["`dpsql qeury`: no such command"]
    assert command_problems(["query", "--epsilonn", "1"]) == [
        "`dpsql query` has no option --epsilonn"]
    assert lone_option_problem(Code(ROOT, 1, "--max-rows", None)) is None
    assert lone_option_problem(Code(ROOT, 1, "--max-rowz N", None)) == \
        "no dpsql command has an option --max-rowz"
    page = tmp_path / "page.md"
    page.write_text("Run `dpsql query x`.\n\n```console {.runnable}\n$ dpsql budget\n"
                    "dpsql: BudgetExhausted: ...\n```\n")
    codes = list(code_of(page))
    assert [(code.line, code.text, code.fence) for code in codes] == [
        (1, "dpsql query x", None), (4, "$ dpsql budget", "console {.runnable}"),
        (5, "dpsql: BudgetExhausted: ...", "console {.runnable}")]
    assert codes[1].next_line == "dpsql: BudgetExhausted: ..."
    page.write_text("```sh\ndpsql query x \\\n    --epsilonn 1\n```\n")
    [code] = code_of(page)
    assert (code.line, code.text) == (2, "dpsql query x --epsilonn 1")


# ------------------------------------------------------------------ runnable examples


def runnable_commands() -> list[Code]:
    return [code for code in all_code()
            if code.fence is not None and RUNNABLE in re.findall(r"\.[\w-]+", code.fence)
            and code.text.startswith("$ dpsql ")]


def test_there_are_runnable_examples() -> None:
    assert len(runnable_commands()) >= 5


@pytest.mark.parametrize("code", runnable_commands(), ids=lambda code: where(code.path, code.line))
def test_runnable_example_runs(code: Code, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Each example in a ledger of its own: the analysts the docs name (alice) start with the
    # sample's full demo budget, whatever other tests spent.
    monkeypatch.setenv("DPSQL_LEDGER", str(tmp_path / "ledger.sqlite"))
    monkeypatch.setenv("DPSQL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(ROOT)
    args = shlex.split(code.text.removeprefix("$ dpsql "), comments=True)
    result = CliRunner().invoke(main, args)
    error = re.match(r"dpsql: (\w+):", code.next_line)
    at = where(code.path, code.line)
    if error:
        assert result.exit_code != 0, f"{at}: expected {error.group(1)}, got: {result.output}"
        assert f"dpsql: {error.group(1)}:" in result.stderr, f"{at}: {result.stderr}"
    else:
        assert result.exit_code == 0, f"{at}: `{code.text}` exited {result.exit_code}: " \
                                      f"{result.stderr or result.output}"

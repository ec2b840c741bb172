"""MkDocs hooks of the documentation site (mkdocs.yml's `hooks`).

- Every page under docs/ must be in `nav`: a page missing from it is a warning, which
  `mkdocs build --strict` (tests/test_docs.py) turns into a failed build, so a page added by
  someone who forgot the nav is noticed.
- `<!-- corpus-summary -->` in a page is replaced by a table of the grammar corpus
  (grammar_tests/cases/*.sql), counted when the site is built: per file, the cases answered and
  refused, and the error classes of the refusals. The corpus is the source of truth of what is
  answered; the table cannot go stale.
"""

from __future__ import annotations

import collections
import logging
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS_MARK = "<!-- corpus-summary -->"
log = logging.getLogger("mkdocs.hooks.dpsql")


def on_nav(nav: Any, config: Any, files: Any) -> Any:
    """Warn (a failure under --strict) for each Markdown page that `nav` does not list."""
    in_nav = {page.file.src_uri for page in nav.pages}
    for file in files.documentation_pages():
        if file.src_uri not in in_nav:
            log.warning(
                "docs/%s is not in mkdocs.yml's nav: add it there (every page must be reachable)",
                file.src_uri,
            )
    return nav


def corpus_summary() -> str:
    """The grammar corpus as a Markdown table: cases per file, answered and refused."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from grammar_tests.corpus import load_corpus

    cases = load_corpus()
    by_file: dict[str, list[Any]] = collections.defaultdict(list)
    for case in cases:
        by_file[case.file].append(case)
    lines = [
        f"The corpus holds **{len(cases)} cases** in {len(by_file)} files (counted when this "
        "site was built).",
        "",
        "| file | cases | answered | refused | refused with |",
        "|---|---:|---:|---:|---|",
    ]
    for name in sorted(by_file):
        group = by_file[name]
        refused = [case for case in group if case.verdict == "refused"]
        classes = collections.Counter(case.error for case in refused)
        named = ", ".join(f"`{error}` ({count})" for error, count in classes.most_common())
        lines.append(
            f"| `grammar_tests/cases/{name}` | {len(group)} | {len(group) - len(refused)} "
            f"| {len(refused)} | {named} |"
        )
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CORPUS_MARK in markdown:
        markdown = markdown.replace(CORPUS_MARK, corpus_summary())
    return markdown

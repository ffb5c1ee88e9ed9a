"""mkdocs hook: lay the package out as Python imports it, for mkdocstrings to read statically.

teammed's subpackages live at the top of the repository (``programs/``, ``signatures/``,
``optimizers/``, ``data/``, ``evals/``; see ``package-dir`` in pyproject.toml) while
``teammed`` itself is ``src/teammed``. Griffe finds a package's submodules in its directory, so
before the build this writes ``.docs_src/teammed``: symlinks to every entry of ``src/teammed``
and to the five subpackage directories. It is rebuilt on every build and ignored by git.

Each page's evidence lines (``<small>Shown by: ...</small>``) are folded into collapsed blocks, so
that a page reads as prose first (`evidence_blocks`), and the marker ``<!-- components table -->``
becomes the table of components drawn from ``teammed.components.TABLE`` (`components_table`): a
page lists the components without a list of its own.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / ".docs_src"
SUBPACKAGES = ("programs", "signatures", "optimizers", "data", "evals")


def on_startup(command: str, dirty: bool) -> None:  # noqa: ARG001 (mkdocs' hook signature)
    package = TREE / "teammed"
    if TREE.exists():
        shutil.rmtree(TREE)
    package.mkdir(parents=True)
    for entry in (ROOT / "src" / "teammed").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name in SUBPACKAGES:
        (package / name).symlink_to(ROOT / name)


_EVIDENCE = re.compile(r"<small>((?:Shown|Measured|Not tested).*?)</small>", re.S)


def evidence_blocks(markdown: str) -> str:
    """Each ``<small>Shown by: ...</small>`` (or ``Measured by``, ``Not tested here``) becomes a collapsed
    block after its paragraph: the page reads as prose first, and the tests and benchmarks behind a
    claim are one click away."""
    return _EVIDENCE.sub(lambda m: f'\n<details class="evidence" markdown="1"><summary>Evidence</summary>\n\n'
                                   f"{m.group(1).strip()}\n\n</details>\n", markdown)


COMPONENTS_MARKER = "<!-- components table -->"


def components_table(markdown: str) -> str:
    """The marker replaced by one row per component of the table: its name, first short name and summary."""
    from teammed.components import TABLE

    def needs(requires: tuple[str, ...]) -> str:
        return f" (needs {' and '.join(r.replace('_', ' ') for r in requires)})" if requires else ""

    rows = [f"| {c.name.replace('_', ' ').capitalize()} | `{c.aliases[0]}` | {c.summary}{needs(c.requires)} |"
            for c in TABLE]
    table = "\n".join(["| component | short name | what it adds |", "|---|---|---|", *rows])
    return markdown.replace(COMPONENTS_MARKER, table)


def on_page_markdown(markdown: str, **_: object) -> str:
    return evidence_blocks(components_table(markdown))

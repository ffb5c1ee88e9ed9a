"""mkdocs hook: lay the package out as Python imports it, for mkdocstrings to read statically.

teammed's subpackages live at the top of the repository (``programs/``, ``signatures/``,
``optimizers/``, ``data/``, ``evals/``; see ``package-dir`` in pyproject.toml) while
``teammed`` itself is ``src/teammed``. Griffe finds a package's submodules in its directory, so
before the build this writes ``.docs_src/teammed``: symlinks to every entry of ``src/teammed``
and to the five subpackage directories. It is rebuilt on every build and ignored by git.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / ".docs_src"
SUBPACKAGES = ("programs", "signatures", "optimizers", "data", "evals")


def build_tree() -> Path:
    package = TREE / "teammed"
    if TREE.exists():
        shutil.rmtree(TREE)
    package.mkdir(parents=True)
    for entry in (ROOT / "src" / "teammed").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name in SUBPACKAGES:
        (package / name).symlink_to(ROOT / name)
    return TREE


def on_startup(command: str, dirty: bool) -> None:  # noqa: ARG001 (mkdocs' hook signature)
    build_tree()

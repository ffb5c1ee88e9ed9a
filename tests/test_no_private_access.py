"""Issue 34, item 1: the package reads and writes no private attribute of a third-party library.

An AST walk of every package module finds ``obj._name`` (and ``getattr``/``setattr``/``hasattr``/
``delattr`` with a ``"_name"`` string) where ``obj`` comes from a third-party import: the imported
module or name itself, or a name bound from it (``client = httpx.Client(...)``, ``with X() as y``,
``for t in study.get_trials()``, a parameter annotated with a third-party type, ``self.x = lib...``).
Dunder names are public protocol. The allow-list below says why each entry has no public way.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = [ROOT / d for d in ("src/teammed", "programs", "signatures", "optimizers", "data", "evals")]

# (file, attribute): why there is no public way, with the figure that justifies it.
ALLOWED = {
    # litellm returns a response's price and deployment only in ``response._hidden_params`` (its docs'
    # own recipe for the cost of a call); recomputing the price with completion_cost cost ~10% of a call's CPU.
    ("src/teammed/backends/litellm_backend.py", "_hidden_params"),
}


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript | ast.Await | ast.Starred):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _dotted(node: ast.AST) -> str | None:
    """``self.client`` -> "self.client"; a plain name -> its id; anything else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _third_party(module: str) -> bool:
    top = module.split(".")[0]
    return bool(top) and top not in sys.stdlib_module_names and top not in ("teammed", "__future__")


class _Checker(ast.NodeVisitor):
    """Finds private attributes of third-party objects in one module."""

    def __init__(self) -> None:
        self.foreign: set[str] = set()  # names (or dotted self.x) that hold third-party objects
        self.stdlib: set[str] = set()  # the standard library's modules, as imported (not third-party)
        self.found: list[tuple[int, str]] = []

    def _is_foreign(self, node: ast.AST) -> bool:
        dotted = _dotted(node)
        if dotted is not None and dotted in self.foreign:
            return True
        root = _root(node)
        if root is not node:
            if self._is_foreign(root):
                return True
            # self.client.post(...) -> self.client
            while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
                node = node.func if isinstance(node, ast.Call) else node.value
                dotted = _dotted(node)
                if dotted is not None and dotted in self.foreign:
                    return True
        return isinstance(root, ast.Name) and root.id in self.foreign

    def _bind(self, target: ast.AST) -> None:
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._bind(element)
        elif (dotted := _dotted(target)) is not None:
            self.foreign.add(dotted)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            (self.foreign if _third_party(alias.name) else self.stdlib).add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module and _third_party(node.module):
            for alias in node.names:
                self.foreign.add(alias.asname or alias.name)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if self._is_foreign(node.value):
            for target in node.targets:
                self._bind(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        if (node.value is not None and self._is_foreign(node.value)) or self._is_foreign(node.annotation):
            self._bind(node.target)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None and self._is_foreign(item.context_expr):
                self._bind(item.optional_vars)
        for statement in node.body:
            self.visit(statement)

    visit_AsyncWith = visit_With  # noqa: N815

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        if self._is_foreign(node.iter):
            self._bind(node.target)
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.visit(node.iter)
        if self._is_foreign(node.iter):
            self._bind(node.target)
        for condition in node.ifs:
            self.visit(condition)

    def _arguments(self, args: ast.arguments) -> None:
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if arg.annotation is not None and self._annotation_foreign(arg.annotation):
                self.foreign.add(arg.arg)

    def _annotation_foreign(self, annotation: ast.AST) -> bool:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return False
        return any(isinstance(n, ast.Name) and n.id in self.foreign for n in ast.walk(annotation))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._arguments(node.args)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815

    def visit_Attribute(self, node: ast.Attribute) -> None:
        private = node.attr.startswith("_") and not (node.attr.startswith("__") and node.attr.endswith("__"))
        if private and self._is_foreign(node.value):
            self.found.append((node.lineno, node.attr))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        named = node.func.id if isinstance(node.func, ast.Name) else None
        if named in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2:
            obj, name = node.args[0], node.args[1]
            if (isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.startswith("_")
                    and not name.value.startswith("__") and _dotted(obj) not in ("self", "cls", *self.stdlib)):
                # a third-party object, or one whose origin the walk cannot see (a parameter without a type)
                self.found.append((node.lineno, name.value))
        self.generic_visit(node)


def private_accesses(source: str) -> list[tuple[int, str]]:
    checker = _Checker()
    checker.visit(ast.parse(source))
    return checker.found


def test_the_checker_finds_what_it_must_and_nothing_of_ours() -> None:
    """The walk itself can fail: it finds each kind of access, and leaves teammed's own privates alone."""
    assert private_accesses("import httpx\nclient = httpx.Client()\nclient._transport = None\n") == [(3, "_transport")]
    annotated = "import optuna\ndef f(study: optuna.Study):\n    return study._storage\n"
    assert private_accesses(annotated) == [(3, "_storage")]
    assert private_accesses("from httpx import Client\nwith Client() as c:\n    c._mounts\n") == [(3, "_mounts")]
    looped = "import optuna\ns = optuna.load_study()\nfor t in s.get_trials():\n    t._x\n"
    assert private_accesses(looped) == [(4, "_x")]
    assert private_accesses("import httpx\nclass A:\n    def __init__(self):\n        self.c = httpx.Client()\n"
                            "    def f(self):\n        return self.c._pool\n") == [(6, "_pool")]
    assert private_accesses("x = getattr(response, '_hidden')\n") == [(1, "_hidden")]
    ours = "import dspy\nclass A:\n    def f(self):\n        return self._own, dspy.__version__\n"
    assert private_accesses(ours) == []
    assert private_accesses("from teammed.usage import _current\n_current.get()\nimport os\nos._exit\n") == []
    assert private_accesses("import threading\ngetattr(threading, '_shutdown', None)\n") == []  # the stdlib


def test_no_private_attribute_of_a_third_party_object_is_used() -> None:
    found = []
    for folder in PACKAGE:
        for path in sorted(folder.rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            found += [f"{relative}:{line}: {attr}" for line, attr in private_accesses(path.read_text())
                      if (relative, attr) not in ALLOWED]
    assert not found, "private attributes of third-party objects (use the library's public API):\n" + "\n".join(found)

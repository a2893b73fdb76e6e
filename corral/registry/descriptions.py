"""A plugin's one-line description, read from its source without importing it.

``corral list`` shows every plugin without importing any (nor torch), so the
first line of a plugin's docstring is read statically: the module its entry
point names is found as the import system would find it (parents already
imported are used, nothing new is imported), parsed, and the class or
function looked up; a name the module re-exports (``from .algorithm import
PPO``) is followed a few modules deep.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path

_REEXPORT_DEPTH = 4
"""how many ``from ... import name`` re-exports are followed before giving up"""


def static_description(value: str) -> str | None:
    """The first line of the docstring of what ``module:attr`` names, without importing the module.

    Args:
        value: an entry point's value, ``"package.module:Name"``; a module alone (``"package.module"``) gives the
            module's docstring.

    Returns:
        The line, or None where the source cannot be read or has no docstring for it.
    """
    module, _, attr = value.partition(":")
    for _ in range(_REEXPORT_DEPTH):
        spec = _find(module)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        try:
            tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            return None
        if not attr:  # a module's entry point (hook plugins, integrations): the module's docstring
            return _first_line(ast.get_docstring(tree))
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == attr:
                return _first_line(ast.get_docstring(node))
        source = _reexported_from(tree, attr, module, spec)
        if source is None:
            return None
        module, attr = source
    return None


def _first_line(doc: str | None) -> str | None:
    return doc.strip().splitlines()[0] if doc and doc.strip() else None


def _reexported_from(tree: ast.Module, attr: str, module: str, spec: ModuleSpec) -> tuple[str, str] | None:
    """The (module, name) a ``from ... import`` in ``tree`` binds ``attr`` to, if one does."""
    package = module if spec.submodule_search_locations is not None else module.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == attr:
                    try:
                        return importlib.util.resolve_name("." * node.level + (node.module or ""), package), alias.name
                    except ImportError:  # a relative import beyond the top-level package
                        return None
    return None


def _find(module: str) -> ModuleSpec | None:
    """The module's spec as the import system would find it, importing nothing not imported already."""
    path = None
    spec: ModuleSpec | None = None
    parts = module.split(".")
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        loaded = sys.modules.get(name)
        spec = getattr(loaded, "__spec__", None) if loaded is not None else _from_finders(name, path)
        if spec is None:
            return None
        path = spec.submodule_search_locations
    return spec


def _from_finders(name: str, path: list[str] | None) -> ModuleSpec | None:
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec: ModuleSpec | None = find_spec(name, path)
        except (ImportError, ValueError):
            continue
        if spec is not None:
            return spec
    return None

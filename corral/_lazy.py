"""Lazy re-exports (PEP 562), old module paths kept importable after a move, and isinstance checks that import nothing.

``corral`` and ``corral.core`` re-export names from heavy modules (torch);
resolving them on first access keeps ``import corral`` and ``corral list`` light.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable
from typing import Any


def lazy_exports(
    module_name: str, namespace: dict[str, Any], exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for a module that re-exports ``{name: defining_module}``.

    ``__getattr__`` imports a name's defining module on first access and stores
    the value in ``namespace``, so later accesses do not come back to it.

    Args:
        module_name: the re-exporting module's name, for the ``AttributeError`` message.
        namespace: the re-exporting module's ``globals()``.
        exports: ``{name: defining module's name}`` of every lazily exported name.

    Returns:
        The module's ``__getattr__`` (``AttributeError`` for a name not in ``exports``)
        and ``__dir__`` (its ``__all__`` if it has one, else the names of ``exports``, sorted).
    """

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(namespace.get("__all__", exports))

    return __getattr__, __dir__


def is_instance_of_loaded(value: Any, module: str, name: str) -> bool:
    """``isinstance(value, module.name)`` without importing ``module``: if it is not loaded, nothing is an instance of it.

    For checks against an optional or heavy library's classes (gymnasium's
    spaces, PettingZoo's envs) in code that must not import it.

    Args:
        value: the object to check.
        module: the module that defines the class, e.g. ``"gymnasium"``.
        name: the class's name in that module.
    """
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(value, getattr(loaded, name))


def is_subclass_of_loaded(cls: Any, module: str, name: str) -> bool:
    """``issubclass(cls, module.name)`` without importing ``module``: if it is not loaded, nothing subclasses it.

    For a lower layer that checks a class against a base a higher layer
    defines (a config checking that an exploration is an ``Exploration``): a
    class that subclasses the base has loaded the base's module.

    Args:
        cls: the object to check (not a class: False).
        module: the module that defines the base, e.g. ``"corral.core.learning.policy"``.
        name: the base's name in that module.

    Returns:
        Whether ``cls`` is a class deriving from the base.
    """
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(cls, type) and issubclass(cls, getattr(loaded, name))


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a module under its old name and hands back the module at its new one (the same object)."""

    def __init__(self, moved: dict[str, str]) -> None:
        self.moved = moved
        self._specs: dict[str, Any] = {}  # a module's own spec, while the import system files it under an old name

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old name; None for every other name, which the regular finders handle."""
        if fullname not in self.moved:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        """The module at its new name, imported if need be; the import system files it under the old name too."""
        new_name = self.moved[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new_name}; import from there, or from the package's public face",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new_name)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: Any) -> None:
        """Nothing to run (the module was executed under its new name): it gets back its own spec.

        The import system gave the module the old name's spec; its own says where it
        is (``importlib.reload`` reads it) and, for a package, where its modules are.
        """
        module.__spec__ = self._specs.pop(module.__spec__.name, module.__spec__)


def alias_moved_modules(moved: dict[str, str]) -> None:
    """Keep old module paths importable after a move: ``import old`` gives the module at its new path.

    Checkpoints and configs record classes as ``"module:Name"`` and plugins may
    import deep paths, so a module that moves stays reachable under its old name
    (with a ``DeprecationWarning``). One finder serves every package's table. It
    is consulted before the regular ones and answers only the old names (whose
    files are gone): a package that moved is aliased with its modules, and its
    old module names must give the new module objects, not a second copy that
    the regular finders would load from the new package's folder.

    Args:
        moved: ``{old module name: new module name}``, added to the moves already known.
    """
    finder = next((f for f in sys.meta_path if isinstance(f, _MovedModuleFinder)), None)
    if finder is None:
        finder = _MovedModuleFinder({})
        sys.meta_path.insert(0, finder)
    finder.moved.update(moved)

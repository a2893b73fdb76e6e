"""The import hook behind ``corral.rllib``: every module path of the table, generated on import.

RLlib's scripts import dozens of deep paths (``ray.rllib.models.torch.misc``,
``ray.rllib.utils.test_utils``). Writing a module per path would copy RLlib's
layout into corral file by file; instead one finder answers every
``corral.rllib.<path>`` that :mod:`corral.rllib.table` lists with an empty
package whose names resolve on first access (PEP 562), so a script pays only
for what it imports. It sits last on ``sys.meta_path``: corral's real modules
under ``corral/rllib/`` are found by the regular finders first.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any

from corral.rllib import table

PREFIX = "corral.rllib"
_OWN_MODULES = ("namespace", "support", "table", "table_docs", "table_new_stack", "__main__")
"""corral.rllib's real modules: names RLlib's paths never start with"""
DOCS = "docs/rllib.md"

_TF_NOTE = "corral runs on torch: {name} is corral's torch counterpart, {target}"


class NotInCorralError(ImportError):
    """An RLlib name corral does not have; the message says what to use instead."""


class ModuleNotInCorralError(NotInCorralError, ModuleNotFoundError):
    """An RLlib module path corral does not have; the message says what to use instead."""


def _registered(name: str) -> Any:
    from corral import registry

    return registry.get_algorithm(name)


_KINDS: dict[str, Callable[[str], Any]] = {
    "algo": _registered,
    "config": lambda name: _registered(name).config_class,
    "policy": lambda name: _registered(name).policy_class,
}


def resolve(path: str, name: str) -> Any:
    """The corral object behind RLlib's ``ray.rllib.<path>.<name>``.

    Args:
        path: the module path below ``ray.rllib`` (``""`` for ``ray.rllib`` itself).
        name: the name in that module.

    Returns:
        The object the table maps the name to (for a TensorFlow name, the torch
        counterpart, after a one-line warning).

    Raises:
        NotInCorralError: the table says corral does not have it (with what to use
            instead), or does not list it at all.
    """
    entry = table.MODULES.get(path, {}).get(name)
    where = f"{PREFIX}.{path}" if path else PREFIX
    if entry is None:
        raise NotInCorralError(
            f"cannot import name {name!r} from {where!r}: corral maps no RLlib name {name!r} there; "
            f"the names it maps are listed in {DOCS} (python -m corral.rllib prints them)",
            name=where,
        )
    if entry.startswith("!"):
        raise NotInCorralError(f"{where}.{name} is not in corral: {entry[1:]}", name=where)
    tensorflow = entry.startswith("tf=")
    target = entry.removeprefix("tf=")
    kind, _, value = target.partition(":")
    obj = _KINDS[kind](value) if kind in _KINDS else getattr(importlib.import_module(kind), value)
    if tensorflow:
        warnings.warn(_TF_NOTE.format(name=name, target=f"{obj.__module__}.{obj.__qualname__}"), stacklevel=3)
    return obj


def _module_getattr(module: types.ModuleType, path: str) -> Callable[[str], Any]:
    def __getattr__(name: str) -> Any:
        if (name.startswith("__") and name.endswith("__")) or (not path and name in _OWN_MODULES):
            # AttributeError: for corral.rllib's own modules, `from corral.rllib import support` then imports them
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        child = f"{path}.{name}" if path else name
        if child in table.PACKAGES:
            return importlib.import_module(f"{PREFIX}.{child}")
        value = resolve(path, name)
        setattr(module, name, value)
        return value

    return __getattr__


def populate(module: types.ModuleType, path: str) -> None:
    """Give ``module`` the names of RLlib's ``ray.rllib.<path>``, resolved on first access.

    Args:
        module: the module to fill (a generated one, or ``corral.rllib`` itself).
        path: its path below ``ray.rllib``.
    """
    names = sorted(n for n, entry in table.MODULES.get(path, {}).items() if not entry.startswith("!"))
    module.__all__ = names  # type: ignore[attr-defined]
    module.__getattr__ = _module_getattr(module, path)  # type: ignore[method-assign]
    module.__dir__ = lambda: sorted({*names, *(c.rpartition(".")[2] for c in table.children(path))})  # type: ignore[method-assign]


class RLlibPathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``corral.rllib.<path>`` for every path of the table, and explains the others."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        """A package spec for a path of the table.

        Args:
            fullname: the module's full name.
            path: the parent package's ``__path__`` (unused: these modules have no files).
            target: unused, as for every finder.

        Returns:
            The spec, or None for a name outside ``corral.rllib``.

        Raises:
            ModuleNotInCorralError: a path under ``corral.rllib`` that the table marks
                missing (with what to use instead) or does not list.
        """
        if not fullname.startswith(PREFIX + "."):
            return None
        rllib_path = fullname[len(PREFIX) + 1 :]
        if rllib_path.split(".")[0] in _OWN_MODULES:
            return None  # corral's own files here, which the regular finders load (or report missing)
        if rllib_path in table.PACKAGES:
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        missing = table.missing_module(rllib_path)
        if missing is not None:
            raise ModuleNotInCorralError(
                f"{fullname} (RLlib's ray.rllib.{rllib_path}) is not in corral: {missing}", name=fullname
            )
        raise ModuleNotInCorralError(
            f"No module named {fullname!r}: corral maps no RLlib module ray.rllib.{rllib_path}; "
            f"the paths it maps are listed in {DOCS} (python -m corral.rllib prints them)",
            name=fullname,
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        """The default module object."""
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        """Fill the module from the table.

        Args:
            module: the new module.
        """
        path = module.__name__[len(PREFIX) + 1 :]
        module.__doc__ = f"corral's counterpart of RLlib's ray.rllib.{path} (the table: {DOCS})."
        module.__path__ = []  # a package, so that deeper paths import below it
        populate(module, path)


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once), behind the finders of corral's real modules."""
    if not any(isinstance(finder, RLlibPathFinder) for finder in sys.meta_path):
        sys.meta_path.append(RLlibPathFinder())

"""Every public function and method that takes more than one argument documents them (``Args:``).

Read at run time, so a method that overrides a documented one (an exploration's
``get_exploration_action``, a policy's ``postprocess_trajectory``) inherits its
base's documentation. The hooks' arguments are described once, in
``hookspecs.HOOK_ARGUMENTS`` (from which ``docs/hooks.md`` is generated), so the
hook specifications and their mirrors on ``Callbacks`` and ``CallbackRunner``
are exempt.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import corral
from corral.core.contracts import callbacks, hookspecs

HOOK_MIRRORS = (callbacks.Callbacks, callbacks.CallbackRunner)
ROOT = Path(__file__).resolve().parents[1]


def corral_modules() -> Iterator[Any]:
    for info in pkgutil.walk_packages(corral.__path__, "corral."):
        if ".scaffold.templates" in info.name or info.name == "corral.core.contracts.hookspecs":
            continue
        yield importlib.import_module(info.name)


def argument_count(function: Callable[..., Any]) -> int:
    parameters = inspect.signature(function).parameters.values()
    return sum(p.name not in ("self", "cls") and p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters)


def overrides_a_documented_method(cls: type, name: str) -> bool:
    return any("Args:" in (getattr(base.__dict__.get(name), "__doc__", None) or "") for base in cls.__mro__[1:])


def undocumented_arguments() -> list[str]:
    found = []
    for module in corral_modules():
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj):
                candidates = [(f"{module.__name__}.{name}", obj, None)]
            elif inspect.isclass(obj) and obj not in HOOK_MIRRORS:
                candidates = [
                    (f"{module.__name__}.{name}.{attr}", inspect.unwrap(getattr(obj, attr)), obj)
                    for attr, value in vars(obj).items()
                    if not attr.startswith("_") and (isinstance(value, (staticmethod, classmethod)) or inspect.isfunction(value))
                ]
            else:
                continue
            for qualified, function, owner in candidates:
                if argument_count(function) < 2 or "Args:" in (function.__doc__ or ""):
                    continue
                if owner is not None and overrides_a_documented_method(owner, function.__name__):
                    continue
                found.append(qualified)
    return sorted(set(found))


def test_public_functions_with_several_arguments_document_them() -> None:
    # In a fresh interpreter: once Ray has started an actor from a class, it wraps the class's methods
    # in place, with signatures of its own.
    code = "from tests.test_docstrings import undocumented_arguments; print(*undocumented_arguments(), sep='\\n')"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    missing = proc.stdout.split()
    assert not missing, f"{len(missing)} public functions need an Args: section:\n" + "\n".join(missing)


def test_the_hook_arguments_are_documented_in_one_place() -> None:
    for name in hookspecs.HOOK_NAMES:
        for argument in inspect.signature(getattr(hookspecs, name)).parameters:
            assert argument in hookspecs.HOOK_ARGUMENTS, f"{name}({argument}) is not described in HOOK_ARGUMENTS"

"""Import paths: how configs and checkpoints name a class or function (``"package.module:Name"``).

Configs store what a user passes by its path, RLlib's files name classes by
dotted paths, and checkpoints record both; every room reads them, so they live
at the bottom with the other shared types.
"""

from __future__ import annotations

import importlib
from typing import Any

from corral.errors import ConfigError


def object_path(obj: Any) -> str:
    """Return ``"module:qualname"`` for a class or function, the form configs store."""
    return f"{obj.__module__}:{obj.__qualname__}"


def split_import_path(path: str) -> tuple[str, str]:
    """``("package.module", "Name")`` from ``"package.module:Name"`` or ``"package.module.Name"``."""
    module_name, sep, qualname = path.partition(":")
    if not sep:
        module_name, _, qualname = path.rpartition(".")
    return module_name, qualname


def is_import_path(name: str) -> bool:
    """Whether a name is an import path, ``"package.module:Name"`` or RLlib's dotted ``"package.module.Name"``.

    A dotted name counts only if every part is an identifier (``"ALE/Pong-v5"`` or
    ``"my-env.v2"`` are not paths); callers look a name up in their registries first.
    """
    return ":" in name or ("." in name and all(part.isidentifier() for part in name.split(".")))


def import_object(path: str) -> Any:
    """Import ``"package.module:Name"`` (or ``"package.module.Name"``) and return the object.

    Raises:
        ConfigError: the path is malformed, or the module or name does not exist.
    """
    if not isinstance(path, str):
        raise ConfigError(f"an import path must be a string 'package.module:Name', got {type(path).__name__}")
    module_name, qualname = split_import_path(path)
    names = [*module_name.split("."), *qualname.split(".")]
    if not module_name or not qualname or not all(n.isidentifier() for n in names):
        raise ConfigError(f"{path!r} is not an absolute import path; write it as 'package.module:Name'")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the module raises while it is imported
        raise ConfigError(f"cannot import module {module_name!r} (from {path!r}): {type(exc).__name__}: {exc}") from exc
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"module {module_name!r} has no attribute {qualname!r} (from {path!r})")
        obj = getattr(obj, part)
    return obj

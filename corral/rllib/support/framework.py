"""``try_import_torch`` and its kin: how RLlib's scripts import their framework.

corral runs on torch, which it requires, so the torch import always succeeds;
TensorFlow and JAX are never used, so their imports answer as RLlib's do where
they are not installed: ``None``, after a one-line note.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

_noted: set[str] = set()


def _note(framework: str, error: bool) -> None:
    if error:
        raise ImportError(f"corral runs on torch and never imports {framework}: use framework='torch'")
    if framework not in _noted:  # once per process: scripts call these at the top of every module
        _noted.add(framework)
        warnings.warn(
            f"corral runs on torch: importing {framework} gives None, as RLlib's helper does where {framework} is not "
            "installed; use framework='torch'",
            stacklevel=3,
        )


def try_import_torch(error: bool = False) -> tuple[Any, Any]:
    """RLlib's ``torch, nn = try_import_torch()``: torch is always there in corral.

    Args:
        error: RLlib raises when torch is missing and this is True; corral requires torch, so it never raises.

    Returns:
        ``(torch, torch.nn)``.
    """
    return torch, nn


def try_import_tf(error: bool = False) -> tuple[None, None, None]:
    """RLlib's ``tf1, tf, tfv = try_import_tf()``: corral never uses TensorFlow.

    Args:
        error: raise instead of answering None (RLlib's meaning).

    Returns:
        ``(None, None, None)``, RLlib's answer where TensorFlow is not installed.

    Raises:
        ImportError: ``error`` is True.
    """
    _note("TensorFlow", error)
    return None, None, None


def try_import_tfp(error: bool = False) -> None:
    """RLlib's ``tfp = try_import_tfp()`` (TensorFlow Probability): corral never uses it.

    Args:
        error: raise instead of answering None.

    Raises:
        ImportError: ``error`` is True.
    """
    _note("TensorFlow Probability", error)


def try_import_jax(error: bool = False) -> tuple[None, None]:
    """RLlib's ``jax, flax = try_import_jax()``: corral never uses JAX.

    Args:
        error: raise instead of answering None.

    Returns:
        ``(None, None)``.

    Raises:
        ImportError: ``error`` is True.
    """
    _note("JAX", error)
    return None, None


def make_tf_callable(session_or_none: Any = None, dynamic_shape: bool = False) -> Any:
    """RLlib's decorator that runs a function in a TensorFlow session; importable, as scripts import it at the top.

    RLlib's scripts call it only on their TensorFlow path (``framework != "torch"``),
    which corral never takes; a script that calls it anyway is told so.

    Args:
        session_or_none: RLlib's TensorFlow session.
        dynamic_shape: RLlib's flag for the inputs' batch axis.

    Raises:
        ImportError: always: there is no TensorFlow session in corral; call the torch function itself.
    """
    raise ImportError(
        "make_tf_callable runs a function in a TensorFlow session, and corral runs on torch: call the function itself "
        "(a torch model's method takes torch tensors: corral.rllib.utils.torch_utils.convert_to_torch_tensor)"
    )

"""The optimizers a config's ``optimizer`` option names; Adam fused into one kernel per step where it can be."""

from __future__ import annotations

from typing import Any, cast

import torch

from corral.core.contracts.config import OPTIMIZERS
from corral.core.learning.fused_adam import FUSED_ADAM_OPTIONS, FusedAdam, fused_adam_runs
from corral.core.learning.policies.optimizer_set import OneOptimizer


def adam(params: Any, lr: float, **kwargs: Any) -> OneOptimizer:
    """Adam, fused into one kernel per step where this torch has the kernel for the device (CPU: torch >= 2.4).

    corral's own :class:`~corral.core.learning.fused_adam.FusedAdam` calls that
    kernel without ``torch.optim``'s first-use import of ``torch._dynamo``
    (0.85 s and 70 MB); ``torch.optim.Adam`` is built where it cannot, or where
    ``kwargs`` names an option only torch's class has (``foreach``, ``capturable``, ...).

    Args:
        params: the parameters to optimise, or param-group dicts, as ``torch.optim.Adam`` takes them.
        lr: the learning rate.
        **kwargs: Adam's other options (``eps``, ``betas``, ...).

    Returns:
        A :class:`FusedAdam`, else ``torch.optim.Adam``: fused if torch accepts ``fused=True`` for
        these parameters, the default implementation if not.
    """
    # groups' parameters as lists, so that looking at them here does not use up a generator
    params = [{**p, "params": _tensor_list(p["params"])} if isinstance(p, dict) else p for p in params]
    tensors = [t for group in params for t in (group["params"] if isinstance(group, dict) else [group])]
    if set(kwargs) <= FUSED_ADAM_OPTIONS and all(fused_adam_runs(t.device, t.dtype) for t in tensors):
        return FusedAdam(params, lr=lr, **kwargs)
    try:
        return torch.optim.Adam(params, lr=lr, fused=True, **kwargs)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(params, lr=lr, **kwargs)


def _tensor_list(params: Any) -> list[torch.Tensor]:
    return [params] if isinstance(params, torch.Tensor) else list(params)


def build_optimizer(params: Any, spec: dict[str, Any], lr: float) -> OneOptimizer:
    """The torch optimizer a config's ``optimizer`` option names (Adam through :func:`adam`, fused where it can be).

    Args:
        params: the parameters to optimise, or param-group dicts (each may carry its own ``lr``).
        spec: the ``optimizer`` option: ``{"type": "adam", "eps": 1e-5, ...}``, checked by the config.
        lr: the learning rate of groups that set none.

    Returns:
        The optimizer.
    """
    kind = spec.get("type", "adam")
    # JSON and YAML give betas as a list; torch documents a tuple
    kwargs = {key: tuple(value) if isinstance(value, list) else value for key, value in spec.items() if key != "type"}
    if kind == "adam":
        return adam(params, lr=lr, **kwargs)
    return cast(OneOptimizer, getattr(torch.optim, OPTIMIZERS[kind])(params, lr=lr, **kwargs))

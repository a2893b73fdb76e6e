"""Adam through torch's fused kernel, without the first-use cost of ``torch.optim.Optimizer``.

``torch.optim.Optimizer`` wraps ``add_param_group``, ``zero_grad``,
``state_dict`` and ``step`` so that torch.compile can trace around them, and
that wrapper imports ``torch._dynamo`` the first time any of them runs. On the
CPU machine CI runs on (torch 2.13) the import takes 0.85 s and about 70 MB,
a third of the time and a fifth of the memory it takes to build a default PPO
and run its first iteration. corral never compiles an optimizer step.

Adam's arithmetic is one aten kernel, ``torch._fused_adam_``: the kernel that
``torch.optim.Adam(fused=True)`` calls. :class:`FusedAdam` keeps the moments
and the param groups itself and calls that kernel. Its results are the same to
the bit as ``torch.optim.Adam(fused=True)``'s, its ``state_dict`` has the same
layout (checkpoints move between the two), and a step costs half as much
Python. :func:`fused_adam_runs` says whether this torch has the kernel for a
device and dtype (CPU needs torch >= 2.4); where it does not, corral builds
``torch.optim.Adam``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, cast

import torch

FUSED_ADAM_OPTIONS = frozenset({"betas", "eps", "weight_decay", "amsgrad", "maximize"})
"""the ``torch.optim.Adam`` arguments (besides ``lr``) :class:`FusedAdam` takes, with the same meaning"""


class FusedAdam:
    """Adam (Kingma and Ba, with torch's L2 ``weight_decay``), stepped by ``torch._fused_adam_``.

    It offers what corral and its plugins use of ``torch.optim.Optimizer``:
    ``param_groups`` (a group may carry its own ``lr`` and other keys, such as
    a ``"name"``), ``state``, ``defaults``, ``zero_grad``, ``step``,
    ``add_param_group``, ``state_dict`` and ``load_state_dict``. Step hooks and
    closures are not offered; a plugin that needs them builds a ``torch.optim``
    optimizer in its ``make_optimizer``.

    Args:
        params: the parameters, or dicts of param groups, as ``torch.optim.Adam`` takes them.
        lr: the learning rate of groups that set none.
        betas: the decay rates of the first and second moment.
        eps: added to the second moment's square root.
        weight_decay: L2 penalty added to the gradient.
        amsgrad: use the largest second moment seen so far.
        maximize: ascend instead of descend.

    Raises:
        ValueError: no parameters, a parameter in two groups, or a parameter that is not a leaf tensor.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        maximize: bool = False,
    ) -> None:
        self.defaults: dict[str, Any] = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
        }
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if not groups:
            raise ValueError("the optimizer got an empty parameter list; give it the model's parameters")
        for group in groups if isinstance(groups[0], dict) else [{"params": groups}]:
            self.add_param_group(group)  # type: ignore[arg-type]

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (the others taken from ``defaults``).

        Args:
            param_group: ``{"params": [...], "lr": ..., ...}``.

        Raises:
            ValueError: a parameter is not a leaf tensor, or is already in a group.
        """
        params = param_group["params"]
        param_group["params"] = [params] if isinstance(params, torch.Tensor) else list(params)
        held = {id(p) for group in self.param_groups for p in group["params"]}
        for param in param_group["params"]:
            if not isinstance(param, torch.Tensor) or not param.is_leaf:
                raise ValueError(f"an optimizer optimises leaf tensors; got {type(param).__name__}")
            if id(param) in held:
                raise ValueError("a parameter is in more than one param group; give each parameter to one group")
            held.add(id(param))
        for key, value in self.defaults.items():
            param_group.setdefault(key, value)
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients: set them to None (the default) or to zeros.

        Args:
            set_to_none: drop the gradient tensors instead of zeroing them.
        """
        for group in self.param_groups:
            for param in group["params"]:
                if set_to_none:
                    param.grad = None
                elif param.grad is not None:
                    param.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step on every parameter that has a gradient, one fused kernel per group, device and dtype."""
        for group in self.param_groups:
            buckets: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
            for param in group["params"]:
                if param.grad is not None:
                    buckets.setdefault((param.device, param.dtype), []).append(param)
            beta1, beta2 = group["betas"]
            for params in buckets.values():
                states = [self._state_of(param, group["amsgrad"]) for param in params]
                steps = [state["step"] for state in states]
                torch._foreach_add_(steps, 1)
                torch._fused_adam_(
                    params,
                    [cast(torch.Tensor, param.grad) for param in params],
                    [state["exp_avg"] for state in states],
                    [state["exp_avg_sq"] for state in states],
                    [state["max_exp_avg_sq"] for state in states] if group["amsgrad"] else [],
                    steps,
                    lr=float(group["lr"]),
                    beta1=float(beta1),
                    beta2=float(beta2),
                    weight_decay=float(group["weight_decay"]),
                    eps=float(group["eps"]),
                    amsgrad=bool(group["amsgrad"]),
                    maximize=bool(group["maximize"]),
                )

    def _state_of(self, param: torch.Tensor, amsgrad: bool) -> dict[str, torch.Tensor]:
        state = self.state.get(param)
        if state is None:
            # torch.optim.Adam(fused=True)'s layout: a float32 step count on the parameter's device
            state = self.state[param] = {
                "step": torch.zeros((), dtype=torch.float32, device=param.device),
                "exp_avg": torch.zeros_like(param, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(param, memory_format=torch.preserve_format),
            }
        if amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        return state

    def state_dict(self) -> dict[str, Any]:
        """The moments and the groups' options, parameters numbered in group order: ``torch.optim``'s layout.

        Returns:
            ``{"state": {index: {"step", "exp_avg", "exp_avg_sq"}}, "param_groups": [{..., "params": [index, ...]}]}``;
            the tensors are the optimizer's own, not copies.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            numbers = [index.setdefault(id(param), len(index)) for param in group["params"]]
            groups.append({**{key: value for key, value in group.items() if key != "params"}, "params": numbers})
        params = [param for group in self.param_groups for param in group["params"]]
        state = {index[id(param)]: dict(self.state[param]) for param in params if param in self.state}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` (or ``torch.optim.Adam.state_dict``) gave, onto the same parameters.

        Args:
            state_dict: the saved moments and groups.

        Raises:
            ValueError: the saved groups do not match this optimizer's groups in number or size.
        """
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"the saved optimizer state has {len(saved_groups)} param groups; this optimizer has {len(self.param_groups)}"
            )
        sizes = [len(group["params"]) for group in self.param_groups]
        saved_sizes = [len(group["params"]) for group in saved_groups]
        if sizes != saved_sizes:
            raise ValueError(f"the saved optimizer state's param groups hold {saved_sizes} parameters; this optimizer's {sizes}")
        by_index: dict[Any, torch.Tensor] = {}
        groups = []
        for group, saved in zip(self.param_groups, saved_groups, strict=True):
            by_index.update(zip(saved["params"], group["params"], strict=True))
            groups.append({**group, **saved, "params": group["params"]})  # options the save lacks keep their values
        state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}
        for number, saved_state in state_dict["state"].items():
            param = by_index.get(number)
            if param is None:
                continue
            state[param] = {
                # copies (a state dict's tensors may be another optimizer's own); the step count stays float32,
                # the moments take their parameter's dtype and device
                key: value.to(device=param.device, dtype=torch.float32 if key == "step" else param.dtype, copy=True)
                if isinstance(value, torch.Tensor)
                else value
                for key, value in saved_state.items()
            }
        self.param_groups = groups
        self.state = state

    def __repr__(self) -> str:
        groups = ", ".join(
            f"group {i}: {len(g['params'])} tensors, lr {g['lr']}" + (f" ({g['name']})" if "name" in g else "")
            for i, g in enumerate(self.param_groups)
        )
        return f"FusedAdam({groups})"


@functools.cache
def fused_adam_runs(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether this torch has the fused Adam kernel for parameters of this device and dtype.

    Args:
        device: the parameters' device.
        dtype: the parameters' dtype.

    Returns:
        True if one fused step on a one-element tensor runs (the answer is cached).
    """
    tensors = [torch.zeros(1, device=device, dtype=dtype) for _ in range(4)]
    step = torch.ones((), dtype=torch.float32, device=device)
    try:
        torch._fused_adam_(
            [tensors[0]], [tensors[1]], [tensors[2]], [tensors[3]], [], [step],
            lr=1e-3, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False,
        )  # fmt: skip
    except (AttributeError, NotImplementedError, RuntimeError):
        return False
    return True

"""RLlib's layer helpers for torch models: ``SlimFC`` and ``normc_initializer`` (``ray.rllib.models.torch.misc``).

RLlib's custom ModelV2 classes build their layers with these (its
autoregressive-action and parametric-action examples among them), so a model
written for RLlib runs with its imports pointed here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from corral.core.networks.default_models import ACTIVATIONS
from corral.errors import ConfigError


def normc_initializer(std: float = 1.0) -> Callable[[torch.Tensor], None]:
    """RLlib's normalized-columns initializer: standard normal weights, each output row scaled to norm ``std``.

    Args:
        std: the norm of each row of the weight (one row per output of a torch ``Linear``).

    Returns:
        A function that fills a weight tensor in place.
    """

    def initializer(tensor: torch.Tensor) -> None:
        with torch.no_grad():
            tensor.normal_(0.0, 1.0)
            tensor.mul_(std / tensor.pow(2).sum(dim=1, keepdim=True).sqrt())

    return initializer


class SlimFC(nn.Module):
    """RLlib's fully connected layer: a ``Linear``, initialized as asked, and an activation.

    Args:
        in_size: inputs.
        out_size: outputs.
        initializer: fills the weight in place (e.g. :func:`normc_initializer`); None: Xavier uniform.
        activation_fn: ``"relu"``, ``"tanh"``, ``"swish"``, ``"elu"``, ``"linear"`` or None (no activation),
            or an ``nn.Module`` class.
        use_bias: whether the layer has a bias.
        bias_init: the bias's initial value.

    Raises:
        ConfigError: an activation name that is not one of those.
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        initializer: Callable[[torch.Tensor], Any] | None = None,
        activation_fn: str | type[nn.Module] | None = None,
        use_bias: bool = True,
        bias_init: float = 0.0,
    ) -> None:
        super().__init__()
        linear = nn.Linear(in_size, out_size, bias=use_bias)
        (initializer or nn.init.xavier_uniform_)(linear.weight)
        if use_bias:
            nn.init.constant_(linear.bias, bias_init)
        layers: list[nn.Module] = [linear]
        if isinstance(activation_fn, str):
            if activation_fn not in ACTIVATIONS:
                raise ConfigError(f"SlimFC: activation_fn={activation_fn!r}; use one of {sorted(ACTIVATIONS)} or None")
            activation_fn = ACTIVATIONS[activation_fn]
        if activation_fn is not None:
            layers.append(activation_fn())
        self._model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The layer's outputs for ``x``."""
        out: torch.Tensor = self._model(x)
        return out

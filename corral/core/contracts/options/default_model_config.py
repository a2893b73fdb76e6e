"""DefaultModelConfig: RLlib's new-stack dataclass of the default models' settings, read as corral's ``model`` options.

RLlib 2.40 replaced the old stack's ``model`` dict with this dataclass
(``config.rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64]))``).
Its defaults are the new stack's, not the old dict's: two layers of 256 whose
encoder the value head shares, and a log standard deviation clamped at 20.
Passed whole, it sets every option it names, so a script gets the network
RLlib would build for it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.errors import ConfigError

_ACTIVATIONS = {"silu": "swish", None: "linear"}
"""RLlib's other names for the activations corral's models have"""


@dataclass
class DefaultModelConfig:
    """The settings of RLlib's default models, with RLlib's (new stack's) defaults.

    Every field is RLlib's. Layer initializers are the one part corral's models
    do not take: they initialise orthogonally, the measured default of
    corral's training speed; a set initializer is refused when the options are
    read, naming what to do instead.
    """

    fcnet_hiddens: list[int] = field(default_factory=lambda: [256, 256])
    fcnet_activation: str | None = "tanh"
    fcnet_kernel_initializer: str | Callable[..., Any] | None = None
    fcnet_kernel_initializer_kwargs: dict[str, Any] | None = None
    fcnet_bias_initializer: str | Callable[..., Any] | None = None
    fcnet_bias_initializer_kwargs: dict[str, Any] | None = None
    fcnet_use_layernorm: bool = False
    conv_filters: list[list[Any]] | None = None
    conv_activation: str | None = "relu"
    conv_kernel_initializer: str | Callable[..., Any] | None = None
    conv_kernel_initializer_kwargs: dict[str, Any] | None = None
    conv_bias_initializer: str | Callable[..., Any] | None = None
    conv_bias_initializer_kwargs: dict[str, Any] | None = None
    head_fcnet_hiddens: list[int] = field(default_factory=list)
    head_fcnet_activation: str | None = "relu"
    head_fcnet_kernel_initializer: str | Callable[..., Any] | None = None
    head_fcnet_kernel_initializer_kwargs: dict[str, Any] | None = None
    head_fcnet_bias_initializer: str | Callable[..., Any] | None = None
    head_fcnet_bias_initializer_kwargs: dict[str, Any] | None = None
    head_fcnet_use_layernorm: bool = False
    free_log_std: bool = False
    log_std_clip_param: float = 20.0
    vf_share_layers: bool = True
    use_lstm: bool = False
    max_seq_len: int = 20
    lstm_cell_size: int = 256
    lstm_use_prev_action: bool = False
    lstm_use_prev_reward: bool = False
    lstm_kernel_initializer: str | Callable[..., Any] | None = None
    lstm_kernel_initializer_kwargs: dict[str, Any] | None = None
    lstm_bias_initializer: str | Callable[..., Any] | None = None
    lstm_bias_initializer_kwargs: dict[str, Any] | None = None

    def model_options(self) -> dict[str, Any]:
        """These settings as corral's ``model`` options (RLlib's names; ``silu`` is ``swish``, ``None`` is ``linear``).

        Returns:
            Every setting but the initializers; an infinite ``log_std_clip_param`` (no clamp) is None.

        Raises:
            ConfigError: an initializer is set.
        """
        values = {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}
        initializers = {name: value for name, value in values.items() if "initializer" in name}
        chosen = sorted(name for name, value in initializers.items() if value is not None)
        if chosen:
            raise ConfigError(
                f"DefaultModelConfig({chosen[0]}=...): corral's default models initialise their layers orthogonally and "
                "take no initializer; to choose one, write the network as a custom model "
                "(RLModuleSpec(module_class=...) or model={'custom_model': ...}) and initialise it there"
            )
        options = {name: value for name, value in values.items() if name not in initializers}
        for name in ("fcnet_activation", "conv_activation", "head_fcnet_activation"):
            options[name] = _ACTIVATIONS.get(options[name], options[name])
        options["log_std_clip_param"] = None if math.isinf(self.log_std_clip_param) else self.log_std_clip_param
        return options


def model_options_of(options: Any, where: str) -> dict[str, Any]:
    """The ``model`` options a model config stands for: a dict's own, or a :class:`DefaultModelConfig`'s.

    Args:
        options: a dict (or mapping) of ``model`` options, or a ``DefaultModelConfig``.
        where: what was given it, for the error (``"rl_module(model_config=...)"``).

    Returns:
        A new dict of the options.

    Raises:
        ConfigError: ``options`` is neither.
    """
    if isinstance(options, DefaultModelConfig):
        return options.model_options()
    if isinstance(options, Mapping):
        return dict(options)
    raise ConfigError(f"{where} takes a dict of model options or a DefaultModelConfig, not {type(options).__name__}")

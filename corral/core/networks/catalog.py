"""``ModelCatalog``: RLlib's registry of custom models by name, and its builder of ModelV2s.

``ModelCatalog.register_custom_model("my_model", MyModel)`` lets a config say
``model={"custom_model": "my_model", "custom_model_config": {...}}``; the
config, its Tune trials and its checkpoints then hold the name, not the class
(see :mod:`corral.core.contracts.options.model_names`, where the names live).
A script that restores such a checkpoint registers the name again before it
does. ``ModelCatalog.get_model_v2(...)`` builds a ModelV2 as RLlib's does: the
config's custom model, or RLlib's default fully connected network
(:class:`FullyConnectedNetwork`, RLlib's ``TorchFC``), which custom models
often hold inside them (RLlib's action-masking and parametric-action examples).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from pydantic import ValidationError
from torch import nn

from corral.core.common.preprocessors import NoPreprocessor, get_preprocessor
from corral.core.common.spaces import is_image_space
from corral.core.contracts.options.model_config import ModelConfig, model_options_problem
from corral.core.contracts.options.model_names import register_model_class
from corral.core.networks.default_models import fully_connected, init_linear
from corral.core.networks.model_v2 import TorchModelV2, is_model_v2, model_v2_obs_space
from corral.errors import ConfigError


class FullyConnectedNetwork(TorchModelV2, nn.Module):
    """RLlib's default ModelV2 for flat observations (``TorchFC``): ``fcnet_hiddens`` layers, logits and a value branch.

    With ``num_outputs`` the last layer is a linear one of that width (the
    logits); with ``num_outputs`` 0 or None the model's outputs are the last
    hidden layer's and ``num_outputs`` becomes its width, as in RLlib. The value
    branch reads the same hidden layers with ``vf_share_layers``, else a copy of
    them; with ``free_log_std`` (corral's default) and a Box action space, half
    the outputs are a learned log standard deviation. For any other action space
    the option is not read: a network of one output (a custom model's value
    network, say) keeps its one output.

    Args:
        obs_space: the observations' space (flattened as the policy preprocesses them).
        action_space: the space the policy acts in.
        num_outputs: the width of the outputs; 0 or None: the features.
        model_config: the model options (a dict; options not given take corral's defaults).
        name: the model's name.

    Raises:
        ConfigError: the model options are not valid.
    """

    def __init__(
        self,
        obs_space: gym.Space[Any],
        action_space: gym.Space[Any],
        num_outputs: int | None,
        model_config: dict[str, Any],
        name: str,
    ) -> None:
        options = _options(model_config)
        inputs = int(np.prod(model_v2_obs_space(obs_space).shape or ()))
        hidden = [*options.fcnet_hiddens, *options.post_fcnet_hiddens]
        self.free_log_std = bool(num_outputs) and options.free_log_std and isinstance(action_space, gym.spaces.Box)
        head = (num_outputs // 2 if self.free_log_std else num_outputs) if num_outputs else None
        features = hidden[-1] if hidden else inputs
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs or features, dict(model_config), name)
        nn.Module.__init__(self)
        self._hidden_layers = fully_connected(inputs, options)
        self._logits = init_linear(nn.Linear(features, head), 0.01) if head else None
        self._value_branch_separate = None if options.vf_share_layers else fully_connected(inputs, options)
        self._value_branch = init_linear(nn.Linear(features, 1), 0.01)
        self._log_std = nn.Parameter(torch.zeros(head)) if self.free_log_std and head else None
        self._features: torch.Tensor | None = None
        self._last_flat_in: torch.Tensor | None = None

    def forward(
        self, input_dict: dict[str, Any], state: list[torch.Tensor], seq_lens: torch.Tensor | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The logits (or features) of a batch.

        Args:
            input_dict: ``obs_flat`` is read.
            state: ``[]``: the network has no memory.
            seq_lens: unused.

        Returns:
            ``(outputs, state)``.
        """
        self._last_flat_in = input_dict["obs_flat"].float()
        self._features = self._hidden_layers(self._last_flat_in)
        if self._logits is None:
            return self._features, state
        logits = self._logits(self._features)
        if self._log_std is not None:
            logits = torch.cat([logits, self._log_std.expand_as(logits)], dim=-1)
        return logits, state

    def value_function(self) -> torch.Tensor:
        """The value estimates ``[B]`` of the last batch.

        Raises:
            ValueError: before the first ``forward`` call.
        """
        if self._features is None or self._last_flat_in is None:
            raise ValueError(f"{self.name}: call the model on a batch before value_function()")
        features = self._features if self._value_branch_separate is None else self._value_branch_separate(self._last_flat_in)
        values: torch.Tensor = self._value_branch(features).squeeze(-1)
        return values


TorchFC = FullyConnectedNetwork
"""RLlib's usual import name for it"""


def _options(model_config: dict[str, Any]) -> ModelConfig:
    """A model dict as validated options, corral's defaults where it says nothing."""
    try:
        return ModelConfig.model_validate(dict(model_config))
    except ValidationError as exc:
        raise ConfigError(model_options_problem(exc, "model_config")) from None


class ModelCatalog:
    """RLlib's ``ModelCatalog``: where custom models are registered by name, and ModelV2s are built."""

    @staticmethod
    def register_custom_model(model_name: str, model_class: type) -> None:
        """Register a custom model class under a name, for ``model={"custom_model": model_name}``.

        Registering a name again replaces its class. Remote env runners get the
        classes their config names; where Ray Tune is imported the name is
        registered with Tune too, for its trials.

        Args:
            model_name: the name configs use; any non-empty string.
            model_class: a ``torch.nn.Module`` subclass: a :class:`~corral.core.networks.model_v2.TorchModelV2`,
                an RLModule, a plain module or a corral ``Model`` (see :mod:`corral.core.networks.custom_model`).

        Raises:
            ConfigError: the name is not a non-empty string, or the class is not a ``torch.nn.Module`` subclass.
        """
        register_model_class(model_name, model_class)

    @staticmethod
    def register_custom_action_dist(action_dist_name: str, action_dist_class: type) -> None:
        """Register an action distribution class under a name, for ``model={"custom_action_dist": action_dist_name}``.

        Args:
            action_dist_name: the name configs use; not a custom model's name.
            action_dist_class: a :class:`~corral.core.networks.custom_distribution.TorchDistributionWrapper` subclass
                (or any class with ``required_model_output_shape``, ``sample`` and ``logp``).

        Raises:
            ConfigError: the name is not a non-empty string or names a custom model, or the class is no distribution.
        """
        register_model_class(action_dist_name, action_dist_class, action_dist=True)

    @staticmethod
    def get_preprocessor_for_space(observation_space: gym.Space[Any], options: dict[str, Any] | None = None) -> NoPreprocessor:
        """RLlib's preprocessor for ``observation_space``: ``transform(obs)`` gives what a network reads (one-hot, flat).

        Args:
            observation_space: the space of what is to be transformed (an observation, or an action to encode).
            options: RLlib's model options (nothing here depends on them).

        Returns:
            The preprocessor (:func:`~corral.core.common.preprocessors.get_preprocessor`'s, built).
        """
        return get_preprocessor(observation_space)(observation_space, options)

    @staticmethod
    def get_model_v2(
        obs_space: gym.Space[Any],
        action_space: gym.Space[Any],
        num_outputs: int | None,
        model_config: dict[str, Any],
        framework: str = "torch",
        name: str = "default_model",
        model_interface: type | None = None,
        default_model: type | None = None,
        **model_kwargs: Any,
    ) -> TorchModelV2:
        """A ModelV2 built as RLlib's catalog builds one: the config's ``custom_model``, else the default network.

        Args:
            obs_space: the observations' space.
            action_space: the space the policy acts in.
            num_outputs: the outputs' width (0 or None: the default network's features).
            model_config: the model options; ``custom_model`` (a class or registered name) and
                ``custom_model_config`` are read as in a config.
            framework: ``"torch"``; corral has no TensorFlow models.
            name: the model's name.
            model_interface: RLlib's interface to wrap the model in: corral has none, so it must be None.
            default_model: the class to build without a ``custom_model`` (default :class:`FullyConnectedNetwork`).
            **model_kwargs: passed to the custom model's constructor with ``custom_model_config``.

        Returns:
            The model.

        Raises:
            ConfigError: another framework, a ``model_interface``, a memory (``use_lstm``, ``use_attention``:
                set those in the policy's model config), image observations without a custom model, or a
                custom model that is not a ModelV2.
        """
        if framework not in ("torch", None):
            raise ConfigError(f"get_model_v2(framework={framework!r}): corral builds torch models only")
        if model_interface is not None:
            raise ConfigError("get_model_v2(model_interface=...): corral wraps no model interfaces; subclass TorchModelV2")
        options = _options(model_config)
        if options.has_memory:
            raise ConfigError(
                "get_model_v2 with use_lstm or use_attention: corral wraps a model in a memory only as the policy's "
                "model; set it in the policy's model config (model={'use_lstm': True, 'custom_model': ...})"
            )
        cls = options.model_class() or default_model
        if cls is None:
            if is_image_space(obs_space):
                raise ConfigError(
                    "get_model_v2 for image observations: corral has no ModelV2 vision network; write a TorchModelV2 "
                    "around corral.core.build_encoder(obs_space, ModelConfig(conv_filters=...)), or flatten the images"
                )
            cls = FullyConnectedNetwork
        if not is_model_v2(cls):
            raise ConfigError(f"get_model_v2 builds ModelV2s; {cls.__qualname__} does not subclass TorchModelV2")
        kwargs = {**options.custom_model_config, **model_kwargs}
        model: TorchModelV2 = cls(obs_space, action_space, num_outputs, dict(model_config), name, **kwargs)
        return model

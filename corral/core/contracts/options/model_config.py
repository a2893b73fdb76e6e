"""ModelConfig: how a policy's network is built (RLlib's ``model`` dict), validated as it is given."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from corral.core.common import by_value
from corral.core.common.import_paths import import_object, is_import_path
from corral.core.contracts.options.declaring import check_plain_data, to_jsonable
from corral.core.contracts.options.model_names import is_action_dist_class, registered_model_class, unknown_model_name
from corral.core.contracts.rllib_compat import RECURRENT_MODEL_SETTINGS, note_flag
from corral.errors import ConfigError, did_you_mean, short_repr

logger = logging.getLogger("corral")

MAX_LAYER_SIZE = 8192
"""The widest layer (or most channels, the largest kernel or stride) a model config may ask for."""


class ModelConfig(BaseModel):
    """How the policy's neural network is built (RLlib's ``model`` dict).

    Read and written as that dict too (``config.model["vf_share_layers"] = True``,
    ``config.model.get("fcnet_hiddens")``), under RLlib's key names, each
    change checked as the whole dict is; read-only once the config holding
    it is frozen (an algorithm was built from it).
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True, allow_inf_nan=False)
    _frozen: bool = PrivateAttr(default=False)

    fcnet_hiddens: list[int] = Field(default_factory=lambda: [64, 64], max_length=64)
    """sizes of the hidden layers of the fully connected network"""
    fcnet_activation: Literal["tanh", "relu", "swish", "elu", "linear"] = "tanh"
    """activation function between the fully connected layers"""
    post_fcnet_hiddens: list[int] = Field(default_factory=list, max_length=64)
    """RLlib's final layers after the network's: after fcnet_hiddens (in fcnet_activation), or after the convolutions
    and fcnet_hiddens for images (in post_fcnet_activation), as RLlib's models stack them"""
    post_fcnet_activation: Literal["tanh", "relu", "swish", "elu", "linear"] = "relu"
    """activation of post_fcnet_hiddens where fcnet_hiddens does not set it (images, or no fcnet_hiddens)"""
    fcnet_use_layernorm: bool = False
    """a LayerNorm after each hidden layer of the fully connected stack, before its activation (RLlib's new stack)"""
    head_fcnet_hiddens: list[int] = Field(default_factory=list, max_length=64)
    """hidden layers of the policy head and of the value head, each its own, between the network and the outputs
    (RLlib's new stack; the catalog's actor-critic models and memory models)"""
    head_fcnet_activation: Literal["tanh", "relu", "swish", "elu", "linear"] = "relu"
    """activation function between the head_fcnet_hiddens layers"""
    head_fcnet_use_layernorm: bool = False
    """a LayerNorm after each head_fcnet_hiddens layer, before its activation"""
    log_std_clip_param: float | None = Field(default=None, gt=0)
    """for Box actions: clamp the log standard deviation to [-log_std_clip_param, log_std_clip_param] (RLlib's new
    stack clamps at 20); None: no clamp (the old stack's)"""
    vf_share_layers: bool = False
    """whether the value head shares the policy's hidden layers (False: a separate network)"""
    free_log_std: bool = True
    """for Box actions: a state-independent, learned log standard deviation instead of a network output"""
    conv_filters: list[list[int]] | None = None
    """for image observations: [[out_channels, kernel, stride], ...]; None picks a default by image size"""
    conv_activation: Literal["tanh", "relu", "swish", "elu"] = "relu"
    """activation function between the convolution layers"""
    custom_model: Any = None
    """a torch.nn.Module subclass, its 'package.module:Class' path, or a name given to ModelCatalog.register_custom_model,
    built with RLlib's arguments (obs_space, action_space, num_outputs, model_config, name, **custom_model_config) or
    corral's (the first four): RLlib's TorchModelV2 gives forward(input_dict, state, seq_lens) and value_function(); a
    plain module's forward(obs) gives the action-distribution inputs and gets a separate value network; DQN puts its Q
    head on either; a corral.core.Model gives every output itself"""
    custom_action_dist: Any = None
    """an action distribution class (RLlib's TorchDistributionWrapper), its 'package.module:Class' path, or a name given
    to ModelCatalog.register_custom_action_dist: its required_model_output_shape sets the model's outputs, and the
    policy acts and learns with it (PPO, A2C, IMPALA, MARWIL, BC)"""
    custom_model_config: dict[str, Any] = Field(default_factory=dict)
    """the custom model's own settings: in model_config, and as keyword arguments with RLlib's constructor arguments"""
    use_lstm: bool = False
    """wrap the network in an LSTM (RLlib's LSTM wrapper): the policy keeps a state per episode and learns on sequences"""
    lstm_cell_size: int = Field(default=256, ge=1, le=MAX_LAYER_SIZE)
    """the LSTM's state size"""
    max_seq_len: int = Field(default=20, ge=1, le=100_000)
    """the longest sequence a recurrent model is trained on: episodes are cut into chunks of at most this many steps"""
    lstm_use_prev_action: bool = False
    """feed the previous action to the LSTM too (one-hot for Discrete actions)"""
    lstm_use_prev_reward: bool = False
    """feed the previous reward to the LSTM too"""
    use_attention: bool = False
    """wrap the network in a gated transformer-XL (GTrXL, RLlib's attention wrapper): a memory of past steps per episode"""
    attention_num_transformer_units: int = Field(default=1, ge=1, le=64)
    """how many transformer units (attention and position-wise MLP, each behind a GRU gate) the GTrXL stacks"""
    attention_dim: int = Field(default=64, ge=1, le=MAX_LAYER_SIZE)
    """the width of the GTrXL's inputs, outputs and memory"""
    attention_num_heads: int = Field(default=1, ge=1, le=64)
    """attention heads per unit"""
    attention_head_dim: int = Field(default=32, ge=1, le=MAX_LAYER_SIZE)
    """the width of each head's queries, keys and values"""
    attention_memory_inference: int = Field(default=50, ge=1, le=100_000)
    """how many past steps each unit remembers when acting: the state is this many steps of every unit's inputs"""
    attention_memory_training: int = Field(default=50, ge=1, le=100_000)
    """how many of those past steps each unit attends to in training (at most attention_memory_inference)"""
    attention_position_wise_mlp_dim: int = Field(default=32, ge=1, le=MAX_LAYER_SIZE)
    """the hidden width of each unit's position-wise MLP"""
    attention_init_gru_gate_bias: float = 2.0
    """the GRU gates' initial bias: the larger, the closer each unit starts to passing its input through unchanged"""
    attention_use_n_prev_actions: int = Field(default=0, ge=0, le=1)
    """feed the previous action to the GTrXL too (1) or not (0); corral carries one previous action"""
    attention_use_n_prev_rewards: int = Field(default=0, ge=0, le=1)
    """feed the previous reward to the GTrXL too (1) or not (0)"""

    @model_validator(mode="before")
    @classmethod
    def _rllib_model_keys(cls, value: Any) -> Any:
        if isinstance(value, dict) and "lstm_use_prev_action_reward" in value:  # RLlib's older name for both switches
            value = dict(value)
            both = value.pop("lstm_use_prev_action_reward")
            value["lstm_use_prev_action"] = value["lstm_use_prev_reward"] = both
        return rllib_model_keys(value, cls.model_fields) if isinstance(value, dict) else value

    @field_validator("fcnet_hiddens", "post_fcnet_hiddens", "head_fcnet_hiddens")
    @classmethod
    def _positive_sizes(cls, value: list[int]) -> list[int]:
        if any(size <= 0 or size > MAX_LAYER_SIZE for size in value):
            raise ValueError(f"every hidden layer size must be an integer from 1 to {MAX_LAYER_SIZE}")
        return value

    @field_validator("conv_filters")
    @classmethod
    def _filter_triples(cls, value: list[list[int]] | None) -> list[list[int]] | None:
        if value is not None and any(len(f) != 3 or min(f) <= 0 or max(f) > MAX_LAYER_SIZE for f in value):
            raise ValueError(f"each conv filter is [out_channels, kernel, stride] with integers from 1 to {MAX_LAYER_SIZE}")
        return value

    @field_validator("custom_model_config", mode="before")
    @classmethod
    def _plain_custom_model_config(cls, value: Any) -> Any:
        check_plain_data("model.custom_model_config", value)
        return value

    @field_validator("custom_model", "custom_action_dist")
    @classmethod
    def _model_class(cls, value: Any) -> Any:
        if value is None or isinstance(value, (str, type)):
            return value
        raise ValueError(
            "custom_model must be a torch.nn.Module subclass, its 'package.module:Class' path or a registered model name"
        )

    @model_validator(mode="after")
    def _one_memory(self) -> ModelConfig:
        if self.use_lstm and self.use_attention:
            raise ValueError("use_lstm and use_attention are both True; a model has one memory: set one of them")
        if self.attention_memory_training > self.attention_memory_inference:
            raise ValueError(
                f"attention_memory_training={self.attention_memory_training} is more than attention_memory_inference="
                f"{self.attention_memory_inference}, the past steps the state holds; make it at most that"
            )
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen and not name.startswith("_"):
            raise ConfigError(f"model.{name}: this config is frozen (an algorithm was built from it); change a copy instead")
        super().__setattr__(name, value)

    def __getitem__(self, key: str) -> Any:
        """``config.model["fcnet_hiddens"]``: an option by its name, as RLlib's model dict reads.

        Raises:
            KeyError: no option has that name.
        """
        if key not in self:
            raise KeyError(f"model has no option {key!r}.{did_you_mean(str(key), type(self).model_fields)}")
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        """``config.model["vf_share_layers"] = True``: RLlib's model dict written, checked with the other options.

        Raises:
            ConfigError: an unknown key, a value that does not fit, or the config is frozen.
        """
        self.update({key: value})

    def update(self, options: dict[str, Any]) -> None:
        """``config.model.update({...})``: several options at once, RLlib's names too, checked together.

        Args:
            options: option names (or RLlib's) and their values.

        Raises:
            ConfigError: an unknown key, a value that does not fit, or the config is frozen.
        """
        given = {name: getattr(self, name) for name in type(self).model_fields}
        try:
            updated = type(self).model_validate({**given, **options})
        except ValidationError as exc:
            raise ConfigError(model_options_problem(exc, "model")) from None
        for name in type(self).model_fields:
            if getattr(updated, name) != given[name]:
                setattr(self, name, getattr(updated, name))

    def get(self, key: str, default: Any = None) -> Any:
        """``config.model.get("use_lstm", False)``: an option's value, or ``default`` when no option has that name.

        Args:
            key: the option's name.
            default: what to return for a name that is no option.

        Returns:
            The value, or ``default``.
        """
        return getattr(self, key) if key in self else default

    def __contains__(self, key: object) -> bool:
        """``"use_lstm" in config.model``: whether an option has that name."""
        return isinstance(key, str) and key in type(self).model_fields

    def keys(self) -> list[str]:
        """Every option's name, as RLlib's model dict has them."""
        return list(type(self).model_fields)

    @property
    def has_memory(self) -> bool:
        """Whether the catalog's model carries a state (``use_lstm`` or ``use_attention``)."""
        return self.use_lstm or self.use_attention

    def model_class(self) -> type | None:
        """The custom model's class: registered under its name, or imported from its path (None: the catalog's model).

        A registered name is looked up first (see
        :mod:`~corral.core.contracts.options.model_names`), so a name may look like a path.

        Raises:
            ConfigError: the string is neither a registered name nor an import path, the path does not import,
                or it is not a ``torch.nn.Module`` subclass.
        """
        from torch import nn

        cls = _named_class(self.custom_model, unknown_model_name)
        if cls is not None and not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise ConfigError(f"model.custom_model={self.custom_model!r} is not a torch.nn.Module subclass")
        return cls

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """The fields as a dict; a custom model class is written as its 'module:qualname' path (or by value, see to_dict),
        and so is a class or function inside ``custom_model_config`` (a catalog class)."""
        data = super().model_dump(**kwargs)
        for key in ("custom_model", "custom_action_dist"):
            if isinstance(data.get(key), type):
                data[key] = by_value.encode(data[key])
        data["custom_model_config"] = to_jsonable(data["custom_model_config"], nested=True)
        return data

    def action_dist_class(self) -> type | None:
        """The custom action distribution's class: registered under its name, or imported from its path (None: none).

        Raises:
            ConfigError: the string is neither a registered name nor an import path, the path does not import,
                or it is not an action distribution class.
        """
        cls: type | None = _named_class(self.custom_action_dist, _unknown_action_dist_name)
        if cls is not None and not is_action_dist_class(cls):
            raise ConfigError(
                f"model.custom_action_dist={self.custom_action_dist!r} is not an action distribution class "
                "(required_model_output_shape, sample, logp: subclass corral.core.TorchDistributionWrapper)"
            )
        return cls


def _named_class(value: Any, unknown: Callable[[str], ConfigError]) -> Any:
    """What a class option names: the class given, the one registered under a name (first), or the one at a path.

    Args:
        value: None, a class, a registered name or a ``'package.module:Class'`` path.
        unknown: the error for a string that is neither a registered name nor a path.

    Returns:
        None for None, else the object named (its kind is the caller's to check).

    Raises:
        ConfigError: the string names nothing, or the path does not import.
    """
    if not isinstance(value, str):
        return value
    found = registered_model_class(value)
    if found is not None:
        return found
    if not is_import_path(value):
        raise unknown(value)
    return import_object(value)


def _unknown_action_dist_name(name: str) -> ConfigError:
    return ConfigError(
        f"model.custom_action_dist {name!r} is not a registered name. Register it with "
        f"ModelCatalog.register_custom_action_dist({name!r}, YourDistribution) (from corral.core import "
        "ModelCatalog), or give the class itself or its 'package.module:Class' path"
    )


def model_options_problem(exc: ValidationError, owner: str, noun: str = "option") -> str:
    """What is wrong with a dict of model options, from pydantic's first error: an unknown key with the closest one.

    Args:
        exc: the error of ``ModelConfig.model_validate``.
        owner: the options' name in the message (``"q_model_config"``).
        noun: what a key is called in it.

    Returns:
        One line naming the key and, for an unknown one, the closest known.
    """
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"{owner} has no {noun} {where!r}.{did_you_mean(where, ModelConfig.model_fields)}"
    return f"{owner}.{where}: {error['msg']}"


def rllib_model_keys(model: dict[str, Any], fields: Collection[str] = ()) -> dict[str, Any]:
    """A ``model`` dict without RLlib's keys that corral answers itself, each answered.

    ``_time_major`` is dropped at INFO, since it asks for nothing corral does
    not do; RLlib's copies of
    ``_disable_preprocessor_api`` and ``_disable_action_flattening`` in the
    model dict mean what the flags mean.

    Args:
        model: the ``model`` dict as given.
        fields: the model config's own options, which are never answered here (a key corral
            implements is its option from then on).

    Returns:
        The dict with those keys removed (the same dict when it has none).

    """
    answered = {key for key in model if isinstance(key, str) and key not in fields} & {
        *RECURRENT_MODEL_SETTINGS,
        "_disable_preprocessor_api",
        "_disable_action_flattening",
    }
    if not answered:
        return model
    for key in sorted(answered):
        if key.startswith("_disable"):
            note_flag(key, model[key])
        else:
            why = "ignored; it configures layers or nets this config does not ask for"
            logger.info("model.%s=%s: %s", key, short_repr(model[key]), why)
    return {key: value for key, value in model.items() if key not in answered}

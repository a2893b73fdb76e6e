"""A user's ``custom_model`` class, built and made into a corral model.

Four kinds of class are taken:

- RLlib's ModelV2, a subclass of :class:`~corral.core.networks.model_v2.TorchModelV2`
  (``forward(input_dict, state, seq_lens)``, ``value_function()``): the whole
  network, whose ``value_function()`` is the value head (the model decides
  whether it shares layers, reading ``model_config["vf_share_layers"]`` as
  RLlib's own models do); DQN reads its outputs as the features under its Q
  head, as RLlib's DQN does. Recurrent ones are refused for now;
- RLlib's RLModule, a subclass of :class:`~corral.core.networks.rl_module.TorchRLModule`:
  the whole network, built with RLlib's keywords (``observation_space``,
  ``action_space``, ``model_config`` the ``custom_model_config``); DQN reads its
  ``action_dist_inputs`` as the Q-values;
- a :class:`~corral.core.networks.default_models.Model` (or any module with
  ``forward_inference``/``forward_exploration``/``forward_train`` returning
  dicts): the whole network, whose outputs the policy reads as they are;
- a plain ``torch.nn.Module`` with ``forward(obs) -> tensor``: its output is
  the action-distribution inputs (logits; a Box's means and log standard
  deviations), and an actor-critic policy gets a separate value network beside
  it, built as the catalog's (``fcnet_hiddens``, ``conv_filters``, ...). DQN reads
  it as the network under its Q head (see :func:`build_q_model`).

Each is constructed with RLlib's arguments,
``Class(obs_space, action_space, num_outputs, model_config, name, **custom_model_config)``,
or, where the constructor does not take those, corral's
``Class(obs_space, action_space, num_outputs, model_config)`` (a ModelV2 takes
only RLlib's, its ``name`` required). A plain module or
a ``Model`` reads observations as the policy preprocesses them: one flat float
vector per row (Discrete one-hot, Dict and Tuple flattened), or channels-last
images; a ModelV2 gets them restored as well (see
:mod:`~corral.core.networks.model_v2`). A module with ModelV2's shape that does
not subclass corral's ``TorchModelV2`` is refused with a message saying so.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any, cast

import gymnasium as gym
import torch
from torch import nn

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.config import ModelConfig
from corral.core.networks.default_models import Model, QModel, build_encoder, init_linear
from corral.core.networks.model_v2 import ModelV2Features, TorchModelV2, is_model_v2, model_v2_obs_space
from corral.core.networks.recurrent import initial_state
from corral.core.networks.rl_module import build_rl_module, is_rl_module
from corral.errors import ConfigError

logger = logging.getLogger("corral")
_WARNED_KEYWORDS: set[type] = set()
"""custom model classes built without custom_model_config's keys, already said"""

MODEL_NAME = "model"
"""the ``name`` RLlib's constructor signature is given"""
RLLIB_ARGUMENTS = "(obs_space, action_space, num_outputs, model_config, name, **custom_model_config)"
CORRAL_ARGUMENTS = "(obs_space, action_space, num_outputs, model_config)"

_FORWARDS = ("forward_inference", "forward_exploration", "forward_train")


def is_whole_model(cls: type) -> bool:
    """Whether a custom model class writes corral's model contract (the three forwards), not only ``forward``."""
    return all(callable(getattr(cls, name, None)) for name in _FORWARDS)


def construct(
    cls: type, obs_space: gym.Space[Any], action_space: gym.Space[Any], num_outputs: int, config: ModelConfig
) -> nn.Module:
    """Call a custom model's constructor with RLlib's arguments, or else with corral's.

    Args:
        cls: the ``custom_model`` class.
        obs_space: the observations' space, as the policy's model sees them.
        action_space: the space the policy acts in.
        num_outputs: the width of the output the model is built for.
        config: the model config; passed as a dict (``model_config``), whose ``custom_model_config``
            RLlib's signature also gets as keyword arguments.

    Returns:
        The module.

    Raises:
        ConfigError: the constructor takes neither form, or it raised.
    """
    model_config = config.model_dump()
    rllib_args = (obs_space, action_space, num_outputs, model_config, MODEL_NAME)
    keywords = dict(config.custom_model_config)
    rllib = f"RLlib's arguments {RLLIB_ARGUMENTS}"
    forms: list[tuple[tuple[Any, ...], dict[str, Any], str]] = [
        (rllib_args, keywords, rllib),
        # RLlib's catalog builds a constructor that takes its arguments but not custom_model_config's keys without
        # them, and warns; its own examples rely on that
        (rllib_args, {}, f"{rllib} without custom_model_config's keys"),
        ((obs_space, action_space, num_outputs, model_config), {}, f"corral's {CORRAL_ARGUMENTS}"),
    ]
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # a class whose signature cannot be read: RLlib's call
        signature = None
    for args, kwargs, form in forms:
        if signature is not None:
            try:
                signature.bind(*args, **kwargs)
            except TypeError:
                continue
        if args is rllib_args and keywords and not kwargs and cls not in _WARNED_KEYWORDS:
            _WARNED_KEYWORDS.add(cls)  # a model is built twice (counted on the meta device, then for real): said once
            logger.warning(
                "model.custom_model %s does not take custom_model_config's keys %s as keyword arguments: built without "
                "them, as RLlib does (it reads them from model_config['custom_model_config'], if at all)",
                cls.__qualname__, sorted(keywords),
            )  # fmt: skip
        try:
            module = cls(*args, **kwargs)
        except Exception as exc:  # whatever a user's constructor raises
            raise ConfigError(
                f"model.custom_model {cls.__qualname__}, built with {form}, raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(module, nn.Module):
            raise ConfigError(f"model.custom_model {cls.__qualname__} built a {type(module).__name__}, not a torch.nn.Module")
        return module
    parameters = ", ".join(signature.parameters) if signature else "..."
    raise ConfigError(
        f"model.custom_model {cls.__qualname__}({parameters}) takes neither RLlib's arguments {RLLIB_ARGUMENTS} "
        f"nor corral's {CORRAL_ARGUMENTS}"
    )


def check_plain_forward(module: nn.Module) -> None:
    """Refuse RLlib's ModelV2, whose ``forward(input_dict, state, seq_lens)`` a plain module's call cannot feed.

    Raises:
        ConfigError: the module's ``forward`` takes more than the observations, or it has ``value_function``.
    """
    try:
        parameters = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):  # a forward whose signature cannot be read: the probe batch checks it
        return
    required = [p for p in parameters if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(required) > 1 or callable(getattr(module, "value_function", None)):
        raise ConfigError(
            f"model.custom_model {type(module).__qualname__} looks like RLlib's ModelV2 (forward(input_dict, state, "
            "seq_lens), value_function()) but does not subclass corral's TorchModelV2, which corral needs to call it. "
            "Subclass it (from corral.core import TorchModelV2, in place of RLlib's), or write forward(obs) returning "
            "the action-distribution inputs (corral adds a value network)"
        )


def build_model_v2(
    cls: type, obs_space: gym.Space[Any], action_space: gym.Space[Any], num_outputs: int, config: ModelConfig
) -> TorchModelV2:
    """Build a user's ModelV2 as RLlib does: the preprocessed observation space, RLlib's constructor arguments.

    Args:
        cls: a :class:`TorchModelV2` subclass.
        obs_space: the observations' space, as the policy's model sees them (the model gets
            the preprocessed space, whose ``original_space`` is this one).
        action_space: the space the policy acts in.
        num_outputs: the width of the outputs ``forward`` returns.
        config: the model config.

    Returns:
        The model.

    Raises:
        ConfigError: the constructor raised.
    """
    model = construct(cls, model_v2_obs_space(obs_space), action_space, num_outputs, config)
    if not isinstance(model, TorchModelV2):  # a __new__ that returns something else
        raise ConfigError(f"model.custom_model {cls.__qualname__} built a {type(model).__name__}, not a TorchModelV2")
    return model


class ModuleModel(Model):
    """A plain ``nn.Module`` as a corral model: its output is ``action_dist_inputs``; a separate value network.

    Args:
        module: the user's module, ``forward(obs) -> [B, num_outputs]``.
        obs_space: the observations' space (the value network reads the same observations).
        config: the model config the value network is built from (as the catalog's encoder).
        value_function: whether the policy needs value estimates (``vf_preds``).
    """

    def __init__(self, module: nn.Module, obs_space: gym.Space[Any], config: ModelConfig, value_function: bool = True) -> None:
        super().__init__()
        self.module = module
        self.vf_encoder: nn.Module | None = None
        self.vf_head: nn.Module | None = None
        if value_function:
            self.vf_encoder, features = build_encoder(obs_space, config)
            self.vf_head = init_linear(nn.Linear(features, 1), 1.0)

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        out = {SampleBatch.ACTION_DIST_INPUTS: self.module(obs)}
        if self.vf_encoder is not None and self.vf_head is not None:
            out[SampleBatch.VF_PREDS] = self.vf_head(self.vf_encoder(obs)).squeeze(-1)
        return out


def build_custom_model(
    cls: type,
    obs_space: gym.Space[Any],
    action_space: gym.Space[Any],
    num_outputs: int,
    config: ModelConfig,
    value_function: bool = True,
) -> nn.Module:
    """The policy's network from a ``custom_model`` class: the class's own model, or a plain module wrapped.

    Args:
        cls: the ``custom_model`` class (a ``torch.nn.Module`` subclass).
        obs_space: the observations' space, as the model sees them.
        action_space: the space the policy acts in.
        num_outputs: the width of ``action_dist_inputs`` the action distribution needs.
        config: the model config.
        value_function: whether the policy needs value estimates: a plain module then gets a value network.

    Returns:
        A module with corral's three forwards.

    Raises:
        ConfigError: the class cannot be built (see :func:`construct`), is a recurrent ModelV2 or a module
            shaped like ModelV2 without subclassing ``TorchModelV2``, or a plain module is asked to share
            its layers with the value function (``vf_share_layers``).
    """
    if is_model_v2(cls):
        model = build_model_v2(cls, obs_space, action_space, num_outputs, config)
        model.value_outputs = value_function  # value_function() is the value head: RLlib's models share as they choose
        return model
    if is_rl_module(cls):
        return build_rl_module(cls, obs_space, action_space, config.custom_model_config, value_function)
    module = construct(cls, obs_space, action_space, num_outputs, config)
    if is_whole_model(cls):
        return module
    check_plain_forward(module)
    if value_function and config.vf_share_layers:
        raise ConfigError(
            f"model.vf_share_layers=True asks the value head to read the policy's hidden layers, but the plain module "
            f"{cls.__qualname__} gives only its outputs; set vf_share_layers=False (corral adds a separate value "
            "network), or subclass corral.core.Model and return 'vf_preds' too"
        )
    return ModuleModel(module, obs_space, config, value_function)


def custom_body(
    cls: type, obs_space: gym.Space[Any], action_space: gym.Space[Any], width: int, config: ModelConfig, why_no_state: str
) -> nn.Module:
    """A ModelV2 or plain module as the network under corral's own head: ``forward(obs)`` is its ``width`` features.

    Args:
        cls: the ``custom_model`` class (a ModelV2 or a plain module, not a whole model).
        obs_space: the observations' space, as the model sees them.
        action_space: the space the policy acts in.
        width: the ``num_outputs`` it is built with: the features the head reads.
        config: the model config.
        why_no_state: why the head cannot carry the model's own recurrent state, for the error.

    Returns:
        The body.

    Raises:
        ConfigError: the model cannot be built (see :func:`construct`), or it is a recurrent ModelV2.
    """
    if not is_model_v2(cls):
        module = construct(cls, obs_space, action_space, width, config)
        check_plain_forward(module)
        return module
    model = build_model_v2(cls, obs_space, action_space, width, config)
    if initial_state(model):
        raise ConfigError(
            f"model.custom_model {cls.__qualname__} is recurrent (get_initial_state() is not empty), but {why_no_state}; "
            "corral's PPO, A2C and IMPALA train recurrent models"
        )
    model.value_outputs = False
    return ModelV2Features(model)


class DistInputs(nn.Module):
    """A whole model (an RLModule, a corral ``Model``) as a network: ``forward(obs)`` is its ``action_dist_inputs``.

    Args:
        model: the model, with corral's three forwards.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The model's ``action_dist_inputs`` for a batch of observations (its training pass)."""
        outputs: torch.Tensor = cast(Model, self.model).forward_train(obs)[SampleBatch.ACTION_DIST_INPUTS]
        return outputs


def custom_network(
    cls: type, obs_space: gym.Space[Any], action_space: gym.Space[Any], num_outputs: int, config: ModelConfig, role: str
) -> nn.Module:
    """Any ``custom_model`` class as one network ``forward(obs) -> [B, num_outputs]``, for an algorithm with several.

    SAC's actor and critics are such networks: a ModelV2's or a plain module's
    outputs, or a whole model's (an RLModule's) ``action_dist_inputs``.

    Args:
        cls: the ``custom_model`` class.
        obs_space: the space of what the network reads, as the model sees it.
        action_space: the space the policy acts in.
        num_outputs: the outputs' width (an RLModule chooses its own from ``action_space``).
        config: the model config.
        role: what the network is, for errors (``"SAC's actor"``).

    Returns:
        The network.

    Raises:
        ConfigError: the model cannot be built, or it is recurrent (the network reads single steps).
    """
    why_no_state = f"{role} reads single steps"
    if is_rl_module(cls):
        module = build_rl_module(cls, obs_space, action_space, config.custom_model_config, value_function=False)
        if initial_state(module):
            raise ConfigError(f"model.custom_model {cls.__qualname__} is a stateful RLModule, but {why_no_state}")
        return DistInputs(module)
    if not is_model_v2(cls) and is_whole_model(cls):
        return DistInputs(construct(cls, obs_space, action_space, num_outputs, config))
    return custom_body(cls, obs_space, action_space, num_outputs, config, why_no_state)


def build_q_model(
    obs_space: gym.Space[Any], action_space: gym.spaces.Discrete, config: ModelConfig, dueling: bool, hiddens: Sequence[int]
) -> nn.Module:
    """DQN's Q-network: the catalog's, or one built on the ``custom_model``.

    A whole model (see :func:`is_whole_model`) is the Q-network as it is: its
    ``action_dist_inputs`` are the Q-values, one per action. A ModelV2 or a plain
    module is, as in RLlib, the network under DQN's Q head (``hiddens``,
    ``dueling``): it is built with ``num_outputs`` features,
    ``([256] + fcnet_hiddens)[-1]`` with a Q head's hidden layers; without
    them it is built with the number of actions, and its outputs are the
    Q-values (a dueling head's advantages) as they are.

    Args:
        obs_space: the observations' space, as the model sees them.
        action_space: the Discrete actions.
        config: the model config.
        dueling: whether the Q head has separate advantage and value streams.
        hiddens: the Q head's hidden layers.

    Returns:
        The Q-network.

    Raises:
        ConfigError: the custom model cannot be built (see :func:`construct`), is a recurrent ModelV2, or is
            shaped like ModelV2 without subclassing ``TorchModelV2``; ``head_fcnet_hiddens`` is set.
    """
    if config.head_fcnet_hiddens:
        raise ConfigError(
            f"model.head_fcnet_hiddens={config.head_fcnet_hiddens}: a Q-network's head layers are the algorithm's own "
            "`hiddens` option (training(hiddens=[...])); remove head_fcnet_hiddens from the model config"
        )
    num_actions = int(action_space.n)
    cls = config.model_class()
    if cls is not None and is_rl_module(cls):
        return build_rl_module(cls, obs_space, action_space, config.custom_model_config, value_function=False)
    if cls is not None and getattr(cls, "actor_critic_only", False):  # an RLlib catalog's model: policy and value heads
        raise ConfigError(f"{cls.__name__} is an actor-critic model (a PPOCatalog's); a Q-network is not built from it")
    if cls is not None and not is_model_v2(cls) and is_whole_model(cls):
        return construct(cls, obs_space, action_space, num_actions, config)
    body = None
    if cls is not None:
        width = [256, *config.fcnet_hiddens][-1] if hiddens else num_actions
        body = (custom_body(cls, obs_space, action_space, width, config, "DQN learns on single steps"), width)
    return QModel(obs_space, num_actions, config, dueling=dueling, hiddens=hiddens, body=body)

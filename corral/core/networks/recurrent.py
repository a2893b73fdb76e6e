"""Models with memory: the recurrent model contract, and RLlib's ``use_lstm`` wrapper built on it.

A recurrent model is a :class:`~corral.core.networks.default_models.Model`
whose ``get_initial_state()`` is not empty. Its three forwards take, beside
the observations, the state and what else RLlib's recurrent models read:

- acting: ``obs`` ``[B, ...]``, one step per row, ``state`` a list of ``[B, ...]``
  tensors, ``seq_lens`` None;
- training: ``obs`` ``[S, L, ...]``, ``S`` sequences of at most ``L`` steps
  (zero-padded after ``seq_lens[s]`` steps), ``state`` the state at each
  sequence's start, ``[S, ...]`` per part.

They return ``action_dist_inputs`` (and ``vf_preds``) with one row per step:
``[B, ...]`` when acting, ``[S * L, ...]`` in training (sequence-major, the padding
included), and ``state_out_0``, ``state_out_1``, ... (:func:`state_out_key`), the
state after the last step of each row or sequence. ``prev_actions``
(``[B]``/``[S, L]`` plus the action's shape) and ``prev_rewards`` come along when
the model asks for them (:attr:`RecurrentModel.uses_prev_actions`).

The policy keeps the rest: the env runners carry each episode's state from step
to step and reset it when an episode starts, and training batches hold
sequences (:mod:`corral.core.learning.recurrent.sequences`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.core.common.actions import ActionAdapter
from corral.core.common.sample_batch import SampleBatch, state_out_key
from corral.core.contracts.options.model_config import ModelConfig
from corral.core.networks.default_models import Model, build_encoder, gaussian_inputs, head, head_layers
from corral.errors import ConfigError


class RecurrentModel(Model):
    """Base of models with memory: write ``get_initial_state`` and ``_forward_recurrent``.

    The three forwards default to ``_forward_recurrent``, as a feed-forward
    model's do to ``_forward``.
    """

    uses_prev_actions: bool = False
    """whether the forwards read ``prev_actions`` (the env runners then record them)"""
    uses_prev_rewards: bool = False
    """whether the forwards read ``prev_rewards``"""

    def get_initial_state(self) -> list[torch.Tensor]:
        """The state at an episode's start, one tensor per part, without a batch axis."""
        raise NotImplementedError

    def _forward_recurrent(
        self,
        obs: torch.Tensor,
        state: list[torch.Tensor],
        seq_lens: torch.Tensor | None = None,
        prev_actions: torch.Tensor | None = None,
        prev_rewards: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def forward(  # type: ignore[override]  # the recurrent contract: more inputs than Model's
        self,
        obs: torch.Tensor,
        state: list[torch.Tensor],
        seq_lens: torch.Tensor | None = None,
        prev_actions: torch.Tensor | None = None,
        prev_rewards: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """The outputs and the next state; ``forward_inference``, ``forward_exploration`` and ``forward_train`` too.

        Args:
            obs: ``[B, ...]`` observations (acting) or ``[S, L, ...]`` sequences (training).
            state: the state at each row or sequence start, one tensor per part.
            seq_lens: ``[S]`` each sequence's steps; None when acting.
            prev_actions: the action before each step, if the model reads it.
            prev_rewards: the reward before each step, if the model reads it.

        Returns:
            The outputs by key, ``state_out_k`` among them (see the module docstring).
        """
        return self._forward_recurrent(obs, state, seq_lens, prev_actions, prev_rewards)

    # one function for all three, as Model's default to _forward; a subclass may override each
    forward_inference = forward_exploration = forward_train = forward  # type: ignore[assignment]


def is_recurrent(model: nn.Module) -> bool:
    """Whether a model has memory: its ``get_initial_state()`` returns state parts."""
    return callable(getattr(model, "get_initial_state", None)) and len(initial_state(model)) > 0


def initial_state(model: nn.Module) -> list[torch.Tensor]:
    """A model's state at an episode's start as a list of parts: a dict's values in its order (an RLModule's).

    Args:
        model: a model with ``get_initial_state()`` (a list of tensors, or an RLModule's dict of them).

    Returns:
        The parts, without a batch axis.
    """
    parts = model.get_initial_state()  # type: ignore[operator]  # every caller has checked it is callable
    return list(parts.values()) if isinstance(parts, dict) else list(parts)


def prev_action_width(action_space: gym.Space[Any]) -> int:
    """How many inputs a previous action takes: one-hot for Discrete, flat for Box, a Tuple or Dict's flat actions.

    A Tuple or Dict action space's previous action is the policy's flat action
    (:mod:`corral.core.common.actions`): a Discrete leaf's index is one number.

    Raises:
        ConfigError: another action space (RLlib's ``lstm_use_prev_action`` has no encoding for it here).
    """
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.Box):
        return int(np.prod(action_space.shape))
    if isinstance(action_space, (gym.spaces.Tuple, gym.spaces.Dict)):
        return int(np.prod(ActionAdapter(action_space, False, False).policy_space.shape or ()))
    raise ConfigError(
        f"model.lstm_use_prev_action=True: the previous action of a {type(action_space).__name__} action space "
        "cannot be an LSTM input; corral encodes Discrete (one-hot), Box, Tuple and Dict actions. Set "
        "lstm_use_prev_action=False"
    )


class MemoryModel(RecurrentModel):
    """RLlib's wrappers with memory: the catalog's encoder, a memory over its features, then policy and value heads.

    As in RLlib, the memory reads the encoder's last hidden layer (plus the
    previous action, one-hot for Discrete, and reward, where asked), and both
    heads read the memory's output, so the value function shares the memory
    (``vf_share_layers`` does not apply). A subclass writes the memory:
    :meth:`memory_options`, :meth:`_build_memory`, :meth:`_memory` and
    ``get_initial_state``; the constructor is this one.

    Args:
        obs_space: one observation's space (as the model sees it).
        action_space: the space the policy acts in.
        num_outputs: the width of ``action_dist_inputs``.
        config: the model config: the encoder's options and the memory's.
        value_function: whether to add the value head.
        body: the network under the memory and its output width, instead of the catalog's encoder
            (a custom model's, see :func:`memory_model`).

    Raises:
        ConfigError: the memory reads previous actions of an action space it cannot encode.
    """

    def __init__(
        self,
        obs_space: gym.Space[Any],
        action_space: gym.Space[Any],
        num_outputs: int,
        config: ModelConfig,
        value_function: bool = True,
        body: tuple[nn.Module, int] | None = None,
    ) -> None:
        super().__init__()
        memory_width, prev_action, prev_reward = self.memory_options(config)
        self.free_log_std = isinstance(action_space, gym.spaces.Box) and config.free_log_std
        head_outputs = num_outputs // 2 if self.free_log_std else num_outputs
        self.uses_prev_actions = prev_action
        self.uses_prev_rewards = prev_reward
        self.discrete_actions = int(action_space.n) if isinstance(action_space, gym.spaces.Discrete) else 0
        extra = (prev_action_width(action_space) if prev_action else 0) + int(prev_reward)
        self.encoder, features = body or build_encoder(obs_space, config)
        self.input_width = features + extra
        """the width of each step's input to the memory"""
        self.pi_head = head(memory_width, head_outputs, 0.01, *head_layers(config))
        self.vf_head = head(memory_width, 1, 1.0, *head_layers(config)) if value_function else None
        self.log_std = nn.Parameter(torch.zeros(head_outputs)) if self.free_log_std else None
        self.log_std_clip = config.log_std_clip_param if isinstance(action_space, gym.spaces.Box) else None
        self._build_memory(config)  # last: the heads' weights are drawn first, as they always were

    @staticmethod
    def memory_options(config: ModelConfig) -> tuple[int, bool, bool]:
        """The memory's output width, and whether it reads the previous action and the previous reward.

        Args:
            config: the model config.

        Returns:
            ``(width, previous_action, previous_reward)``.
        """
        raise NotImplementedError

    def _build_memory(self, config: ModelConfig) -> None:
        """Build the memory's layers (``self.input_width`` inputs per step)."""
        raise NotImplementedError

    def _memory(
        self, x: torch.Tensor, state: list[torch.Tensor], seq_lens: torch.Tensor | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The memory over ``[S, T, input_width]`` steps from each sequence's state: ``[S, T, width]`` and the next state."""
        raise NotImplementedError

    def _memory_inputs(
        self, features: torch.Tensor, prev_actions: torch.Tensor | None, prev_rewards: torch.Tensor | None
    ) -> torch.Tensor:
        parts = [features]
        if self.uses_prev_actions:
            if prev_actions is None:
                raise ConfigError(f"{type(self).__name__} reads the previous actions: pass prev_actions")
            if self.discrete_actions:
                one_hot = nn.functional.one_hot(prev_actions.long(), self.discrete_actions)
                parts.append(one_hot.reshape(*features.shape[:-1], -1).to(features.dtype))
            else:
                parts.append(prev_actions.reshape(*features.shape[:-1], -1).to(features.dtype))
        if self.uses_prev_rewards:
            if prev_rewards is None:
                raise ConfigError(f"{type(self).__name__} reads the previous rewards: pass prev_rewards")
            parts.append(prev_rewards.reshape(*features.shape[:-1], 1).to(features.dtype))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def _forward_recurrent(
        self,
        obs: torch.Tensor,
        state: list[torch.Tensor],
        seq_lens: torch.Tensor | None = None,
        prev_actions: torch.Tensor | None = None,
        prev_rewards: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        if seq_lens is None:  # acting: a row is one step of its own sequence
            sequences, steps = obs.shape[0], 1
            features = self.encoder(obs)
        else:
            sequences, steps = obs.shape[:2]
            features = self.encoder(obs.reshape(sequences * steps, *obs.shape[2:]))
        x = self._memory_inputs(features.reshape(sequences, steps, -1), prev_actions, prev_rewards)
        out, state_out = self._memory(x, state, seq_lens)
        out = out.reshape(sequences * steps, out.shape[-1])
        outputs = {SampleBatch.ACTION_DIST_INPUTS: gaussian_inputs(self.pi_head(out), self.log_std, self.log_std_clip)}
        outputs.update((state_out_key(index), part) for index, part in enumerate(state_out))
        if self.vf_head is not None:
            outputs[SampleBatch.VF_PREDS] = self.vf_head(out).squeeze(-1)
        return outputs


class LSTMModel(MemoryModel):
    """RLlib's ``use_lstm`` wrapper: an LSTM of ``lstm_cell_size`` as the memory (see :class:`MemoryModel`).

    The state is the LSTM's ``(h, c)``, zeros at an episode's start; the
    previous action and reward are read with ``lstm_use_prev_action`` and
    ``lstm_use_prev_reward``.
    """

    @staticmethod
    def memory_options(config: ModelConfig) -> tuple[int, bool, bool]:
        """``lstm_cell_size`` outputs; ``lstm_use_prev_action`` and ``lstm_use_prev_reward``."""
        return config.lstm_cell_size, config.lstm_use_prev_action, config.lstm_use_prev_reward

    def _build_memory(self, config: ModelConfig) -> None:
        self.cell_size = config.lstm_cell_size
        self.lstm = nn.LSTM(self.input_width, self.cell_size, batch_first=True)

    def get_initial_state(self) -> list[torch.Tensor]:
        """``[h, c]``: two zero vectors of ``lstm_cell_size``."""
        weight = next(self.pi_head.parameters())
        return [weight.new_zeros(self.cell_size), weight.new_zeros(self.cell_size)]

    def _memory(
        self, x: torch.Tensor, state: list[torch.Tensor], seq_lens: torch.Tensor | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        if x.shape[1] == 1:  # one step (acting): the cell alone, a third of nn.LSTM's cost for a step
            w_ih, w_hh, b_ih, b_hh = self.lstm.all_weights[0]
            h, c = torch.lstm_cell(x[:, 0], (state[0], state[1]), w_ih, w_hh, b_ih, b_hh)
            return h.unsqueeze(1), [h, c]
        # padding after a sequence's end changes nothing before it: the LSTM runs forward only
        out, (h, c) = self.lstm(x, (state[0].unsqueeze(0), state[1].unsqueeze(0)))
        return out, [h[0], c[0]]


def memory_model(
    cls: type | None,
    obs_space: gym.Space[Any],
    action_space: gym.Space[Any],
    num_outputs: int,
    config: ModelConfig,
    value_function: bool = True,
) -> MemoryModel:
    """``use_lstm`` or ``use_attention``: the memory over the catalog's encoder, or over a custom model's outputs.

    As RLlib wraps one, a ModelV2 or a plain module is built with
    ``fcnet_hiddens[-1]`` outputs (256 without hidden layers), which the memory
    reads as its features; a ModelV2 whose constructor sets ``num_outputs``
    gives that many.

    Args:
        cls: the ``custom_model`` class, or None for the catalog's encoder.
        obs_space: one observation's space.
        action_space: the space the policy acts in.
        num_outputs: the width of ``action_dist_inputs``.
        config: the model config (``use_lstm`` or ``use_attention`` set).
        value_function: whether to add the value head.

    Returns:
        An :class:`LSTMModel`, or an :class:`~corral.core.networks.attention.AttentionModel`.

    Raises:
        ConfigError: the custom model gives every output itself (a ``corral.core.Model`` or an RLModule), has its
            own state, or cannot be built.
    """
    from corral.core.networks.attention import AttentionModel  # it builds on this module
    from corral.core.networks.custom_model import custom_body, is_whole_model
    from corral.core.networks.model_v2 import is_model_v2

    switch = "use_attention" if config.use_attention else "use_lstm"
    body = None
    if cls is not None:
        if not is_model_v2(cls) and is_whole_model(cls):
            raise ConfigError(
                f"model.{switch}=True with model.custom_model={cls.__qualname__}, which gives every output itself: there "
                f"is nothing to wrap. Give the model its own state (get_initial_state) or remove {switch}"
            )
        width = config.fcnet_hiddens[-1] if config.fcnet_hiddens else 256
        why = f"{switch} wraps it in a memory of its own"
        features = custom_body(cls, obs_space, action_space, width, config, why)
        # the memory reads as many features as the ModelV2 says it outputs: its constructor may set num_outputs (RLlib's)
        width = int(getattr(getattr(features, "model", None), "num_outputs", None) or width)
        body = (features, width)
    memory = AttentionModel if config.use_attention else LSTMModel
    return memory(obs_space, action_space, num_outputs, config, value_function, body)

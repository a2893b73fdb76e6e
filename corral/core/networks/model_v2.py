"""RLlib's ModelV2 for torch: ``TorchModelV2``, with ``forward(input_dict, state, seq_lens)`` and ``value_function()``.

An RLlib user's custom model subclasses it as in RLlib::

    class MyModel(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name, **kwargs):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            ...

        def forward(self, input_dict, state, seq_lens):
            self._features = self.body(input_dict["obs_flat"])
            return self.logits(self._features), state

        def value_function(self):
            return self._value_branch(self._features).reshape(-1)

and ``model={"custom_model": MyModel}`` (or a name given to
``ModelCatalog.register_custom_model``) builds it. It is adapted onto corral's
one model contract: :class:`TorchModelV2` writes ``forward_inference``,
``forward_exploration`` and ``forward_train`` itself, each calling the model
and, where the policy needs value estimates, ``value_function()`` after it. So
``policy.model`` is the user's model, and ``policy.model(input_dict)`` and
``policy.model.value_function()`` work as in RLlib.

What the model is given:

- ``obs_space``: as in RLlib, the space of the preprocessed observations (a
  flat ``Box`` for Dict, Tuple, Discrete and MultiDiscrete observations, the
  ``Box`` itself otherwise), whose ``original_space`` is the env's;
- ``input_dict``: ``obs`` restored to the original structure (a dict or tuple of
  ``[B, ...]`` tensors for Dict and Tuple spaces, Box parts in their shape,
  Discrete and MultiDiscrete parts one-hot, as RLlib's
  :func:`restore_original_dimensions` gives them), ``obs_flat`` (the flat
  ``[B, n]`` batch) and ``is_training`` (True in the loss); a recurrent model
  also gets ``prev_actions`` and ``prev_rewards``;
- ``state`` and ``seq_lens``: ``[]`` and None for a feed-forward model. A
  recurrent one (whose ``get_initial_state()`` is not empty, usually a
  :class:`RecurrentNetwork` with ``forward_rnn``) gets its state and, as in
  RLlib, flat ``[S * L]`` rows with ``seq_lens`` in training and ``[B]`` rows with
  ``seq_lens`` of ones when acting; it returns the next state. PPO and A2C
  train it, as they train ``use_lstm``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.core.common.repeated import Repeated, RepeatedValues, map_leaves
from corral.core.common.sample_batch import SampleBatch, state_out_key
from corral.core.common.spaces import ObservationPreprocessor, is_image_space


class TorchModelV2(nn.Module):
    """RLlib's torch ModelV2: write ``forward(input_dict, state, seq_lens) -> (outputs, state)`` and ``value_function()``.

    Args:
        obs_space: the preprocessed observations' space; ``obs_space.original_space`` is the env's.
        action_space: the space the policy acts in.
        num_outputs: the width of the outputs ``forward`` returns (the action-distribution
            inputs; under DQN's Q head, the features it reads).
        model_config: the ``model`` config as a dict (``custom_model_config`` in it).
        name: the model's name.
    """

    value_outputs: bool = True
    """whether corral's forwards add ``vf_preds`` from :meth:`value_function` (False where the policy needs no values)"""

    def __init__(
        self, obs_space: gym.Space[Any], action_space: gym.Space[Any], num_outputs: int, model_config: dict[str, Any], name: str
    ) -> None:
        if "_modules" not in self.__dict__:  # RLlib's style calls nn.Module.__init__ after this; either order works
            nn.Module.__init__(self)
        self.obs_space = obs_space
        self.action_space = action_space
        self.num_outputs = num_outputs
        self.model_config = model_config
        self.name = name
        self.framework = "torch"
        self._last_output: torch.Tensor | None = None

    def forward(
        self, input_dict: dict[str, Any], state: list[torch.Tensor], seq_lens: torch.Tensor | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The model's outputs for a batch: override this.

        Args:
            input_dict: ``obs`` (restored to the observation space's structure), ``obs_flat``
                (``[B, n]``) and ``is_training``.
            state: the recurrent state, ``[]`` for a feed-forward model.
            seq_lens: None for a feed-forward model.

        Returns:
            ``(outputs, state_out)``: ``[B, num_outputs]`` outputs and the state (``state`` itself here).
        """
        raise NotImplementedError(f"{type(self).__qualname__} must implement forward(input_dict, state, seq_lens)")

    def value_function(self) -> torch.Tensor:
        """The value estimates ``[B]`` of the batch of the last :meth:`forward` call: override this for actor-critics."""
        raise NotImplementedError(
            f"{type(self).__qualname__} has no value_function(), which an actor-critic algorithm (PPO, A2C, IMPALA) needs"
        )

    def get_initial_state(self) -> list[torch.Tensor]:
        """The recurrent state at an episode's start, one tensor per state part; ``[]``: a feed-forward model."""
        return []

    def custom_loss(self, policy_loss: Any, loss_inputs: Mapping[str, torch.Tensor]) -> Any:
        """The loss to optimize, given the algorithm's: override to add terms of the model's own (RLlib's hook).

        Called at every gradient step, before backpropagation.

        Args:
            policy_loss: the algorithm's total loss, in a list of one (RLlib passes one loss per optimizer).
            loss_inputs: the batch the policy is learning on, its columns as tensors (``obs``,
                ``actions``, ...; the whole train batch, of which PPO's minibatches are slices).

        Returns:
            The losses to backpropagate, as given (``policy_loss`` unchanged by default); a scalar tensor is taken too.
        """
        return policy_loss

    def metrics(self) -> dict[str, Any]:
        """Numbers to report beside the learner's stats after each update (RLlib's hook); none by default."""
        return {}

    def last_output(self) -> torch.Tensor | None:
        """The outputs of the last call (None before the first)."""
        return self._last_output

    def __call__(
        self,
        input_dict: Mapping[str, Any],
        state: list[torch.Tensor] | None = None,
        seq_lens: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Call :meth:`forward` on a batch as the policy stores it, restored as RLlib's ``ModelV2.__call__`` does.

        Args:
            input_dict: ``obs``, the preprocessed observations (a tensor or array with a batch axis,
                as the policy stores them); ``is_training`` (default False) and any other entries
                are passed on.
            state: the recurrent state (default ``[]``).
            seq_lens: the sequence lengths (default None).

        Returns:
            ``(outputs, state_out)`` as :meth:`forward` returns them.

        Raises:
            ValueError: ``input_dict`` has no ``obs``, or ``forward`` did not return a pair.
        """
        if SampleBatch.OBS not in input_dict:
            raise ValueError(f"{type(self).__qualname__}(input_dict) needs input_dict['obs'], the batch of observations")
        obs = input_dict[SampleBatch.OBS]
        if not isinstance(obs, torch.Tensor):
            obs = torch.as_tensor(np.asarray(obs))
        restored = dict(input_dict)
        restored[SampleBatch.OBS] = restore_original_dimensions(obs, self.obs_space)
        restored["obs_flat"] = obs.reshape(obs.shape[0], -1) if obs.dim() > 2 else obs
        restored.setdefault("is_training", False)
        result = self.forward(restored, list(state or []), seq_lens)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise ValueError(f"{type(self).__qualname__}.forward must return (outputs, state), got {type(result).__name__}")
        outputs, state_out = result
        self._last_output = outputs
        return outputs, state_out

    def __getstate__(self) -> dict[str, Any]:
        """The module's attributes for copying and pickling, tensors kept from the last forward pass detached.

        An RLlib-style model keeps its last features (``self._features``) for
        ``value_function()``; with their autograd graph they could not be
        deep-copied (an exported copy, a target network).
        """
        state = dict(self.__dict__)
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and value.grad_fn is not None:
                state[key] = value.detach()
        return state

    # corral's model contract (see corral.core.networks.default_models.Model, and .recurrent for the state)
    def forward_inference(self, obs: torch.Tensor, *recurrent: Any) -> dict[str, torch.Tensor]:
        """Outputs for acting without exploration: ``action_dist_inputs`` and, for actor-critics, ``vf_preds``.

        Args:
            obs: the preprocessed observations.
            *recurrent: for a recurrent model, ``state, seq_lens, prev_actions, prev_rewards``
                (see :mod:`corral.core.networks.recurrent`).

        Returns:
            The outputs by key; a recurrent model's next state as ``state_out_k``.
        """
        return self._corral_outputs(obs, False, *recurrent)

    def forward_exploration(self, obs: torch.Tensor, *recurrent: Any) -> dict[str, torch.Tensor]:
        """Outputs for acting while collecting samples (arguments as :meth:`forward_inference`'s).

        Args:
            obs: the preprocessed observations.
            *recurrent: a recurrent model's state and the rest.

        Returns:
            The outputs by key.
        """
        return self._corral_outputs(obs, False, *recurrent)

    def forward_train(self, obs: torch.Tensor, *recurrent: Any) -> dict[str, torch.Tensor]:
        """Outputs for the loss (``is_training`` True; arguments as :meth:`forward_inference`'s).

        Args:
            obs: the preprocessed observations (``[S, L, ...]`` sequences for a recurrent model).
            *recurrent: a recurrent model's state at each sequence's start and the rest.

        Returns:
            The outputs by key, a row per step.
        """
        return self._corral_outputs(obs, True, *recurrent)

    def _corral_outputs(
        self,
        obs: torch.Tensor,
        is_training: bool,
        state: list[torch.Tensor] | None = None,
        seq_lens: torch.Tensor | None = None,
        prev_actions: torch.Tensor | None = None,
        prev_rewards: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        input_dict: dict[str, Any] = {"is_training": is_training}
        if state is not None:  # recurrent: RLlib's models get flat [S * L] rows with seq_lens (all ones when acting)
            sequences = seq_lens is not None
            if seq_lens is None:
                seq_lens = torch.ones(obs.shape[0], dtype=torch.int32, device=obs.device)
            else:
                obs = obs.reshape(-1, *obs.shape[2:])
            if prev_actions is not None:
                input_dict[SampleBatch.PREV_ACTIONS] = prev_actions.flatten(0, 1) if sequences else prev_actions
            if prev_rewards is not None:
                input_dict[SampleBatch.PREV_REWARDS] = prev_rewards.reshape(-1)
        input_dict[SampleBatch.OBS] = obs
        outputs, state_out = self(input_dict, state, seq_lens)
        out = {SampleBatch.ACTION_DIST_INPUTS: outputs}
        if self.value_outputs:
            out[SampleBatch.VF_PREDS] = self.value_function().reshape(-1)
        for index, part in enumerate(state_out if state is not None else ()):
            out[state_out_key(index)] = part
        return out


class RecurrentNetwork(TorchModelV2):
    """RLlib's base of recurrent ModelV2s: write ``forward_rnn(inputs, state, seq_lens)`` and ``get_initial_state()``.

    :meth:`forward` gives ``forward_rnn`` the flat observations with a time axis,
    ``[S, L, n]``: ``S`` sequences of ``L`` steps, zero-padded after ``seq_lens``
    (one step per sequence when acting), and flattens its ``[S, L, num_outputs]``
    outputs back to rows, as RLlib's does. ``value_function()`` then returns a
    value per row too. The policy carries the state between steps and resets it
    with each episode.
    """

    def forward(
        self, input_dict: dict[str, Any], state: list[torch.Tensor], seq_lens: torch.Tensor | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Add the time axis, call :meth:`forward_rnn`, and flatten its outputs.

        Args:
            input_dict: ``obs_flat`` is read, ``[S * L, n]``.
            state: the state at each sequence's start.
            seq_lens: ``[S]`` each sequence's steps.

        Returns:
            ``([S * L, num_outputs] outputs, state after each sequence)``.

        Raises:
            ValueError: no ``seq_lens`` (the model was not called as a recurrent one).
        """
        if seq_lens is None:
            raise ValueError(f"{type(self).__qualname__} is recurrent: call it with seq_lens (and its state)")
        flat = input_dict["obs_flat"].float()
        inputs = flat.reshape(seq_lens.shape[0], -1, *flat.shape[1:])
        outputs, state_out = self.forward_rnn(inputs, state, seq_lens)
        return outputs.reshape(-1, outputs.shape[-1]), state_out

    def forward_rnn(
        self, inputs: torch.Tensor, state: list[torch.Tensor], seq_lens: torch.Tensor
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The recurrent network: override this.

        Args:
            inputs: ``[S, L, n]`` flat observations with a time axis.
            state: the state at each sequence's start, ``[S, ...]`` per part.
            seq_lens: ``[S]`` each sequence's steps.

        Returns:
            ``([S, L, num_outputs] outputs, the state after the sequences)``.
        """
        raise NotImplementedError(f"{type(self).__qualname__} must implement forward_rnn(inputs, state, seq_lens)")


class ModelV2Features(nn.Module):
    """A ModelV2 as the network under DQN's Q head: ``forward(obs)`` is the model's outputs (its features).

    ``is_training`` is whether gradients are recorded (the loss's forward pass), since the
    Q-network's forward passes do not say which they are.

    Args:
        model: the user's model, built with the features' width as ``num_outputs``.
    """

    def __init__(self, model: TorchModelV2) -> None:
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The model's outputs for a batch of preprocessed observations."""
        outputs, _ = self.model({SampleBatch.OBS: obs, "is_training": torch.is_grad_enabled()})
        return outputs


def model_v2_obs_space(space: gym.Space[Any]) -> gym.Space[Any]:
    """The observation space a ModelV2 is built with, as RLlib's preprocessors give it.

    Args:
        space: the observations' space, as the policy's model sees them.

    Returns:
        A Box of the preprocessed observations (the Box itself for Box spaces, flat float32
        otherwise), with ``original_space`` set to ``space``.
    """
    if isinstance(space, gym.spaces.Box):
        box = gym.spaces.Box(space.low, space.high, space.shape, space.dtype)
    else:
        box = gym.spaces.Box(-np.inf, np.inf, ObservationPreprocessor(space).shape, np.float32)
    box.original_space = space  # type: ignore[attr-defined]  # RLlib's attribute, read by restore_original_dimensions
    return box


def restore_original_dimensions(obs: torch.Tensor, obs_space: gym.Space[Any], tensorlib: Any = "torch") -> Any:
    """Preprocessed observations in their original structure, as RLlib's function of this name gives them.

    Args:
        obs: ``[B, n]`` flat observations (images: ``[B, H, W, C]``, returned as they are).
        obs_space: the preprocessed space; its ``original_space`` (else itself) says the structure.
        tensorlib: RLlib's framework argument; only torch tensors are taken.

    Returns:
        For a Dict space a dict, for a Tuple a tuple, of ``[B, ...]`` parts: Box and MultiBinary
        parts in their shape, Discrete and MultiDiscrete parts one-hot; a Box in its shape; a
        ``Repeated`` space a :class:`~corral.core.common.repeated.RepeatedValues` of ``[B, max_len, ...]`` items.
    """
    original = getattr(obs_space, "original_space", obs_space)
    if is_image_space(original) or obs.dim() != 2:
        return obs
    return _unflatten(obs, original)


def _unflatten(flat: torch.Tensor, space: gym.Space[Any]) -> Any:
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        parts = list(space.spaces.items()) if isinstance(space, gym.spaces.Dict) else list(enumerate(space.spaces))
        sizes = [_flat_width(part) for _, part in parts]
        pieces = torch.split(flat, sizes, dim=1)
        restored = [_unflatten(piece, part) for piece, (_, part) in zip(pieces, parts, strict=True)]
        if isinstance(space, gym.spaces.Dict):
            return {key: value for (key, _), value in zip(parts, restored, strict=True)}
        return tuple(restored)
    if isinstance(space, Repeated):  # [B, 1 + max_len * width]: each row's length, then its padded items
        batch, width = flat.shape[0], _flat_width(space.child_space)
        items = _unflatten(flat[:, 1:].reshape(batch * space.max_len, width), space.child_space)
        with_lists = map_leaves(items, lambda part: part.reshape(batch, space.max_len, *part.shape[1:]))
        return RepeatedValues(with_lists, flat[:, 0], space.max_len)
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiBinary)):
        return flat.reshape(flat.shape[0], *space.shape)
    return flat  # Discrete, MultiDiscrete: one-hot, as the preprocessor made them


def _flat_width(space: gym.Space[Any]) -> int:
    """How many columns of a flat row a (part of a) space takes; an image part too (flattened inside a Dict)."""
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    return int(ObservationPreprocessor(space).shape[0])


def is_model_v2(cls: type) -> bool:
    """Whether a custom model class is corral's :class:`TorchModelV2`."""
    return isinstance(cls, type) and issubclass(cls, TorchModelV2)

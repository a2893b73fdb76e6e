"""Action masking: legal actions read from the observation, never sampled or picked when illegal.

Board games (PettingZoo's classic games) observe a Dict ``{"observation": ...,
"action_mask": ...}``: a 0/1 flag per Discrete action. When a policy's
observation space is such a Dict (the key is ``environment(action_mask_key=)``),
the observation and the mask travel together as one flat row, the
observation's preprocessed values followed by the mask, so sample batches,
replay buffers and Ray transfers carry the mask with no new column. The
policy's model is wrapped in :class:`ActionMaskedModel`, which hands the model
only the observation and sets the distribution inputs (logits, Q-values) of
illegal actions to :data:`MASKED_LOGIT`, in every forward pass: acting, the
loss, target networks. Every algorithm thereby learns and acts over legal
actions only without knowing masks exist, and explorations draw their uniform
actions from the mask (see ``Exploration.action_mask``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from corral.core.common.sample_batch import SampleBatch
from corral.core.common.spaces import ObservationPreprocessor, flat_size
from corral.core.networks.default_models import Model, torch_dtype
from corral.errors import ConfigError

MASKED_LOGIT = -1e9
"""The distribution input of an illegal action. Finite on purpose: softmax gives it
probability 0 all the same, and ``0 * log p`` stays 0 in entropies and KLs where
``-inf`` would make NaN."""

LEGAL_ACTIONS = "legal_actions"
"""The output of an :class:`ActionMaskedModel` holding the ``[B, n]`` boolean legal actions it masked with."""


class MaskedObservationPreprocessor(ObservationPreprocessor):
    """The observation (preprocessed, flattened) followed by the action mask, as one float32 row.

    Args:
        observation_space: the agent's Dict observation space, holding ``key``.
        action_space: the agent's action space; must be Discrete with one flag per action.
        key: the Dict key of the mask.

    A model written to RLlib's APIs (a ModelV2, an RLModule) masks by itself,
    reading the mask from its observation as RLlib hands it the whole Dict:
    with ``whole_observation`` it sees the whole Dict, mask included, and its
    outputs are masked all the same (masking twice changes nothing).

    Attributes:
        model_observation_space: what the model sees: the Dict's other entry (if it has
            one, as ``{"observation", "action_mask"}`` does), else a Dict of the others;
            with ``whole_observation``, the whole Dict.
        model_input: the preprocessor of the observation part of a row (the entries beside the mask).
        model_view: the preprocessor of ``model_observation_space``, whose rows the model reads.
        num_actions: the mask's length.

    Raises:
        ConfigError: the action space is not Discrete, the mask's space is not a Box or
            MultiBinary of one flag per action, or the Dict holds nothing but the mask.
    """

    def __init__(
        self, observation_space: gym.spaces.Dict, action_space: gym.Space[Any], key: str, whole_observation: bool = False
    ) -> None:
        mask_space = observation_space.spaces[key]
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ConfigError(
                f"the observations hold an action mask ({key!r}), which needs Discrete actions, not {action_space}; "
                "set environment(action_mask_key=None) if that entry is not a mask"
            )
        n = int(action_space.n)
        if not isinstance(mask_space, (gym.spaces.Box, gym.spaces.MultiBinary)) or int(np.prod(mask_space.shape)) != n:
            raise ConfigError(
                f"the action mask {key!r} must be a Box or MultiBinary of {n} flags (one per action), not {mask_space}"
            )
        rest = {k: s for k, s in observation_space.spaces.items() if k != key}
        if not rest:
            raise ConfigError(f"the observation Dict holds only the action mask {key!r}; it needs an observation beside it")
        self.key = key
        self.num_actions = n
        self._keys = list(rest)
        self._single = self._keys[0] if len(rest) == 1 else None
        self.model_observation_space: gym.Space[Any] = rest[self._single] if self._single is not None else gym.spaces.Dict(rest)
        self.model_input = ObservationPreprocessor(self.model_observation_space)
        self._inner_size = int(np.prod(self.model_input.shape))
        self._model_dtype = torch_dtype(self.model_input.dtype)
        self.space = observation_space
        self.shape = (self._inner_size + n,)
        self.dtype = np.dtype(np.float32)
        self.model_view = self.model_input
        self._whole_columns: torch.Tensor | None = None
        if whole_observation:
            self.model_observation_space = observation_space
            self.model_view = ObservationPreprocessor(observation_space)
            # the whole Dict's flat layout (its entries in its order), gathered from a row's (the others, then the mask)
            starts = dict(zip(self._keys, np.cumsum([0] + [flat_size(rest[k]) for k in self._keys]), strict=False))
            starts[key] = self._inner_size
            spans = [np.arange(starts[k], starts[k] + flat_size(space)) for k, space in observation_space.spaces.items()]
            self._whole_columns = torch.from_numpy(np.concatenate(spans))

    @staticmethod
    def detect(
        observation_space: gym.Space[Any], action_space: gym.Space[Any], key: str | None, whole_observation: bool = False
    ) -> MaskedObservationPreprocessor | None:
        """The preprocessor for a masked observation space, or None if the space holds no mask.

        Args:
            observation_space: an agent's observation space.
            action_space: its action space.
            key: the mask's key (``config.action_mask_key``); None turns masking off.
            whole_observation: the model sees the whole Dict, mask included (a model written to RLlib's APIs).

        Returns:
            A preprocessor when ``observation_space`` is a Dict holding ``key``, else None.

        Raises:
            ConfigError: as the constructor does.
        """
        if key is None or not isinstance(observation_space, gym.spaces.Dict) or key not in observation_space.spaces:
            return None
        return MaskedObservationPreprocessor(observation_space, action_space, key, whole_observation)

    def __call__(self, obs: Any) -> np.ndarray:
        """A batch of raw Dict observations to ``[B, observation size + num_actions]`` rows."""
        inner_raw = obs[self._single] if self._single is not None else {k: obs[k] for k in self._keys}
        return self.join(self.model_input(inner_raw), np.asarray(obs[self.key]))

    def join(self, model_obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Preprocessed observations and masks as one float32 row each.

        Args:
            model_obs: ``[B, ...]`` preprocessed observations.
            mask: ``[B, n]`` legal-action flags (any numeric dtype).

        Returns:
            ``[B, observation size + n]`` float32 rows.
        """
        rows = model_obs.shape[0]
        return np.concatenate(
            [model_obs.reshape(rows, -1).astype(np.float32, copy=False), mask.reshape(rows, -1).astype(np.float32, copy=False)],
            axis=1,
        )

    def map_observation(self, rows: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Rows with ``fn`` applied to their observation part (an observation filter), the mask untouched.

        Args:
            rows: ``[B, observation size + n]`` rows from this preprocessor.
            fn: maps ``[B, *model_input.shape]`` observations to the same shape.

        Returns:
            New rows.
        """
        model_obs = rows[:, : self._inner_size].reshape(rows.shape[0], *self.model_input.shape)
        return self.join(fn(model_obs), rows[:, self._inner_size :])

    def split(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Model inputs and legal actions from a batch of rows.

        Args:
            rows: ``[B, observation size + num_actions]``.

        Returns:
            ``(observations, legal)``: the observations in the model's input shape and
            dtype, and a ``[B, n]`` boolean mask. A row with no legal action (the
            observation after a game ends) counts every action legal, so nothing
            downstream meets a row of only masked logits.
        """
        legal = rows[:, self._inner_size :] > 0.5
        if self._whole_columns is not None:
            model_obs = rows[:, self._whole_columns.to(rows.device)]
        else:
            model_obs = rows[:, : self._inner_size].reshape(rows.shape[0], *self.model_input.shape).to(self._model_dtype)
        return model_obs, legal | ~legal.any(dim=1, keepdim=True)


def mask_logits(logits: torch.Tensor, legal: torch.Tensor | None) -> torch.Tensor:
    """``logits`` with every illegal action's entry set to :data:`MASKED_LOGIT`.

    Args:
        logits: ``[B, n]`` distribution inputs (logits or Q-values).
        legal: ``[B, n]`` booleans from :meth:`MaskedObservationPreprocessor.split`; None: all legal.

    Returns:
        ``logits`` itself without a mask, else a new tensor whose gradient flows to the legal entries only.
    """
    if legal is None:
        return logits
    return torch.where(legal, logits, torch.full_like(logits, MASKED_LOGIT))


def _masked_forward(name: str) -> Callable[..., dict[str, torch.Tensor]]:
    """An :class:`ActionMaskedModel` method: the wrapped model's forward of this name, masked."""

    def forward(self: ActionMaskedModel, obs: torch.Tensor, *recurrent: Any) -> dict[str, torch.Tensor]:
        return self._masked(getattr(self.model, name), obs, recurrent)

    forward.__name__ = name
    forward.__doc__ = f"""The wrapped model's ``{name}``, masked.

        Args:
            obs: the masked preprocessor's rows (``[S, L, ...]`` sequences for a recurrent model in training).
            *recurrent: a recurrent model's state and the rest (see :mod:`corral.core.networks.recurrent`).

        Returns:
            The wrapped model's outputs, illegal actions masked, and :data:`LEGAL_ACTIONS`.
        """
    return forward


class ActionMaskedModel(Model):
    """A model that sees the observation only, and whose illegal actions' distribution inputs are masked.

    Its outputs add :data:`LEGAL_ACTIONS`, the mask it applied.

    Attributes the wrapped model has and this one lacks (SAC's ``actor``,
    ``q_values``) are read from the wrapped model, so an algorithm that calls
    its network's parts directly works with it; it splits the rows itself with
    ``Policy.split_action_mask``.

    Args:
        model: the network the policy built for ``preprocessor.model_observation_space``.
        preprocessor: the masked preprocessor whose rows this model reads.
    """

    def __init__(self, model: Model, preprocessor: MaskedObservationPreprocessor) -> None:
        super().__init__()
        self.model = model
        self.preprocessor = preprocessor

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("model"), name)

    def _masked(
        self, forward: Callable[..., dict[str, torch.Tensor]], rows: torch.Tensor, recurrent: tuple[Any, ...]
    ) -> dict[str, torch.Tensor]:
        # a recurrent model's training rows are [S, L, ...] sequences: split them flat, give the model its sequences
        model_obs, legal = self.preprocessor.split(rows.reshape(-1, rows.shape[-1]))
        out = dict(forward(model_obs.reshape(*rows.shape[:-1], *model_obs.shape[1:]), *recurrent))
        out[SampleBatch.ACTION_DIST_INPUTS] = mask_logits(out[SampleBatch.ACTION_DIST_INPUTS], legal)
        out[LEGAL_ACTIONS] = legal  # for the exploration's uniform draws, without splitting the rows again
        return out

    forward_inference = _masked_forward("forward_inference")
    forward_exploration = _masked_forward("forward_exploration")
    forward_train = _masked_forward("forward_train")

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        return self._masked(self.model.forward, obs, ())

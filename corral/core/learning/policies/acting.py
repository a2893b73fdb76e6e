"""A policy's acting: raw observations to model inputs, and batches of them to actions, values and likelihoods.

What env runners and users call on a :class:`~corral.core.learning.policy.Policy`,
every forward pass under ``torch.inference_mode()``; RLlib's
``compute_single_action`` for one raw observation is here too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from corral.core.common.actions import zero_actions
from corral.core.common.sample_batch import STATE_OUT_PREFIX, SampleBatch, state_in_key, state_out_key
from corral.core.common.spaces import ObservationCheck
from corral.core.learning.acting import single_action
from corral.core.learning.policies.part import PolicyPart
from corral.core.learning.recurrent.sequences import episode_grid
from corral.core.networks.action_masking import LEGAL_ACTIONS
from corral.core.networks.default_models import Model
from corral.core.networks.recurrent import initial_state
from corral.errors import ConfigError, ObservationError

if TYPE_CHECKING:  # the class this part makes up with the others
    from corral.core.learning.policy import Policy
    from corral.core.networks.recurrent import RecurrentModel


@contextlib.contextmanager
def overriding(policy: PolicyPart, key: str, value: Any) -> Iterator[None]:
    """``value`` under ``key`` in the policy's ``__dict__`` inside the ``with`` block, for a property that reads it.

    Args:
        policy: the policy.
        key: the attribute, e.g. ``"_acting_model"``.
        value: what the property returns inside the block.
    """
    policy.__dict__[key] = value
    try:
        yield
    finally:
        del policy.__dict__[key]


class Acting(PolicyPart):
    """What a policy does with observations; part of :class:`~corral.core.learning.policy.Policy`."""

    def preprocess(self, raw_obs: Any, update_filter: bool | np.ndarray = False) -> np.ndarray:
        """Raw observations (a batch) to model inputs, through the observation filter.

        Args:
            raw_obs: a batch of observations as a vector env returns them (an array
                with a leading batch axis, or dicts/tuples of such arrays for Dict and
                Tuple spaces).
            update_filter: fold the batch into the observation filter's running
                statistics first; True only for observations that become training samples
                (a boolean mask: only the rows it marks).

        Returns:
            ``[B, *preprocessor.shape]``: float32, or the image's own dtype for image
            observations without a filter.
        """
        obs = self.preprocessor(raw_obs)
        obs_filter = self.observation_filter
        if obs_filter is None:
            return obs
        if self.action_mask is None:
            return obs_filter(obs, update=update_filter)
        return self.action_mask.map_observation(obs, lambda model_obs: obs_filter(model_obs, update=update_filter))

    def _obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        """Observations as a tensor on the policy's device, always contiguous.

        A strided view (a column of the sampler's buffers) takes another matmul
        kernel, whose sums round differently: the same observations would give
        actions that differ in the last bit, depending on where they lie.
        """
        return torch.from_numpy(np.ascontiguousarray(obs)).to(self.device)

    @property
    def acting_model(self) -> Model:
        """The model :meth:`compute_actions` acts with: :attr:`model`, or another one inside :meth:`acting_with`."""
        model = self.__dict__.get("_acting_model")
        return self.model if model is None else model

    def acting_with(self, model: Model) -> contextlib.AbstractContextManager[None]:
        """Act with ``model`` (a copy of :attr:`model`) inside the ``with`` block.

        While a learner thread updates :attr:`model`, the env runner in the
        main thread samples with a copy, so no action comes from weights
        halfway through an optimizer step.

        Args:
            model: the model to act with, of the same kind as :attr:`model`.

        Returns:
            The context manager.
        """
        return overriding(self, "_acting_model", model)

    @torch.inference_mode()
    def compute_actions(
        self,
        obs: np.ndarray,
        explore: bool | None = None,
        timestep: int | None = None,
        *,
        state: Sequence[np.ndarray] | None = None,
        prev_actions: np.ndarray | None = None,
        prev_rewards: np.ndarray | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions (in the policy's action space) and extras for a batch of preprocessed observations.

        Args:
            obs: ``[B, ...]`` observations from :meth:`preprocess`.
            explore: explore (the model's ``forward_exploration``) or act deterministically
                (``forward_inference``); None means ``config.explore``.
            timestep: the timestep the exploration's schedules read; None means
                ``self.global_timestep``.
            state: a recurrent model's state, an ``[B, ...]`` array per part; None: each row
                starts an episode (:meth:`get_initial_state`). Ignored by feed-forward models.
            prev_actions: ``[B, ...]`` the action before each row's step (zeros at an episode's
                first), for recurrent models that read it; None: zeros.
            prev_rewards: ``[B]`` the reward before each row's step, likewise.

        Returns:
            ``(actions, extras)``: ``[B, ...]`` actions in the policy's action space
            (:attr:`action_adapter` maps them to the env's), and the
            :meth:`extra_action_out` columns (with a recurrent model, the next state
            as ``state_out_0``, ...), all as numpy arrays on the CPU.
        """
        explore = self.config.explore if explore is None else explore
        obs_t = self._obs_tensor(obs)
        if self.is_recurrent:
            model = cast("RecurrentModel", self.acting_model)
            inputs = self._recurrent_inputs(len(obs), state, prev_actions, prev_rewards)
            model_out = model.forward_exploration(obs_t, *inputs) if explore else model.forward_inference(obs_t, *inputs)
        else:
            acting = self.acting_model
            model_out = acting.forward_exploration(obs_t) if explore else acting.forward_inference(obs_t)
        dist = self.dist_class(model_out[SampleBatch.ACTION_DIST_INPUTS])
        t = self.global_timestep if timestep is None else timestep
        self.exploration.action_mask = model_out.get(LEGAL_ACTIONS)  # set by an ActionMaskedModel
        actions = self.exploration.get_exploration_action(dist, t, explore)
        extras = self.extra_action_out(model_out, dist, actions)
        if self.is_recurrent:
            extras.update((key, value) for key, value in model_out.items() if key.startswith(STATE_OUT_PREFIX))
        return actions.cpu().numpy(), {k: v.cpu().numpy() for k, v in extras.items()}

    def compute_actions_from_input_dict(
        self, input_dict: Any, explore: bool | None = None, timestep: int | None = None, **kwargs: Any
    ) -> tuple[np.ndarray, list[np.ndarray], dict[str, np.ndarray]]:
        """RLlib's call with a batch dict: :meth:`compute_actions` on its ``obs`` (and state, previous actions and rewards).

        Args:
            input_dict: ``obs`` (``[B, ...]`` preprocessed observations, numpy or torch), and for a
                recurrent model ``state_in_0``, ... (without them, each row starts an episode) and
                ``prev_actions`` / ``prev_rewards`` where given.
            explore: as :meth:`compute_actions`.
            timestep: as :meth:`compute_actions`.
            **kwargs: RLlib's ``episodes`` and the like, which the computation does not read.

        Returns:
            ``(actions, state_outs, extras)``, as RLlib returns them.
        """

        def array(value: Any) -> Any:
            return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value

        obs = np.asarray(array(input_dict[SampleBatch.OBS]), dtype=np.float32)
        keys = [state_in_key(i) for i in range(len(self.get_initial_state()))]
        state = [array(input_dict[key]) for key in keys] if all(key in input_dict for key in keys) else []
        actions, extras = self.compute_actions(
            obs,
            explore,
            timestep,
            state=state or None,  # without it, each row starts an episode
            prev_actions=array(input_dict.get(SampleBatch.PREV_ACTIONS)),
            prev_rewards=array(input_dict.get(SampleBatch.PREV_REWARDS)),
        )
        return actions, [extras[state_out_key(i)] for i in range(len(keys))], extras

    def get_initial_state(self) -> list[np.ndarray]:
        """The model's state at an episode's start, one array per part without a batch axis (RLlib's); ``[]`` without memory."""
        if not self.is_recurrent:
            return []
        return [part.detach().cpu().numpy() for part in initial_state(self.acting_model)]

    @torch.inference_mode()
    def recurrent_states(self, fragment: SampleBatch) -> SampleBatch:
        """A fragment with the state this policy's model is in at each step: ``state_in_k`` and ``state_out_k``.

        For steps recorded without their state (demonstrations of another
        agent, a file of another tool): each episode's steps in the fragment
        run through the model from the initial state, all episodes side by
        side, a step at a time, as the env runner would have acted.

        Args:
            fragment: a ``[T, N]`` fragment of preprocessed observations with ``valid``; previous
                actions and rewards where the model reads them (zeros otherwise).

        Returns:
            The fragment with a ``[T, N, ...]`` ``state_in_k`` and ``state_out_k`` per state part
            (zero on reset rows).
        """
        steps, envs, real = episode_grid(fragment[SampleBatch.VALID])
        initial = self.get_initial_state()
        valid_shape = fragment[SampleBatch.VALID].shape
        state_in = [np.zeros((*valid_shape, *part.shape), part.dtype) for part in initial]
        state_out = [np.zeros_like(column) for column in state_in]
        state = [np.repeat(part[None], len(steps), axis=0) for part in initial]
        model = cast("RecurrentModel", self.model)
        for index in range(real.shape[1]):
            running = np.flatnonzero(real[:, index])  # the episodes that have this step
            at = steps[running, index], envs[running, index]
            previous = [fragment[k][at] if k in fragment else None for k in (SampleBatch.PREV_ACTIONS, SampleBatch.PREV_REWARDS)]
            inputs = self._recurrent_inputs(len(running), [part[running] for part in state], *previous)
            out = model.forward_inference(self._obs_tensor(fragment[SampleBatch.OBS][at]), *inputs)
            for k, part in enumerate(state):
                state_in[k][at] = part[running]
                part[running] = state_out[k][at] = out[state_out_key(k)].cpu().numpy()
        columns = {state_in_key(k): column for k, column in enumerate(state_in)}
        columns.update((state_out_key(k), column) for k, column in enumerate(state_out))
        return SampleBatch({**fragment, **columns})

    def _recurrent_inputs(
        self,
        batch: int,
        state: Sequence[np.ndarray] | None,
        prev_actions: np.ndarray | None,
        prev_rewards: np.ndarray | None,
    ) -> tuple[list[torch.Tensor], None, torch.Tensor, torch.Tensor]:
        """A recurrent model's arguments after the observations when acting: ``(state, seq_lens, prev_actions, prev_rewards)``.

        Tensors on the policy's device; the initial state and zeros where not given, and no ``seq_lens`` (one step per row).
        """
        if state is None:
            parts = [p.expand(batch, *p.shape) for p in initial_state(self.acting_model)]
        else:
            parts = [torch.as_tensor(np.asarray(p), dtype=torch.float32, device=self.device) for p in state]
        if prev_actions is None:
            prev_actions = zero_actions(self.action_adapter.policy_space, batch)
        if prev_rewards is None:
            prev_rewards = np.zeros(batch, dtype=np.float32)
        actions = torch.as_tensor(prev_actions, device=self.device)
        return parts, None, actions, torch.as_tensor(prev_rewards, dtype=torch.float32, device=self.device)

    def split_action_mask(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The model's observations and the legal actions of a batch, for code that calls parts of the model directly.

        The model's ``forward_*`` methods mask by themselves; an algorithm that
        feeds sub-networks itself (SAC's actor and critics) splits its batch here.

        Args:
            obs: ``[B, ...]`` preprocessed observations (``preprocess`` output, as a tensor).

        Returns:
            ``(observations, legal)``: without an action mask, ``obs`` itself and None;
            with one, the observations in the model's input shape and a ``[B, n]``
            boolean mask (see :func:`corral.core.networks.action_masking.mask_logits`).
        """
        if self.action_mask is None:
            return obs, None
        return self.action_mask.split(obs)

    @torch.inference_mode()
    def compute_log_likelihoods(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        *,
        state: Sequence[np.ndarray] | None = None,
        prev_actions: np.ndarray | None = None,
        prev_rewards: np.ndarray | None = None,
    ) -> np.ndarray:
        """Log-likelihoods of ``actions`` under the policy's exploring action distribution (off-policy estimation weighs by them).

        Args:
            obs: ``[B, ...]`` preprocessed observations.
            actions: ``[B, ...]`` actions in the policy's action space.
            state: a recurrent model's state before each row's step, as :meth:`compute_actions` takes it.
            prev_actions: ``[B, ...]`` the action before each row's step, for a recurrent model that reads it.
            prev_rewards: ``[B]`` the reward before each row's step, likewise.

        Returns:
            ``[B]`` float32 log-likelihoods under the distribution :meth:`compute_actions` samples from
            when it explores (an exploration that acts otherwise, such as epsilon-greedy, is not in them).

        Raises:
            ConfigError: the policy is recurrent and no ``state`` is given (its likelihoods depend on the episode so
                far, which rows alone do not hold).
        """
        obs_t = self._obs_tensor(obs)
        if self.is_recurrent:
            if state is None:
                raise ConfigError(
                    "off-policy estimation weighs rows by the policy's likelihoods, which for a recurrent policy "
                    "(model.use_lstm) depend on each episode's earlier steps; corral does not estimate recurrent policies "
                    "yet: remove off_policy_estimation_methods or use a feed-forward model"
                )
            inputs = self._recurrent_inputs(len(obs), state, prev_actions, prev_rewards)
            model_out = cast("RecurrentModel", self.model).forward_exploration(obs_t, *inputs)
        else:
            model_out = self.model.forward_exploration(obs_t)
        dist = self.dist_class(model_out[SampleBatch.ACTION_DIST_INPUTS])
        return dist.logp(torch.as_tensor(actions, device=self.device)).float().cpu().numpy()

    @torch.inference_mode()
    def compute_values(
        self,
        obs: np.ndarray,
        *,
        state: Sequence[np.ndarray] | None = None,
        prev_actions: np.ndarray | None = None,
        prev_rewards: np.ndarray | None = None,
    ) -> np.ndarray:
        """Value estimates for a batch of preprocessed observations (actor-critic models).

        Args:
            obs: ``[B, ...]`` preprocessed observations.
            state: a recurrent model's state at them (see :meth:`compute_actions`).
            prev_actions: the actions before them, for recurrent models that read them.
            prev_rewards: the rewards before them, likewise.

        Returns:
            ``[B]`` value estimates.
        """
        obs_t = self._obs_tensor(obs)
        if self.is_recurrent:
            inputs = self._recurrent_inputs(len(obs), state, prev_actions, prev_rewards)
            out = cast("RecurrentModel", self.model).forward_inference(obs_t, *inputs)
        else:
            out = self.model.forward_inference(obs_t)
        return out[SampleBatch.VF_PREDS].cpu().numpy()

    def check_observations(self, obs: Any, batched: bool) -> None:
        """Refuse raw observations whose form does not fit the observation space, before any forward pass.

        The shape, the Dict and Tuple parts, and that they are numbers: values outside the
        space's bounds are the caller's to judge (an env may well return them).

        Args:
            obs: one observation, or a batch with a leading batch axis.
            batched: whether ``obs`` is a batch.

        Raises:
            ObservationError: naming what is wrong and the space's shape.
        """
        check = getattr(self, "_observation_check", None)
        if check is None:  # made on first use: compute_single_action is for users, not the sampling loop
            check = self._observation_check = ObservationCheck(self.observation_space)
        found = check.problem(obs, batched, bounds=False)
        if found is not None:
            if batched:
                raise ObservationError(f"observation {found[0]} of the batch {found[1]}; give a batch with a leading axis")
            raise ObservationError(f"the observation {found[1]}; give one observation, without a batch axis")

    def compute_single_action(
        self,
        obs: Any = None,
        state: list[Any] | None = None,
        *,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: Any = None,
        input_dict: dict[str, Any] | None = None,
        episode: Any = None,
        explore: bool | None = None,
        timestep: int | None = None,
    ) -> tuple[Any, list[Any], dict[str, Any]]:
        """The env action for one raw observation, with RLlib's signature and its ``(action, state_outs, extras)``.

        The observation filter is applied but not updated. The action is the env's:
        unsquashed or clipped as the config's ``normalize_actions`` and ``clip_actions``
        say (RLlib's policy leaves that to ``Algorithm.compute_single_action``; corral's
        policy holds the mapping, so what it returns can go to ``env.step`` as it is).

        Args:
            obs: one observation of ``observation_space``, without a batch axis.
            state: a recurrent model's state (None: an episode's start; :meth:`get_initial_state`);
                a stateless model's is None or ``[]``.
            prev_action: the previous action, for recurrent models that read it (``lstm_use_prev_action``).
            prev_reward: the previous reward, likewise.
            info: the env's info dict (RLlib's; corral's models do not read it).
            input_dict: instead of ``obs`` and ``state``: ``{"obs": ..., "state_in_0": ...}``.
            episode: the episode acted in (RLlib's; corral's explorations do not read it).
            explore: explore or act deterministically; None means ``config.explore``.
            timestep: the timestep exploration schedules read; None means :attr:`global_timestep`.

        Returns:
            ``(action, state_out, extras)``: the env action (an ``int`` for Discrete spaces, a numpy
            array otherwise), the state after it (``[]`` without memory), and the extra outputs for it
            (``action_dist_inputs``, ``action_logp``, ``action_prob``, ``vf_preds`` as the policy has them).

        Raises:
            ConfigError: ``state`` is not empty for a stateless model, or ``input_dict`` comes with ``obs``
                or without ``"obs"``.
            ObservationError: ``obs`` does not fit the observation space (see :meth:`check_observations`).
        """
        policy = cast("Policy", self)  # single_action takes the whole policy, which this part is of
        action, state_out, extras = single_action(
            policy, obs, state, prev_action=prev_action, prev_reward=prev_reward, input_dict=input_dict, explore=explore,
            timestep=timestep, adapter=self.action_adapter, policy_id=None, caller="Policy.compute_single_action",
        )  # fmt: skip
        return action, state_out, extras

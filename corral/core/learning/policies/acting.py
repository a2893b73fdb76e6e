"""A policy's acting: raw observations to model inputs, and batches of them to actions, values and likelihoods.

What env runners and users call on a :class:`~corral.core.learning.policy.Policy`,
every forward pass under ``torch.inference_mode()``; RLlib's
``compute_single_action`` for one raw observation is here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from corral.core.common.sample_batch import SampleBatch
from corral.core.common.spaces import ObservationCheck
from corral.core.learning.acting import single_action
from corral.core.learning.policies.part import PolicyPart
from corral.core.networks.action_masking import LEGAL_ACTIONS
from corral.errors import ObservationError

if TYPE_CHECKING:  # the class this part makes up with the others
    from corral.core.learning.policy import Policy


class Acting(PolicyPart):
    """What a policy does with observations; part of :class:`~corral.core.learning.policy.Policy`."""

    def preprocess(self, raw_obs: Any, update_filter: bool = False) -> np.ndarray:
        """Raw observations (a batch) to model inputs, through the observation filter.

        Args:
            raw_obs: a batch of observations as a vector env returns them (an array
                with a leading batch axis, or dicts/tuples of such arrays for Dict and
                Tuple spaces).
            update_filter: fold the batch into the observation filter's running
                statistics first; True only for observations that become training samples.

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

    @torch.inference_mode()
    def compute_actions(
        self, obs: np.ndarray, explore: bool | None = None, timestep: int | None = None
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions (in the policy's action space) and extras for a batch of preprocessed observations.

        Args:
            obs: ``[B, ...]`` observations from :meth:`preprocess`.
            explore: explore (the model's ``forward_exploration``) or act deterministically
                (``forward_inference``); None means ``config.explore``.
            timestep: the timestep the exploration's schedules read; None means
                ``self.global_timestep``.

        Returns:
            ``(actions, extras)``: ``[B, ...]`` actions in the policy's action space
            (:attr:`action_adapter` maps them to the env's), and the
            :meth:`extra_action_out` columns, all as numpy arrays on the CPU.
        """
        explore = self.config.explore if explore is None else explore
        obs_t = torch.from_numpy(obs).to(self.device)
        model_out = self.model.forward_exploration(obs_t) if explore else self.model.forward_inference(obs_t)
        dist = self.dist_class(model_out[SampleBatch.ACTION_DIST_INPUTS])
        t = self.global_timestep if timestep is None else timestep
        self.exploration.action_mask = model_out.get(LEGAL_ACTIONS)  # set by an ActionMaskedModel
        actions = self.exploration.get_exploration_action(dist, t, explore)
        extras = self.extra_action_out(model_out, dist, actions)
        return actions.cpu().numpy(), {k: v.cpu().numpy() for k, v in extras.items()}

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
    def compute_log_likelihoods(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Log-likelihoods of ``actions`` under the policy's exploring action distribution (off-policy estimation weighs by them).

        Args:
            obs: ``[B, ...]`` preprocessed observations.
            actions: ``[B, ...]`` actions in the policy's action space.

        Returns:
            ``[B]`` float32 log-likelihoods under the distribution :meth:`compute_actions` samples from
            when it explores (an exploration that acts otherwise, such as epsilon-greedy, is not in them).
        """
        obs_t = torch.from_numpy(obs).to(self.device)
        dist = self.dist_class(self.model.forward_exploration(obs_t)[SampleBatch.ACTION_DIST_INPUTS])
        return dist.logp(torch.as_tensor(actions, device=self.device)).float().cpu().numpy()

    @torch.inference_mode()
    def compute_values(self, obs: np.ndarray) -> np.ndarray:
        """Value estimates for a batch of preprocessed observations (actor-critic models)."""
        return self.model.forward_inference(torch.from_numpy(obs).to(self.device))[SampleBatch.VF_PREDS].cpu().numpy()

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
            state: RNN state; corral's models are stateless, so only None or ``[]``.
            prev_action: the previous action (RLlib's; corral's models do not read it).
            prev_reward: the previous reward (RLlib's; corral's models do not read it).
            info: the env's info dict (RLlib's; corral's models do not read it).
            input_dict: instead of ``obs`` and ``state``: ``{"obs": ..., "state_in_0": ...}``.
            episode: the episode acted in (RLlib's; corral's explorations do not read it).
            explore: explore or act deterministically; None means ``config.explore``.
            timestep: the timestep exploration schedules read; None means :attr:`global_timestep`.

        Returns:
            ``(action, [], extras)``: the env action (an ``int`` for Discrete spaces, a numpy
            array otherwise), no RNN state, and the extra outputs for it
            (``action_dist_inputs``, ``action_logp``, ``action_prob``, ``vf_preds`` as the policy has them).

        Raises:
            ConfigError: ``state`` is not empty, or ``input_dict`` comes with ``obs`` or without ``"obs"``.
            ObservationError: ``obs`` does not fit the observation space (see :meth:`check_observations`).
        """
        policy = cast("Policy", self)  # single_action takes the whole policy, which this part is of
        action, extras = single_action(
            policy, obs, state, prev_action=prev_action, prev_reward=prev_reward, input_dict=input_dict, explore=explore,
            timestep=timestep, adapter=self.action_adapter, policy_id=None, caller="Policy.compute_single_action",
        )  # fmt: skip
        return action, [], extras

"""Asking a policy for actions outside sampling, with RLlib's signatures.

``Algorithm.compute_single_action``, ``Algorithm.compute_actions`` and
``Policy.compute_single_action`` take RLlib's arguments in RLlib's order:
the observation, then the RNN ``state``, then everything else by keyword.
Putting ``state`` second matters: ``compute_single_action(obs, False)`` written
for an older signature must not be read as ``explore=False``. A recurrent
policy (``model.use_lstm``) acts from the ``state`` given (None: an episode's
start) with ``prev_action`` and ``prev_reward``, and returns the next state;
for a stateless one a non-empty ``state`` is an error that says so, and
``prev_action``, ``prev_reward``, ``info`` and ``episode(s)`` are accepted, as
RLlib's models that do not ask for them ignore them.

The sampling loop does not come here: it calls :meth:`Policy.compute_actions`
on whole vectors of preprocessed observations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from corral.core.common.actions import ActionAdapter, zero_actions
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, STATE_IN_PREFIX, STATE_OUT_PREFIX, SampleBatch, state_columns
from corral.core.common.spaces import add_batch_dim, stack_observations
from corral.errors import ConfigError

if TYPE_CHECKING:  # the policy module imports this one
    from corral.core.learning.policy import Policy

ACTION_PROB = "action_prob"
"""the probability of the action taken (``exp(action_logp)``), among the extras ``full_fetch=True`` returns, as RLlib's"""


def check_stateless(policy: Policy, state: Any, policy_id: str | None, caller: str) -> None:
    """Refuse RNN state for a stateless model: None and an empty list are the only states it has.

    Args:
        policy: the policy asked (a recurrent one takes any state).
        state: what the caller passed as ``state``.
        policy_id: the policy asked, for the message (None: a policy called directly).
        caller: the method called, for the message.

    Raises:
        ConfigError: ``state`` holds something.
    """
    if state is None or policy.is_recurrent:
        return
    states = state.values() if isinstance(state, dict) else [state]  # compute_actions: {agent_id: [state, ...]}
    if all(isinstance(s, (list, tuple)) and len(s) == 0 for s in states):
        return
    raise ConfigError(
        f"{caller}: state={_short(state)} is RNN state, but {_named(policy_id)} has a stateless model (model.use_lstm "
        "gives one memory); pass state=None. The second positional argument is the state, as in RLlib: give explore "
        "and the other options by keyword, e.g. compute_single_action(obs, explore=False)"
    )


def single_action(
    policy: Policy,
    observation: Any,
    state: Any,
    *,
    prev_action: Any,
    prev_reward: Any,
    input_dict: Mapping[str, Any] | None,
    explore: bool | None,
    timestep: int | None,
    adapter: ActionAdapter,
    policy_id: str | None,
    caller: str,
) -> tuple[Any, list[np.ndarray], dict[str, Any]]:
    """One observation's env action, the next RNN state and its extras: what every ``compute_single_action`` does.

    Args:
        policy: the policy that acts.
        observation: one raw observation, without a batch axis (None if ``input_dict`` holds it).
        state: a recurrent policy's state, one array per part without a batch axis (None: an
            episode's start); a stateless policy's must be empty (see :func:`check_stateless`).
        prev_action: the previous action in the policy's action space, for recurrent models that
            read it (None: zeros, as at an episode's start).
        prev_reward: the previous reward, likewise.
        input_dict: RLlib's alternative to ``observation``: ``{"obs": ..., "state_in_0": ..., "prev_actions": ...}``.
        explore: explore, or act deterministically; None means the policy's ``config.explore``.
        timestep: the timestep exploration schedules read; None means the policy's ``global_timestep``.
        adapter: maps the policy's actions to the env's (unsquashed or clipped as asked).
        policy_id: the policy's id, for messages (None: a policy called directly).
        caller: the method called, for messages.

    Returns:
        ``(action, state_out, extras)``: the env action (an ``int`` for Discrete spaces), the
        state after it (``[]`` without memory) and the policy's extra outputs for it
        (``action_dist_inputs``, ``action_logp``, ``action_prob``, ``vf_preds`` where the policy
        has them), without a batch axis.

    Raises:
        ConfigError: both ``input_dict`` and ``observation`` (or its companions) are given,
            neither is, or ``state`` is not empty.
        ObservationError: the observation does not fit the policy's observation space.
    """
    if input_dict is not None:
        if observation is not None or state is not None or prev_action is not None or prev_reward is not None:
            raise ConfigError(f"{caller}: give either input_dict or the observation (with state, prev_action, prev_reward)")
        if SampleBatch.OBS not in input_dict:
            raise ConfigError(f"{caller}: input_dict needs the observation under 'obs'; it has {sorted(map(str, input_dict))}")
        observation = input_dict[SampleBatch.OBS]
        state = [input_dict[key] for key in state_columns(input_dict, STATE_IN_PREFIX)] or None
        prev_action = input_dict.get(SampleBatch.PREV_ACTIONS)
        prev_reward = input_dict.get(SampleBatch.PREV_REWARDS)
    elif observation is None:
        raise ConfigError(f"{caller} needs an observation (or input_dict={{'obs': observation}})")
    check_stateless(policy, state, policy_id, caller)
    policy.check_observations(observation, batched=False)
    recurrent = _one_row_inputs(policy, state, prev_action, prev_reward)
    actions, extras = _act(policy, add_batch_dim(policy.observation_space, observation), explore, timestep, recurrent)
    env_action = adapter.rows(adapter(actions))[0]
    state_out = _pop_state(extras)
    return env_action, [part[0] for part in state_out], {key: value[0] for key, value in extras.items()}


def _one_row_inputs(policy: Policy, state: Any, prev_action: Any, prev_reward: Any) -> dict[str, Any]:
    """A recurrent policy's inputs for one row (a batch axis added); nothing for a stateless policy."""
    if not policy.is_recurrent:
        return {}
    zero = zero_actions(policy.action_adapter.policy_space, 1)
    return {
        "state": None if state is None else [np.asarray(part, dtype=np.float32)[None] for part in state],
        SampleBatch.PREV_ACTIONS: None if prev_action is None else np.asarray(prev_action, dtype=zero.dtype).reshape(zero.shape),
        SampleBatch.PREV_REWARDS: None if prev_reward is None else np.full(1, prev_reward, dtype=np.float32),
    }


def _pop_state(extras: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The ``state_out_k`` arrays of a recurrent policy's extras, taken out of them, in order."""
    return [extras.pop(key) for key in state_columns(list(extras), STATE_OUT_PREFIX)]


def actions_of(
    policy: Policy,
    observations: Any,
    state: Any,
    *,
    prev_action: Any = None,
    prev_reward: Any = None,
    explore: bool | None,
    timestep: int | None,
    adapter: ActionAdapter,
    policy_id: str,
) -> tuple[Any, Any, dict[str, np.ndarray]]:
    """Several observations' env actions, their next states and their extras: ``Algorithm.compute_actions``.

    Args:
        policy: the policy that acts for every observation.
        observations: ``{agent_id: observation}``, or a batch with a leading axis (with a Dict
            observation space, a dict is the batch's parts, not agents).
        state: RLlib's ``{agent_id: [state, ...]}`` (for a batch, a list of ``[B, ...]`` arrays); a recurrent
            policy starts an episode where it is None (or an agent is missing), a stateless one's lists must be empty.
        prev_action: a recurrent policy's previous actions: ``{agent_id: action}``, or a batch.
        prev_reward: its previous rewards, likewise.
        explore: explore, or act deterministically; None means the policy's ``config.explore``.
        timestep: the timestep exploration schedules read; None means the policy's ``global_timestep``.
        adapter: maps the policy's actions to the env's (unsquashed or clipped as asked).
        policy_id: the policy's id, for messages.

    Returns:
        ``(actions, states, extras)``: ``{agent_id: action}`` and ``{agent_id: [state, ...]}`` for a
        dict of agents, else a numpy array of env actions and a list of ``[B, ...]`` state arrays
        (empty lists without memory); the extras batched, a row per observation in the order given.

    Raises:
        ConfigError: ``state`` is not empty.
        ObservationError: an observation does not fit the policy's observation space.
    """
    check_stateless(policy, state, policy_id, "compute_actions")
    if isinstance(observations, dict) and not isinstance(policy.observation_space, gym.spaces.Dict):
        if not observations:
            return {}, {}, {}
        for obs in observations.values():
            policy.check_observations(obs, batched=False)
        agents = list(observations)
        recurrent = _agents_inputs(policy, agents, state, prev_action, prev_reward)
        batch = stack_observations(list(observations.values()), policy.observation_space)
        actions, extras = _act(policy, batch, explore, timestep, recurrent)
        env_actions = adapter.rows(adapter(actions))  # Discrete as Python ints, as compute_single_action gives
        state_out = _pop_state(extras)
        states = {agent: [part[row] for part in state_out] for row, agent in enumerate(agents)}
        return dict(zip(agents, env_actions, strict=True)), states, extras
    policy.check_observations(observations, batched=True)
    recurrent = (
        {"state": state or None, SampleBatch.PREV_ACTIONS: prev_action, SampleBatch.PREV_REWARDS: prev_reward}
        if policy.is_recurrent
        else {}
    )
    actions, extras = _act(policy, observations, explore, timestep, recurrent)
    return adapter(actions), _pop_state(extras), extras


def _agents_inputs(policy: Policy, agents: list[Any], state: Any, prev_action: Any, prev_reward: Any) -> dict[str, Any]:
    """A recurrent policy's inputs for agents acting together, stacked in their order (an episode's start where not given)."""
    if not policy.is_recurrent:
        return {}
    initial = policy.get_initial_state()
    given = state or {}
    parts = [np.stack([np.asarray(given[a][k] if given.get(a) else init) for a in agents]) for k, init in enumerate(initial)]
    zero = zero_actions(policy.action_adapter.policy_space, 1)[0]
    prev_action = prev_action or {}
    prev_reward = prev_reward or {}
    return {
        "state": parts,
        SampleBatch.PREV_ACTIONS: np.stack([np.asarray(prev_action.get(a, zero), dtype=zero.dtype) for a in agents]),
        SampleBatch.PREV_REWARDS: np.array([prev_reward.get(a, 0.0) for a in agents], dtype=np.float32),
    }


def action_adapter(policy: Policy, unsquash: bool | None, clip: bool | None) -> ActionAdapter:
    """How to map the policy's actions to the env's: the config's way, or unsquashed and clipped as the caller says.

    RLlib's ``unsquash_action`` and ``clip_action``: None takes the config's
    ``normalize_actions`` and ``clip_actions``. Unsquashing maps [-1, 1] onto
    the Box's bounds; clipping clamps to them and applies only when not unsquashing.

    Args:
        policy: the policy that acts.
        unsquash: unsquash the actions; None means ``config.normalize_actions``.
        clip: clip the actions; None means ``config.clip_actions``.

    Returns:
        The policy's own adapter when nothing differs from its config, else a new one.
    """
    config = policy.config
    unsquash = config.normalize_actions if unsquash is None else unsquash
    clip = config.clip_actions if clip is None else clip
    if (unsquash, clip) == (config.normalize_actions, config.clip_actions):
        return policy.action_adapter
    return ActionAdapter(policy.action_space, unsquash, clip)


def _act(
    policy: Policy, raw_batch: Any, explore: bool | None, timestep: int | None, recurrent: dict[str, Any] | None = None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The policy's actions (in its own space) and extras for a batch of raw observations; the filter is not updated."""
    obs = policy.preprocess(raw_batch)
    actions, extras = policy.compute_actions(obs, explore=explore, timestep=timestep, **(recurrent or {}))
    if SampleBatch.ACTION_LOGP in extras:
        extras[ACTION_PROB] = np.exp(extras[SampleBatch.ACTION_LOGP])
    return actions, extras


def _named(policy_id: str | None) -> str:
    return "the policy" if policy_id is None else f"policy {policy_id!r}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ActionComputation:
    """``Algorithm.compute_single_action`` and ``Algorithm.compute_actions``: asking a trained algorithm for actions.

    A base of :class:`~corral.core.training.algorithm.Algorithm`, which gives it ``_policy``.
    """

    if TYPE_CHECKING:  # Algorithm's

        def _policy(self, policy_id: str) -> Policy:
            """The policy with this id; an unknown id is a ConfigError."""

    def compute_single_action(
        self,
        observation: Any = None,
        state: list[Any] | None = None,
        *,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: Any = None,
        input_dict: dict[str, Any] | None = None,
        episode: Any = None,
        explore: bool | None = None,
        timestep: int | None = None,
        unsquash_action: bool | None = None,
        clip_action: bool | None = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
    ) -> Any:
        """The env action for one raw observation, with RLlib's signature (see :mod:`corral.core.learning.acting`).

        Args:
            observation: one observation as the env returns it, without a batch axis.
            state: a recurrent policy's state (``get_initial_state()`` at an episode's start, then the
                state each call returns; None: an episode's start); a stateless policy's is None or ``[]``.
            prev_action: the previous action, for recurrent models that read it (``lstm_use_prev_action``).
            prev_reward: the previous reward, for recurrent models that read it.
            info: the env's info dict (corral's models do not read it).
            input_dict: instead of ``observation`` and ``state``: ``{"obs": ..., "state_in_0": ...}``.
            episode: the episode acted in (corral's explorations do not read it).
            explore: explore or act deterministically; None means ``config.explore``.
            timestep: the timestep exploration schedules read; None means the policy's.
            unsquash_action: map a Box action from [-1, 1] onto its bounds; None means ``normalize_actions``.
            clip_action: clip a Box action to its bounds when not unsquashing; None means ``clip_actions``.
            policy_id: the policy that acts.
            full_fetch: return ``(action, state_out, extras)`` instead of the action alone.

        Returns:
            The action in the env's action space (an ``int`` for Discrete spaces); with
            ``full_fetch`` or a non-empty ``state``, as RLlib: ``(action, state_out, extras)``, the
            state after the action (``[]`` without memory) and the extras ``action_dist_inputs``,
            ``action_logp``, ``action_prob`` and ``vf_preds`` where the policy has them.

        Raises:
            ConfigError: there is no policy ``policy_id``, ``state`` is not empty, or
                ``input_dict`` comes with ``observation`` or without ``"obs"``.
            ObservationError: the observation does not fit the policy's observation space.
        """
        policy = self._policy(policy_id)
        action, state_out, extras = single_action(
            policy, observation, state, prev_action=prev_action, prev_reward=prev_reward, input_dict=input_dict,
            explore=explore, timestep=timestep, adapter=action_adapter(policy, unsquash_action, clip_action),
            policy_id=policy_id, caller="compute_single_action",
        )  # fmt: skip
        return (action, state_out, extras) if full_fetch or state else action  # RLlib's test: a non-empty state

    def compute_actions(
        self,
        observations: Any,
        state: dict[Any, list[Any]] | None = None,
        *,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: Any = None,
        episodes: Any = None,
        explore: bool | None = None,
        timestep: int | None = None,
        unsquash_actions: bool | None = None,
        clip_actions: bool | None = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
    ) -> Any:
        """Env actions for several observations, in one forward pass, with RLlib's signature.

        Args:
            observations: ``{agent_id: observation}``, or a batch of observations with a
                leading batch axis, as a vector env returns them. With a Dict observation
                space a dict is taken as a batch, not as agents.
            state: RNN state by agent, ``{agent_id: [...]}`` (a list of ``[B, ...]`` arrays for a batch);
                a stateless policy's lists are empty.
            prev_action: the previous actions, for recurrent models that read them.
            prev_reward: the previous rewards, likewise.
            info: the env's info dicts (corral's models do not read them).
            episodes: the episodes acted in (corral's explorations do not read them).
            explore: explore or act deterministically; None means ``config.explore``.
            timestep: the timestep exploration schedules read; None means the policy's.
            unsquash_actions: map Box actions from [-1, 1] onto their bounds; None means ``normalize_actions``.
            clip_actions: clip Box actions to their bounds when not unsquashing; None means ``clip_actions``.
            policy_id: the policy that acts, for every observation.
            full_fetch: return ``(actions, states, extras)`` instead of the actions alone (as a ``state`` does).

        Returns:
            ``{agent_id: action}`` for a dict of agents, else a numpy array of env actions
            with the batch's leading axis. With ``full_fetch`` or a ``state``, as RLlib:
            ``(actions, states, extras)``, the states ``{agent_id: []}`` (``[]`` for a batch)
            and the extras batched, a row per observation in the order given; a recurrent policy's
            states are the next ones.

        Raises:
            ConfigError: this algorithm has no policy ``policy_id``, or ``state`` is not empty for a stateless policy.
            ObservationError: an observation does not fit the policy's observation space.
        """
        policy = self._policy(policy_id)
        actions, states, extras = actions_of(
            policy, observations, state, prev_action=prev_action, prev_reward=prev_reward, explore=explore, timestep=timestep,
            adapter=action_adapter(policy, unsquash_actions, clip_actions), policy_id=policy_id,
        )  # fmt: skip
        return (actions, states, extras) if full_fetch or state is not None else actions

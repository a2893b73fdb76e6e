"""Policies written by hand to RLlib's ``Policy`` API: heuristics, scripted opponents, and what they declare.

RLlib's scripts write a heuristic as a subclass of ``Policy`` that overrides
``compute_actions(obs_batch, state_batches=None, prev_action_batch=None,
prev_reward_batch=None, ...)`` and returns ``(actions, state_outs, extras)``.
Corral's own policies act through ``compute_actions(obs, explore, timestep, *,
state, ...)`` and return ``(actions, extras)``. A subclass whose override takes
RLlib's ``state_batches`` second follows RLlib's protocol
(:func:`follows_rllib_protocol`), and env runners call it that way
(:func:`rllib_protocol_actions`):

- ``obs_batch``: the observations as the env gave them, stacked (the policy's
  ``observation_space`` is the env's, so a heuristic reads what it declares);
- ``state_batches``: each agent's state, from ``get_initial_state()`` at the
  start of each of its episodes (asked anew each time: a heuristic may draw
  it), then the ``state_outs`` it returned; ``[]`` where it has none;
- ``prev_action_batch``, ``prev_reward_batch``, ``explore`` and ``timestep``,
  as RLlib passes them.

A subclass of one of corral's learning policies may override RLlib's
``loss(model, dist_class, train_batch)`` where its policy computes its update
through one (PPO's), and RLlib's per-trajectory ``postprocess_trajectory(
sample_batch, other_agent_batches, episode)`` (env runners then call it per
agent and episode). Where corral cannot honour an override it is refused once
built (:func:`check_rllib_overrides`), naming what does that work in corral:
a silent difference would train something else.

Such a policy may also declare ``view_requirements`` (:class:`ViewRequirement`)
as RLlib's do. Corral's samplers provide a fixed set of views, so each declared
one is checked once the policy is built (:func:`check_view_requirements`): one
that corral provides is accepted, any other is an error that says which are.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.learning.policy import Policy


class ViewRequirement:
    """RLlib's declaration of a column a policy reads: which data column, shifted by how many steps.

    Args:
        data_col: the column the view is taken from; None: the view's own name.
        space: the space of one row of it.
        shift: the step it reads relative to the current one (``-1``: the previous); RLlib's ranges
            (``"-50:-1"``, a list) are refused when checked, since corral's samplers keep no such windows.
        index: RLlib's absolute index into the column; corral's samplers provide none.
        batch_repeat_value: rows per repeated value (RLlib's, for state columns; recorded only).
        used_for_compute_actions: whether acting reads it.
        used_for_training: whether learning reads it.
        shift_from: RLlib's start of a shift range.
        shift_to: RLlib's end of a shift range.
    """

    def __init__(
        self,
        data_col: str | None = None,
        space: gym.Space[Any] | None = None,
        shift: int | str | list[int] = 0,
        index: int | None = None,
        batch_repeat_value: int = 1,
        used_for_compute_actions: bool = True,
        used_for_training: bool = True,
        shift_from: int | None = None,
        shift_to: int | None = None,
    ) -> None:
        self.data_col = data_col
        self.space = space if space is not None else gym.spaces.Box(float("-inf"), float("inf"), shape=())
        self.shift = shift
        self.index = index
        self.batch_repeat_value = batch_repeat_value
        self.used_for_compute_actions = used_for_compute_actions
        self.used_for_training = used_for_training
        self.shift_from = shift_from
        self.shift_to = shift_to

    def __repr__(self) -> str:
        return f"ViewRequirement(data_col={self.data_col!r}, shift={self.shift!r})"


# What corral's samplers provide: a view's name -> (the column it is taken from, the shift).
_PROVIDED = {
    SampleBatch.OBS: (SampleBatch.OBS, 0),
    SampleBatch.NEXT_OBS: (SampleBatch.OBS, 1),
    SampleBatch.ACTIONS: (SampleBatch.ACTIONS, 0),
    SampleBatch.PREV_ACTIONS: (SampleBatch.ACTIONS, -1),
    SampleBatch.REWARDS: (SampleBatch.REWARDS, 0),
    SampleBatch.PREV_REWARDS: (SampleBatch.REWARDS, -1),
    SampleBatch.TERMINATEDS: (SampleBatch.TERMINATEDS, 0),
    SampleBatch.TRUNCATEDS: (SampleBatch.TRUNCATEDS, 0),
    SampleBatch.INFOS: (SampleBatch.INFOS, 0),
    SampleBatch.EPS_ID: (SampleBatch.EPS_ID, 0),
    SampleBatch.T: (SampleBatch.T, 0),
}


def default_view_requirements() -> dict[str, ViewRequirement]:
    """The views corral's samplers provide every policy, under RLlib's names (``state_in_k`` come with a state)."""
    return {name: ViewRequirement(column, shift=shift) for name, (column, shift) in _PROVIDED.items()}


def check_view_requirements(policy: Policy) -> None:
    """Refuse a declared view that corral's samplers do not provide, naming those they do.

    Provided are the columns of :func:`default_view_requirements`, and a state's
    ``state_in_k`` taken from ``state_out_k`` one step before.

    Args:
        policy: the built policy.

    Raises:
        ConfigError: a view is taken from another column, at another shift, by index or over a range.
    """
    for name, view in getattr(policy, "view_requirements", {}).items():
        column = view.data_col or name
        if name.startswith("state_in_"):
            expected: tuple[str, int] | None = ("state_out_" + name.removeprefix("state_in_"), -1)
        else:
            expected = _PROVIDED.get(name)
        if expected == (column, view.shift) and view.index is None:
            continue
        provided = ", ".join(f"{n} ({c}, shift {s})" for n, (c, s) in _PROVIDED.items())
        raise ConfigError(
            f"{type(policy).__name__}.view_requirements[{name!r}] asks for {column!r} at shift {view.shift!r}"
            f"{'' if view.index is None else f', index {view.index}'}: corral's samplers provide {provided}, and "
            "state_in_k from state_out_k at shift -1 (a recurrent model's longer windows: model={'use_attention': True})"
        )


def check_rllib_overrides(policy: Policy) -> None:
    """Refuse a subclass of a corral policy that overrides RLlib's ``loss`` where its policy has no such loss, or
    postprocesses in RLlib's per-trajectory form with a recurrent model.

    RLlib's ``Policy.loss(model, dist_class, train_batch)`` is called in place
    of the update's own loss where the policy class defines one in RLlib's form
    (PPO's); elsewhere an override would be ignored. The per-trajectory
    ``postprocess_trajectory(sample_batch, other_agent_batches, episode)`` is
    called as RLlib calls it (see :mod:`corral.core.sampling.trajectories`), for a
    feed-forward model: a recurrent one learns on sequences cut from whole fragments.

    Args:
        policy: the built policy.

    Raises:
        ConfigError: naming the override and what does its work in corral, or an override beside a
            ``learner_class`` (both would replace the update's loss).
    """
    policy_class: Any = type(policy)
    if overrides_rllib_loss(policy) and not _has_rllib_loss(policy_class):
        raise ConfigError(
            f"{policy_class.__name__} overrides RLlib's Policy.loss(model, dist_class, train_batch), which "
            f"{policy_class.__mro__[1].__name__} does not compute its update with (PPO's policy does): give the loss "
            "to a Learner (learner_class= a TorchLearner subclass overriding compute_loss_for_module), or add a term "
            "with a custom model's custom_loss(policy_loss, loss_inputs)"
        )
    if overrides_rllib_loss(policy) and policy.learner is not None:
        raise ConfigError(
            f"{policy_class.__name__} overrides RLlib's Policy.loss(model, dist_class, train_batch) and the config "
            f"gives a learner_class ({type(policy.learner).__name__}): each replaces the update's loss; keep one"
        )
    if postprocesses_trajectories(policy) and not follows_rllib_protocol(policy) and policy.is_recurrent:
        raise ConfigError(
            f"{policy_class.__name__} overrides RLlib's postprocess_trajectory(sample_batch, other_agent_batches, "
            "episode) and has a recurrent model, which learns on sequences cut from whole fragments: use a "
            "feed-forward model, or rewrite each trajectory in a callbacks class's on_postprocess_trajectory"
        )


def overrides_rllib_loss(policy: object) -> bool:
    """Whether a policy's class overrides RLlib's ``loss(model, dist_class, train_batch)``.

    Args:
        policy: the policy.
    """
    policy_class: Any = type(policy)  # any class: the cache keys on it
    return _overrides_loss(policy_class)


@functools.cache
def _overrides_loss(policy_class: Any) -> bool:
    if not {"dist_class", "train_batch"} & set(_parameters(policy_class, "loss")):
        return False
    return not getattr(policy_class.loss, _UPDATE_LOSS, False)


_UPDATE_LOSS = "_computes_the_update"


def update_loss(method: Any) -> Any:
    """Mark a policy's ``loss(model, dist_class, train_batch)``, in RLlib's form, as the loss its update computes
    when a subclass overrides it (and never otherwise: the update keeps its faster path).

    Args:
        method: the policy class's ``loss``.

    Returns:
        The method, marked.
    """
    setattr(method, _UPDATE_LOSS, True)
    return method


def _has_rllib_loss(policy_class: Any) -> bool:
    return any(getattr(vars(klass).get("loss"), _UPDATE_LOSS, False) for klass in policy_class.__mro__)


def postprocesses_trajectories(policy: object) -> bool:
    """Whether a policy postprocesses in RLlib's per-trajectory form, ``postprocess_trajectory(sample_batch,
    other_agent_batches, episode)``, rather than a whole fragment with ``(fragment, bootstrap_obs)``.

    Args:
        policy: the policy.
    """
    policy_class: Any = type(policy)  # any class: the cache keys on it
    return "other_agent_batches" in _parameters(policy_class, "postprocess_trajectory")


def follows_rllib_protocol(policy: object) -> bool:
    """Whether a policy acts by RLlib's ``compute_actions(obs_batch, state_batches, ...)`` (see the module).

    Args:
        policy: the policy.
    """
    policy_class: Any = type(policy)  # any class: the cache keys on it
    parameters = _parameters(policy_class, "compute_actions")
    return len(parameters) > 2 and parameters[2] == "state_batches"


@functools.cache
def _parameters(policy_class: Any, name: str) -> tuple[str, ...]:
    """The parameter names of a policy class's method, ``self`` first (none where it has no such method), read once."""
    method = getattr(policy_class, name, None)
    return tuple(inspect.signature(method).parameters) if callable(method) else ()


def carries_state(policy: Policy) -> bool:
    """Whether a runner carries a policy's state from one step to the next: a recurrent model's, or the state an
    RLlib-protocol policy may keep (its ``get_initial_state()``).

    Args:
        policy: the policy.
    """
    return bool(policy.is_recurrent) or follows_rllib_protocol(policy)


def stateful_actions(
    policy: Policy, obs: np.ndarray, raw: Any, inputs: dict[str, Any], explore: bool
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One step of a policy that :func:`carries_state`: corral's ``compute_actions`` on the preprocessed observations,
    or RLlib's protocol on the env's own.

    Args:
        policy: the policy.
        obs: the observations, preprocessed.
        raw: the observations as the env gave them, stacked.
        inputs: the carried ``state``, ``prev_actions`` and ``prev_rewards``.
        explore: whether to explore.

    Returns:
        ``(actions, extras)``, as ``Policy.compute_actions`` returns them.
    """
    if follows_rllib_protocol(policy):
        return rllib_protocol_actions(policy, raw, inputs, explore, policy.global_timestep)
    return policy.compute_actions(obs, explore=explore, **inputs)


def rllib_protocol_actions(
    policy: Policy, obs_batch: Any, inputs: dict[str, Any], explore: bool, timestep: int | None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Act with a policy that follows RLlib's protocol; returns what corral's ``compute_actions`` returns.

    Args:
        policy: the policy.
        obs_batch: the observations as the env gave them, stacked.
        inputs: the agents' ``state`` (a list of ``[B, ...]`` arrays), ``prev_actions`` and ``prev_rewards``.
        explore: whether to explore.
        timestep: the sampler's timestep.

    Returns:
        ``(actions, extras)``: the actions as an array, and the policy's extras with its ``state_outs``
        as ``state_out_k`` columns, each a ``[B, ...]`` array.

    Raises:
        ValueError: the policy returned another number of actions, or an extra or state without a row each.
    """
    rows = len(inputs[SampleBatch.PREV_REWARDS])
    rllib_policy: Any = policy  # its compute_actions has RLlib's signature (follows_rllib_protocol), not corral's
    actions, state_outs, extras = rllib_policy.compute_actions(
        obs_batch, inputs["state"], inputs[SampleBatch.PREV_ACTIONS], inputs[SampleBatch.PREV_REWARDS],
        explore=explore, timestep=timestep,
    )  # fmt: skip
    columns = {f"state_out_{k}": part for k, part in enumerate(state_outs or [])}
    columns.update(extras or {})
    as_arrays = {key: np.asarray(value) for key, value in [(SampleBatch.ACTIONS, actions), *columns.items()]}
    for key, value in as_arrays.items():
        if value.ndim == 0 or len(value) != rows:
            raise ValueError(
                f"{type(policy).__name__}.compute_actions returned {key} with shape {value.shape} for {rows} observations: "
                "RLlib's protocol returns (actions, state_outs, extras), each with a row per observation"
            )
    return as_arrays.pop(SampleBatch.ACTIONS), as_arrays

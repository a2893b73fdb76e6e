"""The policy's outputs for the actions an application logged, computed for a poll's steps in one forward pass.

A ``PolicyClient`` that acts itself (``inference_mode="local"``) reports an
episode's steps together. The external env runner handles an episode's steps
one after another (a step's row closes with the next step's observation), so
acting on them as they come would be one forward pass per row, which a
profile of a server with four such clients showed as its largest cost. The
actions are the application's, so the pass only gives each row's extras
(value predictions, distribution inputs, log-likelihoods); for a feed-forward
policy without an observation filter those are the same for a row alone or
in a batch, and :class:`LoggedAhead` computes them once for the steps ahead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.core.common.spaces import stack_observations
from corral.core.environments.external_env import ExternalStep


@dataclasses.dataclass(frozen=True)
class LoggedAhead:
    """The policy's outputs for logged steps ahead in the runner's backlog, a row per step.

    Args:
        rows: each step's row, by the step's ``id()`` (the steps stay in the backlog while this is used).
        obs: the preprocessed observations.
        actions: the logged actions, in the policy's form.
        extras: the policy's other outputs, with the logged actions' log-likelihoods (:func:`with_logged_actions`).
    """

    rows: dict[int, int]
    obs: np.ndarray
    actions: np.ndarray
    extras: dict[str, np.ndarray]

    @classmethod
    def forward(cls, policy: Any, backlog: Iterable[ExternalStep], explore: bool, limit: int | None) -> LoggedAhead:
        """One forward pass over the logged steps among the next ``limit`` steps the policy acts on.

        Args:
            policy: the one policy of a single-agent runner; None (several agents) computes nothing.
            backlog: the steps the runner is about to handle, in order.
            explore: whether the runner explores (as it would pass to ``compute_actions``).
            limit: how many trained-on steps the runner records at most in this pass; None: no limit.

        Returns:
            The outputs; :data:`NOTHING_AHEAD` where the policy is recurrent (a row's state comes from the row
            before it), has an observation filter (a batch moves its statistics differently from single rows),
            or fewer than two steps are logged.
        """
        if policy is None or policy.is_recurrent or policy.observation_filter is not None:
            return NOTHING_AHEAD
        logged: list[ExternalStep] = []
        acting = 0
        for step in backlog:
            if limit is not None and acting >= limit:
                break
            if step.dropped is None and not step.ended:  # the runner acts on it (and records it, trained on)
                acting += step.training_enabled
                if step.action is not None:
                    logged.append(step)
        if len(logged) < 2:
            return NOTHING_AHEAD
        obs = policy.preprocess(stack_observations([step.observation for step in logged], policy.observation_space))
        actions, extras = policy.compute_actions(obs, explore=explore)
        taken, logps = [step.action for step in logged], [step.action_logp for step in logged]
        actions, extras = with_logged_actions(policy, list(range(len(logged))), taken, logps, obs, actions, extras, {})
        return cls({id(step): row for row, step in enumerate(logged)}, obs, actions, extras)

    def rows_of(self, steps: list[ExternalStep]) -> list[int] | None:
        """The rows of ``steps``, or None unless every one was computed ahead.

        Args:
            steps: the steps the runner acts on together.

        Returns:
            Their rows in this pass's outputs, in order.
        """
        rows = [self.rows.get(id(step), -1) for step in steps]
        return rows if rows and min(rows) >= 0 else None

    def outputs(self, rows: list[int]) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """The observations, actions and extras of ``rows`` (from :meth:`rows_of`).

        Args:
            rows: rows of this pass.

        Returns:
            ``(obs, actions, extras)``, as ``preprocess``, ``compute_actions`` and :func:`with_logged_actions` would
            give for those steps alone.
        """
        return self.obs[rows], self.actions[rows], {key: value[rows] for key, value in self.extras.items()}


def with_logged_actions(
    policy: Any, rows: list[int], taken: list[Any], logps: list[float | None], obs: np.ndarray, actions: np.ndarray,
    extras: dict[str, np.ndarray], recurrent: dict[str, Any],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:  # fmt: skip
    """The sampled actions with the application's own in their rows, and the log-likelihoods of those beside them.

    An on-policy algorithm weighs a row by the likelihood of the action taken: the one the application gave
    (``action_prob`` or ``action_logp``), else the policy's own.

    Args:
        policy: the policy that acted.
        rows: the rows whose actions the application took itself.
        taken: those actions, as the env takes them.
        logps: the log-likelihood the application gave each, or None.
        obs: the rows' preprocessed observations.
        actions: the actions the policy sampled for every row.
        extras: the policy's other outputs for every row.
        recurrent: a recurrent policy's inputs for every row (its state, previous actions and rewards); else empty.

    Returns:
        ``(actions, extras)``, new arrays where they differ from the ones given.
    """
    actions = actions.copy()
    actions[rows] = policy.action_adapter.policy_actions(taken)
    if SampleBatch.ACTION_LOGP not in extras:
        return actions, extras
    logp = extras[SampleBatch.ACTION_LOGP].copy()
    given = [(row, value) for row, value in zip(rows, logps, strict=True) if value is not None]
    logp[[row for row, _ in given]] = [value for _, value in given]
    unknown = [row for row, value in zip(rows, logps, strict=True) if value is None]
    if unknown:  # a second forward pass only for what the application did not weigh itself
        inputs = {key: _rows(value, unknown) for key, value in recurrent.items()}
        logp[unknown] = policy.compute_log_likelihoods(obs[unknown], actions[unknown], **inputs)
    return actions, {**extras, SampleBatch.ACTION_LOGP: logp}


def _rows(value: Any, rows: list[int]) -> Any:
    """Rows of a recurrent input: an array's, or each state part's."""
    return [part[rows] for part in value] if isinstance(value, list) else value[rows]


NOTHING_AHEAD = LoggedAhead({}, np.empty(0), np.empty(0), {})
"""nothing computed ahead: the runner computes each step's outputs as it acts on it"""

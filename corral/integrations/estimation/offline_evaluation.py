"""Off-policy estimation at each evaluation: recorded episodes read in turn, each estimator run on them."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from corral.core.common.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.errors import ConfigError
from corral.integrations.estimation.estimator import TARGET_LOGP, Episodes, OffPolicyEstimator, make_estimator
from corral.integrations.offline.experience_input import (
    SAMPLER,
    TRANSITION_COLUMNS,
    InputCheck,
    episode_order,
    file_format_of,
    input_files,
    read_experiences,
)

EPISODE_COLUMNS = (SampleBatch.OBS, SampleBatch.ACTIONS, *TRANSITION_COLUMNS, SampleBatch.ACTION_LOGP)
"""what an estimator reads of each recorded row; ``action_logp`` is the behaviour policy's"""


class OffPolicyEvaluation:
    """The estimators of one run and the recorded episodes they estimate on, file after file, round and round.

    Args:
        estimators: by the name results report them under.
        files: ``(path, format)`` of the recorded episodes.
        check: checks each file's rows against the policy and puts actions in its space.
        policy: the target policy.
    """

    def __init__(
        self, estimators: Mapping[str, OffPolicyEstimator], files: list[tuple[Path, str]], check: InputCheck, policy: Any
    ) -> None:
        self.estimators = dict(estimators)
        self.files = files
        self.check = check
        self.policy = policy
        self._next_file = 0
        self._pending: deque[dict[str, np.ndarray]] = deque()

    def run(self, duration: int, unit: str) -> dict[str, dict[str, float]]:
        """Estimate the target policy's value on the next recorded episodes.

        Args:
            duration: how many episodes, or rows (whole episodes, at least this many).
            unit: ``"episodes"`` or ``"timesteps"``.

        Returns:
            Each estimator's estimate (see :func:`~corral.integrations.estimation.estimator.summarize`)
            and training stats, by name.
        """
        taken: list[dict[str, np.ndarray]] = []
        while (len(taken) if unit == "episodes" else sum(len(e[SampleBatch.REWARDS]) for e in taken)) < duration:
            if not self._pending:
                self._read_next_file()
            taken.append(self._pending.popleft())
        rows = {k: np.concatenate([e[k] for e in taken]) for k in EPISODE_COLUMNS}
        rows[TARGET_LOGP] = self.policy.compute_log_likelihoods(rows[SampleBatch.OBS], rows[SampleBatch.ACTIONS])
        episodes = Episodes(rows, np.cumsum([0] + [len(e[SampleBatch.REWARDS]) for e in taken[:-1]]))
        results = {}
        for name, estimator in self.estimators.items():
            stats = estimator.train(episodes)
            results[name] = {**estimator.estimate(episodes), **stats}
        return results

    def _read_next_file(self) -> None:
        for _ in range(len(self.files)):
            path, file_format = self.files[self._next_file]
            self._next_file = (self._next_file + 1) % len(self.files)
            for pid, batch in read_experiences(path, file_format).items():
                rows, ends = episode_order(self.check.check(path, pid, batch))
                bounds = np.flatnonzero(ends) + 1
                self._pending.extend(
                    {k: rows[k][a:b] for k in EPISODE_COLUMNS} for a, b in zip(np.r_[0, bounds[:-1]], bounds, strict=True)
                )
            if self._pending:
                return
        raise ConfigError(
            f"the recorded episodes for off-policy estimation hold no rows: {', '.join(str(p) for p, _ in self.files)}"
        )


def build_off_policy_evaluation(config: Any, policies: Mapping[str, Any]) -> OffPolicyEvaluation | None:
    """The off-policy evaluation ``config.off_policy_estimation_methods`` asks for; None when it names none.

    The episodes are the files ``evaluation_config``'s ``input`` names, else those of
    ``input_``; each file is checked now, before training starts.

    Args:
        config: the algorithm's config.
        policies: the learner's policies (single-agent: ``default_policy`` only).

    Returns:
        The evaluation, or None.

    Raises:
        ConfigError: a multi-agent run, no recorded episodes named, a file that does not
            fit the policy (or lacks ``action_logp``), an estimator that does not fit.
    """
    methods = config.off_policy_estimation_methods
    if not methods:
        return None
    if config.is_multi_agent:
        raise ConfigError("off_policy_estimation_methods estimates one policy's value: it needs a single-agent run")
    source = config.evaluation_config.get("input_", config.evaluation_config.get("input", config.input_))
    specs = [s for s in (source if isinstance(source, Mapping) else [source]) if s != SAMPLER]
    if not specs:
        raise ConfigError(
            "off_policy_estimation_methods estimates on recorded episodes: name them with "
            "evaluation_config={'input': folder or files} or offline_data(input_=...)"
        )
    policy = policies[DEFAULT_POLICY_ID]
    estimators = {name: make_estimator(spec, policy, config.gamma) for name, spec in methods.items()}
    check = InputCheck(policy, EPISODE_COLUMNS, config.actions_in_input_normalized)
    file_format = config.input_config.get("format")
    files = []
    for spec in specs:
        for path in input_files(spec, file_format):
            fmt = file_format_of(path, file_format)
            for pid, batch in read_experiences(path, fmt, head=True).items():
                check.check(path, pid, batch)
            files.append((path, fmt))
    return OffPolicyEvaluation(estimators, files, check, policy)

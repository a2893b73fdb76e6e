"""Evaluation: ``evaluate()``, on its own env runners, in parallel with training when asked.

Episodes on the evaluation runners (or the training ones, when
``evaluation_num_env_runners`` is 0), and the off-policy estimates of the
recorded episodes, reported under ``evaluation``.
"""

from __future__ import annotations

import functools
from typing import Any

from corral.core.common.import_paths import object_path
from corral.core.results import with_rllib_groups
from corral.core.sampling.env_runner import evaluation_span
from corral.core.sampling.env_runner_group import EnvRunnerGroup, EvaluationRound
from corral.core.sampling.metrics import summarize_episodes
from corral.core.sampling.multi_agent_env_runner import make_env_runner
from corral.core.training.part import AlgorithmPart
from corral.errors import ConfigError


class Evaluation(AlgorithmPart):
    """Part of :class:`~corral.core.training.algorithm.Algorithm` (see the module docstring)."""

    def evaluate(self) -> dict[str, Any]:
        """Run ``evaluation_duration`` episodes (or timesteps) with ``evaluation_config`` applied.

        On the ``evaluation_num_env_runners`` Ray actors if there are any
        (sharing the duration), else in this process; or whatever
        ``custom_evaluation_function(algorithm, eval_workers)`` does instead.

        Returns:
            The evaluation metrics (``episode_reward_mean``, ...), or the custom function's.

        Raises:
            ConfigError: the custom evaluation function returned something other than a dict.
            CorralError: the algorithm was stopped.
        """
        self._check_not_stopped("evaluate")
        self.settle_learning()
        self.callbacks.evaluate_start(self._as_algorithm)
        function = self.config.custom_evaluation_function
        if function is None:
            return self._finish_evaluation(self._start_evaluation())
        metrics = function(self, self._evaluation_runners())
        if not isinstance(metrics, dict):
            raise ConfigError(
                f"custom_evaluation_function {object_path(function)} returned {type(metrics).__name__}; it must return "
                "a dict of metrics"
            )
        self.callbacks.evaluate_end(self._as_algorithm, metrics)
        return metrics

    def _evaluation_runners(self) -> EnvRunnerGroup:
        if self._eval_group is None:
            eval_config = self._runner_config(self.config.get_evaluation_config())
            num_envs = eval_config.evaluation_num_envs or eval_config.num_envs_per_env_runner
            if eval_config.evaluation_duration_unit == "episodes" and eval_config.evaluation_duration != "auto":
                num_envs = min(num_envs, eval_config.evaluation_duration)
            local = make_env_runner(
                eval_config, self.policies, 0, self.callbacks, num_envs=num_envs, seed=self.config.seed, stream="evaluation"
            )
            remote = self.config.evaluation_num_env_runners
            recreated = functools.partial(self.callbacks.env_runners_recreated, self._as_algorithm, is_evaluation=True)
            self._eval_group = EnvRunnerGroup(
                local, eval_config, self.policy_builds, "evaluation", num_remote=remote, on_recreated=recreated
            )
        return self._eval_group

    def _start_evaluation(self) -> EvaluationRound | None:
        """Start evaluating on the evaluation actors (None: evaluation runs in this process, when finished)."""
        self.settle_learning()  # the actors get the weights between two updates
        group = self._evaluation_runners()
        if not group.remote_env_runners:
            return None
        cfg = group.local_env_runner.config
        return group.start_episodes(cfg.evaluation_duration, cfg.evaluation_duration_unit, cfg.explore)

    def _finish_evaluation(self, pending: EvaluationRound | None) -> dict[str, Any]:
        group = self._evaluation_runners()
        if pending is not None:
            episodes = group.finish_episodes(pending)
        else:
            cfg = group.local_env_runner.config
            if cfg.evaluation_duration == "auto":  # every evaluation actor failed and was dropped: an episode per env here
                span = evaluation_span(group.local_env_runner.num_envs, "episodes")
            else:
                span = evaluation_span(cfg.evaluation_duration, cfg.evaluation_duration_unit)
            episodes = group.local_env_runner.run_episodes(explore=cfg.explore, **span)
        metrics = with_rllib_groups(
            {**summarize_episodes(episodes, self.config.keep_per_episode_custom_metrics), "episodes_this_iter": len(episodes)}
        )
        if self.off_policy_evaluation is not None:
            cfg = self.config
            duration, unit = cfg.evaluation_duration, cfg.evaluation_duration_unit
            if duration == "auto":  # as many as the evaluation runners finished
                duration, unit = max(1, len(episodes)), "episodes"
            metrics["off_policy_estimator"] = self.off_policy_evaluation.run(int(duration), unit)
        self.callbacks.evaluate_end(self._as_algorithm, metrics)
        return metrics

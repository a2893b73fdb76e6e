"""RLlib's evaluation.metrics written in corral: collect a custom evaluation's episodes, summarise them under RLlib's keys."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import pytest
import ray

import corral
from corral.core.sampling.metrics import EpisodeSummary
from corral.rllib.support.episodes import RolloutMetrics, collect_episodes, summarize_episodes

RLLIB_KEYS = {
    "episode_reward_max", "episode_reward_min", "episode_reward_mean", "episode_len_mean", "episode_media",
    "episodes_this_iter", "policy_reward_min", "policy_reward_max", "policy_reward_mean", "custom_metrics",
    "hist_stats", "sampler_perf", "num_faulty_episodes", "connector_metrics",
}  # fmt: skip


def small(**evaluation: Any) -> Any:
    values = {"num_envs_per_env_runner": 2, "train_batch_size": 64, "minibatch_size": 32, "seed": 0}
    return corral.get_config("PPO").environment("CartPole-v1").update_from_dict(values).evaluation(**evaluation)


def custom_eval_function(algorithm: Any, eval_workers: Any) -> dict[str, Any]:
    """RLlib's custom_eval.py example: sample on the evaluation runners, then collect and summarise what finished."""
    for _ in range(3):
        eval_workers.foreach_env_runner(lambda w: w.sample(), local_env_runner=not eval_workers.remote_env_runners)
    episodes = collect_episodes(workers=eval_workers, timeout_seconds=99999)
    metrics = summarize_episodes(episodes)
    metrics["foo"] = 1
    metrics["again"] = len(collect_episodes(eval_workers))  # collecting drained them
    metrics["rllib_names"] = all(e.episode_reward == e.reward and e.episode_length == e.length for e in episodes)
    return metrics


def test_summaries_of_episodes_under_rllib_s_keys() -> None:
    episodes = [
        EpisodeSummary(1.0, 10, {"x": 1.0, "gone": math.nan}, {"default_policy": [0.5], "a": [1.0, 2.0]}, {"seen": [1.0]}),
        EpisodeSummary(3.0, 20, {"x": math.nan, "gone": math.nan}, {"a": [3.0], "b": [4.0]}, {"seen": [2.0, 3.0]}),
        EpisodeSummary(5.0, 30, {"x": 3.0}),
    ]
    metrics = summarize_episodes(episodes, new_episodes=episodes[2:])
    assert set(metrics) == RLLIB_KEYS
    assert (metrics["episode_reward_mean"], metrics["episode_reward_min"], metrics["episode_reward_max"]) == (3.0, 1.0, 5.0)
    assert metrics["episode_len_mean"] == 20.0 and metrics["episodes_this_iter"] == 1
    # NaN values are left out; a metric with no value left is NaN
    custom = metrics["custom_metrics"]
    assert {k: v for k, v in custom.items() if k.startswith("x")} == {"x_mean": 2.0, "x_min": 1.0, "x_max": 3.0}
    assert all(math.isnan(custom[f"gone_{s}"]) for s in ("mean", "min", "max"))
    # the default policy is left out, as RLlib does: a single-agent run reports no policy rewards
    assert metrics["policy_reward_mean"] == {"a": 2.0, "b": 4.0}
    assert metrics["policy_reward_min"] == {"a": 1.0, "b": 4.0} and metrics["policy_reward_max"] == {"a": 3.0, "b": 4.0}
    hist = metrics["hist_stats"]
    assert hist["episode_reward"] == [1.0, 3.0, 5.0] and hist["episode_lengths"] == [10, 20, 30]
    assert hist["policy_a_reward"] == [1.0, 2.0, 3.0] and hist["seen"] == [1.0, 2.0, 3.0]
    assert "policy_default_policy_reward" not in hist
    assert metrics["num_faulty_episodes"] == 0 and metrics["sampler_perf"] == {} and metrics["episode_media"] == {}
    kept = summarize_episodes(episodes, keep_custom_metrics=True)["custom_metrics"]
    assert kept == {"x": [1.0, 3.0], "gone": []}


def test_no_episodes_give_nan_means() -> None:
    metrics = summarize_episodes([])
    assert math.isnan(metrics["episode_reward_mean"]) and math.isnan(metrics["episode_len_mean"])
    assert metrics["episodes_this_iter"] == 0 and metrics["hist_stats"]["episode_reward"] == []


def test_bad_input_is_named() -> None:
    with pytest.raises(TypeError, match=r"episodes\[1\] is a dict; it takes the episode summaries collect_episodes returns"):
        summarize_episodes([EpisodeSummary(1.0, 1), {"episode_reward": 1.0}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="new_episodes must be a list of episodes"):
        summarize_episodes([], new_episodes=EpisodeSummary(1.0, 1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="the EnvRunnerGroup a custom evaluation function gets as its second argument"):
        collect_episodes()


def test_a_custom_evaluation_collects_and_summarises_what_its_runners_sampled(make_algo: Callable[..., Any]) -> None:
    algo = make_algo(small(evaluation_interval=1, custom_evaluation_function=custom_eval_function))
    result = algo.train()["evaluation"]
    assert set(result) >= RLLIB_KEYS and result["foo"] == 1
    assert result["episodes_this_iter"] > 0 and result["episode_len_mean"] > 0
    assert len(result["hist_stats"]["episode_lengths"]) == result["episodes_this_iter"]
    assert result["again"] == 0 and result["rllib_names"] is True
    runner = algo.env_runner_group.local_env_runner
    runner.sample()
    finished = collect_episodes(runner)  # one runner gives its own
    assert finished and all(isinstance(e, RolloutMetrics) for e in finished) and collect_episodes(runner) == []


def test_the_remote_runners_episodes_are_collected_within_the_timeout(
    make_algo: Callable[..., Any], ray_on_two_cpus: None, caplog: pytest.LogCaptureFixture
) -> None:
    groups: list[Any] = []

    def evaluate(algorithm: Any, eval_workers: Any) -> dict[str, Any]:
        groups.append(eval_workers)
        return custom_eval_function(algorithm, eval_workers)

    algo = make_algo(small(evaluation_interval=1, evaluation_num_env_runners=1, custom_evaluation_function=evaluate))
    result = algo.evaluate()
    assert result["episodes_this_iter"] > 0 and result["again"] == 0 and result["rllib_names"] is True
    (group,) = groups
    group.foreach_env_runner(lambda w: w.sample(), local_env_runner=False)
    assert collect_episodes(group, remote_worker_ids=[2]) == []  # no such runner: only the local one, which has none
    busy = group.remote_env_runner(1).apply.remote(lambda w: time.sleep(1))
    with caplog.at_level(logging.WARNING, logger="corral"):
        assert collect_episodes(group, timeout_seconds=0.1) == []
    assert "remote env runners [1] did not hand over their episodes within timeout_seconds=0.1" in caplog.text
    ray.get(busy)
    with pytest.raises(TypeError, match="remote_worker_ids must be remote runner indexes"):
        collect_episodes(group, remote_worker_ids=["1"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="timeout_seconds must be a number of seconds >= 0"):
        collect_episodes(group, timeout_seconds=-1)

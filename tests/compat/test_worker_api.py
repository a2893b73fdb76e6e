"""RLlib's worker API as its documented examples use it: the local worker, its policies, its envs, each worker by index."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import corral
from corral.core.sampling.metrics import summarize_episodes


def small(env: str = "CartPole-v1", **overrides: Any) -> Any:
    values = {"num_envs_per_env_runner": 2, "train_batch_size": 64, "minibatch_size": 32, "seed": 0, **overrides}
    return corral.get_config("PPO").environment(env).update_from_dict(values)


def test_the_local_worker_its_policy_and_its_policy_map(make_algo) -> None:
    algo = make_algo(small())
    worker = algo.workers.local_worker()
    assert worker is algo.env_runner_group.local_env_runner
    assert worker.get_policy() is algo.get_policy() is worker.policy_map["default_policy"]
    assert worker.get_policy("nope") is None  # RLlib's worker.get_policy()


def test_foreach_worker_with_index_calls_every_worker_with_its_index(make_algo) -> None:
    algo = make_algo(small())
    algo.train()
    steps = algo.workers.foreach_worker_with_index(lambda worker, index: (index, worker.get_policy().global_timestep))
    assert steps == [(0, algo.get_policy().global_timestep)] and steps[0][1] > 0


def test_foreach_worker_with_id_gives_rllib_s_order_the_id_first(make_algo) -> None:
    algo = make_algo(small())
    assert algo.workers.foreach_worker_with_id(lambda index, worker: (index, worker.worker_index)) == [(0, 0)]
    assert algo.env_runner_group.foreach_env_runner_with_id(lambda index, worker: worker.get_policy()) == [algo.get_policy()]


@pytest.mark.parametrize(
    ("method", "fn", "right"),
    [
        ("foreach_worker_with_index", lambda index, worker: worker.get_policy(), "foreach_worker_with_id"),
        ("foreach_worker_with_id", lambda worker, index: worker.get_policy(), "foreach_worker_with_index"),
    ],
)
def test_a_function_written_for_the_other_order_is_told_the_method_to_use(make_algo, method: str, fn: Any, right: str) -> None:
    algo = make_algo(small())
    with pytest.raises(corral.ConfigError, match=rf"{method} calls fn.*looked up 'get_policy' on the index.*Use {right}\(fn\)"):
        getattr(algo.workers, method)(fn)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):  # any other mistake is the function's own
        getattr(algo.workers, method)(lambda a, b: (a if method.endswith("index") else b).nope)


class Level(gym.Env):
    """An env of the user's with a method of its own (RLlib's TaskSettableEnv idiom): a reward of ``task`` a step."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: Any = None) -> None:
        self.task = 0

    def set_task(self, task: int) -> None:
        self.task = task

    def get_task(self) -> int:
        return self.task

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return np.zeros(2, np.float32), float(self.task), False, False, {}


def test_foreach_env_reaches_the_user_s_env_through_corral_s_wrappers(make_algo) -> None:
    """gymnasium's env checker and TimeLimit (``horizon``) forward no attributes: the function gets the env itself."""
    algo = make_algo(small(Level, horizon=5))
    algo.workers.foreach_worker(lambda worker: worker.foreach_env(lambda env: env.set_task(5)))
    assert algo.workers.foreach_env(lambda env: (type(env).__name__, env.get_task())) == [[("Level", 5), ("Level", 5)]]
    assert algo.train()["episode_reward_max"] == 25  # five steps at the task set


def test_foreach_env_on_a_gymnasium_id_gets_the_env_its_entry_point_made(make_algo) -> None:
    worker = make_algo(small("Pendulum-v1", vectorize_mode="sync")).workers.local_worker()
    assert worker.foreach_env(lambda env: env.max_speed) == [8, 8]


@pytest.mark.parametrize(("mode", "count"), [("sync", 2), ("native", 1)])
def test_foreach_env_reaches_each_sub_environment(make_algo, mode: str, count: int) -> None:
    worker = make_algo(small(vectorize_mode=mode)).workers.local_worker()
    ids = worker.foreach_env(lambda env: env.unwrapped.spec.id if mode == "sync" else env.num_envs)
    assert ids == (["CartPole-v1", "CartPole-v1"] if mode == "sync" else [2]) and len(ids) == count


def test_foreach_env_sets_state_the_next_sample_sees(make_algo) -> None:
    """RLlib's curriculum idiom: reach into each sub-environment between iterations."""
    algo = make_algo(small(vectorize_mode="sync"))
    algo.workers.foreach_worker(lambda worker: worker.foreach_env(lambda env: setattr(env.unwrapped, "x_threshold", 0.01)))
    result = algo.train()
    assert result["episode_len_mean"] < 10  # the cart leaves the narrowed track at once


def test_foreach_env_on_a_multi_agent_worker_gives_each_multi_agent_env(make_algo) -> None:
    config = small("corral.testing.envs:MultiAgentCartPole", env_config={"num_agents": 2})
    worker = make_algo(config).workers.local_worker()
    assert worker.foreach_env(lambda env: env.num_agents if env.num_agents else len(env.possible_agents)) == [2, 2]


def count_episodes(algorithm: Any, eval_workers: Any) -> dict[str, Any]:
    """RLlib's custom evaluation: run what you like on the evaluation workers, return metrics."""
    episodes = eval_workers.local_worker().run_episodes(num_episodes=3)
    return {"custom_episodes": len(episodes), "iteration_seen": algorithm.iteration}


def test_a_custom_evaluation_function_replaces_corral_s_evaluation(make_algo) -> None:
    config = small().evaluation(evaluation_interval=1, custom_evaluation_function=count_episodes)
    result = make_algo(config).train()
    assert result["evaluation"] == {"custom_episodes": 3, "iteration_seen": 1}
    by_path = small().evaluation(evaluation_interval=1, custom_evaluation_function=f"{__name__}:count_episodes")
    assert make_algo(by_path).train()["evaluation"]["custom_episodes"] == 3


def test_a_custom_evaluation_function_must_return_a_dict(make_algo) -> None:
    config = small().evaluation(evaluation_interval=1, custom_evaluation_function=lambda algorithm, workers: 3)
    with pytest.raises(corral.ConfigError, match="returned int; it must return a dict of metrics"):
        make_algo(config).train()


def test_always_attach_evaluation_results_repeats_the_latest_between_evaluations(make_algo) -> None:
    attached = make_algo(small().evaluation(evaluation_interval=2, evaluation_duration=2, always_attach_evaluation_results=True))
    results = [attached.train() for _ in range(3)]
    assert "evaluation" not in results[0] and results[2]["evaluation"] == results[1]["evaluation"]
    plain = make_algo(small().evaluation(evaluation_interval=2, evaluation_duration=2))
    assert ["evaluation" in plain.train() for _ in range(3)] == [False, True, False]


class PoleAngles(corral.Callbacks):
    """RLlib's documented custom-metrics example: a per-episode metric and a histogram of every step's value."""

    def on_episode_step(self, *, episode: Any, **kwargs: Any) -> None:
        episode.user_data.setdefault("angles", []).append(abs(float(episode.last_observation[2])))

    def on_episode_end(self, *, episode: Any, **kwargs: Any) -> None:
        angles = episode.user_data["angles"]
        episode.custom_metrics["pole_angle"] = max(angles)
        episode.hist_data["pole_angles"] = angles


def test_hist_data_is_reported_as_hist_stats_with_rllib_s_episode_lists(make_algo) -> None:
    result = make_algo(small().callbacks(PoleAngles)).train()
    stats = result["hist_stats"]
    assert len(stats["episode_reward"]) == len(stats["episode_lengths"]) == min(result["episodes_total"], 100) > 0
    assert max(stats["episode_reward"]) == result["episode_reward_max"]
    assert len(stats["pole_angles"]) == sum(stats["episode_lengths"])  # every step of every episode in the window
    assert set(result["custom_metrics"]) == {"pole_angle_mean", "pole_angle_min", "pole_angle_max"}


def test_keep_per_episode_custom_metrics_reports_each_episode_s_value(make_algo) -> None:
    result = make_algo(small().callbacks(PoleAngles).reporting(keep_per_episode_custom_metrics=True)).train()
    assert len(result["custom_metrics"]["pole_angle"]) == len(result["hist_stats"]["episode_reward"])


def test_hist_stats_resume_from_a_checkpoint_as_they_were(make_algo, restored_algos, tmp_path) -> None:
    algo = make_algo(small().callbacks(PoleAngles))
    before = algo.train()["hist_stats"]
    restored = corral.Algorithm.from_checkpoint(algo.save(tmp_path / "ckpt"), callbacks=PoleAngles)
    restored_algos.append(restored)
    assert summarize_episodes(restored.history.episodes)["hist_stats"] == before

"""Algorithm: result dicts, the experiment folder, evaluation, seeding, acting, weights, checkpoints on schedule."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import corral
from corral import AlgorithmConfig, ConfigError
from corral.plugins.dqn import DQNConfig
from corral.plugins.ppo import PPO, PPOConfig

from ..conftest import SMALL_PPO

DESIGN_KEYS = (
    "training_iteration", "timesteps_total", "num_env_steps_sampled", "num_env_steps_trained",
    "episode_reward_mean", "episode_reward_min", "episode_reward_max", "episode_len_mean",
    "episodes_this_iter", "episodes_total", "time_this_iter_s", "time_total_s", "custom_metrics", "info",
)  # fmt: skip
LOSS_STATS = ("total_loss", "policy_loss", "vf_loss", "kl", "entropy")


def cartpole_observations(n: int, seed: int = 0) -> list[np.ndarray]:
    """``n`` distinct CartPole observations from a seeded random walk."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    out = []
    while len(out) < n:
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return out


def assert_weights_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for pid in a:
        assert a[pid].keys() == b[pid].keys()
        for name in a[pid]:
            np.testing.assert_array_equal(a[pid][name], b[pid][name], err_msg=f"{pid}/{name}")


def weights_differ(a: dict, b: dict) -> bool:
    return any(not np.array_equal(a[pid][k], b[pid][k]) for pid in a for k in a[pid])


# ---------------------------------------------------------------------- #
# results
# ---------------------------------------------------------------------- #
def test_train_result_has_every_design_key_with_sane_values(make_algo) -> None:
    algo = make_algo()
    results = [algo.train() for _ in range(3)]

    for i, result in enumerate(results, start=1):
        missing = [k for k in DESIGN_KEYS if k not in result]
        assert not missing, f"result lacks {missing}"
        assert result["training_iteration"] == i
        for key in ("timesteps_total", "num_env_steps_sampled", "num_env_steps_trained", "episodes_this_iter", "episodes_total"):
            assert isinstance(result[key], int) and not isinstance(result[key], bool), key
        assert result["timesteps_total"] == result["num_env_steps_sampled"]
        # A train batch of at least 256 steps (reset rows are none), topped up by less than a step per sub-environment.
        assert 256 <= result["num_env_steps_sampled"] - (results[i - 2]["num_env_steps_sampled"] if i > 1 else 0) < 256 + 4
        for key in ("episode_reward_mean", "episode_reward_min", "episode_reward_max", "episode_len_mean"):
            assert isinstance(result[key], float) and math.isfinite(result[key]), key
        assert result["episode_reward_min"] <= result["episode_reward_mean"] <= result["episode_reward_max"]
        # CartPole pays 1 per step, so mean reward and mean length agree.
        assert result["episode_reward_mean"] == pytest.approx(result["episode_len_mean"])
        assert result["time_this_iter_s"] > 0 and result["time_total_s"] >= result["time_this_iter_s"]
        assert result["custom_metrics"] == {}
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        for key in LOSS_STATS:
            assert isinstance(stats[key], float) and math.isfinite(stats[key]), key
        assert stats["entropy"] > 0
        json.dumps(result)  # results are JSON-serialisable as they are

    for key in ("training_iteration", "timesteps_total", "num_env_steps_sampled", "num_env_steps_trained", "episodes_total"):
        values = [r[key] for r in results]
        assert values == sorted(values) and values[0] < values[-1], (key, values)
    assert results[-1]["num_env_steps_trained"] == results[-1]["num_env_steps_sampled"]
    assert [r["episodes_total"] for r in results] == list(np.cumsum([r["episodes_this_iter"] for r in results]))
    assert results[-1]["time_total_s"] == pytest.approx(sum(r["time_this_iter_s"] for r in results))


def test_experiment_folder_holds_params_results_progress_and_tensorboard(make_algo, ppo_config, results_dir) -> None:
    algo = make_algo(ppo_config)
    results = [algo.train() for _ in range(2)]
    algo.stop()

    logdir = Path(algo.logdir)
    assert logdir.parent == results_dir
    assert re.fullmatch(r"PPO_CartPole-v1_\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}(_\d+)?", logdir.name), logdir.name

    params = json.loads((logdir / "params.json").read_text())
    assert params.pop("algorithm") == "PPO"
    restored = PPOConfig.from_dict(params)
    assert restored.to_dict() == ppo_config.to_dict()
    assert restored.train_batch_size == 256 and restored.seed == 0

    lines = (logdir / "result.json").read_text().splitlines()
    assert [json.loads(line)["training_iteration"] for line in lines] == [1, 2]
    assert json.loads(lines[1])["timesteps_total"] == results[1]["timesteps_total"]

    with open(logdir / "progress.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["training_iteration"]) for r in rows] == [1, 2]
    assert int(rows[1]["timesteps_total"]) == results[1]["timesteps_total"]
    assert float(rows[0]["info/learner/default_policy/learner_stats/total_loss"]) == pytest.approx(
        results[0]["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
    )

    events = list(logdir.glob("events.out.tfevents.*"))
    assert events and all(e.stat().st_size > 0 for e in events)


def test_no_results_outside_the_configured_folder(make_algo, results_dir) -> None:
    algo = make_algo()
    algo.train()
    assert Path(algo.logdir).is_relative_to(results_dir)
    assert [p.name for p in results_dir.iterdir()] == [Path(algo.logdir).name]


# ---------------------------------------------------------------------- #
# evaluation
# ---------------------------------------------------------------------- #
def test_evaluation_runs_every_interval_and_widens_progress_csv(make_algo, ppo_config) -> None:
    ppo_config.evaluation(evaluation_interval=2, evaluation_duration=3)
    algo = make_algo(ppo_config)
    results = [algo.train() for _ in range(4)]

    assert ["evaluation" in r for r in results] == [False, True, False, True]
    for result in results[1::2]:
        evaluation = result["evaluation"]
        assert evaluation["episodes_this_iter"] == 3
        assert math.isfinite(evaluation["episode_reward_mean"])
        assert evaluation["episode_reward_min"] <= evaluation["episode_reward_mean"] <= evaluation["episode_reward_max"]

    with open(Path(algo.logdir) / "progress.csv", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        header = reader.fieldnames or []
    assert "evaluation/episode_reward_mean" in header
    assert [int(r["training_iteration"]) for r in rows] == [1, 2, 3, 4]
    assert [r["evaluation/episode_reward_mean"] != "" for r in rows] == [False, True, False, True]
    assert float(rows[3]["evaluation/episode_reward_mean"]) == pytest.approx(results[3]["evaluation"]["episode_reward_mean"])


def test_evaluation_duration_in_timesteps(make_algo, ppo_config) -> None:
    # Exploring, so that the (barely trained) policy ends episodes within the budget.
    ppo_config.evaluation(
        evaluation_interval=1, evaluation_duration=200, evaluation_duration_unit="timesteps", evaluation_config={"explore": True}
    )
    algo = make_algo(ppo_config)
    evaluation = algo.train()["evaluation"]
    # Only episodes that finished inside the ~200 evaluation steps count (4 sub-envs may overshoot by 3).
    assert evaluation["episodes_this_iter"] >= 1
    assert evaluation["episodes_this_iter"] * evaluation["episode_len_mean"] <= 203
    # Unlike the default unit: 200 episodes of CartPole would be far more than 200 steps.
    assert evaluation["episodes_this_iter"] < 200


def test_explore_false_acts_deterministically(make_algo, ppo_config) -> None:
    ppo_config.evaluation(evaluation_interval=1, evaluation_duration=2, evaluation_config={"explore": False})
    algo = make_algo(ppo_config)
    algo.train()
    assert algo.config.get_evaluation_config().explore is False
    assert algo.config.explore is True  # the override applies to evaluation only

    obs = cartpole_observations(1)[0]
    greedy = {algo.compute_single_action(obs, explore=False) for _ in range(30)}
    assert len(greedy) == 1
    # While exploring, an (almost untrained) policy samples both actions.
    sampled = {algo.compute_single_action(obs, explore=True) for _ in range(200)}
    assert sampled == {0, 1}


# ---------------------------------------------------------------------- #
# seeding
# ---------------------------------------------------------------------- #
def test_same_seed_gives_identical_runs_and_another_seed_does_not(make_algo) -> None:
    first = make_algo(seed=0)
    r1 = first.train()
    w1 = first.get_weights()
    second = make_algo(seed=0)
    r2 = second.train()
    w2 = second.get_weights()

    assert r1["episode_reward_mean"] == r2["episode_reward_mean"]
    assert r1["episodes_this_iter"] == r2["episodes_this_iter"]
    assert r1["num_env_steps_sampled"] == r2["num_env_steps_sampled"]
    assert r1["info"]["learner"] == r2["info"]["learner"]
    assert_weights_equal(w1, w2)

    other = make_algo(seed=1)
    other.train()
    assert weights_differ(w1, other.get_weights())


# ---------------------------------------------------------------------- #
# acting
# ---------------------------------------------------------------------- #
def test_compute_single_action_cartpole_gives_a_valid_int(make_algo) -> None:
    algo = make_algo()
    space = gym.spaces.Discrete(2)
    for obs in cartpole_observations(10):
        for explore in (True, False):
            action = algo.compute_single_action(obs, explore=explore)
            assert type(action) is int and space.contains(action)


def test_compute_single_action_pendulum_stays_inside_the_box(make_algo) -> None:
    algo = make_algo(env="Pendulum-v1")
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        for explore in (True, False):
            action = algo.compute_single_action(obs, explore=explore)
            assert isinstance(action, np.ndarray) and action.shape == env.action_space.shape
            assert np.all(action >= env.action_space.low) and np.all(action <= env.action_space.high), action
        obs, *_ = env.step(env.action_space.sample())
    env.close()


def test_compute_actions_dict_gives_dict_and_batch_gives_batch(make_algo) -> None:
    algo = make_algo()
    obs = cartpole_observations(5)
    by_agent = algo.compute_actions({"a": obs[0], "b": obs[1]}, explore=False)
    assert isinstance(by_agent, dict) and set(by_agent) == {"a", "b"}
    assert by_agent["a"] == algo.compute_single_action(obs[0], explore=False)
    assert all(a in (0, 1) for a in by_agent.values())

    batch = algo.compute_actions(np.stack(obs), explore=False)
    assert isinstance(batch, np.ndarray) and batch.shape == (5,)
    assert batch.tolist() == [algo.compute_single_action(o, explore=False) for o in obs]


def test_weights_round_trip_into_another_algorithm(make_algo) -> None:
    trained = make_algo(seed=0)
    trained.train()
    other = make_algo(seed=1)
    weights = trained.get_weights()
    assert set(weights) == {"default_policy"}
    assert weights_differ(weights, other.get_weights())

    other.set_weights(weights)
    assert_weights_equal(other.get_weights(), weights)
    for obs in cartpole_observations(20):
        assert other.compute_single_action(obs, explore=False) == trained.compute_single_action(obs, explore=False)
    # get_weights returns copies: changing them does not touch the model.
    weights["default_policy"][next(iter(weights["default_policy"]))] += 1.0
    assert_weights_equal(trained.get_weights(), other.get_weights())


def test_get_policy_of_unknown_id_is_none_as_rllib_s_and_the_calls_that_need_one_list_them(make_algo) -> None:
    algo = make_algo()
    assert algo.get_policy() is algo.get_policy("default_policy") is not None
    assert algo.get_policy("nope") is None  # RLlib's documented contract: scripts test `is None`
    for call in (lambda: algo.get_module("nope"), lambda: algo.compute_single_action(np.zeros(4), policy_id="nope")):
        with pytest.raises(ConfigError, match="nope") as info:
            call()
        assert "default_policy" in str(info.value)


# ---------------------------------------------------------------------- #
# checkpoints on schedule
# ---------------------------------------------------------------------- #
def checkpoint_names(logdir: Path) -> list[str]:
    return sorted(p.name for p in logdir.iterdir() if p.name.startswith("checkpoint_"))


def test_checkpoint_frequency_saves_and_keep_num_prunes(make_algo, ppo_config) -> None:
    ppo_config.checkpointing(checkpoint_frequency=1, keep_checkpoints_num=2)
    algo = make_algo(ppo_config)
    logdir = Path(algo.logdir)
    algo.train()
    assert checkpoint_names(logdir) == ["checkpoint_000001"]
    algo.train()
    assert checkpoint_names(logdir) == ["checkpoint_000001", "checkpoint_000002"]
    algo.train()
    assert checkpoint_names(logdir) == ["checkpoint_000002", "checkpoint_000003"]
    for name in checkpoint_names(logdir):
        assert (logdir / name / "corral_checkpoint.json").is_file()
        assert (logdir / name / "policies" / "default_policy" / "policy_state.pt").is_file()
    assert not [p.name for p in logdir.iterdir() if p.name.startswith(".")]  # no temp folders left


def test_checkpoint_frequency_two_saves_every_second_iteration(make_algo, ppo_config) -> None:
    ppo_config.checkpointing(checkpoint_frequency=2)
    algo = make_algo(ppo_config)
    for _ in range(3):
        algo.train()
    assert checkpoint_names(Path(algo.logdir)) == ["checkpoint_000002"]


def test_save_without_a_folder_saves_into_the_experiment_folder(make_algo) -> None:
    algo = make_algo()
    algo.train()
    path = Path(algo.save())
    assert path == Path(algo.logdir).resolve() / "checkpoint_000001"
    assert (path / "corral_checkpoint.json").is_file()


# ---------------------------------------------------------------------- #
# construction
# ---------------------------------------------------------------------- #
def test_algorithm_accepts_a_config_dict(ppo_config) -> None:
    algo = PPO(config=ppo_config.to_dict())
    try:
        assert algo.config.to_dict() == ppo_config.to_dict()
        assert algo.train()["training_iteration"] == 1
    finally:
        algo.stop()

    partial = PPO(config={"env": "CartPole-v1", **SMALL_PPO})
    try:
        assert isinstance(partial.config, PPOConfig)
        assert partial.config.train_batch_size == 256 and partial.config.clip_param == 0.3
    finally:
        partial.stop()


def test_algorithm_rejects_a_config_of_another_algorithm() -> None:
    config = DQNConfig().environment("CartPole-v1")
    with pytest.raises(ConfigError, match="PPO needs a PPOConfig, got DQNConfig"):
        PPO(config=config)


def test_algorithm_takes_a_generic_config_as_its_own_like_rllib() -> None:
    # RLlib's Algorithm turns a plain AlgorithmConfig() into its default config updated by it.
    algo = PPO(config=AlgorithmConfig().environment("CartPole-v1").training(gamma=0.9))
    try:
        assert type(algo.config) is PPOConfig
        assert algo.config.gamma == 0.9
        assert algo.config.clip_param == PPOConfig().clip_param
    finally:
        algo.stop()


def test_algorithm_rejects_a_bad_config_dict() -> None:
    with pytest.raises(ConfigError, match="clip_parm"):
        PPO(config={"env": "CartPole-v1", "clip_parm": 0.3})


def test_built_config_is_frozen_and_the_original_is_not(make_algo, ppo_config) -> None:
    algo = make_algo(ppo_config)
    with pytest.raises(ConfigError, match="frozen"):
        algo.config.lr = 0.1
    ppo_config.training(lr=0.1)  # the user's config stays editable
    assert algo.config.lr == 2e-3


@pytest.mark.parametrize("name", ["ppo", "PPO", "Ppo"])
def test_get_config_is_case_insensitive_and_builds_ppo(name: str) -> None:
    config = corral.get_config(name)
    assert type(config) is PPOConfig
    algo = config.environment("CartPole-v1").build()
    try:
        assert type(algo) is PPO
        assert algo.config.train_batch_size == 4000  # PPO's own default
    finally:
        algo.stop()

"""Policy.from_checkpoint: one policy of an algorithm checkpoint, alone, acting exactly as it did in the algorithm."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from corral import Algorithm, CheckpointError, Policy, make_multi_agent
from corral.plugins.ppo import PPOConfig, PPOPolicy
from corral.plugins.sac import SACConfig, SACPolicy


def trained(config, tmp_path: Path) -> tuple[Algorithm, Path]:
    algo = config.debugging(seed=0).reporting(storage_path=str(tmp_path / "results")).build()
    algo.train()
    return algo, Path(algo.save(tmp_path / "ckpt"))


@pytest.fixture
def ppo(tmp_path: Path):
    config = (
        PPOConfig()
        .environment("tests.toy_envs:DictObsEnv")  # an env by path: loading the policy never imports it
        .training(train_batch_size=64, minibatch_size=32, num_epochs=1)
        .env_runners(num_envs_per_env_runner=2, observation_filter="MeanStdFilter")
    )
    algo, path = trained(config, tmp_path)
    yield algo, path
    algo.stop()


def test_a_policy_loads_alone_and_acts_as_in_the_algorithm(ppo) -> None:
    algo, path = ppo
    policy = Policy.from_checkpoint(path)
    assert type(policy) is PPOPolicy
    assert policy.global_timestep == algo.get_policy().global_timestep
    for _ in range(5):
        obs = algo.get_policy().observation_space.sample()
        assert np.array_equal(policy.compute_single_action(obs, explore=False)[0], algo.compute_single_action(obs, explore=False))
    stats = policy.observation_filter.get_state()
    assert json.dumps(stats, default=str) == json.dumps(algo.get_policy().observation_filter.get_state(), default=str)


def test_box_bounds_come_back_exactly_so_actions_are_scaled_alike(tmp_path: Path) -> None:
    config = SACConfig().environment("Pendulum-v1").training(train_batch_size=32).reporting(log_to_tensorboard=False)
    config = config.update_from_dict({"learning_starts": 0, "min_sample_timesteps_per_iteration": 64})
    algo, path = trained(config, tmp_path)
    policy = Policy.from_checkpoint(path)
    assert type(policy) is SACPolicy and policy.action_space == algo.get_policy().action_space
    obs = np.array([1.0, 0.0, 0.5], np.float32)
    assert np.array_equal(policy.compute_single_action(obs, explore=False)[0], algo.compute_single_action(obs, explore=False))
    algo.stop()


def test_rllib_s_path_of_one_policy_inside_an_algorithm_checkpoint_names_that_policy(ppo) -> None:
    algo, path = ppo
    policy = Policy.from_checkpoint(path / "policies" / "default_policy")  # RLlib's restore_1_of_n_agents example
    expected = algo.get_policy().get_weights()
    assert all(np.array_equal(policy.get_weights()[k], expected[k]) for k in expected)
    with pytest.raises(CheckpointError, match=r"has no policy 'main'"):
        Policy.from_checkpoint(path / "policies" / "main")


def test_an_unknown_policy_id_names_the_ones_there_are(ppo) -> None:
    with pytest.raises(CheckpointError, match=r"has no policy 'main'; it has \['default_policy'\]"):
        Policy.from_checkpoint(ppo[1], "main")


def test_a_checkpoint_that_describes_its_spaces_only_loads_as_an_algorithm_but_not_as_a_policy(ppo, tmp_path: Path) -> None:
    """corral 0.1 wrote a description of each space (no Box bounds); such a checkpoint still restores an algorithm."""
    from corral.core.common.spaces import space_to_json

    algo, path = ppo
    meta_file = path / "corral_checkpoint.json"
    meta = json.loads(meta_file.read_text())
    policy = algo.get_policy()
    meta["policies"]["default_policy"] = {
        "observation_space": space_to_json(policy.observation_space),
        "action_space": space_to_json(policy.action_space),
    }
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"does not hold policy 'default_policy'.s spaces exactly"):
        Policy.from_checkpoint(path)
    restored = Algorithm.from_checkpoint(path, trust_code=True)
    assert restored.iteration == 1
    restored.stop()


def test_a_policy_s_own_checkpoint_reopens_as_that_policy_and_not_as_an_algorithm(tmp_path: Path) -> None:
    config = (
        PPOConfig()
        .environment(make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .multi_agent(policies={"pol0", "pol1"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"pol{agent_id}")
        .training(train_batch_size=64, minibatch_size=32, num_epochs=1)
    )
    algo, _ = trained(config, tmp_path)
    try:
        original = algo.get_policy("pol1")
        assert original.policy_id == "pol1"
        path = original.export_checkpoint(tmp_path / "pol1", checkpoint_format="msgpack")  # data only, either format
        policy = Policy.from_checkpoint(path)
        assert policy.policy_id == "pol1" and policy.global_timestep == original.global_timestep > 0
        for _ in range(3):
            obs = original.observation_space.sample()
            assert np.array_equal(
                policy.compute_single_action(obs, explore=False)[0], original.compute_single_action(obs, explore=False)[0]
            )
        with pytest.raises(CheckpointError, match=r"one policy's checkpoint .*Policy\.from_checkpoint\(path\)"):
            Algorithm.from_checkpoint(path)
        with pytest.raises(CheckpointError, match=r"one policy's checkpoint"):
            algo.restore(path)
        with pytest.raises(ValueError, match=r"'cloudpickle' and 'msgpack'"):
            original.export_checkpoint(tmp_path / "other", checkpoint_format="pickle")
    finally:
        algo.stop()

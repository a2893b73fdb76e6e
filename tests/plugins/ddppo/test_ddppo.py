"""DD-PPO: every remote env runner samples and learns on its own samples; their weights stay identical."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import corral
from corral import ConfigError
from corral.plugins.ddppo import DDPPO, DDPPOConfig
from tests.conftest import best_return_within

pytestmark = pytest.mark.usefixtures("ray_on_two_cpus")

SMALL = {"rollout_fragment_length": 40, "num_envs_per_env_runner": 2, "minibatch_size": 32, "num_epochs": 2}


def tiny(**overrides: Any) -> DDPPOConfig:
    return DDPPOConfig().environment("CartPole-v1").update_from_dict({**SMALL, "seed": 0, **overrides})


def _runner_weights(algo: DDPPO) -> list[dict[str, np.ndarray]]:
    return algo.env_runner_group.foreach_env_runner(lambda runner: runner.get_policy().get_weights(), local_env_runner=False)


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_registered_under_its_name_with_rllib_s_rules() -> None:
    assert corral.get_algorithm("DDPPO") is DDPPO
    config = corral.get_config("DDPPO")
    assert (config.train_batch_size, config.kl_coeff, config.num_env_runners, config.minibatch_size) == (-1, 0.0, 2, 50)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"train_batch_size": 4000}, "train_batch_size=4000: DD-PPO's batch is each runner's sample call"),
        ({"num_env_runners": 0}, "num_env_runners=0: DD-PPO learns on its remote env runners"),
        ({"kl_coeff": 0.2}, "kl_coeff=0.2: each DD-PPO runner would adapt its own KL penalty"),
        ({"num_learners": 2}, "DD-PPO learns on its env runners, not on Learner actors"),
        ({"recreate_failed_env_runners": True}, "a lost runner breaks"),
        ({"minibatch_size": 100}, "minibatch_size=100 is larger than num_envs_per_env_runner x rollout_fragment_length=80"),
    ],
)
def test_what_decentralized_learning_rules_out_is_refused_before_any_runner_starts(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        tiny(**overrides).validate()


def test_each_round_every_runner_learns_and_all_end_with_the_same_weights_which_the_main_process_copies() -> None:
    algo = tiny().build()
    try:
        start = algo.get_policy().get_weights()
        assert all(_same(start, weights) for weights in _runner_weights(algo)), "the runners start from its state"
        result = algo.train()
        first, second = _runner_weights(algo)
        assert _same(first, second), "averaged gradients keep the runners' weights identical"
        assert not _same(first, start) and _same(algo.get_policy().get_weights(), first)
        # 2 runners x 2 sub-environments x 40 steps, less a step per episode that ended (its reset row is no step)
        sampled = result["num_env_steps_sampled"]
        assert 140 <= sampled <= 160 and result["num_env_steps_trained"] == sampled
        learner = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert learner["num_sgd_updates"] == 2 * 3, "2 epochs of 3 minibatches: 80 rows cut in 32s"
        assert result["episodes_this_iter"] > 0, "the runners' episodes are reported"
    finally:
        algo.stop()


def test_a_restored_checkpoint_reaches_the_runners(tmp_path) -> None:
    algo = tiny().build()
    try:
        algo.train()
        path = algo.save(str(tmp_path / "checkpoint"))
        saved = algo.get_policy().get_weights()
        algo.train()
        algo.restore(path)
        assert all(_same(saved, weights) for weights in _runner_weights(algo))
    finally:
        algo.stop()


def test_learning_on_a_batch_in_the_main_process_is_refused_with_what_to_use() -> None:
    algo = tiny().build()
    try:
        with pytest.raises(ConfigError, match="DD-PPO learns on its env runners"):
            algo.learn_on_batch(algo.sample(100))
    finally:
        algo.stop()


def test_more_than_one_policy_is_refused_with_what_to_use() -> None:
    config = tiny().environment(corral.make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
    config = config.multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent, *args, **kwargs: f"p{agent}")
    with pytest.raises(ConfigError, match=r"DD-PPO learns one policy, this config has 2 \(p0, p1\)"):
        config.build()


@pytest.mark.slow
def test_dd_ppo_learns_cartpole_within_300k_env_steps() -> None:
    algo = DDPPOConfig().environment("CartPole-v1").debugging(seed=0).build()
    try:
        best, steps = best_return_within(algo, 300_000, 450.0)
        assert best >= 450.0, f"mean return {best:.1f} after {steps} steps"
    finally:
        algo.stop()

"""NaN and inf never reach the weights in silence: a TrainingError (or a counted skip), or an EnvError for the env.

Each config the hostile-user sweep found training on with NaN weights, and
each env returning NaN or inf rewards or observations outside their space,
now stops with an error that names the policy, the term and the iteration (or
the sub-environment and the step), and the weights are those of the last
finite update.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral import ConfigError, EnvError, TrainingError
from corral.core import adam
from corral.core.common.spaces import ObservationCheck
from corral.core.environments.envs import check_vector_step
from corral.plugins.a2c import A2CConfig
from corral.plugins.dqn import DQNConfig
from corral.plugins.impala import IMPALAConfig
from corral.plugins.sac import SACConfig

from ..conftest import small_ppo_config

BROKEN = "tests.toy_envs:BrokenCartPole"


def record_weights(algo: Any) -> list[dict[str, np.ndarray]]:
    """Wrap the policy's guarded optimizer step to record the weights after each step."""
    snapshots: list[dict[str, np.ndarray]] = []
    policy = algo.get_policy()
    guard = policy.update_guard
    real_step = guard.step

    def step() -> None:
        real_step()
        snapshots.append(policy.get_weights())

    guard.step = step  # type: ignore[method-assign]
    snapshots.append(policy.get_weights())
    return snapshots


def last_finite(snapshots: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The weights after the last update that left them finite."""
    return [w for w in snapshots if all(np.isfinite(v).all() for v in w.values())][-1]


def assert_weights(algo: Any, expected: dict[str, np.ndarray]) -> None:
    for name, value in algo.get_policy().get_weights().items():
        assert np.isfinite(value).all(), name
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def train_until_error(algo: Any, error: type[Exception], iterations: int = 5) -> Exception:
    with pytest.raises(error) as info:
        for _ in range(iterations):
            algo.train()
    return info.value


TINY_DQN = {
    "learning_starts": 0,
    "train_batch_size": 16,
    "min_sample_timesteps_per_iteration": 32,
    "num_envs_per_env_runner": 2,
    "seed": 0,
}
TINY_SAC = {**TINY_DQN, "replay_buffer_config": {"capacity": 1000}, "model": {"fcnet_hiddens": [16]}}


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(small_ppo_config(lr=1e308), id="PPO lr=1e308"),
        pytest.param(small_ppo_config(entropy_coeff=1e308), id="PPO entropy_coeff=1e308"),
        pytest.param(A2CConfig().environment("CartPole-v1").training(lr=1e308).debugging(seed=0), id="A2C lr=1e308"),
        pytest.param(DQNConfig().environment("CartPole-v1").update_from_dict({**TINY_DQN, "lr": 1e308}), id="DQN lr=1e308"),
        pytest.param(
            IMPALAConfig()
            .environment("CartPole-v1")
            .update_from_dict(
                {"lr": 1e308, "train_batch_size": 40, "rollout_fragment_length": 10, "num_envs_per_env_runner": 4, "seed": 0}
            ),
            id="IMPALA lr=1e308",
        ),
        pytest.param(
            SACConfig().environment("Pendulum-v1").update_from_dict({**TINY_SAC, "initial_alpha": 1e308}),
            id="SAC initial_alpha=1e308",
        ),
        pytest.param(
            SACConfig().environment("Pendulum-v1").update_from_dict({**TINY_SAC, "critic_lr": 1e308}), id="SAC critic_lr=1e308"
        ),
    ],
)
def test_configs_that_overflow_raise_a_training_error_and_keep_the_weights(config, make_algo) -> None:
    algo = make_algo(config)
    snapshots = record_weights(algo)
    error = train_until_error(algo, TrainingError)
    assert error.policy_id == "default_policy" and error.iteration == algo.iteration + 1
    assert "default_policy" in str(error) and f"iteration {error.iteration}" in str(error)
    assert "not applied" in str(error) and "on_nonfinite='skip'" in str(error)
    assert_weights(algo, last_finite(snapshots))


def test_the_error_names_the_loss_term(make_algo) -> None:
    """A reward that is finite but huge makes the value loss overflow: the error says it was the value loss."""
    algo = make_algo(small_ppo_config(env=BROKEN).environment(env_config={"reward": 1e30, "at": 2, "after_resets": 6}))
    snapshots = record_weights(algo)
    error = train_until_error(algo, TrainingError)
    assert error.term == "vf_loss" and "'vf_loss' is inf" in str(error)
    assert len(snapshots) > 1, "some updates were applied before the overflow"
    assert_weights(algo, last_finite(snapshots))


def test_sac_names_the_param_group_whose_gradient_is_not_finite(make_algo) -> None:
    algo = make_algo(SACConfig().environment("Pendulum-v1").update_from_dict(TINY_SAC))
    policy = algo.get_policy()
    before = policy.get_weights()
    policy.model.actor[-1].weight.register_hook(lambda grad: grad * float("inf"))
    error = train_until_error(algo, TrainingError)
    assert error.term == "gradient of param group 'actor'"
    assert_weights(algo, before)


def test_skip_mode_drops_the_bad_updates_and_counts_them(make_algo) -> None:
    config = small_ppo_config(env=BROKEN).environment(env_config={"reward": 1e30, "at": 2}).debugging(on_nonfinite="skip")
    algo = make_algo(config)
    for _ in range(2):
        result = algo.train()
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert stats["num_nonfinite_updates_skipped"] > 0
    for value in algo.get_policy().get_weights().values():
        assert np.isfinite(value).all()


def test_schedules_and_values_that_cannot_be_used_are_refused_up_front() -> None:
    for values in (
        {"lr_schedule": [[0, math.nan]]},
        {"lr_schedule": [[0, -1.0]]},
        {"lr_schedule": [[0, 1e-3], [100, 0.0]]},
        {"lr": math.inf},
        {"entropy_coeff": math.nan},
    ):
        with pytest.raises(ConfigError):
            small_ppo_config().update_from_dict(values)
    with pytest.raises(ConfigError, match="target_entropy"):
        SACConfig().training(target_entropy=math.nan)


def test_ppo_with_one_step_fragments_trains_finite(make_algo) -> None:
    algo = make_algo(small_ppo_config().env_runners(rollout_fragment_length=1))
    for _ in range(3):
        result = algo.train()
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert all(math.isfinite(stats[k]) for k in ("total_loss", "policy_loss", "vf_loss", "grad_gnorm"))


# ---------------------------------------------------------------------- #
# the env's side: rewards and observations
# ---------------------------------------------------------------------- #
@pytest.mark.parametrize(
    ("env_config", "match"),
    [
        ({"reward": math.nan}, "returned the reward nan at step 3"),
        ({"reward": math.inf}, "returned the reward inf at step 3"),
        ({"obs": "outside"}, "outside the observation space"),
        ({"obs": "nan"}, r"holds \[nan"),
        ({"obs": "shape"}, r"has shape \(5,\)"),
    ],
    ids=["nan-reward", "inf-reward", "outside", "nan-observation", "wrong-shape"],
)
def test_a_broken_env_is_an_env_error_naming_the_sub_environment_and_the_step(make_algo, env_config, match) -> None:
    algo = make_algo(small_ppo_config(env=BROKEN).environment(env_config={**env_config, "only_vector": 2}))
    before = algo.get_policy().get_weights()
    error = train_until_error(algo, EnvError, iterations=1)
    assert "sub-environment 2 of env runner 0" in str(error)
    assert re.search(match, str(error)), str(error)
    assert_weights(algo, before)


def test_restart_failed_sub_environments_covers_a_broken_env(make_algo) -> None:
    config = (
        small_ppo_config(env=BROKEN)
        .environment(env_config={"reward": math.nan, "only_vector": 1})
        .fault_tolerance(restart_failed_sub_environments=True)
    )
    algo = make_algo(config)
    result = algo.train()
    restarts = sum(env.restarts for env in algo.env_runner_group.local_env_runner.base_env.envs)
    assert restarts >= 1 and math.isfinite(result["episode_reward_mean"])


def test_disable_env_checking_lets_an_observation_outside_the_space_through(make_algo) -> None:
    config = small_ppo_config(env=BROKEN).environment(env_config={"obs": "outside"}, disable_env_checking=True)
    make_algo(config).train()


def test_a_native_vector_env_is_checked_too() -> None:
    check = ObservationCheck(gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    steps = np.array([4, 9, 0])
    obs = np.zeros((3, 2), dtype=np.float32)
    check_vector_step(obs, np.ones(3), check, steps, worker_index=1)
    with pytest.raises(EnvError, match="sub-environment 1 of env runner 1 returned the reward nan at step 10"):
        check_vector_step(obs, np.array([1.0, np.nan, 0.0]), check, steps, worker_index=1)
    obs[2, 1] = 3.0
    with pytest.raises(EnvError, match=r"sub-environment 2 of env runner 1 returned an observation that holds \[3.0\]"):
        check_vector_step(obs, np.ones(3), check, steps, worker_index=1)
    with pytest.raises(EnvError, match="has shape"):
        check_vector_step(np.zeros((3, 5)), np.ones(3), check, steps, worker_index=1)


def test_the_guard_costs_no_wrong_answers_for_finite_updates(make_algo) -> None:
    """Guarded updates are the plain optimizer's updates, bit for bit (gradients clipped by norm, as configured)."""
    algo = make_algo(grad_clip=0.5)
    policy = algo.get_policy()
    model = copy.deepcopy(policy.model)
    optimizer = adam(model.parameters(), lr=policy.config.lr, eps=1e-5)
    optimizer.load_state_dict(policy.optimizer.state_dict())
    obs = torch.randn(8, 4)
    for _ in range(3):
        loss = policy.model.forward_train(obs)["vf_preds"].pow(2).mean()
        policy.apply_gradients(loss)
        reference = model.forward_train(obs)["vf_preds"].pow(2).mean()
        optimizer.zero_grad()
        reference.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), policy.config.grad_clip)
        optimizer.step()
    for (name, a), b in zip(policy.model.state_dict().items(), model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_a_training_error_names_iteration_zero_and_an_empty_policy_id() -> None:
    message = str(TrainingError("the loss is NaN", term="total_loss", policy_id="", iteration=0))
    assert message.startswith("policy '', iteration 0: the loss is NaN")

"""DDPG and TD3: RLlib's names and defaults, the deterministic actor, delayed actor updates, smoothed targets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import corral
from corral import ConfigError
from corral.core import SampleBatch
from corral.plugins.ddpg import DDPG, TD3, DDPGConfig, TD3Config

TINY = {
    "train_batch_size": 32,
    "learning_starts": 64,
    "min_sample_timesteps_per_iteration": 128,
    "actor_hiddens": [32, 32],
    "critic_hiddens": [32, 32],
    "seed": 0,
}


def tiny(name: str = "TD3", env: Any = "Pendulum-v1", **overrides: Any) -> Any:
    return corral.get_config(name).environment(env).update_from_dict({**TINY, **overrides})


def replayed(rows: int = 16, seed: int = 0) -> SampleBatch:
    """A replayed minibatch of Pendulum transitions (random values, in the policy's [-1, 1] actions)."""
    rng = np.random.default_rng(seed)
    return SampleBatch(
        {
            SampleBatch.OBS: rng.normal(size=(rows, 3)).astype(np.float32),
            SampleBatch.ACTIONS: rng.uniform(-1, 1, size=(rows, 1)).astype(np.float32),
            SampleBatch.REWARDS: rng.normal(size=rows).astype(np.float32),
            SampleBatch.NEXT_OBS: rng.normal(size=(rows, 3)).astype(np.float32),
            SampleBatch.DISCOUNTS: np.full(rows, 0.99, np.float32),
            SampleBatch.WEIGHTS: np.ones(rows, np.float32),
        }
    )


@pytest.mark.parametrize("name, cls", [("DDPG", DDPG), ("TD3", TD3)])
def test_found_by_rllib_s_names(name: str, cls: type) -> None:
    (info,) = [p for p in corral.list_algorithms() if p.name == name]
    assert info.dist == "corral" and info.value == f"corral.plugins.ddpg:{name}"
    assert corral.get_algorithm(name.lower()) is cls


def test_defaults_are_rllib_s() -> None:
    ddpg, td3 = DDPGConfig(), TD3Config()
    assert (ddpg.twin_q, ddpg.policy_delay, ddpg.smooth_target_policy) == (False, 1, False)
    assert (ddpg.tau, ddpg.train_batch_size, ddpg.learning_starts, ddpg.l2_reg) == (0.002, 256, 1500, 1e-6)
    assert ddpg.exploration_config["type"] == "OrnsteinUhlenbeckNoise"
    assert ddpg.replay_buffer_config["type"] == "PrioritizedReplayBuffer"
    assert (td3.twin_q, td3.policy_delay, td3.smooth_target_policy, td3.target_noise, td3.target_noise_clip) == (
        True,
        2,
        True,
        0.2,
        0.5,
    )
    assert (td3.tau, td3.train_batch_size, td3.learning_starts, td3.l2_reg) == (0.005, 100, 10_000, 0.0)
    assert td3.exploration_config == {
        "type": "GaussianNoise",
        "random_timesteps": 10_000,
        "stddev": 0.1,
        "initial_scale": 1.0,
        "final_scale": 1.0,
        "scale_timesteps": 1,
    }
    assert ddpg.actor_hiddens == td3.critic_hiddens == [400, 300]


def test_a_partial_exploration_config_keeps_the_rest_and_another_type_replaces_it() -> None:
    config = TD3Config().update_from_dict({"exploration_config": {"random_timesteps": 5000}})
    assert config.exploration_config == {**TD3Config().exploration_config, "random_timesteps": 5000}
    config.update_from_dict({"exploration_config": {"type": "OrnsteinUhlenbeckNoise", "ou_theta": 0.2}})
    assert config.exploration_config == {"type": "OrnsteinUhlenbeckNoise", "ou_theta": 0.2}


def test_rllib_s_older_replay_keys_are_read() -> None:
    config = DDPGConfig().environment("Pendulum-v1")
    config.update_from_dict({"replay_buffer_config": {"min_size_for_sampling": 500, "worker_side_prioritization": False}})
    assert config.learning_starts == 500
    assert config.replay_buffer_config["worker_side_prioritization"] is False
    config.validate()
    config.update_from_dict({"replay_buffer_config": {"worker_side_prioritization": True}})
    with pytest.raises(ConfigError, match=r"which DDPGConfig's policy computes where it learns; leave it False"):
        config.validate()


@pytest.mark.parametrize(
    ("env", "overrides", "message"),
    [
        ("CartPole-v1", {}, r"Discrete"),
        ("Pendulum-v1", {"normalize_actions": False}, r"TD3's actor produces actions in \[-1, 1\]"),
        ("Pendulum-v1", {"model": {"custom_model": "torch.nn:Linear"}}, r"TD3 builds its own actor and critics"),
        ("Pendulum-v1", {"lr_schedule": [[0, 1e-3], [100, 1e-4]]}, r"TD3 does not use lr_schedule"),
    ],
)
def test_what_it_cannot_do_is_refused_before_it_starts(env: str, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        tiny("TD3", env, **overrides).build()


def test_the_actor_is_deterministic_and_exploration_adds_noise_in_bounds(make_algo: Any) -> None:
    algo = make_algo(tiny("TD3", learning_starts=0, exploration_config={"random_timesteps": 0, "stddev": 0.5}))
    policy = algo.get_policy()
    obs = np.array([0.3, -0.2, 0.1], np.float32)
    greedy = [algo.compute_single_action(obs, explore=False) for _ in range(3)]
    with torch.no_grad():
        mean = policy.model.actor(torch.as_tensor(obs)[None])[0].numpy()
    np.testing.assert_allclose(greedy, [2.0 * mean] * 3, rtol=1e-5)  # Pendulum's bounds are [-2, 2]
    explored = np.array([algo.compute_single_action(obs, explore=True) for _ in range(50)])
    assert np.all(np.abs(explored) <= 2.0) and explored.std() > 0.1


def test_the_actor_learns_every_policy_delay_th_update_and_its_optimizer_rests_between(make_algo: Any) -> None:
    policy = make_algo(tiny("TD3")).get_policy()
    assert policy.config.policy_delay == 2 and policy.model.critics.k == 2
    actor = [p for p in policy.model.actor.parameters()]
    for update in range(4):
        before = [p.detach().clone() for p in actor]
        stats = policy.learn_on_batch(replayed(seed=update))
        moved = any(not torch.equal(a, b) for a, b in zip(before, actor, strict=True))
        assert moved == (update % 2 == 0) == ("actor_loss" in stats), update
        assert "critic_loss" in stats and stats[policy.TD_ERROR].shape == (16,)
    restored = make_algo(tiny("TD3")).get_policy()
    restored.set_state(policy.get_state())
    assert restored.critic_updates == 4


def test_the_critic_loss_is_rllib_s_with_smoothed_clipped_twin_targets(make_algo: Any) -> None:
    config = tiny("TD3", target_noise=10.0, target_noise_clip=0.05, l2_reg=0.01, gamma=0.9)
    policy = make_algo(config).get_policy()
    seen: list[torch.Tensor] = []
    target_q = policy.target_model.q_values

    def spy(obs: torch.Tensor, actions: torch.Tensor, frozen: bool = False) -> torch.Tensor:
        seen.append(actions)
        return target_q(obs, actions, frozen)

    policy.target_model.q_values = spy  # type: ignore[method-assign]
    batch = replayed()
    t = {k: torch.as_tensor(v) for k, v in batch.items()}
    with torch.no_grad():  # the values before the update moves the weights
        clean = policy.target_model.actor(t[SampleBatch.NEXT_OBS])
        q = policy.model.q_values(t[SampleBatch.OBS], t[SampleBatch.ACTIONS])
        weights = [p for name, p in policy.model.critics.named_parameters() if "bias" not in name]
        l2 = 0.01 * 0.5 * sum(w.pow(2).sum() for w in weights)
    stats = policy.learn_on_batch(batch)
    (smoothed,) = seen
    assert 0 < (smoothed - clean).abs().max() <= 0.05 + 1e-6  # noise of stddev 10, clipped to 0.05
    with torch.no_grad():  # the targets do not move within an update
        target = t[SampleBatch.REWARDS] + t[SampleBatch.DISCOUNTS] * target_q(t[SampleBatch.NEXT_OBS], smoothed).min(0).values
    expected = (0.5 * (q - target).pow(2)).sum(0).mean() + l2
    assert stats["critic_loss"] == pytest.approx(float(expected), rel=1e-4)


def test_use_huber_puts_the_huber_loss_on_the_td_errors(make_algo: Any) -> None:
    policy = make_algo(tiny("DDPG", use_huber=True, huber_threshold=0.5, l2_reg=0.0)).get_policy()
    batch = replayed()
    t = {k: torch.as_tensor(v) for k, v in batch.items()}
    with torch.no_grad():
        next_q = policy.target_model.q_values(t[SampleBatch.NEXT_OBS], policy.target_model.actor(t[SampleBatch.NEXT_OBS]))
        target = t[SampleBatch.REWARDS] + t[SampleBatch.DISCOUNTS] * next_q[0]
        q = policy.model.q_values(t[SampleBatch.OBS], t[SampleBatch.ACTIONS])[0]
    stats = policy.learn_on_batch(batch)
    assert stats["critic_loss"] == pytest.approx(float(F.huber_loss(q, target, delta=0.5)), rel=1e-4)


@pytest.mark.parametrize("name", ["DDPG", "TD3"])
def test_trains_targets_follow_and_a_checkpoint_restores(name: str, make_algo: Any, tmp_path: Any) -> None:
    algo = make_algo(tiny(name, exploration_config={"random_timesteps": 64}))
    policy = algo.get_policy()
    target_before = {k: v.clone() for k, v in policy.target_model.state_dict().items()}
    result = algo.train()
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert {"critic_loss", "mean_q", "max_q", "min_q"} <= set(stats)
    target_after = policy.target_model.state_dict()
    for part in ("actor.", "critics."):  # Polyak-averaged targets of both networks
        assert any(not torch.equal(target_before[k], target_after[k]) for k in target_after if k.startswith(part))
    path = algo.save(str(tmp_path / "checkpoint"))
    restored = corral.Algorithm.from_checkpoint(path)
    try:
        obs = np.array([0.5, 0.5, -0.3], np.float32)
        assert np.allclose(restored.compute_single_action(obs, explore=False), algo.compute_single_action(obs, explore=False))
    finally:
        restored.stop()

"""SAC: both action-space variants, entropy tuning, its three optimizers in checkpoints."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import corral
from corral import Algorithm, ConfigError
from corral.core import SquashedGaussian
from corral.plugins.sac import SAC, SACConfig

TINY = {
    "train_batch_size": 32,
    "learning_starts": 64,
    "training_intensity": 32.0,
    "min_sample_timesteps_per_iteration": 128,
    "model": {"fcnet_hiddens": [32, 32]},
    "seed": 0,
}


def tiny(env: str, **overrides) -> SACConfig:
    return SACConfig().environment(env).update_from_dict({**TINY, **overrides})


def test_sac_is_found_through_corrals_own_entry_point() -> None:
    (info,) = [p for p in corral.list_algorithms() if p.name == "SAC"]
    assert info.dist == "corral" and info.value == "corral.plugins.sac:SAC"
    assert corral.get_algorithm("sac") is SAC


@pytest.mark.parametrize("env, target", [("Pendulum-v1", -1.0), ("CartPole-v1", 0.98 * math.log(2))])
def test_auto_target_entropy(env, target) -> None:
    assert tiny(env).build().get_policy().target_entropy == pytest.approx(target)


@pytest.mark.parametrize("env", ["Pendulum-v1", "CartPole-v1"])
def test_one_update_per_replayed_batch_moves_every_part(env) -> None:
    algo = tiny(env).build()
    policy = algo.get_policy()
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    target_before = {k: v.clone() for k, v in policy.target_model.state_dict().items()}
    result = algo.train()
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    for key in ("critic_loss", "actor_loss", "alpha_loss", "alpha", "entropy", "mean_q"):
        assert np.isfinite(stats[key]), key
    after = policy.model.state_dict()
    for prefix in ("actor.", "critics.", "log_alpha"):
        assert any(not torch.equal(before[k], after[k]) for k in before if k.startswith(prefix)), prefix
    # Polyak-averaged critic targets moved, the (unused) target actor did not
    target_after = policy.target_model.state_dict()
    assert any(not torch.equal(target_before[k], target_after[k]) for k in target_after if k.startswith("critics."))
    assert all(torch.equal(target_before[k], target_after[k]) for k in target_after if k.startswith("actor."))


def test_alpha_rises_when_entropy_is_below_target() -> None:
    algo = tiny("Pendulum-v1", target_entropy=100.0).build()
    algo.train()
    assert algo.get_policy().model.log_alpha.item() > 0.0  # started at log(1) = 0


def test_actions_stay_inside_the_box() -> None:
    algo = tiny("Pendulum-v1").build()
    algo.train()
    for obs in np.random.default_rng(0).normal(size=(20, 3)):
        action = algo.compute_single_action(obs.astype(np.float32))
        assert -2.0 <= float(action[0]) <= 2.0


def test_squashed_gaussian_log_density_matches_change_of_variables() -> None:
    inputs = torch.tensor([[0.3, -0.5]])
    dist = SquashedGaussian(inputs)
    action, logp = dist.rsample_with_logp()
    base = torch.distributions.Normal(torch.tensor(0.3), torch.tensor(-0.5).exp())
    pre = torch.atanh(action.clamp(-0.999999, 0.999999))
    expected = base.log_prob(pre) - torch.log(1 - action.pow(2) + 1e-12)
    torch.testing.assert_close(logp, expected.squeeze(-1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dist.logp(action), logp, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("lr", [1e-3, None])  # None: RLlib's new stack asks for it, as SAC has no single lr
def test_one_optimizer_steps_critics_actor_and_alpha_at_their_own_rates(lr: float | None) -> None:
    policy = tiny("Pendulum-v1", critic_lr=1e-3, actor_lr=2e-4, alpha_lr=5e-2, lr=lr).build().get_policy()
    assert policy.config.lr == lr
    groups = policy.optimizer.param_groups
    assert [g["lr"] for g in groups] == [1e-3, 2e-4, 5e-2]
    assert groups[2]["params"] == [policy.model.log_alpha]
    assert {id(p) for p in groups[1]["params"]} == {id(p) for p in policy.model.actor.parameters()}


def test_actor_loss_does_not_reach_the_critic_weights() -> None:
    policy = tiny("Pendulum-v1").build().get_policy()
    obs = torch.zeros(4, 3)
    loss, _ = policy._box_actor_loss(obs, torch.tensor(0.2))
    loss.backward()
    assert all(p.grad is None for p in policy.model.critics.parameters())
    assert all(p.grad is not None for p in policy.model.actor.parameters())


def test_checkpoint_restores_optimizer_and_target_critics(tmp_path) -> None:
    algo = tiny("Pendulum-v1").build()
    algo.train()
    restored = Algorithm.from_checkpoint(algo.save(tmp_path / "ckpt"))
    a, b = algo.get_policy(), restored.get_policy()
    sa, sb = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
    assert sa.keys() == sb.keys() and len(sa) == len(list(a.model.parameters()))
    for key in sa:
        torch.testing.assert_close(sa[key]["exp_avg"], sb[key]["exp_avg"])
    for key, value in a.target_model.state_dict().items():
        torch.testing.assert_close(value, b.target_model.state_dict()[key])
    obs = np.zeros(3, dtype=np.float32)
    np.testing.assert_allclose(algo.compute_single_action(obs, explore=False), restored.compute_single_action(obs, explore=False))


@pytest.mark.parametrize(
    "overrides, message",
    [({"lr_schedule": [[0, 1e-3], [10, 1e-4]]}, "actor_lr"), ({"normalize_actions": False}, "normalize_actions")],
)
def test_invalid_settings_are_refused(overrides, message) -> None:
    with pytest.raises(ConfigError, match=message):
        tiny("Pendulum-v1", **overrides).build()


@pytest.mark.parametrize("env", ["Pendulum-v1", "CartPole-v1"])
def test_a_single_critic_works_when_twin_q_is_off(env) -> None:
    algo = tiny(env, twin_q=False).build()
    assert algo.get_policy().model.critics.k == 1
    assert np.isfinite(algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["critic_loss"])


def test_rllib_s_q_value_calls_give_each_critic_s_values() -> None:
    model = tiny("Pendulum-v1").build().get_policy().model
    obs = torch.from_numpy(np.random.default_rng(0).random((5, 3)))  # float64, as RLlib's offline_rl example passes it
    actions = torch.from_numpy(np.random.default_rng(1).random((5, 1)))
    q, state = model.get_q_values(obs, actions)
    twin, _ = model.get_twin_q_values(obs, actions)
    both = model.q_values(obs.float(), actions.float())
    assert q.shape == (5, 1) and state == []
    torch.testing.assert_close(torch.cat([q, twin], dim=1), both.T)
    discrete = tiny("CartPole-v1").build().get_policy().model
    assert discrete.get_q_values(obs[:, :2].repeat(1, 2))[0].shape == (5, 2), "every action's value"
    single = tiny("Pendulum-v1", twin_q=False).build().get_policy().model
    with pytest.raises(ValueError, match=r"one Q network \(twin_q=False\)"):
        single.get_twin_q_values(obs, actions)


def test_rllib_s_calls_of_the_model_and_the_policy_with_an_input_dict() -> None:
    policy = tiny("Pendulum-v1").build().get_policy()
    obs = torch.from_numpy(np.random.default_rng(0).random((4, 3)))  # RLlib's offline_rl example's calls
    model_out, state = policy.model({"obs": obs})
    assert state == [] and model_out.dtype == torch.float32 and torch.equal(model_out, obs.float())
    actions, state_outs, extras = policy.compute_actions_from_input_dict({"obs": obs}, explore=False)
    assert actions.shape == (4, 1) and state_outs == [] and isinstance(extras, dict)
    q, _ = policy.model.get_q_values(model_out, torch.from_numpy(actions))
    assert q.shape == (4, 1) and torch.isfinite(q).all()

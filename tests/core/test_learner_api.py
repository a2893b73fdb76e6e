"""RLlib's Learner API (``learner_class``): a loss or optimizers written for RLlib's new stack change corral's update.

An algorithm's Learner that replaces nothing leaves the update as it is, to the
bit; each part a subclass replaces is called where RLlib calls it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from corral import CheckpointError, ConfigError
from corral.core import Learner, OptimizerSet, TorchLearner
from corral.plugins.a2c import A2CConfig
from corral.plugins.appo import APPOConfig, APPOTorchLearner
from corral.plugins.dqn import DQNConfig, DQNTorchLearner
from corral.plugins.impala import IMPALAConfig, IMPALATorchLearner
from corral.plugins.marwil import MARWILConfig, MARWILTorchLearner
from corral.plugins.ppo import PPOConfig, PPOTorchLearner
from corral.plugins.sac import SACConfig, SACTorchLearner


def _small_ppo(**training: Any) -> PPOConfig:
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .training(train_batch_size=256, minibatch_size=64, num_epochs=2, **training)
        .debugging(seed=1)
    )


def _trained(config: Any, iterations: int = 1) -> tuple[dict[str, Any], dict[str, np.ndarray], Any]:
    """Train; returns the last result, the default policy's weights and the (stopped) algorithm."""
    algo = config.build()
    try:
        for _ in range(iterations):
            result = algo.train()
        return result, algo.get_policy().get_weights(), algo
    finally:
        algo.stop()


def _largest_difference(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    return max(float(np.abs(np.asarray(a[k]) - np.asarray(b[k])).max()) for k in a)


_ALGORITHMS = {
    "PPO": (_small_ppo(), PPOTorchLearner),
    "A2C": (A2CConfig().environment("CartPole-v1").training(train_batch_size=100, grad_clip=0.5), TorchLearner),
    "MARWIL": (
        MARWILConfig().environment("CartPole-v1").training(train_batch_size=100, beta=1.0).offline_data(input_="sampler"),
        MARWILTorchLearner,
    ),
    "IMPALA": (IMPALAConfig().environment("CartPole-v1").training(train_batch_size=100), IMPALATorchLearner),
    "APPO": (APPOConfig().environment("CartPole-v1").training(train_batch_size=100, num_epochs=2), APPOTorchLearner),
    "DQN": (DQNConfig().environment("CartPole-v1").training(learning_starts=64), DQNTorchLearner),
    "SAC": (
        SACConfig().environment("Pendulum-v1").training(learning_starts=64, train_batch_size=32),
        SACTorchLearner,
    ),
}


@pytest.mark.parametrize("name", sorted(_ALGORITHMS))
def test_an_algorithm_s_own_learner_leaves_its_update_as_it_is(name: str) -> None:
    config, learner_class = _ALGORITHMS[name]
    config = config.copy().debugging(seed=3).reporting(min_sample_timesteps_per_iteration=200)
    _, without, _ = _trained(config.copy(), iterations=2)
    result, with_learner, algo = _trained(config.copy().training(learner_class=learner_class), iterations=2)
    assert isinstance(algo.get_policy().learner, learner_class)
    assert _largest_difference(without, with_learner) == 0.0
    assert result["info"]["learner"]["default_policy"], "the update ran and reported"


class PPOWithWeightPenalty(PPOTorchLearner):
    """PPO's loss plus the mean of the weights (RLlib's ppo_with_custom_loss_fn example, written here)."""

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):  # type: ignore[no-untyped-def]
        loss = super().compute_loss_for_module(module_id=module_id, config=config, batch=batch, fwd_out=fwd_out)
        mean_weight = torch.stack([w.mean() for w in self.get_parameters(self.module[module_id])]).mean()
        self.metrics.log_value((module_id, "mean_weight"), mean_weight, window=1)
        return loss + config.learner_config_dict["penalty"] * mean_weight


def test_a_learner_s_own_loss_changes_the_update_and_its_logged_values_are_reported() -> None:
    _, plain, _ = _trained(_small_ppo())
    result, penalised, algo = _trained(_small_ppo(learner_class=PPOWithWeightPenalty, learner_config_dict={"penalty": 5.0}))
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert _largest_difference(plain, penalised) > 1e-4
    # window=1: the last minibatch's value, taken before its step
    assert stats["mean_weight"] == pytest.approx(float(stats["mean_weight"]))
    assert abs(stats["mean_weight"]) < 0.1
    assert {"policy_loss", "vf_loss", "kl"} <= set(stats), "PPO's own stats stay"
    _, penalised_again, _ = _trained(_small_ppo(learner_class=PPOWithWeightPenalty, learner_config_dict={"penalty": 5.0}))
    assert _largest_difference(penalised, penalised_again) == 0.0, "seeded runs with a Learner repeat"
    assert algo.config.learner_class is PPOWithWeightPenalty
    with pytest.raises(ValueError, match=r"ema_coeff=0.01: corral reduces a Learner's metrics over each update"):
        algo.get_policy().learner.metrics.log_value("x", 1.0, ema_coeff=0.01)


class SeparateValueOptimizer(PPOTorchLearner):
    """One Adam for the policy's network, one for the value function's, each with its own learning rate."""

    def configure_optimizers_for_module(self, module_id, config=None):  # type: ignore[no-untyped-def]
        model = self.module[module_id]
        pi = self.get_parameters(model.encoder) + self.get_parameters(model.pi_head)
        vf = self.get_parameters(model.vf_encoder) + self.get_parameters(model.vf_head)
        self.register_optimizer(
            module_id=module_id, optimizer_name="pi", optimizer=torch.optim.Adam(pi), params=pi, lr_or_lr_schedule=config.lr
        )
        lr_vf = config.learner_config_dict["lr_vf"]
        self.register_optimizer(
            module_id=module_id, optimizer_name="vf", optimizer=torch.optim.Adam(vf), params=vf, lr_or_lr_schedule=lr_vf
        )


def test_optimizers_a_learner_registers_step_their_own_parameters_at_their_own_rates(tmp_path) -> None:
    config = _small_ppo(
        learner_class=SeparateValueOptimizer,
        learner_config_dict={"lr_vf": [[0, 1e-3], [10_000, 1e-4]]},
        model={"vf_share_layers": False},
        lr=1e-6,
    )
    algo = config.build()
    try:
        policy = algo.get_policy()
        assert isinstance(policy.optimizer, OptimizerSet)
        before = {k: v.copy() for k, v in policy.get_weights().items()}
        algo.train()
        after = policy.get_weights()
        moved = {k: float(np.abs(after[k] - before[k]).max()) for k in before}
        assert max(v for k, v in moved.items() if k.startswith("vf_")) > 1e-4
        assert max(v for k, v in moved.items() if k.startswith(("encoder", "pi_head"))) < 1e-4
        vf_rate = policy.learner.get_optimizer(optimizer_name="vf").param_groups[0]["lr"]
        assert vf_rate == pytest.approx(1e-3 - 0.9e-3 * policy.global_timestep / 10_000), "its schedule, at the timestep"
        assert policy.learner.get_optimizer(optimizer_name="pi").param_groups[0]["lr"] == 1e-6
        path = algo.save(str(tmp_path / "ckpt"))
        state = policy.get_state()["optimizer"]
    finally:
        algo.stop()
    with pytest.raises(CheckpointError, match=r"Learner class 'tests.core.test_learner_api:SeparateValueOptimizer'"):
        type(algo).from_checkpoint(path)  # a class of the script's: the checkpoint names code it cannot vouch for
    restored = type(algo).from_checkpoint(path, config_overrides={"learner_class": SeparateValueOptimizer})
    try:
        again = restored.get_policy().get_state()["optimizer"]["optimizers"]
        for name in ("pi", "vf"):
            saved_moments = state["optimizers"][name]["state"]
            assert all(torch.equal(saved_moments[i]["exp_avg"], again[name]["state"][i]["exp_avg"]) for i in saved_moments)
    finally:
        restored.stop()


class NoGradients(PPOTorchLearner):
    """Gradients zeroed after clipping, and every step counted."""

    steps = 0

    def postprocess_gradients(self, gradients_dict):  # type: ignore[no-untyped-def]
        return {param: torch.zeros_like(grad) for param, grad in super().postprocess_gradients(gradients_dict).items()}

    def apply_gradients(self, gradients_dict):  # type: ignore[no-untyped-def]
        type(self).steps += 1
        super().apply_gradients(gradients_dict)


def test_postprocess_and_apply_gradients_of_a_learner_take_part_in_every_gradient_step() -> None:
    algo = _small_ppo(learner_class=NoGradients, optimizer={"type": "sgd"}).build()
    try:
        before = algo.get_policy().get_weights()
        result = algo.train()
        after = algo.get_policy().get_weights()
    finally:
        algo.stop()
    assert NoGradients.steps == result["info"]["learner"]["default_policy"]["learner_stats"]["num_sgd_updates"] > 0
    assert _largest_difference(before, after) == 0.0, "plain SGD with zero gradients leaves the weights"


class CountingUpdates(TorchLearner):
    """Counts the updates it is told of, and reports a value the old way (register_metrics)."""

    def build(self) -> None:
        super().build()
        self.updates = 0

    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        self.updates += 1
        self.register_metrics("default_policy", {"updates_seen": self.updates, "at": timesteps["num_env_steps_sampled_lifetime"]})


def test_after_gradient_based_update_runs_after_each_update_and_register_metrics_reports() -> None:
    config = A2CConfig().environment("CartPole-v1").training(train_batch_size=100, learner_class=CountingUpdates)
    algo = config.reporting(min_sample_timesteps_per_iteration=0).build()
    try:
        algo.train()
        result = algo.train()
    finally:
        algo.stop()
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert stats["updates_seen"] == 2
    assert stats["at"] == result["num_env_steps_sampled"]


def test_update_from_batch_updates_the_policy_as_its_algorithm_does() -> None:
    algo = _small_ppo(learner_class=PPOTorchLearner).build()
    try:
        batch = algo.sample(256)
        before = algo.get_policy().get_weights()
        results = algo.get_policy().learner.update_from_batch(batch, minibatch_size=64)
        assert results["default_policy"]["num_sgd_updates"] == 2 * math.ceil(batch.env_steps / 64)
        assert _largest_difference(before, algo.get_policy().get_weights()) > 0
        with pytest.raises(ConfigError, match=r"minibatch_size=32.*holds 64"):
            algo.get_policy().learner.update_from_batch(batch, minibatch_size=32)
    finally:
        algo.stop()


def test_the_learner_group_updates_every_policy_from_a_batch_as_learn_on_batch_does() -> None:
    algo, twin = _small_ppo().build(), _small_ppo().build()
    try:
        batch = algo.sample(256)
        twin.sample(256)  # the same samples drew the same generators
        group = algo.learner_group
        assert group.is_local and not group.is_remote and group.num_restarts == 0
        stats = group.update_from_batch(batch.policy_batches["default_policy"], minibatch_size=64, timesteps={})
        assert stats["default_policy"]["num_sgd_updates"] > 0
        assert algo.counters["num_env_steps_trained"] == batch.env_steps
        twin.learn_on_batch(batch)
        assert _largest_difference(group.get_weights()["default_policy"], twin.get_weights()["default_policy"]) == 0
        with pytest.raises(ConfigError, match=r"num_epochs=3.*config.training\(num_epochs=...\)"):
            group.update_from_batch(batch, num_epochs=3)
        group.set_weights(twin.learner_group.get_weights(["default_policy"]))
    finally:
        algo.stop()
        twin.stop()


class LossOfItsOwn(TorchLearner):
    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):  # type: ignore[no-untyped-def]
        return fwd_out["action_dist_inputs"].pow(2).mean()


class OptimizerOfItsOwn(TorchLearner):
    def configure_optimizers_for_module(self, module_id, config=None):  # type: ignore[no-untyped-def]
        params = self.get_parameters(self.module[module_id])
        self.register_optimizer(module_id=module_id, optimizer=torch.optim.SGD(params[:1]), params=params)


def test_a_learner_that_does_not_fit_the_algorithm_is_refused_with_what_to_do_instead() -> None:
    dqn = DQNConfig().environment("CartPole-v1")
    with pytest.raises(ConfigError, match=r"DQNPolicy computes its loss in its own update.*PPO, A2C, MARWIL and BC"):
        dqn.copy().training(learner_class=LossOfItsOwn).build()
    with pytest.raises(ConfigError, match=r"Learner of PPOPolicy, not of DQNPolicy"):
        dqn.copy().training(learner_class=PPOTorchLearner).build()
    with pytest.raises(ConfigError, match=r"builds optimizers of its own"):
        SACConfig().environment("Pendulum-v1").training(learner_class=type("O", (OptimizerOfItsOwn,), {})).build()
    with pytest.raises(ConfigError, match=r"params must be the parameters the optimizer was built over"):
        _small_ppo(learner_class=OptimizerOfItsOwn).build()
    with pytest.raises(ConfigError, match=r"not a subclass of corral.core.Learner"):
        _small_ppo(learner_class=dict).build()
    with pytest.raises(ConfigError, match=r"not a class"):
        _small_ppo(learner_class=len)
    assert issubclass(PPOTorchLearner, Learner)

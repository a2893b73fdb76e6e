"""APPO: IMPALA's sequences and V-trace, PPO's clipped surrogate against a target network, registered like any plugin."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import corral
from corral import ConfigError
from corral.plugins.appo import APPO, APPOConfig, APPOPolicy
from corral.plugins.appo.policy import surrogate_ratio

SMALL = {"train_batch_size": 64, "rollout_fragment_length": 16, "num_envs_per_env_runner": 4, "seed": 0}


def tiny(**overrides):
    """Each train() one update, in this thread: these tests follow the update itself (the learner thread has its own)."""
    return APPOConfig().environment("CartPole-v1").update_from_dict({**SMALL, "learner_thread": False, **overrides})


def _target_equals_policy(policy: APPOPolicy) -> bool:
    online, target = policy.model.state_dict(), policy.target_model.state_dict()
    return all(torch.equal(online[k], target[k]) for k in online)


def test_registered_under_its_name_with_rllib_s_defaults_but_the_learning_rate() -> None:
    assert corral.get_algorithm("APPO") is APPO
    config = corral.get_config("APPO")
    assert isinstance(config, APPOConfig)
    assert (config.clip_param, config.use_kl_loss, config.tau, config.target_network_update_freq) == (0.4, False, 1.0, 1)


def test_the_target_network_follows_the_policy_every_target_network_update_freq_trained_steps() -> None:
    algo = tiny(target_network_update_freq=128).build()  # two train batches of 64
    policy = algo.get_policy()
    try:
        algo.train()
        assert not _target_equals_policy(policy), "64 steps trained: the target stays where it was"
        algo.train()
        assert _target_equals_policy(policy), "128 steps trained: tau=1 copies the policy"
    finally:
        algo.stop()


def test_the_ratio_is_the_learner_s_over_the_target_s_unless_the_sampler_took_the_step_twice_as_often() -> None:
    target = torch.log(torch.tensor([0.5, 0.5, 0.1]))
    sampler = torch.log(torch.tensor([0.5, 0.25, 0.4]))  # as the target; half as often; 4x as often
    learner = torch.log(torch.tensor([0.6, 0.6, 0.15]))
    ratio = surrogate_ratio(learner, target, sampler)
    assert torch.allclose(ratio, torch.tensor([1.2, 1.2, 2.0 * 0.15 / 0.4])), "the last: min(4, 2) * pi / mu"


def test_num_epochs_steps_on_each_batch() -> None:
    algo = tiny(num_epochs=3).build()
    try:
        learner = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]
        steps = {int(state["step"]) for state in algo.get_policy().optimizer.state.values()}
        assert steps == {3}
        assert {"policy_loss", "vf_loss", "entropy", "kl", "cur_kl_coeff", "grad_gnorm"} <= learner.keys()
        assert learner["kl"] > 0, "three steps away from the target network"
    finally:
        algo.stop()


def test_the_kl_weight_adapts_at_each_target_update_with_use_kl_loss() -> None:
    algo = tiny(use_kl_loss=True, kl_coeff=1.0, kl_target=1e-9, num_epochs=2).build()
    try:
        algo.train()
        assert algo.get_policy().kl_coeff == 1.5, "a divergence above twice the target raises the weight by half"
        assert algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["cur_kl_coeff"] == 1.5
    finally:
        algo.stop()


def test_a_checkpoint_holds_the_target_network_and_the_kl_weight(tmp_path) -> None:
    config = tiny(use_kl_loss=True, kl_target=1e-9, target_network_update_freq=128)
    algo = config.build()
    try:
        algo.train()
        path = algo.save(str(tmp_path / "checkpoint"))
        policy = algo.get_policy()
        target = {k: v.clone() for k, v in policy.target_model.state_dict().items()}
        kl_coeff = policy.kl_coeff
        after = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
    finally:
        algo.stop()
    restored = config.build()
    try:
        restored.restore(path)
        policy = restored.get_policy()
        assert all(torch.equal(target[k], v) for k, v in policy.target_model.state_dict().items())
        assert policy.kl_coeff == kl_coeff
        assert np.isclose(restored.train()["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"], after, rtol=1e-5)
    finally:
        restored.stop()


def test_vtrace_false_is_refused_with_what_to_use() -> None:
    with pytest.raises(ConfigError, match=r"vtrace=False: corral's APPO always corrects .* use PPO"):
        tiny(vtrace=False).validate()


def test_a_recurrent_appo_learns_on_sequences_from_their_start_states() -> None:
    lstm = {"use_lstm": True, "lstm_cell_size": 16, "fcnet_hiddens": [16]}
    algo = tiny(model=lstm, num_epochs=2).build()
    try:
        learner = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(learner["total_loss"]) and learner["kl"] > 0
    finally:
        algo.stop()

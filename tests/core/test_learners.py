"""Learner actors (``learners(num_learners=N)``): an update on N Learners is the update one process makes, and failures are clear.

Each Learner holds the whole batch and computes its losses on its share of
the rows; gradients are averaged with torch.distributed (gloo) on two CPUs.
"""

from __future__ import annotations

import copy
import logging
import math
from typing import Any

import numpy as np
import pytest
import ray

import corral
from corral import ConfigError, LearnerError
from corral.core import MultiAgentBatch
from corral.plugins.a2c import A2CConfig
from corral.plugins.appo import APPOConfig
from corral.plugins.ddpg import TD3Config
from corral.plugins.dqn import DQNConfig
from corral.plugins.impala import IMPALAConfig
from corral.plugins.marwil import BCConfig, MARWILConfig
from corral.plugins.ppo import PPOConfig
from corral.plugins.ppo.policy import PPOPolicy
from corral.plugins.r2d2 import R2D2Config
from corral.plugins.sac import CQLConfig, SACConfig
from tests.conftest import best_return_within
from tests.core.test_learner_api import PPOWithWeightPenalty, SeparateValueOptimizer

pytestmark = pytest.mark.usefixtures("ray_on_two_cpus")


def _same_update(config: Any, rows: int, tolerance: float = 2e-5, replayed: bool = False, updates: int = 1) -> dict[str, Any]:
    """Learn on one batch ``updates`` times with 0 and with 2 Learners; assert every policy's weights end alike.

    The batch is ``rows`` sampled env steps, or with ``replayed`` a minibatch
    replayed from them (an off-policy algorithm's, with prioritized-replay weights).

    Returns:
        The last update's stats, alone and together.
    """
    alone, together = config.copy().learners(num_learners=0).build(), config.copy().learners(num_learners=2).build()
    try:
        batch = alone.sample(rows)
        if replayed:
            for policy_id, rows_of_policy in batch.policy_batches.items():
                alone.replay_buffers[policy_id].add(rows_of_policy)
            buffers = alone.replay_buffers.items()
            batch = MultiAgentBatch({pid: alone._replayed(pid, buffer, 0.4) for pid, buffer in buffers}, rows)
        for policy_id in batch.policy_batches:  # sampling drew from the policy's generators: start from the same state
            together.get_policy(policy_id).set_state(alone.get_policy(policy_id).get_state())
        for _ in range(updates):
            stats_alone = alone.learn_on_batch(copy.deepcopy(batch))
            stats_together = together.learn_on_batch(copy.deepcopy(batch))
        for policy_id in stats_alone:
            before, after = alone.get_policy(policy_id).get_weights(), together.get_policy(policy_id).get_weights()
            worst = max(float(np.abs(np.asarray(before[k]) - np.asarray(after[k])).max()) for k in before)
            assert worst < tolerance, f"policy {policy_id!r}: weights differ by up to {worst:.2e}"
        return {"alone": stats_alone, "together": stats_together}
    finally:
        alone.stop()
        together.stop()


def test_ppo_s_epochs_of_shuffled_minibatches_on_two_learners_end_where_one_process_ends() -> None:
    # 3 epochs of minibatches of 128 over 520 rows: the last minibatch of each epoch has 8 rows, 4 for each Learner
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=4)
        .training(train_batch_size=520, minibatch_size=128, num_epochs=3)
        .debugging(seed=0)
    )
    stats = _same_update(config, 520)
    alone, together = stats["alone"]["default_policy"], stats["together"]["default_policy"]
    assert together["num_sgd_updates"] == alone["num_sgd_updates"] == 15
    assert np.isclose(together["kl"], alone["kl"], rtol=1e-3), "the KL the coefficient adapts to is the whole batch's"
    assert together["cur_kl_coeff"] == alone["cur_kl_coeff"]


def test_a_recurrent_ppo_and_a2c_impala_and_appo_update_alike_on_two_learners() -> None:
    lstm = {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 8, "fcnet_hiddens": [16]}
    ppo = PPOConfig().environment("CartPole-v1").training(train_batch_size=200, minibatch_size=80, num_epochs=2, model=lstm)
    a2c = A2CConfig().environment("CartPole-v1").training(train_batch_size=100)
    impala = IMPALAConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=3, rollout_fragment_length=20)
    appo = APPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=3, rollout_fragment_length=20)
    appo = appo.training(train_batch_size=60, num_epochs=2, use_kl_loss=True)
    for config in (ppo, a2c, impala.training(train_batch_size=60), appo):
        stats = _same_update(config.debugging(seed=0), config.train_batch_size)
    alone, together = stats["alone"]["default_policy"], stats["together"]["default_policy"]
    assert np.isclose(together["kl"], alone["kl"], rtol=1e-4), "APPO's KL weight adapts to the whole batch's KL"


def test_dqn_sac_cql_and_r2d2_replayed_updates_and_priorities_are_alike_on_two_learners() -> None:
    prioritized = {"type": "PrioritizedReplayBuffer", "capacity": 1000}
    lstm = {"use_lstm": True, "lstm_cell_size": 16, "max_seq_len": 10, "fcnet_hiddens": [16]}
    configs = [
        # dueling=False: the dueling head's centred advantages leave a hidden unit a gradient of exactly 0 in one
        # process, which the group's average rounds to 3e-7, and Adam's first step scales to 3e-5
        DQNConfig().environment("CartPole-v1").training(train_batch_size=50, replay_buffer_config=prioritized, dueling=False),
        SACConfig().environment("Pendulum-v1").training(train_batch_size=50, replay_buffer_config=prioritized),
        SACConfig().environment("CartPole-v1").training(train_batch_size=50),  # a softmax actor: no noise drawn
        CQLConfig().environment("Pendulum-v1").training(train_batch_size=50, num_actions=3, bc_iters=0),
        R2D2Config()
        .environment("CartPole-v1")
        .training(train_batch_size=60, model=lstm, replay_buffer_config={**prioritized, "replay_burn_in": 2}),
    ]
    for config in configs:
        stats = _same_update(config.debugging(seed=0), 200, replayed=True)
        alone, together = stats["alone"]["default_policy"], stats["together"]["default_policy"]
        # the TD errors set the replayed rows' priorities: the Learners' shares joined in order are the whole batch's
        assert np.allclose(together["td_error"], alone["td_error"], atol=1e-4), type(config).__name__


def test_td3_s_delayed_actor_and_smoothed_targets_update_alike_on_two_learners() -> None:
    # the second update leaves the actor out: on Learners too, neither its weights nor its Adam moments move
    config = TD3Config().environment("Pendulum-v1").training(train_batch_size=50, actor_hiddens=[32], critic_hiddens=[32])
    stats = _same_update(config.debugging(seed=0), 200, replayed=True, updates=2)
    assert "actor_loss" not in stats["together"]["default_policy"]
    assert np.allclose(stats["together"]["default_policy"]["td_error"], stats["alone"]["default_policy"]["td_error"], atol=1e-4)


def _worst_difference(first: dict[str, Any], second: dict[str, Any]) -> float:
    """The largest difference between two policy states' weights and target weights."""
    pairs = [(first[part][k], second[part][k]) for part in ("weights", "target_weights") for k in first[part]]
    return max(float((a - b).abs().max()) for a, b in pairs)


def test_an_off_policy_iteration_keeps_the_state_on_the_learners_and_ends_where_one_process_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prioritized = {"type": "PrioritizedReplayBuffer", "capacity": 1000}
    configs = [  # SAC moves its targets after every update, DQN copies them every 30 env steps: both on the Learners
        SACConfig().environment("Pendulum-v1").training(train_batch_size=32, replay_buffer_config=prioritized),
        DQNConfig().environment("CartPole-v1").training(train_batch_size=32, target_network_update_freq=30, dueling=False),
    ]
    for config in configs:
        config = config.training(learning_starts=20, training_intensity=32).reporting(min_sample_timesteps_per_iteration=40)
        alone, together = config.debugging(seed=0).build(), config.copy().learners(num_learners=2).build()
        try:
            policy = together.get_policy()
            sent: list[int] = []
            steps: list[int] = []
            monkeypatch.setattr(policy, "get_state", lambda read=policy.get_state, sent=sent: sent.append(1) or read())
            monkeypatch.setattr(
                together, "training_step", lambda step=together.training_step, steps=steps: steps.append(1) or step()
            )
            for _ in range(2):
                trained = [algo.train()["num_env_steps_trained"] for algo in (alone, together)]
            assert trained[0] == trained[1] > 40 * 32, "the iterations made many updates of 32 rows"
            assert len(sent) == len(steps) < 10, "the state went to the Learners once a training step, not once an update"
            monkeypatch.undo()
            worst = _worst_difference(alone.get_policy().get_state(), together.get_policy().get_state())
            assert worst < 1e-4, f"{type(config).__name__}: weights and targets differ by up to {worst:.2e}"
        finally:
            alone.stop()
            together.stop()


def test_a_learner_that_dies_amid_an_off_policy_iteration_is_started_again_and_replays_its_updates() -> None:
    config = SACConfig().environment("Pendulum-v1").training(train_batch_size=32, learning_starts=20, training_intensity=32)
    config = config.reporting(min_sample_timesteps_per_iteration=40).learners(num_learners=2, num_cpus_per_learner=0.5)
    runs = [config.copy().debugging(seed=0).build() for _ in range(2)]
    try:
        killed = runs[1]
        replay_once = killed._replay_once
        replays: list[int] = []

        def kill_on_the_fifth(*args: Any) -> Any:
            replays.append(1)
            if len(replays) == 5:  # four updates of this iteration are on the Learners only
                ray.kill(killed.learner_actors._actors[1])
            return replay_once(*args)

        killed._replay_once = kill_on_the_fifth  # type: ignore[method-assign]
        for algo in runs:
            algo.train()
        assert killed.learner_group.num_restarts == 1 and len(replays) > 5
        worst = _worst_difference(runs[0].get_policy().get_state(), killed.get_policy().get_state())
        assert worst == 0.0, "the group started again made every update of the iteration as the first would have"
    finally:
        for algo in runs:
            algo.stop()


def test_marwil_and_bc_update_alike_on_two_learners() -> None:
    for config in (MARWILConfig().training(beta=1.0), BCConfig()):
        # MARWIL's advantage scale is a moving average of the whole batch's mean squared advantage
        stats = _same_update(config.environment("CartPole-v1").training(train_batch_size=100).debugging(seed=0), 100)
        if "moving_average_sqd_adv_norm" in stats["alone"]["default_policy"]:
            scale = [stats[run]["default_policy"]["moving_average_sqd_adv_norm"] for run in ("alone", "together")]
            assert np.isclose(*scale, rtol=1e-5)


def test_every_policy_of_a_multi_agent_run_updates_alike_on_two_learners() -> None:
    config = (
        PPOConfig()
        .environment(corral.make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=lambda agent, *args, **kwargs: f"p{agent}")
        .training(train_batch_size=256, minibatch_size=64, num_epochs=2)
        .debugging(seed=0)
    )
    assert set(_same_update(config, 256)["together"]) == {"p0", "p1"}


def test_a_learner_class_s_loss_and_optimizers_update_alike_on_two_learners() -> None:
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .training(
            train_batch_size=256,
            minibatch_size=64,
            num_epochs=2,
            learner_class=SeparateValueOptimizer,
            learner_config_dict={"lr_vf": 3e-3},
            model={"vf_share_layers": False},
        )
        .debugging(seed=0)
    )
    _same_update(config, 256)
    penalised = config.copy().training(learner_class=PPOWithWeightPenalty, learner_config_dict={"penalty": 5.0})
    stats = _same_update(penalised, 256)
    assert stats["together"]["default_policy"]["mean_weight"] == pytest.approx(
        stats["alone"]["default_policy"]["mean_weight"], abs=1e-6
    ), "what each Learner logged, averaged over the Learners"


def test_the_learner_group_updates_from_a_batch_on_the_actors_as_in_one_process() -> None:
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=128, minibatch_size=64).debugging(seed=0)
    alone, together = config.copy().build(), config.copy().learners(num_learners=2).build()
    try:
        batch = alone.sample(128)
        together.get_policy().set_state(alone.get_policy().get_state())
        assert together.learner_group.is_remote and alone.learner_group.is_local
        alone.learner_group.update_from_batch(copy.deepcopy(batch))
        together.learner_group.update_from_batch(copy.deepcopy(batch))
        before = alone.learner_group.get_weights()["default_policy"]
        after = together.learner_group.get_weights()["default_policy"]
        assert max(float(np.abs(before[k] - after[k]).max()) for k in before) < 2e-5
    finally:
        alone.stop()
        together.stop()


def test_a_checkpoint_of_a_run_with_learners_reopens_with_or_without_them(tmp_path) -> None:
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=256, minibatch_size=64).debugging(seed=0)
    algo = config.copy().learners(num_learners=2).build()
    try:
        algo.train()
        path = algo.save(str(tmp_path / "checkpoint"))
        weights = algo.get_policy().get_weights()
        first = algo.train()["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
    finally:
        algo.stop()
    for learners in (0, 2):
        restored = config.copy().learners(num_learners=learners).build()
        try:
            restored.restore(path)
            assert all(np.array_equal(weights[k], v) for k, v in restored.get_policy().get_weights().items())
            again = restored.train()["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
            assert np.isclose(again, first, rtol=1e-4), f"{learners} Learners continue as the run did"
        finally:
            restored.stop()


def test_an_algorithm_whose_policy_cannot_share_its_update_is_refused_before_any_learner_starts() -> None:
    class OwnLoss(PPOPolicy):
        data_parallel_learning = False  # a user's policy that has not said its losses are means over its share

    config = PPOConfig().environment("CartPole-v1").learners(num_learners=2)
    config = config.multi_agent(policies={"default_policy": corral.PolicySpec(policy_class=OwnLoss)})
    with pytest.raises(ConfigError, match=r"num_learners=2\): OwnLoss cannot learn on Learner actors"):
        config.build()
    assert not ray.util.list_named_actors(), "no Learner started"


def test_rllib_s_names_for_learners_set_them() -> None:
    old = PPOConfig().resources(num_learner_workers=2, num_cpus_per_learner_worker=0.5, num_gpus_per_learner_worker=0)
    new = PPOConfig().learners(num_learners=2, num_cpus_per_learner=0.5, num_gpus_per_learner=0)
    assert old.to_dict() == new.to_dict() and new.num_learners == 2 and new.num_cpus_per_learner == 0.5


def test_train_batch_size_per_learner_counts_one_learner_s_rows_of_the_batch_and_of_ppo_s_minibatches() -> None:
    per_learner = PPOConfig().training(train_batch_size_per_learner=300, minibatch_size=100, num_epochs=1)
    assert PPOConfig().total_train_batch_size == 4000, "without it, train_batch_size is the whole batch"
    for learners, rows in ((0, 300), (2, 600)):
        config = per_learner.copy().environment("CartPole-v1").learners(num_learners=learners).debugging(seed=0)
        assert config.total_train_batch_size == rows and config.whole_minibatch_size == 100 * max(1, learners)
        algo = config.build_algo()  # RLlib's name for build() since Ray 2.40
        try:
            result = algo.train()
            trained = result["num_env_steps_trained"]
            assert rows <= trained < rows + 4, "less than a step per sub-environment more"
            minibatches = result["info"]["learner"]["default_policy"]["learner_stats"]["num_sgd_updates"]
            assert minibatches == math.ceil(trained / (100 * max(1, learners))), "minibatches of 100 rows a Learner"
        finally:
            algo.stop()


def test_a_train_batch_size_that_train_batch_size_per_learner_overrides_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=1000, train_batch_size_per_learner=300)
    with caplog.at_level(logging.WARNING, logger="corral"):
        config.validate()
    assert "train_batch_size=1000 is not used: train_batch_size_per_learner=300" in caplog.text
    with pytest.raises(ConfigError, match="minibatch_size=400 is larger than train_batch_size_per_learner=300"):
        config.training(minibatch_size=400).validate()


def test_a_learner_that_dies_is_started_again_and_the_run_learns_what_it_would_have(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=256)
    config = config.learners(num_learners=2, num_cpus_per_learner=0.5)  # two groups on two CPUs
    runs = [config.copy().debugging(seed=0).build() for _ in range(2)]
    try:
        for algo in runs:
            algo.train()
        first = runs[1].learner_actors._actors
        ray.kill(first[1])
        with caplog.at_level(logging.WARNING, logger="corral"):
            results = [algo.train() for algo in runs]
        assert "Learner 1 of 2 died" in caplog.text and runs[1].learner_group.num_restarts == 1
        group = runs[1].learner_actors._actors
        assert len(group) == 2 and not set(group) & set(first), "a new group of as many Learners"
        same, restarted = (algo.get_policy().get_weights() for algo in runs)
        assert all(np.array_equal(same[k], restarted[k]) for k in same), "the repeated update is the one it would have made"
        assert results[1]["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"] == pytest.approx(
            results[0]["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
        )
    finally:
        for algo in runs:
            algo.stop()


def test_without_restarts_a_learner_that_dies_stops_the_run_with_an_error_naming_it() -> None:
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=256).learners(num_learners=2)
    algo = config.fault_tolerance(restart_failed_learners=False).build()
    try:
        algo.train()
        ray.kill(algo.learner_actors._actors[1])
        with pytest.raises(LearnerError, match=r"Learner 1 of 2 died .*restart_failed_learners=True"):
            algo.train()
        assert not algo.learner_actors._actors, "the other Learner is stopped, not left waiting"
    finally:
        algo.stop()


def test_fake_gpus_run_the_gpu_learner_configuration_on_the_cpu() -> None:
    config = PPOConfig().environment("CartPole-v1").training(train_batch_size=256).resources(_fake_gpus=True)
    algo = config.learners(num_learners=2, num_gpus_per_learner=1).build()  # Ray reserves no GPU; the Learners use gloo
    try:
        assert algo.train()["num_env_steps_trained"] >= 256
    finally:
        algo.stop()


@pytest.mark.slow
def test_ppo_learns_cartpole_on_two_learners() -> None:
    algo = PPOConfig().environment("CartPole-v1").learners(num_learners=2).debugging(seed=0).build()
    try:
        best, steps = best_return_within(algo, 200_000, 450.0)
        assert best >= 450.0, f"mean return {best:.1f} after {steps} steps"
    finally:
        algo.stop()


@pytest.mark.slow
def test_sac_learns_pendulum_on_two_learners_within_20_iterations() -> None:
    # the settings of corral's tuned example (sac_pendulum.yaml), in iterations of 500 env steps, with an update every
    # other env step: on two Learners an update costs 3.7x what it does in process (benchmarks/learners.py)
    config = (
        SACConfig()
        .environment("Pendulum-v1")
        .training(train_batch_size=128, training_intensity=64, learning_starts=100, model={"fcnet_hiddens": [64, 64]})
        .training(actor_lr=1e-3, critic_lr=1e-3, alpha_lr=1e-3)
        .reporting(min_sample_timesteps_per_iteration=500, metrics_num_episodes_for_smoothing=10)
        .learners(num_learners=2)
        .debugging(seed=0)
    )
    algo = config.build()
    try:
        best, steps = best_return_within(algo, 20 * 500, -300.0)
        assert best >= -300.0, f"mean return {best:.1f} after {steps} steps ({algo.iteration} iterations)"
    finally:
        algo.stop()


def test_each_learner_s_share_is_its_consecutive_rows_and_may_be_empty() -> None:
    import torch

    from corral.core.learning.learners.gradient_sync import GradientSync

    columns = {"obs": torch.arange(5), "actions": torch.arange(5) * 10}
    shares = [GradientSync(rank, 2, torch.device("cpu")).share(columns) for rank in range(2)]
    assert [s["obs"].tolist() for s in shares] == [[0, 1], [2, 3, 4]] and shares[1]["actions"].tolist() == [20, 30, 40]
    one_row = [GradientSync(rank, 2, torch.device("cpu")).share({"obs": torch.arange(1)})["obs"].tolist() for rank in range(2)]
    assert one_row == [[], [0]], "a minibatch smaller than the group leaves a Learner nothing: it adds a zero gradient"

"""An algorithm that writes its own ``training_step()`` with RLlib's helpers: two policies, two algorithms' updates.

RLlib's two-trainer workflow, written for corral: in a 4-agent CartPole, the
even agents act with a PPO policy that learns on its fresh samples, the odd
ones with a DQN policy that learns on replayed ones; each policy brings its
own algorithm's config.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import corral
from corral.core import (
    Algorithm,
    AlgorithmConfig,
    MultiAgentBatch,
    PolicySpec,
    SampleBatch,
    standardize_fields,
    synchronous_parallel_sample,
    train_one_step,
)
from corral.plugins.dqn import DQNConfig, DQNPolicy
from corral.plugins.ppo import PPO, PPOConfig, PPOPolicy
from corral.rllib.support.replay_buffers import MultiAgentReplayBuffer
from tests.conftest import small_ppo_config


class TwoTrainers(Algorithm):
    """PPO's policy learns on each round's samples; DQN's on minibatches replayed from all of them.

    Written as RLlib's two_trainer_workflow example writes it: ``setup(self, config)`` and RLlib's buffer.
    """

    def setup(self, config: Any) -> None:
        assert config is self.config
        super().setup(config)
        self.replay = MultiAgentReplayBuffer(num_shards=1, capacity=50_000, seed=0)

    def training_step(self) -> dict[str, dict[str, Any]]:
        ppo_batches, ppo_steps = [], 0
        while ppo_steps < 200:
            for batch in synchronous_parallel_sample(worker_set=self.workers, concat=False):
                self._counters["num_env_steps_sampled"] += batch.env_steps
                self._counters["num_agent_steps_sampled"] += batch.agent_steps
                ppo_batch = batch.policy_batches.pop("ppo_policy")
                self.replay.add(batch)
                ppo_batches.append(ppo_batch)
                ppo_steps += ppo_batch.count
        results: dict[str, dict[str, Any]] = {}
        dqn = self.get_policy("dqn_policy")
        if self._counters["num_env_steps_sampled"] > 400:
            for _ in range(10):
                replayed = self.replay.sample(num_items=64)
                assert set(replayed.policy_batches) == {"dqn_policy"}, "PPO's rows were taken out before they were added"
                results.update(train_one_step(self, replayed, ["dqn_policy"]))
                self._counters["agent_steps_trained_DQN"] += replayed.agent_steps
        if (
            self._counters["agent_steps_trained_DQN"] - self._counters["last_target_update_ts"]
            >= dqn.config["target_network_update_freq"]
        ):
            dqn.update_target()
            self._counters["num_target_updates"] += 1
            self._counters["last_target_update_ts"] = self._counters["agent_steps_trained_DQN"]
        ppo_train_batch = standardize_fields(SampleBatch.concat(ppo_batches), [SampleBatch.ADVANTAGES])
        self._counters["agent_steps_trained_PPO"] += ppo_train_batch.count
        ppo_train_batch = MultiAgentBatch({"ppo_policy": ppo_train_batch}, ppo_train_batch.count)
        results.update(train_one_step(self, ppo_train_batch, ["ppo_policy"]))
        return results


def _even_ppo_odd_dqn(agent_id: int, *args: Any, **kwargs: Any) -> str:
    return ("ppo_policy", "dqn_policy")[agent_id % 2]


def _two_trainers_config() -> AlgorithmConfig:
    policies = {
        "ppo_policy": PolicySpec(PPOPolicy, config=PPOConfig().training(num_epochs=10, minibatch_size=128, lr=1e-3)),
        "dqn_policy": PolicySpec(DQNPolicy, config=DQNConfig().training(target_network_update_freq=500)),
    }
    return (
        AlgorithmConfig(algo_class=TwoTrainers)
        .environment(corral.make_multi_agent("CartPole-v1"), env_config={"num_agents": 4})
        .multi_agent(
            policies=policies, policy_mapping_fn=lambda agent_id, *args, **kwargs: ("ppo_policy", "dqn_policy")[agent_id % 2]
        )
        .env_runners(rollout_fragment_length=50)
        .debugging(seed=0)
    )


def test_each_policy_trains_with_its_own_algorithm_s_config_and_update() -> None:
    algo = _two_trainers_config().build()
    try:
        ppo, dqn = algo.get_policy("ppo_policy"), algo.get_policy("dqn_policy")
        assert isinstance(ppo.config, PPOConfig) and ppo.config.num_epochs == 10 and ppo.config.lr == 1e-3
        assert isinstance(dqn.config, DQNConfig) and dqn.config.target_network_update_freq == 500
        assert ppo.config.seed == dqn.config.seed == 0, "what every policy shares is the algorithm's"
        ppo_before, dqn_target_before = ppo.get_weights(), {k: v.clone() for k, v in dqn.target_model.state_dict().items()}
        results = [algo.train() for _ in range(4)]
    finally:
        algo.stop()
    last = results[-1]
    assert set(last["info"]["learner"]) == {"ppo_policy", "dqn_policy"}
    assert last["info"]["learner"]["ppo_policy"]["learner_stats"]["num_sgd_updates"] > 10, (
        "PPO's minibatch epochs, from its own config"
    )
    assert "mean_q" in last["info"]["learner"]["dqn_policy"]["learner_stats"]
    assert last["agent_steps_trained_DQN"] == 640 * (len(results) - 1), "counted by the training step, reported"
    assert last["num_target_updates"] >= 1
    assert last["num_env_steps_trained"] > 0 and last["num_env_steps_sampled"] >= 4 * 100
    assert any(not np.array_equal(ppo_before[k], ppo.get_weights()[k]) for k in ppo_before)
    moved = [not np.array_equal(v.numpy(), dqn.target_model.state_dict()[k].numpy()) for k, v in dqn_target_before.items()]
    assert any(moved), "update_target() copied the trained network"
    assert last["episodes_this_iter"] > 0, "episodes that synchronous_parallel_sample finished are reported"


def test_a_checkpoint_keeps_the_counters_a_training_step_added(tmp_path) -> None:
    algo = _two_trainers_config().build()
    try:
        algo.train()
        algo.train()
        path = algo.save(str(tmp_path / "ckpt"))
        counters = dict(algo.counters)
    finally:
        algo.stop()
    restored = TwoTrainers.from_checkpoint(
        path, policy_mapping_fn=lambda agent_id, *a, **k: ("ppo_policy", "dqn_policy")[agent_id % 2]
    )
    try:
        assert dict(restored.counters) == counters
        assert restored.counters["agent_steps_trained_DQN"] == 640
        assert isinstance(restored.get_policy("ppo_policy").config, PPOConfig)
    finally:
        restored.stop()


def test_synchronous_parallel_sample_gives_each_round_s_batches_or_one_and_leaves_the_counters() -> None:
    config = PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=1, rollout_fragment_length=50)
    algo = config.debugging(seed=0).build()
    try:
        one = synchronous_parallel_sample(worker_set=algo.env_runner_group)
        assert isinstance(one, SampleBatch), "a single-agent run's batch, as RLlib's runners give"
        assert 45 <= one.count <= 50, "a fragment of 50 steps (a row fewer for each episode it ends)"
        many = synchronous_parallel_sample(worker_set=algo.workers, max_env_steps=120, concat=False)
        assert len(many) == 3 and all(isinstance(batch, SampleBatch) for batch in many), "rounds of 50 steps until 120"
        assert algo.counters["num_env_steps_sampled"] == 0, "the caller counts what it samples"
        before = algo.get_policy().get_weights()
        stats = train_one_step(algo, one)
        assert stats["default_policy"]["learner_stats"]["num_sgd_updates"] > 0, "RLlib's layout, as train_one_step gives it"
        assert algo.counters["num_env_steps_trained"] == one.count, "a SampleBatch's rows are its steps"
        assert any(not np.array_equal(before[k], algo.get_policy().get_weights()[k]) for k in before)
        with pytest.raises(ValueError, match="not both"):
            synchronous_parallel_sample(worker_set=algo.workers, max_env_steps=1, max_agent_steps=1)
    finally:
        algo.stop()


class MarkedPPOPolicy(PPOPolicy):
    """PPO's policy under another name: which class an algorithm built shows."""


class PPOWithItsOwnPolicy(PPO):
    @classmethod
    def get_default_policy_class(cls, config: AlgorithmConfig) -> type[PPOPolicy]:
        return MarkedPPOPolicy


def test_get_default_policy_class_picks_the_class_of_policies_whose_spec_names_none(make_algo, restored_algos, tmp_path) -> None:
    """RLlib's custom algorithms choose their policy class in this classmethod; a checkpoint restores it."""
    config = PPOConfig(algo_class=PPOWithItsOwnPolicy).update_from_dict(small_ppo_config().to_dict())
    algo = make_algo(config)
    assert type(algo) is PPOWithItsOwnPolicy and type(algo.get_policy()) is MarkedPPOPolicy
    algo.train()
    restored = PPOWithItsOwnPolicy.from_checkpoint(algo.save(tmp_path / "ckpt"))
    restored_algos.append(restored)
    assert type(restored.get_policy()) is MarkedPPOPolicy
    assert PPO.get_default_policy_class(config) is PPOPolicy  # the algorithm's own policy_class

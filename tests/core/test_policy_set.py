"""Policies added and removed while training: everywhere they live, and across checkpoints."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import corral
from corral import ConfigError, RandomPolicy
from tests.core.test_multi_agent_training import MultiCartPole, by_agent, two_cartpoles


def first_agent_to_p0_second_to_snapshot(agent_id: Any, episode: Any, **kwargs: Any) -> str:
    return "p0" if agent_id == 0 else "snapshot"


def both_to_p0(agent_id: Any, episode: Any, **kwargs: Any) -> str:
    return "p0"


def equal_weights(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


corral.register_env("corral-test-multi-cartpole", MultiCartPole)  # by name, so a checkpoint's config names it


def two_policies(**training: Any) -> Any:
    return (
        two_cartpoles(env="corral-test-multi-cartpole", **training)
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_agent)
        .debugging(seed=0)
    )


def test_a_snapshot_added_as_a_frozen_opponent_acts_and_never_learns() -> None:
    algo = two_policies().build()
    algo.train()
    main = algo.get_policy("p0")
    snapshot = algo.add_policy(
        "snapshot",
        policy_state=main.get_state(),
        policy_mapping_fn=first_agent_to_p0_second_to_snapshot,
        policies_to_train=["p0"],
    )
    assert algo.get_policy("snapshot") is snapshot
    assert algo.env_runner_group.local_env_runner.policy_map["snapshot"] is snapshot
    frozen = snapshot.get_weights()
    assert equal_weights(frozen, main.get_weights())
    assert algo.config.policies_to_train == ["p0"] and "snapshot" in algo.config.policies
    result = {}
    for _ in range(3):
        result = algo.train()
    assert "snapshot" in result["policy_reward_mean"]  # it acted for agent 1 in the episodes begun since
    assert set(result["info"]["learner"]) == {"p0"}
    assert equal_weights(snapshot.get_weights(), frozen)
    assert not equal_weights(main.get_weights(), frozen)
    algo.stop()


def test_a_removed_policy_leaves_episodes_in_progress_and_every_later_batch() -> None:
    algo = two_policies().build()
    runner = algo.env_runner_group.local_env_runner
    runner.sample(num_steps=5)  # episodes are in progress, agent 1's rows open for p1
    algo.remove_policy("p1", policy_mapping_fn=both_to_p0)
    assert sorted(algo.policies) == ["p0"] and sorted(algo.config.policies) == ["p0"]
    samples = runner.sample(num_steps=20)
    assert set(samples.policy_batches) == {"p0"}
    assert samples.policy_batches["p0"].count > 20  # agent 1 went on, now with p0
    result = algo.train()
    assert set(result["info"]["learner"]) == {"p0"}
    algo.stop()


def test_a_mapping_that_still_names_a_removed_policy_is_refused_when_it_is_asked() -> None:
    algo = two_policies().build()
    algo.remove_policy("p1")  # by_agent still maps agent 1 to p1
    with pytest.raises(ConfigError, match=r"'p1', which is not a policy; the policies are \['p0'\]"):
        for _ in range(20):
            algo.env_runner_group.local_env_runner.sample(num_steps=50)
    algo.stop()


def test_removing_a_policy_drops_it_from_policies_to_train() -> None:
    algo = two_cartpoles().multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_agent, policies_to_train=["p0", "p1"]).build()
    algo.remove_policy("p1", policy_mapping_fn=both_to_p0)
    assert algo.config.policies_to_train == ["p0"]
    algo.stop()


def test_what_add_and_remove_refuse() -> None:
    algo = two_policies().build()
    with pytest.raises(ConfigError, match="'p0' exists already"):
        algo.add_policy("p0")
    with pytest.raises(ConfigError, match=r"no policy 'nope'"):
        algo.remove_policy("nope")
    with pytest.raises(ConfigError, match="policy_class must be a corral Policy subclass"):
        algo.add_policy("bad", policy_cls=dict)  # type: ignore[arg-type]
    assert sorted(algo.policies) == ["p0", "p1"] and sorted(algo.config.policies) == ["p0", "p1"]
    algo.remove_policy("p1", policy_mapping_fn=both_to_p0)
    with pytest.raises(ConfigError, match="'p0' is the only one"):
        algo.remove_policy("p0")
    algo.stop()
    single = corral.get_config("PPO").environment("CartPole-v1").build()
    with pytest.raises(ConfigError, match="add_policy needs a multi-agent environment"):
        single.add_policy("other")
    single.stop()


def test_an_added_policy_gets_its_own_class_options_and_replay_buffer() -> None:
    algo = (
        corral.get_config("DQN")
        .environment(MultiCartPole, env_config={"num_agents": 2})
        .training(learning_starts=40, train_batch_size=32)
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_agent)
        .debugging(seed=0)
        .build()
    )
    random = algo.add_policy("random", RandomPolicy, policies_to_train=["p0", "p1"])
    tuned = algo.add_policy("tuned", config={"lr": 0.123})
    assert isinstance(random, RandomPolicy) and tuned.optimizer.param_groups[0]["lr"] == 0.123
    assert {"random", "tuned"} <= set(algo.replay_buffers)
    algo.remove_policy("tuned")
    assert "tuned" not in algo.replay_buffers
    algo.train()
    algo.stop()


def test_an_added_policy_survives_save_and_restore(tmp_path: Any) -> None:
    algo = two_policies().build()
    algo.train()
    algo.add_policy("snapshot", policy_state=algo.get_policy("p0").get_state())
    path = algo.save(tmp_path / "ckpt")
    weights = algo.get_weights()
    algo.stop()
    # from the checkpoint: every policy, the added one included
    restored = corral.Algorithm.from_checkpoint(path, policy_mapping_fn=by_agent)
    assert sorted(restored.policies) == ["p0", "p1", "snapshot"]
    assert all(equal_weights(weights[pid], w) for pid, w in restored.get_weights().items())
    restored.stop()
    # into an algorithm built without it: it is added
    fresh = two_policies().build()
    fresh.restore(path)
    assert sorted(fresh.policies) == ["p0", "p1", "snapshot"]
    assert equal_weights(fresh.get_policy("snapshot").get_weights(), weights["snapshot"])
    assert fresh.train()["training_iteration"] == 2
    fresh.stop()


def test_from_checkpoint_restores_only_the_policies_asked_for(tmp_path: Any) -> None:
    algo = two_policies().multi_agent(policies_to_train=["p0", "p1"]).build()
    algo.train()
    path = algo.save(tmp_path / "ckpt")
    p0 = algo.get_policy("p0").get_weights()
    algo.stop()
    restored = corral.Algorithm.from_checkpoint(path, policy_ids=["p0"], policy_mapping_fn=both_to_p0)
    assert sorted(restored.policies) == ["p0"]
    assert restored.config.policies_to_train == ["p0"]
    assert equal_weights(restored.get_policy("p0").get_weights(), p0)
    restored.train()
    restored.stop()
    with pytest.raises(corral.CheckpointError, match=r"policy_ids \['p9'\] must name some of the checkpoint's policies"):
        corral.Algorithm.from_checkpoint(path, policy_ids=["p9"], policy_mapping_fn=both_to_p0)


def test_checkpoint_trainable_policies_only_saves_the_learners(tmp_path: Any) -> None:
    config = two_policies().multi_agent(policies_to_train=["p0"]).checkpointing(checkpoint_trainable_policies_only=True)
    algo = config.build()
    algo.train()
    path = algo.save(tmp_path / "ckpt")
    algo.stop()
    assert sorted(p.name for p in (tmp_path / "ckpt" / "policies").iterdir()) == ["p0"]
    restored = corral.Algorithm.from_checkpoint(path, policy_mapping_fn=by_agent)
    assert sorted(restored.policies) == ["p0", "p1"]  # p1 is built afresh from the config
    restored.stop()


def test_policy_from_checkpoint_builds_the_class_its_spec_names(tmp_path: Any) -> None:
    config = two_policies().multi_agent(
        policies={"p0": corral.PolicySpec(), "p1": corral.PolicySpec(policy_class=RandomPolicy)}, policies_to_train=["p0"]
    )
    algo = config.build()
    path = algo.save(tmp_path / "ckpt")
    algo.stop()
    assert isinstance(corral.Policy.from_checkpoint(path, "p1"), RandomPolicy)
    assert not isinstance(corral.Policy.from_checkpoint(path, "p0"), RandomPolicy)


def test_evaluation_runners_take_the_new_policy_set() -> None:
    config = two_policies().evaluation(evaluation_duration=2, evaluation_config={"explore": False})
    algo = config.build()
    assert set(algo.evaluate()["policy_reward_mean"]) == {"p0", "p1"}
    algo.add_policy("snapshot", policy_mapping_fn=first_agent_to_p0_second_to_snapshot)
    assert set(algo.evaluate()["policy_reward_mean"]) == {"p0", "snapshot"}
    algo.stop()

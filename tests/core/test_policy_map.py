"""``policy_map_capacity``: at most that many policies in memory, the others on disk, and training exactly as if all stayed."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import corral
from corral.core.learning.policy_map import PolicyMap
from tests.core.test_exact_resume import same
from tests.core.test_multi_agent_training import MultiCartPole, by_agent

FOUR_POLICIES = {f"p{i}" for i in range(4)}
corral.register_env("corral-test-multi-cartpole", MultiCartPole)  # by name, so a checkpoint's config names it


def four_agents(name: str = "PPO", capacity: int = 100, **options: Any) -> Any:
    """Four agents, a policy each, with a MeanStdFilter (state a copy on disk must keep)."""
    training = {
        "PPO": {"train_batch_size": 64, "minibatch_size": 32, "num_epochs": 2},
        "DQN": {
            "learning_starts": 20,
            "train_batch_size": 16,
            "target_network_update_freq": 20,
            "min_sample_timesteps_per_iteration": 20,
        },
    }
    return (
        corral.get_config(name)
        .environment("corral-test-multi-cartpole", env_config={"num_agents": 4})
        .env_runners(num_envs_per_env_runner=2, observation_filter="MeanStdFilter")
        .multi_agent(policies=FOUR_POLICIES, policy_mapping_fn=by_agent, policy_map_capacity=capacity)
        .update_from_dict({**training[name], **options})
        .debugging(seed=0)
    )


def full_states(algo: Any) -> dict[str, Any]:
    """Every policy's complete state (weights, optimizer, generators, filter, timestep)."""
    return {pid: algo.get_policy(pid).get_state() for pid in sorted(algo.policies)}


def train_and_compare(config: Any, iterations: int, capacity: int) -> list[Any]:
    """Train the config with every policy in memory and with ``capacity``: results and states must be identical."""
    runs = []
    for cap in (100, capacity):
        algo = config.multi_agent(policy_map_capacity=cap).build()
        results = [algo.train() for _ in range(iterations)]
        loaded = len(algo.policies.loaded())
        runs.append((results, full_states(algo), loaded, algo.policies.evictions))
        algo.stop()
    (everything, all_states, all_loaded, no_evictions), (capped, capped_states, capped_loaded, evictions) = runs
    assert (all_loaded, no_evictions) == (4, 0)
    assert capped_loaded <= capacity and evictions > 0
    for ours, theirs in zip(capped, everything, strict=True):
        assert ours["policy_reward_mean"] == theirs["policy_reward_mean"]
        assert ours["num_agent_steps_sampled"] == theirs["num_agent_steps_sampled"]
    same(capped_states, all_states)
    return runs


@pytest.mark.parametrize("name", ["PPO", "DQN"])
def test_a_policy_that_went_to_disk_and_came_back_trains_exactly_as_if_it_had_stayed(name: str) -> None:
    train_and_compare(four_agents(name), iterations=2 if name == "PPO" else 3, capacity=1)


@pytest.mark.usefixtures("ray_on_two_cpus")
def test_remote_runners_keep_at_most_the_capacity_and_report_every_step_and_observation() -> None:
    """A remote copy that goes to disk mid-sample still reports its timesteps and filter statistics."""
    config = four_agents().env_runners(num_env_runners=1)
    train_and_compare(config, iterations=2, capacity=2)
    algo = config.multi_agent(policy_map_capacity=2).build()
    algo.train()
    [(in_memory, folder)] = algo.env_runner_group.foreach_env_runner(
        lambda runner: (len(runner.policies.loaded()), str(runner.policies.folder)), local_env_runner=False
    )
    assert in_memory == 2 and Path(folder).is_dir()
    algo.stop()
    assert not Path(folder).exists()  # the runner removed its files before it was killed


def test_a_broadcast_after_the_first_sends_only_the_policies_that_may_have_changed() -> None:
    algo = four_agents(capacity=2).multi_agent(policies_to_train=["p0"]).build()
    group = algo.env_runner_group
    everything = group.sampling_state()
    assert set(everything) == FOUR_POLICIES
    watermark = algo.policies.evictions
    in_memory = set(algo.policies.loaded())
    assert set(group.sampling_state(changed_since=watermark)) == in_memory  # nothing went to disk since
    algo.get_policy(sorted(FOUR_POLICIES - in_memory)[0])  # loading one moves another out
    moved = set(algo.policies.moved_out_since(watermark))
    assert len(moved) == 1
    expected = set(algo.policies.loaded()) | moved  # before the call: it loads the one moved out
    assert set(group.sampling_state(changed_since=watermark)) == expected
    algo.stop()


def test_snapshots_beyond_the_capacity_wait_on_disk_and_a_checkpoint_holds_them_all(tmp_path: Path) -> None:
    config = four_agents(capacity=2)
    algo = config.build()
    algo.train()
    for i in range(3):
        algo.add_policy(f"snapshot{i}", policy_state=algo.get_policy("p0").get_state(), policy_mapping_fn=by_agent)
    assert len(algo.policies) == 7 and len(algo.policies.loaded()) == 2
    states = full_states(algo)
    path = algo.save(tmp_path / "ckpt")
    restored = corral.Algorithm.from_checkpoint(path, config_overrides={"policy_mapping_fn": by_agent})
    assert len(restored.policies.loaded()) == 2
    same(full_states(restored), states)
    algo.stop()
    restored.stop()


def test_the_map_moves_the_least_recently_used_to_disk_and_cleans_up() -> None:
    built: list[str] = []
    algo = four_agents().build()

    def rebuild(policy_id: str) -> Any:
        built.append(policy_id)
        return algo.policy_builds["p0"].build("p0")

    policies = PolicyMap(2, rebuild)
    for pid in ("a", "b", "c"):
        policies[pid] = algo.get_policy(f"p{'abc'.index(pid)}")
    assert list(policies.loaded()) == ["b", "c"] and "a" in policies and len(policies) == 3
    folder = policies.folder
    assert folder is not None and len(list(folder.iterdir())) == 1
    expected = algo.get_policy("p0").get_weights()
    a = policies["a"]  # back from disk: "b" was least recently used
    assert built == ["a"] and list(policies.loaded()) == ["c", "a"]
    assert all(np.array_equal(a.get_weights()[k], expected[k]) for k in expected)
    del policies["b"]
    assert sorted(policies) == ["a", "c"] and not list(folder.iterdir())
    with pytest.raises(KeyError):
        policies["b"]
    del policies, a
    gc.collect()
    assert not folder.exists()
    algo.stop()

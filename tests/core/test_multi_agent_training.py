"""Multi-agent sampling and training: rows per agent, policies by mapping, what learns and what stays frozen."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import torch

import corral
from corral import ConfigError, MultiAgentEnv, PolicySpec, SampleBatch, TrainingError, make_multi_agent
from corral.core.environments.multi_agent_env import ALL_AGENTS

MultiCartPole = make_multi_agent("CartPole-v1")
MultiPendulum = make_multi_agent("Pendulum-v1")


def by_agent(agent_id: Any, episode: Any, **kwargs: Any) -> str:
    return f"p{agent_id}"


def two_cartpoles(train_batch_size: int = 200, env: Any = MultiCartPole, **training: Any) -> Any:
    """PPO on two-agent CartPole with a small budget (each test adds its multi-agent options)."""
    return (
        corral.get_config("PPO")
        .environment(env, env_config={"num_agents": 2})
        .training(train_batch_size=train_batch_size, minibatch_size=100, num_epochs=1, **training)
    )


class Relay(MultiAgentEnv):
    """Agents "a" and "b" take turns (a, b, a, b, a), then the game ends for both.

    An agent's observation is the step it acts at. Each step pays the mover 1
    and the other player 10 times the step number, so a row's reward is the sum
    of its own step's and the reply's: what tells the rows were closed right.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.possible_agents = ["a", "b"]
        super().__init__()
        self.observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self.t = 0
        self.agents = ["a", "b"]
        return {"a": np.array([0.0], np.float32)}, {}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        (mover,) = action_dict
        other = "b" if mover == "a" else "a"
        rewards = {mover: 1.0}
        if self.t > 0:
            rewards[other] = 10.0 * (self.t + 1)
        self.t += 1
        over = self.t == 5
        obs = np.array([float(self.t)], np.float32)
        observations = {"a": obs, "b": obs} if over else {other: obs}
        return observations, rewards, {ALL_AGENTS: over, "a": over, "b": over}, {ALL_AGENTS: False}, {}


def relay_config(**training: Any) -> Any:
    return (
        corral.get_config("PPO")
        .environment(Relay)
        .training(gamma=1.0, lambda_=1.0, train_batch_size=12, minibatch_size=12, num_epochs=1, **training)
        .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=12)
        .multi_agent(policies={"pa", "pb"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}")
        .debugging(seed=0)
    )


def test_turn_based_rows_close_at_the_next_turn_and_sum_the_rewards_between() -> None:
    algo = relay_config().build()
    runner = algo.env_runner_group.local_env_runner
    samples = runner.sample()
    a, b = samples.policy_batches["pa"], samples.policy_batches["pb"]
    # 12 steps: episode (5 steps), reset step, episode (5 steps), reset step
    assert a[SampleBatch.OBS][:, 0].tolist() == [0, 2, 4, 0, 2, 4]
    assert a[SampleBatch.REWARDS].tolist() == [21, 41, 1, 21, 41, 1]
    assert a[SampleBatch.TERMINATEDS].tolist() == [False, False, True] * 2
    assert b[SampleBatch.OBS][:, 0].tolist() == [1, 3, 1, 3]
    assert b[SampleBatch.REWARDS].tolist() == [31, 51, 31, 51]
    # gamma = lambda = 1 over terminated episodes: the value targets are the returns
    assert a[SampleBatch.VALUE_TARGETS].tolist() == pytest.approx([63, 42, 1, 63, 42, 1])
    assert b[SampleBatch.VALUE_TARGETS].tolist() == pytest.approx([82, 51, 82, 51])
    assert (samples.env_steps, samples.agent_steps) == (10, 10)
    algo.stop()


def test_a_row_still_open_at_the_end_of_a_sample_call_closes_in_the_next() -> None:
    algo = relay_config().build()
    runner = algo.env_runner_group.local_env_runner
    first, second = runner.sample(num_steps=3), runner.sample(num_steps=3)
    a = SampleBatch.concat([first.policy_batches["pa"], second.policy_batches["pa"]])
    assert a[SampleBatch.OBS][:, 0].tolist() == [0, 2, 4]
    assert a[SampleBatch.REWARDS].tolist() == [21, 41, 1]
    # the first call closed only a's first row, which bootstraps from its next turn's value: not the return
    assert first.policy_batches["pa"][SampleBatch.OBS][:, 0].tolist() == [0]
    runner_policy = algo.get_policy("pa")
    bootstrap = runner_policy.compute_values(np.array([[2.0]], np.float32))[0]
    assert first.policy_batches["pa"][SampleBatch.VALUE_TARGETS][0] == pytest.approx(21 + bootstrap, rel=1e-5)
    algo.stop()


def test_the_step_counts_and_results_of_a_multi_agent_run() -> None:
    config = (
        two_cartpoles(400)
        .env_runners(num_envs_per_env_runner=2)
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_agent)
        .debugging(seed=0)
    )
    algo = config.build()
    result = algo.train()
    # at least the batch in env steps, topped up by less than a step per sub-environment; each has two agents
    assert 400 <= result["num_env_steps_sampled"] < 402
    assert result["num_env_steps_sampled"] < result["num_agent_steps_sampled"] <= 2 * result["num_env_steps_sampled"]
    assert result["agent_timesteps_total"] == result["num_agent_steps_sampled"]
    assert set(result["info"]["learner"]) == {"p0", "p1"}
    assert set(result["policy_reward_mean"]) == {"p0", "p1"}
    for policy_id in ("p0", "p1"):
        assert result["policy_reward_min"][policy_id] <= result["policy_reward_mean"][policy_id]
        assert result["policy_reward_mean"][policy_id] <= result["policy_reward_max"][policy_id]
    # each policy acted once for each of its agent's steps
    policies = algo.env_runner_group.local_env_runner.policy_map
    assert sum(p.global_timestep for p in policies.values()) == result["num_agent_steps_sampled"]
    algo.stop()


class CrashingRelay(Relay):
    """Relay whose first copy in sub-environment 1 crashes at its 8th step; every other copy runs fine."""

    crashed: ClassVar[list[int]] = []

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.steps = 0
        self.crashes = getattr(config, "vector_index", 0) == 1 and not CrashingRelay.crashed

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.steps += 1
        if self.crashes and self.steps == 8:
            CrashingRelay.crashed.append(self.steps)
            raise RuntimeError("the simulator crashed")
        return super().step(action_dict)


def test_a_crashed_sub_environment_is_restarted_and_training_goes_on() -> None:
    CrashingRelay.crashed.clear()
    config = relay_config().environment(CrashingRelay).env_runners(num_envs_per_env_runner=2)
    with pytest.raises(corral.EnvRunnerError, match=r"sub-environment 1 of env runner 0 .* raised RuntimeError"):
        config.build().train()

    CrashingRelay.crashed.clear()
    algo = config.fault_tolerance(restart_failed_sub_environments=True).build()
    for _ in range(3):
        result = algo.train()
    runner = algo.env_runner_group.local_env_runner
    assert CrashingRelay.crashed == [8] and [guard.restarts for guard in runner.envs] == [0, 1]
    assert not runner.base_env[1].crashes  # the runner steps the new copy
    assert runner.env is runner.base_env[0] and isinstance(runner.env, CrashingRelay), "RLlib's worker.env: one game"
    # the crashed game ended there, 3 steps in (a full one lasts 5), and sampling went on
    assert result["timesteps_total"] == 3 * 20 and 22.0 == result["episode_reward_min"] < 145.0 == result["episode_reward_max"]
    assert np.isfinite(result["info"]["learner"]["pa"]["learner_stats"]["total_loss"])
    algo.stop()


def test_episode_ids_are_the_runner_s_own_so_a_mapping_that_reads_them_is_reproducible() -> None:
    seen: list[int] = []

    def by_episode(agent_id: Any, episode: Any, **kwargs: Any) -> str:
        seen.append(episode.episode_id)
        return "pa" if episode.episode_id % 2 else "pb"

    config = relay_config().multi_agent(policy_mapping_fn=by_episode)
    first = config.build()
    first.train()
    ids, seen[:] = list(seen), []
    second = config.build()  # another runner in the same process sees the same ids
    second.train()
    assert seen == ids and len(set(ids)) > 1
    np.testing.assert_array_equal(first.get_weights()["pa"]["pi_head.weight"], second.get_weights()["pa"]["pi_head.weight"])
    first.stop()
    second.stop()


def test_train_batch_size_counts_agent_steps_when_asked() -> None:
    config = two_cartpoles(400).env_runners(num_envs_per_env_runner=2).multi_agent(count_steps_by="agent_steps").debugging(seed=0)
    algo = config.build()
    result = algo.train()
    assert 400 <= result["num_agent_steps_sampled"] < 404  # two sub-envs, two agents: at most one step's worth over
    assert result["num_env_steps_sampled"] < 400
    assert set(result["policy_reward_mean"]) == {"default_policy"}  # no multi_agent(policies): one shared policy
    algo.stop()


ALGORITHMS = [
    ("PPO", MultiCartPole, {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 1}),
    ("A2C", MultiCartPole, {"train_batch_size": 200}),
    # without its learner thread, which would run both policies' updates in a thread of its own
    ("IMPALA", MultiCartPole, {"train_batch_size": 200, "learner_thread": False}),
    # a few updates an iteration are enough to compare (the defaults sample 1,000 env steps an iteration)
    ("DQN", MultiCartPole, {"learning_starts": 40, "train_batch_size": 32, "min_sample_timesteps_per_iteration": 100}),
    ("SAC", MultiPendulum, {"learning_starts": 40, "train_batch_size": 32, "min_sample_timesteps_per_iteration": 100}),
]


@pytest.mark.parametrize(("name", "env", "training"), ALGORITHMS, ids=[a[0] for a in ALGORITHMS])
def test_only_the_policies_to_train_learn_and_the_others_stay_bit_identical(name: str, env: Any, training: dict) -> None:
    config = (
        corral.get_config(name)
        .environment(env, env_config={"num_agents": 2})
        .update_from_dict(training)
        .env_runners(num_envs_per_env_runner=2)
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_agent, policies_to_train=["p0"])
        .debugging(seed=0)
    )
    algo = config.build()
    before = algo.get_weights()
    for _ in range(3):
        result = algo.train()
    after = algo.get_weights()
    assert set(result["info"]["learner"]) == {"p0"}
    assert all(np.array_equal(before["p1"][k], after["p1"][k]) for k in before["p1"])
    assert not all(np.array_equal(before["p0"][k], after["p0"][k]) for k in before["p0"])
    assert algo.get_policy("p1").global_timestep > 0  # the frozen policy still acts
    algo.stop()


def recording(base: type, threads: list[str]) -> type:
    """``base`` whose ``learn_on_batch`` notes the thread it runs in, and fails for a policy whose ``lr`` is 0.5."""

    class Recording(base):  # type: ignore[misc, valid-type]
        def learn_on_batch(self, batch: SampleBatch) -> Any:
            threads.append(threading.current_thread().name)
            if self.config.lr == 0.5:
                raise TrainingError("the loss is NaN", term="total_loss")
            stats = super().learn_on_batch(batch)
            threads.append("done")
            return stats

    return Recording


def learning_config(name: str, policy_class: type, threads: int, p0: dict | None = None, **multi_agent: Any) -> Any:
    """Two policies of ``policy_class`` (``p0`` with its own options) learning in up to ``threads`` threads."""
    env, training = next((env, training) for algo, env, training in ALGORITHMS if algo == name)
    return (
        corral.get_config(name)
        .environment(env, env_config={"num_agents": 2})
        .update_from_dict(training)
        .env_runners(num_envs_per_env_runner=2)
        .multi_agent(
            policies={"p0": PolicySpec(policy_class=policy_class, config=p0), "p1": PolicySpec(policy_class=policy_class)},
            policy_mapping_fn=by_agent,
            **multi_agent,
        )
        .resources(num_learner_threads=threads)
        .debugging(seed=0)
    )


def run_learning(name: str, policy_class: type, threads: int, **multi_agent: Any) -> tuple[Any, Any]:
    """Three iterations (see :func:`learning_config`); the learner stats and the two policies' states."""
    algo = learning_config(name, policy_class, threads, **multi_agent).build()
    try:
        results = [algo.train()["info"]["learner"] for _ in range(3)]
        return results, {pid: algo.get_policy(pid).get_state() for pid in ("p0", "p1")}
    finally:
        algo.stop()


@pytest.mark.parametrize("name", [a[0] for a in ALGORITHMS])
def test_policies_that_learn_in_threads_learn_bit_for_bit_as_one_after_another(name: str) -> None:
    from tests.core.test_exact_resume import same

    threads: list[str] = []
    policy_class = recording(corral.get_algorithm(name).policy_class, threads)
    one_by_one = run_learning(name, policy_class, threads=1)
    assert set(threads) == {"MainThread", "done"}
    threads.clear()
    at_once = run_learning(name, policy_class, threads=2)
    assert threads and all(thread.startswith("corral-learner") for thread in threads if thread != "done")
    same(one_by_one, at_once)


def test_policies_learn_one_after_another_unless_their_class_allows_threads_and_all_fit_in_memory() -> None:
    threads: list[str] = []
    undeclared = recording(corral.get_algorithm("PPO").policy_class, threads)
    undeclared.thread_safe_learning = False  # a plugin's policy that does not say its update is its own
    run_learning("PPO", undeclared, threads=2)
    assert set(threads) == {"MainThread", "done"}
    threads.clear()
    run_learning("PPO", recording(corral.get_algorithm("PPO").policy_class, threads), threads=2, policy_map_capacity=1)
    assert set(threads) == {"MainThread", "done"}


def test_an_error_in_a_learner_thread_names_its_policy_and_comes_after_every_update_ended() -> None:
    threads: list[str] = []
    algo = learning_config("PPO", recording(corral.get_algorithm("PPO").policy_class, threads), 2, p0={"lr": 0.5}).build()
    with pytest.raises(TrainingError, match="policy 'p0', iteration 1: the loss is NaN"):
        algo.train()
    # p1 learned in a thread too, and its update had ended when p0's error was raised
    assert len(threads) == 3 and threads[2] == "done" and all(name.startswith("corral-learner") for name in threads[:2])
    algo.stop()


def test_policies_to_train_may_be_a_predicate() -> None:
    config = two_cartpoles().multi_agent(
        policies={"p0", "p1"}, policy_mapping_fn=by_agent, policies_to_train=lambda pid, batch=None: pid == "p1"
    )
    algo = config.build()
    assert set(algo.train()["info"]["learner"]) == {"p1"}
    algo.stop()


def test_a_policy_s_own_options_apply_to_it_alone() -> None:
    config = (
        two_cartpoles(lr=1e-3)
        .multi_agent(policies={"p0": PolicySpec(config={"lr": 1e-5, "gamma": 0.5}), "p1": None}, policy_mapping_fn=by_agent)
        .debugging(seed=0)
    )
    algo = config.build()
    p0, p1 = algo.get_policy("p0"), algo.get_policy("p1")
    assert (p0.config.lr, p0.config.gamma, p1.config.lr, p1.config.gamma) == (1e-5, 0.5, 1e-3, config.gamma)
    learner = algo.train()["info"]["learner"]
    assert (learner["p0"]["learner_stats"]["cur_lr"], learner["p1"]["learner_stats"]["cur_lr"]) == (1e-5, 1e-3)
    assert [g["lr"] for g in p0.optimizer.param_groups] == [1e-5]
    # gamma 0.5: p0's value targets hardly reach past the next reward; p1's (gamma 0.99) grow with the episode
    samples = algo.env_runner_group.local_env_runner.sample()
    assert samples.policy_batches["p0"][SampleBatch.VALUE_TARGETS].max() < 5
    assert samples.policy_batches["p1"][SampleBatch.VALUE_TARGETS].max() > 5
    algo.stop()


def test_a_mapping_to_an_unknown_policy_is_refused_at_build_naming_the_agent() -> None:
    config = corral.get_config("PPO").environment(MultiCartPole, env_config={"num_agents": 2})
    config.multi_agent(policies={"p0"}, policy_mapping_fn=by_agent)
    with pytest.raises(ConfigError, match=r"mapped agent 1 to 'p1', which is not a policy; the policies are \['p0'\]"):
        config.build()


def test_agents_with_different_spaces_cannot_share_a_policy() -> None:
    class Mixed(Relay):
        def __init__(self, config: Any = None) -> None:
            super().__init__(config)
            self.observation_spaces = {"a": self.observation_space, "b": gym.spaces.Box(0.0, 1.0, (3,), np.float32)}

    config = corral.get_config("PPO").environment(Mixed).multi_agent(policies={"shared"})
    with pytest.raises(ConfigError, match="agents 'a' and 'b' both map to policy 'shared' but have different spaces"):
        config.build()


def test_a_policy_no_agent_maps_to_gets_the_spaces_all_agents_share() -> None:
    config = relay_config().multi_agent(
        policies={"pa", "pb", "pool_0"}, policy_mapping_fn=lambda agent_id, episode, **kw: f"p{agent_id}"
    )
    algo = config.build()
    assert algo.get_policy("pool_0").observation_space == Relay().observation_space
    algo.stop()


def test_multi_agent_options_on_a_single_agent_env_are_refused() -> None:
    config = corral.get_config("PPO").environment("CartPole-v1").multi_agent(policies={"a", "b"}, policy_mapping_fn=by_agent)
    with pytest.raises(ConfigError, match=r"'CartPole-v1' is a single-agent env; .*corral.make_multi_agent"):
        config.build()


def test_callbacks_see_each_agent_s_trajectory_and_rewards() -> None:
    seen: dict[str, Any] = {"trajectories": [], "episodes": []}

    class Watch(corral.Callbacks):
        def on_postprocess_trajectory(self, *, agent_id: Any, policy_id: str, postprocessed_batch: Any, **kw: Any) -> None:
            seen["trajectories"].append((agent_id, policy_id, postprocessed_batch.count))

        def on_episode_end(self, *, episode: Any, **kw: Any) -> None:
            seen["episodes"].append((dict(episode.agent_rewards), episode.policy_for("a"), episode.length))

    algo = relay_config().callbacks(Watch).build()
    algo.env_runner_group.local_env_runner.sample()
    assert seen["trajectories"] == [("a", "pa", 6), ("b", "pb", 4)]
    rewards, policy, length = seen["episodes"][0]  # every reward each agent got
    assert rewards == {("a", "pa"): 1 + 20 + 1 + 40 + 1, ("b", "pb"): 1 + 30 + 1 + 50}
    assert (policy, length) == ("pa", 5)
    algo.stop()


def test_a_multi_agent_checkpoint_restores_every_policy(tmp_path: Any) -> None:
    corral.register_env("corral-test-multi-cartpole", MultiCartPole)
    config = (
        two_cartpoles(env="corral-test-multi-cartpole")
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_agent)
        .debugging(seed=0)
    )
    algo = config.build()
    algo.train()
    path = algo.save(tmp_path / "ckpt")
    weights = algo.get_weights()
    algo.stop()
    # the mapping function is code the checkpoint names: it is passed again, not imported from the checkpoint
    with pytest.raises(corral.CheckpointError, match="policy_mapping_fn"):
        corral.Algorithm.from_checkpoint(path)
    restored = corral.Algorithm.from_checkpoint(path, config_overrides={"policy_mapping_fn": by_agent})
    assert sorted(restored.policies) == ["p0", "p1"]
    for policy_id in ("p0", "p1"):
        assert all(np.array_equal(weights[policy_id][k], v) for k, v in restored.get_weights([policy_id])[policy_id].items())
    assert restored.train()["training_iteration"] == 2
    restored.stop()


def test_evaluation_reports_each_policy_s_rewards() -> None:
    config = (
        two_cartpoles()
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_agent)
        .evaluation(evaluation_interval=1, evaluation_duration=3)
    )
    algo = config.build()
    evaluation = algo.train()["evaluation"]
    assert evaluation["episodes_this_iter"] == 3
    assert set(evaluation["policy_reward_mean"]) == {"p0", "p1"}
    algo.stop()


def test_an_evaluation_env_with_more_agents_for_a_shared_policy_is_built_and_evaluated() -> None:
    config = two_cartpoles().evaluation(
        evaluation_interval=1, evaluation_duration=2, evaluation_config={"env_config": {"num_agents": 3}}
    )
    algo = config.build()
    evaluation = algo.train()["evaluation"]
    # three poles each balanced for at least a few steps: each episode's total return is the sum of three
    assert evaluation["episodes_this_iter"] == 2 and evaluation["episode_reward_min"] >= 3 * 8
    algo.stop()


def test_an_evaluation_env_whose_agents_do_not_fit_the_policies_is_refused_at_build() -> None:
    config = (
        two_cartpoles()
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=by_agent)
        .evaluation(evaluation_interval=1, evaluation_config={"env": MultiPendulum})
    )
    with pytest.raises(
        ConfigError, match=r"the evaluation env .* has the observation space Box.* for policy 'p0', which is trained on"
    ):
        config.build()


def test_policies_whose_models_share_a_layer_learn_one_after_another() -> None:
    threads: list[str] = []
    algo = learning_config("PPO", recording(corral.get_algorithm("PPO").policy_class, threads), threads=2).build()
    try:
        first, second = (
            next(m for m in algo.get_policy(pid).model.modules() if isinstance(m, torch.nn.Linear)) for pid in ("p0", "p1")
        )
        second.weight = first.weight  # one layer in both models, as RLlib's shared-weights example makes it
        algo.train()
        assert set(threads) == {"MainThread", "done"}, "an update in a thread would race the other's gradients"
    finally:
        algo.stop()

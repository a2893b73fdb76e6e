"""EnvRunner on tiny deterministic envs: exact rows, episodes and rewards; env creation paths."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import corral
from corral import EnvContext, EnvError, SampleBatch
from corral.core.sampling.env_runner import EnvRunner
from corral.plugins.ppo import PPOConfig

from ..conftest import small_ppo_config


class CountingEnv(gym.Env):
    """Ends after exactly ``length`` steps; the observation is the step count, the reward at step k is k."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    truncate = False

    def __init__(self, config=None):
        config = config or {}
        self.length = int(config.get("length", 3))
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        assert self.t < self.length, "stepped after the episode ended"
        self.t += 1
        done = self.t >= self.length
        return np.array([self.t], np.float32), float(self.t), done and not self.truncate, done and self.truncate, {}


class TruncatingEnv(CountingEnv):
    truncate = True


def build(env, tmp_path, num_envs=2, fragment=5, **env_options):
    config = (
        PPOConfig()
        .environment(env, **env_options)
        .env_runners(num_envs_per_env_runner=num_envs, rollout_fragment_length=fragment)
        .training(train_batch_size=num_envs * fragment, minibatch_size=num_envs, num_epochs=1, model={"fcnet_hiddens": [8]})
        .debugging(seed=0)
        .reporting(storage_path=str(tmp_path))
    )
    return config.build()


@pytest.fixture
def algo_factory(tmp_path):
    built = []

    def make(env, **kwargs):
        algo = build(env, tmp_path, **kwargs)
        built.append(algo)
        return algo

    yield make
    for algo in built:
        algo.stop()


def _policy_batch(samples):
    assert list(samples.policy_batches) == ["default_policy"]
    return samples.policy_batches["default_policy"]


@pytest.mark.parametrize("env_cls", [CountingEnv, TruncatingEnv])
def test_sample_returns_exactly_the_valid_rows(algo_factory, env_cls):
    algo = algo_factory(env_cls, num_envs=2, fragment=5)
    runner = algo.env_runner_group.local_env_runner
    assert isinstance(runner, EnvRunner) and runner.num_envs == 2

    # per sub-env: steps 1 2 3 | reset | 1  -> 4 valid rows of 5
    samples = runner.sample()
    batch = _policy_batch(samples)
    assert samples.env_steps == batch.count == 8
    assert "valid" not in batch
    # the envs run in lockstep, and rows are time-major: each step appears once per env
    np.testing.assert_array_equal(batch[SampleBatch.REWARDS], np.repeat([1, 2, 3, 1], 2))
    np.testing.assert_array_equal(batch[SampleBatch.OBS][:, 0], np.repeat([0, 1, 2, 0], 2))
    ended = np.repeat([False, False, True, False], 2)
    done_column = SampleBatch.TRUNCATEDS if env_cls.truncate else SampleBatch.TERMINATEDS
    other_column = SampleBatch.TERMINATEDS if env_cls.truncate else SampleBatch.TRUNCATEDS
    np.testing.assert_array_equal(batch[done_column], ended)
    assert not batch[other_column].any()
    for column in (
        SampleBatch.ACTIONS,
        SampleBatch.ACTION_LOGP,
        SampleBatch.VF_PREDS,
        SampleBatch.ADVANTAGES,
        SampleBatch.VALUE_TARGETS,
    ):
        assert len(batch[column]) == 8

    episodes = runner.get_metrics()
    assert [(e.reward, e.length) for e in episodes] == [(6.0, 3), (6.0, 3)]
    assert runner.get_metrics() == []  # metrics are handed out once


def test_consecutive_samples_neither_lose_nor_duplicate_rows(algo_factory):
    algo = algo_factory(CountingEnv, num_envs=3, fragment=5, env_config={"length": 4})
    runner = algo.env_runner_group.local_env_runner
    rewards, episodes, env_steps = [], [], 0
    for _ in range(6):  # 30 vector steps: 6 episodes of 4 steps + 6 reset rows per env
        samples = runner.sample()
        env_steps += samples.env_steps
        rewards.append(_policy_batch(samples)[SampleBatch.REWARDS])
        episodes += runner.get_metrics()
    rewards = np.concatenate(rewards)
    # one env's stream across calls: 1 2 3 4 (reset) 1 2 3 4 (reset) ...
    stream = [k for step in range(30) for k in [(step % 5) + 1] if k <= 4]
    np.testing.assert_array_equal(rewards, np.repeat(stream, 3))
    assert env_steps == len(rewards) == 3 * 24
    assert [(e.reward, e.length) for e in episodes] == [(10.0, 4)] * 18
    # every reward belongs to exactly one finished episode
    assert rewards.sum() == sum(e.reward for e in episodes)


def test_rows_are_recorded_per_sub_env_in_time_major_order(algo_factory):
    algo = algo_factory(CountingEnv, num_envs=2, fragment=4, env_config={"length": 2})
    runner = algo.env_runner_group.local_env_runner
    batch = _policy_batch(runner.sample())
    # per env: 1 2 (reset) 1
    np.testing.assert_array_equal(batch[SampleBatch.REWARDS], [1, 1, 2, 2, 1, 1])
    # termination rows do not bootstrap: their value target is the reward
    terminal = batch[SampleBatch.TERMINATEDS]
    np.testing.assert_allclose(batch[SampleBatch.VALUE_TARGETS][terminal], batch[SampleBatch.REWARDS][terminal])


def test_truncation_bootstraps_value_of_final_observation(algo_factory):
    algo = algo_factory(TruncatingEnv, num_envs=1, fragment=3, env_config={"length": 1})
    runner = algo.env_runner_group.local_env_runner
    policy = algo.get_policy()
    batch = _policy_batch(runner.sample())  # rows: step, reset, step
    assert batch.count == 2
    final_value = float(policy.compute_values(np.array([[1.0]], np.float32))[0])
    gamma = algo.config.gamma
    np.testing.assert_allclose(batch[SampleBatch.VALUE_TARGETS], 1.0 + gamma * final_value, rtol=1e-5)


def test_sample_with_explicit_steps_and_train_counts(algo_factory):
    algo = algo_factory(CountingEnv, num_envs=2, fragment=5)
    runner = algo.env_runner_group.local_env_runner
    samples = runner.sample(num_steps=8)  # per env: 1 2 3 R 1 2 3 R
    assert samples.env_steps == 12
    result = algo.train()  # 5 more steps per env: 1 2 3 R 1, and one more (2) to fill the batch of 10 steps
    assert result["num_env_steps_sampled"] == 10
    assert result["episodes_this_iter"] == 4 + 2


def test_run_episodes_counts_exact_episodes(algo_factory):
    algo = algo_factory(CountingEnv, num_envs=2, fragment=5, env_config={"length": 5})
    runner = algo.env_runner_group.local_env_runner
    episodes = runner.run_episodes(num_episodes=3)
    assert [(e.reward, e.length) for e in episodes] == [(15.0, 5)] * 3


@pytest.mark.parametrize(
    ("env_id", "native"),
    [("CartPole-v1", True), ("Pendulum-v1", False)],
)
def test_gymnasium_ids_native_and_sync(algo_factory, env_id, native):
    algo = algo_factory(env_id, num_envs=3, fragment=20)
    runner = algo.env_runner_group.local_env_runner
    assert isinstance(runner.base_env, gym.vector.SyncVectorEnv) is not native
    assert runner.base_env.num_envs == 3
    assert runner.observation_space == gym.make(env_id).observation_space
    samples = runner.sample()
    batch = _policy_batch(samples)
    assert batch.count == samples.env_steps
    assert 3 * 20 - 3 * 20 // 9 <= batch.count <= 60  # CartPole episodes last at least 8 steps
    assert batch[SampleBatch.OBS].shape == (batch.count, *runner.observation_space.shape)
    if not native:
        assert batch.count == 60  # Pendulum only ends after 200 steps
        # actions in the batch are the policy's [-1, 1] actions for Pendulum's [-2, 2] torque
        assert batch[SampleBatch.ACTIONS].shape == (60, 1)
    algo.train()


def test_vectorize_mode_sync_forces_copies(algo_factory, tmp_path):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, vectorize_mode="sync")
        .training(train_batch_size=16, minibatch_size=8, num_epochs=1)
        .reporting(storage_path=str(tmp_path))
    )
    algo = config.build()
    try:
        assert isinstance(algo.env_runner_group.local_env_runner.base_env, gym.vector.SyncVectorEnv)
    finally:
        algo.stop()


def test_vectorize_mode_native_without_native_env_is_env_error(tmp_path):
    config = PPOConfig().environment("Pendulum-v1").env_runners(vectorize_mode="native")
    with pytest.raises(EnvError, match="native"):
        config.build()


def test_register_env_creator_gets_env_context(algo_factory):
    contexts = []

    def creator(ctx):
        contexts.append(ctx)
        return CountingEnv(ctx)

    corral.register_env("corral-test-counting-env", creator)
    algo = algo_factory("corral-test-counting-env", num_envs=3, fragment=4, env_config={"length": 2, "tag": "x"})
    assert len(contexts) == 3
    assert all(isinstance(ctx, EnvContext) for ctx in contexts)
    assert sorted(ctx.vector_index for ctx in contexts) == [0, 1, 2]
    assert {ctx.worker_index for ctx in contexts} == {0}
    assert {ctx.num_workers for ctx in contexts} == {0}
    assert all(dict(ctx) == {"length": 2, "tag": "x"} for ctx in contexts)
    # the env_config reached the env: episodes of 2 steps
    batch = _policy_batch(algo.env_runner_group.local_env_runner.sample())
    np.testing.assert_array_equal(batch[SampleBatch.REWARDS], np.repeat([1, 2, 1], 3))


def test_env_class_receives_env_context(algo_factory):
    seen = []

    class Recording(CountingEnv):
        def __init__(self, config):
            seen.append(config)
            super().__init__(config)

    algo_factory(Recording, num_envs=2, env_config={"length": 7})
    assert [ctx.vector_index for ctx in seen] == [0, 1]
    assert all(isinstance(ctx, EnvContext) and ctx["length"] == 7 for ctx in seen)


def test_env_class_without_arguments(algo_factory):
    class NoArgs(CountingEnv):
        def __init__(self):
            super().__init__({"length": 2})

    algo = algo_factory(NoArgs, num_envs=1, fragment=3)
    batch = _policy_batch(algo.env_runner_group.local_env_runner.sample())
    np.testing.assert_array_equal(batch[SampleBatch.REWARDS], [1, 2])


def test_env_import_path(algo_factory):
    algo = algo_factory("tests.core.test_env_runner:CountingEnv", num_envs=1, fragment=4)
    batch = _policy_batch(algo.env_runner_group.local_env_runner.sample())
    np.testing.assert_array_equal(batch[SampleBatch.REWARDS], [1, 2, 3])


def test_env_context_copy_with():
    ctx = EnvContext({"a": 1}, worker_index=2, vector_index=0, num_workers=4)
    other = ctx.copy_with(vector_index=3)
    assert (other.worker_index, other.vector_index, other.num_workers) == (2, 3, 4)
    assert dict(other) == {"a": 1} and ctx.vector_index == 0


def test_unknown_env_name_is_env_error_with_suggestion():
    with pytest.raises(EnvError) as info:
        PPOConfig().environment("CartPol-v1").build()
    message = str(info.value)
    assert "'CartPol-v1'" in message
    assert "Did you mean 'CartPole-v1'" in message
    assert "register_env" in message


def test_bad_env_specs_are_env_errors():
    with pytest.raises(EnvError, match="no_such_module"):
        PPOConfig().environment("no_such_module:Env").build()
    with pytest.raises(EnvError, match=r"not a gymnasium\.Env"):
        PPOConfig().environment(dict).build()
    corral.register_env("corral-test-not-an-env", lambda ctx: object())
    with pytest.raises(EnvError, match=r"not a gymnasium\.Env"):
        PPOConfig().environment("corral-test-not-an-env").build()
    with pytest.raises(EnvError, match="non-empty"):
        corral.register_env("", lambda ctx: None)
    with pytest.raises(EnvError, match="callable"):
        corral.register_env("corral-test-x", 42)


def test_foreach_env_runner(algo_factory):
    algo = algo_factory(CountingEnv, num_envs=2)
    assert algo.env_runner_group.foreach_env_runner(lambda r: r.num_envs) == [2]
    assert algo.workers.foreach_worker(lambda r: r.worker_index) == [0]
    # RLlib 2.9's keywords, and the later name of its flag
    assert algo.workers.foreach_worker(func=lambda r: r.worker_index, local_worker=True, timeout_seconds=5) == [0]
    assert algo.workers.foreach_worker(func=lambda r: r.worker_index, local_env_runner=False) == []
    assert algo.workers.foreach_worker_with_id(func=lambda i, r: (i, r.num_envs), local_worker=True) == [(0, 2)]


# ---------------------------------------------------------------------- #
# failing sub-environments, in this process
# ---------------------------------------------------------------------- #
def test_a_failing_sub_environment_is_named_in_the_error(make_algo) -> None:
    from corral.errors import EnvRunnerError

    config = small_ppo_config("tests.toy_envs:FlakyCartPole").environment(env_config={"fail_worker": 0, "fail_vector": 2})
    with pytest.raises(
        EnvRunnerError, match=r"sub-environment 2 of env runner 0 raised RuntimeError: flaky sub-environment \(0, 2\) broke"
    ):
        make_algo(config).train()


def test_restart_failed_sub_environments_restarts_only_that_one(make_algo) -> None:
    config = (
        small_ppo_config("tests.toy_envs:FlakyCartPole")
        .environment(env_config={"fail_worker": 0, "fail_vector": 1, "once": True})
        .fault_tolerance(restart_failed_sub_environments=True)
    )
    algo = make_algo(config)
    result = algo.train()
    assert [e.restarts for e in algo.env_runner_group.local_env_runner.base_env.envs] == [0, 1, 0, 0]
    assert result["num_env_steps_sampled"] > 200  # the runner kept sampling with the new sub-environment


def test_restarting_sub_environments_refuses_native_vectorisation() -> None:
    from corral.errors import ConfigError

    with pytest.raises(ConfigError, match="restart_failed_sub_environments needs sub-environments stepped one by one"):
        small_ppo_config().env_runners(vectorize_mode="native").fault_tolerance(restart_failed_sub_environments=True).validate()

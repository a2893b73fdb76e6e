"""Env runners sample an ExternalEnv: concurrent episodes as columns, logged actions as given, PPO learns through it."""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral import ConfigError
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.core.environments.external_env import ExternalEnv
from corral.errors import EnvError
from corral.plugins.ppo import PPOConfig
from tests.conftest import best_return_within
from tests.recurrent_replay import replay_sequences

SPACE = gym.spaces.Box(-10.0, 10.0, (1,), np.float32)


def play_in_threads(play: Any, arguments: list[tuple[Any, ...]]) -> None:
    """An application's players, each ``play(*args)`` in a thread of its own, until all return."""
    threads = [threading.Thread(target=play, args=args, daemon=True) for args in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class Countdown(ExternalEnv):
    """Concurrent threads, each playing episodes that count down from ``start`` to 0, rewarded ``count`` each step.

    ``env_config``: ``threads``; ``untrained_first`` plays one episode with training disabled (counting down from 7)
    before the others; ``logged_prob`` logs action 1 itself with that probability (``"none"``: without one).
    """

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(gym.spaces.Discrete(2), SPACE)
        self.config = config

    def run(self) -> None:
        play_in_threads(self._play, [() for _ in range(self.config.get("threads", 1))])

    def _play(self) -> None:
        try:
            if self.config.get("untrained_first"):
                self._play_one(7, training_enabled=False)
            while True:
                self._play_one(3, training_enabled=True)
        except EnvError:  # the runner stopped
            pass

    def _play_one(self, start: int, training_enabled: bool) -> None:
        episode = self.start_episode(training_enabled=training_enabled)
        for count in range(start, 0, -1):
            obs = np.array([count], np.float32)
            if "logged_prob" in self.config:
                prob = self.config["logged_prob"]
                self.log_action(episode, obs, 1, action_prob=None if prob == "none" else prob)
            else:
                self.get_action(episode, obs)
            self.log_returns(episode, float(count))
        self.end_episode(episode, np.zeros(1, np.float32))


def countdown(**env_config: Any) -> PPOConfig:
    return (
        PPOConfig()
        .environment(Countdown, env_config=env_config)
        .env_runners(rollout_fragment_length=12)
        .training(train_batch_size=24, minibatch_size=12, num_epochs=1)
        .debugging(seed=0)
    )


def test_a_sample_call_records_the_fragment_s_steps_over_concurrent_episodes_one_column_each(make_algo: Any) -> None:
    runner = make_algo(countdown(threads=3)).env_runner_group.local_env_runner
    samples = runner.sample()
    assert samples.env_steps == 12
    batch = samples.policy_batches[DEFAULT_POLICY_ID]
    obs = batch[SampleBatch.OBS][:, 0]
    # each row's reward is what the episode logged after acting on the row's observation; a row still waiting for
    # its episode's next observation goes into the next call's batch
    assert np.array_equal(batch[SampleBatch.REWARDS], obs) and set(obs.tolist()) <= {1.0, 2.0, 3.0} and 9 <= len(obs) <= 12
    assert np.array_equal(batch[SampleBatch.TERMINATEDS], obs == 1.0)
    episodes = runner.get_metrics()
    assert episodes and all((e.reward, e.length) == (6.0, 3) for e in episodes)


def test_actions_the_application_logged_are_recorded_as_given_with_their_probability(make_algo: Any) -> None:
    runner = make_algo(countdown(logged_prob=0.25)).env_runner_group.local_env_runner
    batch = runner.sample().policy_batches[DEFAULT_POLICY_ID]
    assert len(batch) >= 9 and np.all(batch[SampleBatch.ACTIONS] == 1)
    np.testing.assert_allclose(batch[SampleBatch.ACTION_LOGP], np.log(0.25), rtol=1e-6)


def test_a_logged_action_without_a_probability_is_weighed_by_the_policy_s_likelihood(make_algo: Any) -> None:
    algo = make_algo(countdown(logged_prob="none"))
    batch = algo.env_runner_group.local_env_runner.sample().policy_batches[DEFAULT_POLICY_ID]
    expected = algo.get_policy().compute_log_likelihoods(batch[SampleBatch.OBS], np.ones(len(batch), np.int64))
    np.testing.assert_allclose(batch[SampleBatch.ACTION_LOGP], expected, rtol=1e-5)
    assert np.all(expected < np.log(0.9)), "the policy's likelihoods, not a probability the application gave"


def test_an_episode_without_training_is_acted_for_and_reported_but_never_trained_on(make_algo: Any) -> None:
    runner = make_algo(countdown(untrained_first=True)).env_runner_group.local_env_runner
    batch = runner.sample().policy_batches[DEFAULT_POLICY_ID]
    assert batch[SampleBatch.OBS].max() <= 3.0, "no row of the untrained episode"
    lengths = sorted(e.length for e in runner.get_metrics())
    assert lengths[-1] == 7 and set(lengths[:-1]) == {3}


class LoggedBurst(ExternalEnv):
    """Logs four countdowns of 3 itself (action 1; ``logp`` when given, else no probability), sets ``logged``, and plays
    no more until its runner closes it."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(gym.spaces.Discrete(2), SPACE)
        self.logp = config.get("logp")
        self.logged, self.closed = threading.Event(), threading.Event()

    def run(self) -> None:
        for _ in range(4):
            episode = self.start_episode()
            for count in (3, 2, 1):
                self.log_action(episode, np.array([count], np.float32), 1, action_logp=self.logp)
                self.log_returns(episode, float(count))
            self.end_episode(episode, np.zeros(1, np.float32))
        self.logged.set()
        self.closed.wait()  # returning would end the application

    def close(self) -> None:
        super().close()
        self.closed.set()


@pytest.mark.parametrize("logp", [None, -0.5], ids=["policy-s-likelihood", "given"])
def test_logged_steps_taken_together_are_weighed_in_one_forward_pass_as_each_alone(make_algo: Any, logp: Any) -> None:
    config = PPOConfig().environment(LoggedBurst, env_config={"logp": logp}).env_runners(rollout_fragment_length=12)
    algo = make_algo(config.training(train_batch_size=12, minibatch_size=12, num_epochs=1).debugging(seed=0))
    runner, policy = algo.env_runner_group.local_env_runner, algo.get_policy()
    compute_actions, passes = policy.compute_actions, []
    policy.compute_actions = lambda obs, **kwargs: passes.append(len(obs)) or compute_actions(obs, **kwargs)
    runner.base_env.start()  # the application logs every step before the runner polls (one poll takes them all)
    assert runner.base_env.logged.wait(timeout=30)
    batch = runner.sample().policy_batches[DEFAULT_POLICY_ID]
    assert passes == [12], "one pass for the twelve logged steps, not one per step"
    # the last episode's last row waits for the episode's end, which is beyond this call's twelve steps
    assert len(batch) == 11 and np.all(batch[SampleBatch.ACTIONS] == 1)
    assert sorted(batch[SampleBatch.OBS][:, 0]) == [1] * 3 + [2] * 4 + [3] * 4
    alone = [compute_actions(obs[None], explore=True)[1] for obs in batch[SampleBatch.OBS]]
    np.testing.assert_allclose(batch[SampleBatch.VF_PREDS], [extras[SampleBatch.VF_PREDS][0] for extras in alone], rtol=1e-5)
    expected = policy.compute_log_likelihoods(batch[SampleBatch.OBS], np.ones(11, np.int64)) if logp is None else -0.5
    np.testing.assert_allclose(batch[SampleBatch.ACTION_LOGP], expected, rtol=1e-5)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"env_runners": {"num_envs_per_env_runner": 2}}, r"num_envs_per_env_runner=2, but an ExternalEnv is one application"),
        ({"env_runners": {"batch_mode": "complete_episodes"}}, r"ExternalEnv is sampled with batch_mode='truncate_episodes'"),
    ],
)
def test_what_an_external_env_cannot_be_sampled_with_is_refused_at_build(settings: dict[str, Any], match: str) -> None:
    config = countdown()
    for method, values in settings.items():
        getattr(config, method)(**values)
    with pytest.raises(ConfigError, match=match):
        config.build()


class TaggedCountdown(ExternalEnv):
    """Concurrent threads playing countdowns of 5 whose observation is ``[episode tag, count]``; ``log_every`` > 0 logs
    every that many counts' action itself (action 1, no probability)."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(gym.spaces.Discrete(2), gym.spaces.Box(0.0, 1e4, (2,), np.float32))
        self.log_every = config.get("log_every", 0)
        self.tags = iter(range(1, 10_000))
        self.lock = threading.Lock()

    def run(self) -> None:
        play_in_threads(self._play, [(), (), ()])

    def _play(self) -> None:
        try:
            while True:
                with self.lock:
                    tag = next(self.tags)
                episode = self.start_episode()
                for count in range(5, 0, -1):
                    obs = np.array([tag, count], np.float32)
                    if self.log_every and count % self.log_every == 0:
                        self.log_action(episode, obs, 1)
                    else:
                        self.get_action(episode, obs)
                    self.log_returns(episode, float(count))
                self.end_episode(episode, np.array([tag, 0], np.float32))
        except EnvError:  # the runner stopped
            pass


LSTM = {"use_lstm": True, "lstm_cell_size": 8, "fcnet_hiddens": [8], "lstm_use_prev_action": True,
        "lstm_use_prev_reward": True, "max_seq_len": 5}  # fmt: skip
ATTENTION = {"use_attention": True, "attention_num_transformer_units": 1, "attention_dim": 16,
             "attention_memory_inference": 5, "attention_memory_training": 5, "max_seq_len": 5}  # fmt: skip


@pytest.mark.parametrize(
    ("model", "log_every"), [(LSTM, 0), (LSTM, 2), (ATTENTION, 2)], ids=["lstm", "lstm-logged", "attention-logged"]
)
def test_a_recurrent_policy_s_state_follows_each_external_episode_across_polls_and_sample_calls(
    make_algo: Any, model: dict[str, Any], log_every: int
) -> None:
    config = (
        PPOConfig()
        .environment(TaggedCountdown, env_config={"log_every": log_every})
        .env_runners(rollout_fragment_length=20)
        .training(model=model, train_batch_size=40, minibatch_size=20, num_epochs=1)
        .debugging(seed=0)
    )
    algo = make_algo(config)
    policy, runner = algo.get_policy(), algo.env_runner_group.local_env_runner
    carried: dict[Any, Any] = {}
    checked = 0
    for _ in range(3):
        batch = runner.sample().policy_batches[DEFAULT_POLICY_ID]  # [sequences, max_seq_len], a state per sequence

        def episode_of(seq: int, batch: Any = batch) -> float | None:
            tag, count = batch[SampleBatch.OBS][seq, 0]
            return tag if tag in carried or count == 5 else None  # None: it began before this test looked

        rows = replay_sequences(policy, batch, carried, episode_of)
        if log_every:  # the application's own actions, recorded as it took them
            assert all(batch[SampleBatch.ACTIONS][seq, t] == 1 for seq, t in rows if batch[SampleBatch.OBS][seq, t, 1] % 2 == 0)
        checked += len(rows)
    assert checked >= 40
    assert algo.train()["num_env_steps_trained"] > 0


class CartPoleApp(ExternalEnv):
    """RLlib's CartPole client pattern, in threads: each plays CartPole and asks the policy for every action."""

    def __init__(self, config: dict[str, Any]) -> None:
        env = gym.make("CartPole-v1")
        super().__init__(env.action_space, env.observation_space)
        self.threads = config["threads"]

    def run(self) -> None:
        play_in_threads(self._play, [(i,) for i in range(self.threads)])

    def _play(self, seed: int) -> None:
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=seed)
        try:
            while True:
                episode, done = self.start_episode(), False
                while not done:
                    obs, reward, terminated, truncated, _ = env.step(self.get_action(episode, obs))
                    self.log_returns(episode, float(reward))
                    done = terminated or truncated
                self.end_episode(episode, obs)
                obs, _ = env.reset()
        except EnvError:  # the runner stopped
            pass


@pytest.mark.slow
def test_ppo_learns_cartpole_through_an_application_that_asks_for_its_actions(make_algo: Any) -> None:
    algo = make_algo(
        PPOConfig()
        .environment(CartPoleApp, env_config={"threads": 4})
        .env_runners(rollout_fragment_length=1000)
        .training(train_batch_size=1000, minibatch_size=128, num_epochs=10, lr=3e-4)
        .debugging(seed=0)
    )
    best, steps = best_return_within(algo, 40_000, 150.0)
    assert best >= 150.0, f"mean return {best:.1f} after {steps} steps"

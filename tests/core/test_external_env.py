"""ExternalEnv: an application's own loop, in its thread, asks for actions; the runner's side polls and answers."""

from __future__ import annotations

import math
import threading
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral.core.environments.external_env import MAX_UNPOLLED_STEPS, ExternalEnv, ExternalStep
from corral.errors import EnvError

SPACE = gym.spaces.Box(-10.0, 10.0, (1,), np.float32)
ACTIONS = gym.spaces.Discrete(2)


class Countdown(ExternalEnv):
    """Episodes in which the application counts down from 3, each on its own thread, rewarded 1 a step."""

    def __init__(self, episodes: int, concurrent: int = 1, off_policy: bool = False) -> None:
        super().__init__(ACTIONS, SPACE)
        self.episodes, self.concurrent, self.off_policy = episodes, concurrent, off_policy
        self.actions_taken: dict[str, list[int]] = {}

    def run(self) -> None:
        threads = [threading.Thread(target=self._play) for _ in range(self.concurrent)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _play(self) -> None:
        for _ in range(self.episodes):
            episode = self.start_episode()
            taken = self.actions_taken.setdefault(episode, [])
            for count in (3.0, 2.0, 1.0):
                obs = np.array([count], np.float32)
                if self.off_policy:
                    self.log_action(episode, obs, 0, action_prob=0.5)
                    taken.append(0)
                else:
                    taken.append(self.get_action(episode, obs))
                self.log_returns(episode, 1.0, {"count": count})
            self.end_episode(episode, np.array([0.0], np.float32))


def _drive(env: ExternalEnv, action_of: Any = lambda step: int(step.observation[0]) % 2) -> list[ExternalStep]:
    """The runner's side: poll until the application stops, answering each observation that waits for an action."""
    seen: list[ExternalStep] = []
    while True:
        try:
            steps = env.poll(timeout=10)
        except EnvError as ended:
            if "returned" in str(ended):
                return seen
            raise
        seen.extend(steps)
        env.send_actions({s.episode_id: action_of(s) for s in steps if not s.ended and s.action is None})


def test_an_episode_s_observations_come_with_the_rewards_logged_since_the_last_action_and_get_their_action() -> None:
    env = Countdown(episodes=2)
    steps = _drive(env)
    first = [s for s in steps if s.episode_id == steps[0].episode_id]
    assert [float(s.observation[0]) for s in first] == [3.0, 2.0, 1.0, 0.0]
    assert [s.reward for s in first] == [0.0, 1.0, 1.0, 1.0] and [s.first for s in first] == [True, False, False, False]
    assert [s.ended for s in first] == [False, False, False, True] and first[-1].info == {"count": 1.0}
    assert env.actions_taken[first[0].episode_id] == [1, 0, 1], "each get_action returned the action sent for it"
    assert len({s.episode_id for s in steps}) == 2


def test_concurrent_episodes_each_get_their_own_actions() -> None:
    env = Countdown(episodes=3, concurrent=4)
    steps = _drive(env, action_of=lambda step: hash(step.episode_id) % 2)
    assert len({s.episode_id for s in steps}) == 12 and sum(s.ended for s in steps) == 12
    assert all(taken == [hash(episode) % 2] * 3 for episode, taken in env.actions_taken.items())


def test_logged_actions_arrive_with_their_probability_and_wait_for_nothing() -> None:
    steps = _drive(Countdown(episodes=1, off_policy=True))
    assert [(s.action, s.action_logp) for s in steps if not s.ended] == [(0, math.log(0.5))] * 3


def test_an_application_that_fails_fails_the_runner_s_poll_with_its_error() -> None:
    class Broken(ExternalEnv):
        def run(self) -> None:
            self.get_action("never-started", np.zeros(1, np.float32))

    with pytest.raises(EnvError, match=r"Broken.run\(\) raised EnvError\(\"no episode 'never-started' is running"):
        Broken(ACTIONS, SPACE).poll(timeout=10)


def test_misuse_of_episodes_is_refused_naming_what_to_do() -> None:
    env = ExternalEnv(ACTIONS, SPACE, max_concurrent=1)
    episode = env.start_episode("a")
    with pytest.raises(EnvError, match="already running"):
        env.start_episode("a")
    with pytest.raises(EnvError, match="max_concurrent=1"):
        env.start_episode("b")
    with pytest.raises(EnvError, match="is not waiting for an action"):
        env.send_actions({episode: 1})
    with pytest.raises(NotImplementedError, match="must implement run"):
        env.run()


def test_closing_releases_an_episode_waiting_for_its_action() -> None:
    env = ExternalEnv(ACTIONS, SPACE)
    episode = env.start_episode()
    failure: list[BaseException] = []

    def wait() -> None:
        try:
            env.get_action(episode, np.zeros(1, np.float32))
        except EnvError as exc:
            failure.append(exc)

    waiting = threading.Thread(target=wait)
    waiting.start()
    while not env._ExternalEnv__steps:  # the observation is recorded before it waits
        threading.Event().wait(0.01)
    env.close()
    waiting.join(timeout=10)
    assert failure and "closed while episode" in str(failure[0])


def test_a_logged_action_outside_the_action_space_is_refused() -> None:
    env = ExternalEnv(ACTIONS, SPACE)
    episode = env.start_episode()
    with pytest.raises(EnvError, match=r"logged the action 5, which is not in Discrete\(2\)"):
        env.log_action(episode, np.zeros(1, np.float32), 5)


def test_an_application_that_logs_faster_than_the_runner_polls_waits_for_room() -> None:
    env = ExternalEnv(ACTIONS, SPACE)
    episode = env.start_episode()
    logged = [0]

    def log_forever() -> None:
        try:
            while True:
                env.log_action(episode, np.zeros(1, np.float32), 0)
                logged[0] += 1
        except EnvError:  # closed
            pass

    logging = threading.Thread(target=log_forever)
    logging.start()
    while logged[0] < MAX_UNPOLLED_STEPS:
        threading.Event().wait(0.01)
    threading.Event().wait(0.2)
    assert logged[0] == MAX_UNPOLLED_STEPS, "it waits once the unpolled steps are full"
    env._ExternalEnv__thread = threading.current_thread()  # poll without starting run(): this test is the application
    assert len(env.poll(timeout=1)) == MAX_UNPOLLED_STEPS
    while logged[0] < 2 * MAX_UNPOLLED_STEPS:  # the poll made room
        threading.Event().wait(0.01)
    env.close()
    logging.join(timeout=10)
    assert not logging.is_alive()

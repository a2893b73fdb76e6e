"""The multi-agent env contract: RLlib's dict protocol, make_multi_agent, and the checks that name agent and key."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import corral
from corral import EnvError, MultiAgentEnv, make_multi_agent
from corral.core.environments.multi_agent_env import ALL_AGENTS
from corral.core.environments.multi_agent_guard import MultiAgentEnvGuard


class TurnTaking(MultiAgentEnv):
    """Two players alternate; a third agent joins at step 2 and leaves at step 4; the game lasts 6 steps.

    Each observation is the step count; each action is 0 or 1, and the reward is the action.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.possible_agents = ["x", "o", "late"]
        super().__init__()
        space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
        self.observation_spaces = dict.fromkeys(self.possible_agents, space)
        self.action_spaces = dict.fromkeys(self.possible_agents, gym.spaces.Discrete(2))
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t], np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        self.t = 0
        self.agents = ["x", "o"]
        return {"x": self._obs()}, {"x": {}}

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        rewards = {agent: float(action) for agent, action in action_dict.items()}
        terminateds: dict[Any, bool] = {ALL_AGENTS: self.t >= 6}
        observations = {"o" if self.t % 2 else "x": self._obs()}
        if self.t == 2:
            self.agents.append("late")
        if 2 <= self.t < 4:
            observations["late"] = self._obs()
        if self.t == 4:
            terminateds["late"] = True
            self.agents.remove("late")
        return observations, rewards, terminateds, {ALL_AGENTS: False}, {}


def checked(env: MultiAgentEnv) -> MultiAgentEnvGuard:
    return MultiAgentEnvGuard(env, "test env")


def test_a_turn_based_game_with_agents_that_join_and_leave_follows_the_protocol() -> None:
    env = checked(TurnTaking())
    observations, _ = env.reset(seed=0)
    seen = [sorted(observations)]
    done = False
    while not done:
        acted = observations
        observations, rewards, terminateds, truncateds, _ = env.step(dict.fromkeys(acted, 1))
        assert rewards == dict.fromkeys(acted, 1.0)
        done = terminateds[ALL_AGENTS] or truncateds[ALL_AGENTS]
        seen.append(sorted(observations))
    assert seen == [["x"], ["o"], ["late", "x"], ["late", "o"], ["x"], ["o"], ["x"]]


@pytest.mark.parametrize("flags", ["terminateds", "truncateds"])
def test_a_step_without_the_all_key_names_the_key(flags: str) -> None:
    class Forgetful(TurnTaking):
        def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
            result = list(super().step(action_dict))
            index = 2 if flags == "terminateds" else 3
            result[index] = {k: v for k, v in result[index].items() if k != ALL_AGENTS}
            return tuple(result)  # type: ignore[return-value]

    env = checked(Forgetful())
    env.reset()
    with pytest.raises(EnvError, match=f"{flags} without the '__all__' key"):
        env.step({"x": 0})


def test_an_action_for_an_agent_the_env_did_not_ask_names_the_agent() -> None:
    env = checked(TurnTaking())
    env.reset()
    with pytest.raises(EnvError, match=r"an action for agent 'o', which the env did not ask to act .*\['x'\]"):
        env.step({"x": 0, "o": 1})


def test_an_observation_outside_the_agents_space_names_the_agent_and_the_key() -> None:
    class Escaping(TurnTaking):
        def _obs(self) -> np.ndarray:
            return np.array([self.t * 50.0], np.float32)  # leaves the Box [0, 100] at t = 3

    env = checked(Escaping())
    observations, _ = env.reset()
    with pytest.raises(EnvError, match=r"observation for agent 'o' \(observations\['o'\]\)"):
        for _ in range(3):
            observations = env.step(dict.fromkeys(observations, 0))[0]


def test_a_non_finite_reward_names_the_agent() -> None:
    class Nan(TurnTaking):
        def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
            observations, rewards, terminateds, truncateds, infos = super().step(action_dict)
            return observations, {agent: float("nan") for agent in rewards}, terminateds, truncateds, infos

    env = checked(Nan())
    env.reset()
    with pytest.raises(EnvError, match=r"reward nan for agent 'x' \(rewards\['x'\]\)"):
        env.step({"x": 1})


def test_results_that_are_not_dicts_and_steps_after_the_end_are_refused() -> None:
    class Flat(TurnTaking):
        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
            return self._obs(), {}

    with pytest.raises(EnvError, match="returned observations as ndarray; it must be a dict by agent id"):
        checked(Flat()).reset()
    env = checked(TurnTaking())
    with pytest.raises(EnvError, match=r"step\(\) after the episode ended; reset\(\) first"):
        env.step({"x": 0})


def test_spaces_per_agent_shared_or_in_a_dict_keyed_by_agent() -> None:
    env = TurnTaking()
    assert env.get_action_space("late") == gym.spaces.Discrete(2)

    class Shared(MultiAgentEnv):
        def __init__(self) -> None:
            super().__init__()
            self.observation_space = gym.spaces.Discrete(3)
            self.action_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(4)})

    shared = Shared()
    assert shared.get_observation_space("anyone") == gym.spaces.Discrete(3)
    assert shared.get_action_space("b") == gym.spaces.Discrete(4)
    with pytest.raises(EnvError, match=r"declares no observation space for agent 'nobody'.*\['late', 'o', 'x'\]"):
        env.get_observation_space("nobody")


def test_make_multi_agent_gives_each_agent_its_own_copy() -> None:
    env = make_multi_agent("CartPole-v1")({"num_agents": 3})
    assert env.possible_agents == [0, 1, 2] and env.max_num_agents == 3 and env.get_agent_ids() == {0, 1, 2}
    assert env.get_observation_space(2) == gym.make("CartPole-v1").observation_space
    first, _ = env.reset(seed=7)
    again, _ = env.reset(seed=7)
    assert sorted(first) == [0, 1, 2] and env.agents == [0, 1, 2]
    assert all(np.array_equal(first[i], again[i]) for i in range(3)), "a seeded reset is repeatable"
    assert not np.array_equal(first[0], first[1]), "each copy gets its own seed"
    checker = MultiAgentEnvGuard(env, "multi cartpole")
    observations, _ = checker.reset(seed=1)
    acting, left = list(observations), []
    done = False
    while not done:
        # agent 0 pushes left, the others right: their poles fall at different steps
        observations, _, terminateds, truncateds, _ = checker.step({agent: int(agent > 0) for agent in acting})
        leaving = [agent for agent in observations if terminateds.get(agent)]
        acting = [agent for agent in observations if agent not in leaving]
        left += leaving
        assert env.agents == [a for a in env.possible_agents if a not in left]
        assert sorted(observations) == sorted(env.agents + leaving), "the last observation of a leaving agent comes back"
        done = terminateds[ALL_AGENTS]
    assert not truncateds[ALL_AGENTS] and sorted(left) == [0, 1, 2]


def test_make_multi_agent_reports_truncation_when_every_agent_runs_out_of_time() -> None:
    env = make_multi_agent("CartPole-v1")({"num_agents": 2, "max_episode_steps": 3})
    env.reset(seed=0)
    for _ in range(3):
        _, _, terminateds, truncateds, _ = env.step({0: 0, 1: 1})
    assert truncateds == {0: True, 1: True, ALL_AGENTS: True} and terminateds[ALL_AGENTS]
    with pytest.raises(EnvError, match=r"an action for agent 0, which is not in the episode now"):
        env.step({0: 0})


def test_make_multi_agent_takes_registered_names_classes_and_creators() -> None:
    made: list[dict] = []

    def creator(config: dict) -> gym.Env:
        made.append(dict(config))
        return gym.make("Pendulum-v1")

    corral.register_env("corral-test-pendulum-creator", creator)
    env = make_multi_agent("corral-test-pendulum-creator")({"num_agents": 2, "g": 9.0})
    assert len(env.envs) == 2 and made == [{"g": 9.0}] * 2
    assert make_multi_agent(creator)({}).num_agents == 0  # no episode yet
    assert make_multi_agent("gymnasium.envs.classic_control:MountainCarEnv")({"num_agents": 2}).max_num_agents == 2


@pytest.mark.parametrize("num_agents", [0, -1, 1.5, True, "2"])
def test_a_bad_number_of_agents_is_refused(num_agents: Any) -> None:
    with pytest.raises(EnvError, match=f"num_agents={num_agents!r} must be a positive integer"):
        make_multi_agent("CartPole-v1")({"num_agents": num_agents})


def test_an_unknown_env_is_refused_when_the_class_is_made() -> None:
    with pytest.raises(EnvError, match="unknown environment 'CartPole-v9'"):
        make_multi_agent("CartPole-v9")


def test_an_agent_that_left_is_not_asked_to_act_again() -> None:
    env = MultiAgentEnvGuard(make_multi_agent("CartPole-v1")({"num_agents": 2}), "multi cartpole")
    env.reset(seed=3)
    terminateds: dict = {}
    step = 0
    while not terminateds.get(0):  # agent 0 always pushes left and falls; agent 1 alternates and balances
        _, _, terminateds, _, _ = env.step({0: 0, 1: step % 2})
        step += 1
    assert not terminateds.get(1)
    with pytest.raises(EnvError, match=r"an action for agent 0, which the env did not ask to act \(.*\[1\]\)"):
        env.step({0: 0, 1: 0})


class Breaks(TurnTaking):
    """TurnTaking whose step raises at step 3, or returns a NaN reward there (``how="nan"``)."""

    def __init__(self, how: str = "raise") -> None:
        super().__init__()
        self.how = how

    def step(self, action_dict: dict) -> tuple[dict, dict, dict, dict, dict]:
        observations, rewards, terminateds, truncateds, infos = super().step(action_dict)
        if self.t == 3 and self.how == "raise":
            raise RuntimeError("the simulator crashed")
        if self.t == 3:
            rewards = {agent: float("nan") for agent in rewards}
        return observations, rewards, terminateds, truncateds, infos


def play_to_step_three(env: MultiAgentEnvGuard) -> tuple[dict, ...]:
    observations, _ = env.reset(seed=0)
    for _ in range(3):
        result = env.step(dict.fromkeys(observations, 1))
        observations = result[0]
    return result


FAILURES = [
    ("raise", corral.EnvRunnerError, "raised RuntimeError: the simulator crashed"),
    ("nan", EnvError, r"reward nan for agent 'x'"),
]


@pytest.mark.parametrize(("how", "error", "message"), FAILURES)
def test_a_failed_step_is_named_or_with_restart_ends_the_episode_in_a_new_env(how: str, error: type, message: str) -> None:
    with pytest.raises(error, match=rf"test env:? .*{message}.* at step 3 of its episode .*restart_failed_sub_environments"):
        play_to_step_three(MultiAgentEnvGuard(Breaks(how), "test env"))

    made: list[Breaks] = []

    def make() -> Breaks:
        made.append(Breaks(how))
        return made[-1]

    env = MultiAgentEnvGuard(Breaks(how), "test env", make=make, restart=True)
    observations, rewards, terminateds, truncateds, infos = play_to_step_three(env)
    # the episode ends there, truncated for everyone (nothing learns from the broken step), in a new env
    assert (observations, rewards, terminateds) == ({}, {}, {ALL_AGENTS: False})
    assert truncateds == {ALL_AGENTS: True, "x": True, "late": True} and infos["x"] == {"corral_env_restarted": True}
    assert env.restarts == 1 and env.env is made[0]
    assert env.reset(seed=0)[0] == {"x": np.array([0.0], np.float32)}


def test_restart_without_a_way_to_make_the_env_is_refused() -> None:
    with pytest.raises(ValueError, match="needs make"):
        MultiAgentEnvGuard(TurnTaking(), "test env", restart=True)


def test_a_replayed_episode_continues_exactly_as_the_original() -> None:
    original = MultiAgentEnvGuard(make_multi_agent("CartPole-v1")({"num_agents": 2}), "multi cartpole")
    original.reset(seed=7)
    for t in range(20):
        original.step({agent: (t * (agent + 1)) % 2 for agent in original.acting})
    record = json.loads(json.dumps(original.episode_record()))  # through JSON, as in a checkpoint

    replayed = MultiAgentEnvGuard(make_multi_agent("CartPole-v1")({"num_agents": 2}), "multi cartpole")
    replayed.replay(record)
    assert replayed.acting == original.acting
    for t in range(10):
        actions = {agent: t % 2 for agent in original.acting}
        a, b = original.step(actions), replayed.step(actions)
        for name, x, y in zip(("observations", "rewards", "terminateds", "truncateds"), a, b, strict=False):
            assert x.keys() == y.keys(), name
            for agent in x:
                np.testing.assert_array_equal(x[agent], y[agent], err_msg=f"{name}[{agent!r}] at step {t}")
        if original.episode_over:
            break


def test_an_episode_that_cannot_be_replayed_says_so() -> None:
    class TupleIds(TurnTaking):
        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
            return {("x", 1): self._obs()}, {}

    env = MultiAgentEnvGuard(TupleIds(), "test env", check_observations=False)
    env.reset(seed=0)
    env.step({("x", 1): 0})
    assert env.episode_record() is None  # an agent id JSON cannot give back
    with pytest.raises(ValueError, match="seed, options, rng and actions"):
        env.replay({"seed": 0})


class OlderIds(MultiAgentEnv):
    """An env written for RLlib 2.9: its ids only in ``_agent_ids`` (a set), its spaces a Dict by agent id."""

    def __init__(self, ids: set[str], via: str) -> None:
        setattr(self, via, set(ids))
        self.observation_space = gym.spaces.Dict({i: gym.spaces.Box(-1, 1, (len(i),)) for i in ids})
        self.action_space = gym.spaces.Dict({i: gym.spaces.Discrete(2) for i in ids})
        super().__init__()


@pytest.mark.parametrize("via", ["_agent_ids", "agents"])
def test_an_env_that_names_its_agents_the_older_way_has_them_as_possible_agents_in_a_fixed_order(via: str) -> None:
    env = OlderIds({"b1", "a22", "c"}, via)
    assert env.possible_agents == ["a22", "b1", "c"], "sorted by repr: the same order in every process"
    assert env.get_observation_space("a22").shape == (3,)
    env.possible_agents = ["c", "a22"]
    assert env.possible_agents == ["c", "a22"], "what the env sets wins"

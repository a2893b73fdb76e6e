"""Multi-agent envs from RLlib's ``examples.env.multi_agent``: agents that finish together, early, in turns or come and go.

Built from :class:`~corral.testing.example_envs.mock.MockEnv` episodes (known
rewards and lengths) so that tests of multi-agent sampling know what to
expect; plus :class:`GuessTheNumberGame` and, as RLlib does with
``make_multi_agent``, one copy per agent of CartPole, Pendulum, continuous
MountainCar and :class:`~corral.testing.example_envs.memory.StatelessCartPole`.

RLlib's versions keep their sub-envs in ``self.agents``; corral's
:class:`~corral.core.environments.multi_agent_env.MultiAgentEnv` uses
``agents`` for the ids of the agents in the episode, so the sub-envs are in
``self.envs`` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from corral.core.environments.multi_agent_env import ALL_AGENTS, MultiAgentDict, MultiAgentEnv, make_multi_agent
from corral.testing.envs import MultiAgentCartPole
from corral.testing.example_envs._common import config_dict
from corral.testing.example_envs.memory import StatelessCartPole
from corral.testing.example_envs.mock import MockEnv
from corral.testing.example_envs.spaces import NestedSpaceRepeatAfterMeEnv

__all__ = [
    "BasicMultiAgent",
    "EarlyDoneMultiAgent",
    "FlexAgentsMultiAgent",
    "GuessTheNumberGame",
    "MultiAgentCartPole",
    "MultiAgentMountainCar",
    "MultiAgentNestedSpaceRepeatAfterMeEnv",
    "MultiAgentPendulum",
    "MultiAgentStatelessCartPole",
]

_StepResult = tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]


class BasicMultiAgent(MultiAgentEnv):
    """``num`` agents (``0`` to ``num - 1``), each playing its own :class:`MockEnv` of 25 steps, all acting every step.

    Observations are ``Discrete(2)`` (always 0), actions ``Discrete(2)``,
    rewards 1.0 a step. All agents finish at step 25, which ends the episode
    (``"__all__"`` terminated and truncated, as each MockEnv sets both).
    ``render`` returns a random 200x300 RGB image.

    Args:
        num: the number of agents.
    """

    render_mode: str | None = "rgb_array"

    def __init__(self, num: int) -> None:
        super().__init__()
        self.envs = [MockEnv(25) for _ in range(num)]
        self.possible_agents = list(range(num))
        self.terminateds: set[int] = set()
        self.truncateds: set[int] = set()
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Discrete(2)
        self.resetted = False
        self.metadata = {"render.modes": ["rgb_array"], "render_modes": ["rgb_array"]}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset every agent's MockEnv; all agents act.

        Args:
            seed: seeds ``np_random`` (which ``render`` draws from).
            options: ignored.
        """
        super().reset(seed=seed)
        self.resetted = True
        self.terminateds, self.truncateds = set(), set()
        self.agents = list(self.possible_agents)
        results = [env.reset() for env in self.envs]
        return {i: obs for i, (obs, _) in enumerate(results)}, {i: info for i, (_, info) in enumerate(results)}

    def step(self, action_dict: MultiAgentDict) -> _StepResult:  # type: ignore[override]  # as MultiAgentEnv.step
        """Step the MockEnv of every agent given an action; the episode ends when every agent has finished."""
        obs, rew, terminated, truncated, info = _step_mock_envs(self.envs, action_dict, self.terminateds, self.truncateds)
        terminated[ALL_AGENTS] = len(self.terminateds) == len(self.envs)
        truncated[ALL_AGENTS] = len(self.truncateds) == len(self.envs)
        self.agents = [a for a in self.possible_agents if a not in self.terminateds and a not in self.truncateds]
        return obs, rew, terminated, truncated, info

    def render(self) -> np.ndarray:
        """A random ``(200, 300, 3)`` ``uint8`` image, standing in for a rendering."""
        return self.np_random.integers(0, 256, size=(200, 300, 3), dtype=np.uint8)


def _step_mock_envs(envs: Any, action_dict: MultiAgentDict, terminateds: set[Any], truncateds: set[Any]) -> _StepResult:
    """Step the sub-env of each agent in ``action_dict``; add those that finished to ``terminateds`` / ``truncateds``.

    Args:
        envs: the sub-envs, indexable by agent id (a list or a dict).
        action_dict: the actions by agent id.
        terminateds: the agents that have terminated so far (updated).
        truncateds: the agents that have been truncated so far (updated).
    """
    obs: MultiAgentDict = {}
    rew: MultiAgentDict = {}
    terminated: MultiAgentDict = {}
    truncated: MultiAgentDict = {}
    info: MultiAgentDict = {}
    for i, action in action_dict.items():
        obs[i], rew[i], terminated[i], truncated[i], info[i] = envs[i].step(action)
        if terminated[i]:
            terminateds.add(i)
        if truncated[i]:
            truncateds.add(i)
    return obs, rew, terminated, truncated, info


class EarlyDoneMultiAgent(MultiAgentEnv):
    """Two agents take turns (one observation per step); the episode ends as soon as the first of them finishes.

    Agent ``0`` plays a :class:`MockEnv` of 3 steps, agent ``1`` one of 5.
    ``reset`` asks agent ``0`` to act; each step runs the given action in its
    agent's MockEnv and hands the turn to the other agent, returning that
    agent's latest result. When that result is the agent's last, its reward is
    reported as 0 and the episode ends for everyone (``"__all__"``), here at
    the sixth step when agent ``0`` finishes. Observations lie in ``Discrete(10)``
    (always 0), actions in ``Discrete(2)``.

    Args:
        config: ignored (RLlib's takes no argument; this lets corral make it from the class).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.envs = [MockEnv(3), MockEnv(5)]
        self.possible_agents = [0, 1]
        self.observation_space = gym.spaces.Discrete(10)
        self.action_space = gym.spaces.Discrete(2)
        self._clear()

    def _clear(self) -> None:
        self.terminateds: set[int] = set()
        self.truncateds: set[int] = set()
        self.last_obs: dict[int, Any] = {}
        self.last_rew: dict[int, float] = {}
        self.last_terminated: dict[int, bool] = {}
        self.last_truncated: dict[int, bool] = {}
        self.last_info: dict[int, dict[str, Any]] = {}
        self.i = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset both MockEnvs; agent ``0`` acts first.

        Args:
            seed: seeds ``np_random`` (nothing here draws from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self._clear()
        self.agents = list(self.possible_agents)
        for i, env in enumerate(self.envs):
            self.last_obs[i], self.last_info[i] = env.reset()
            self.last_rew[i], self.last_terminated[i], self.last_truncated[i] = 0.0, False, False
        obs, info = {self.i: self.last_obs[self.i]}, {self.i: self.last_info[self.i]}
        self.i = (self.i + 1) % len(self.envs)
        return obs, info

    def step(self, action_dict: MultiAgentDict) -> _StepResult:  # type: ignore[override]  # as MultiAgentEnv.step
        """Step the acting agent's MockEnv; return the other agent's latest result (see the class docstring)."""
        if len(self.terminateds) == len(self.envs):
            raise RuntimeError("EarlyDoneMultiAgent stepped after every agent finished; reset it first")
        for i, action in action_dict.items():
            (self.last_obs[i], self.last_rew[i], self.last_terminated[i], self.last_truncated[i], self.last_info[i]) = self.envs[
                i
            ].step(action)
        turn = self.i
        obs: MultiAgentDict = {turn: self.last_obs[turn]}
        rew: MultiAgentDict = {turn: self.last_rew[turn]}
        terminated: MultiAgentDict = {turn: self.last_terminated[turn]}
        truncated: MultiAgentDict = {turn: self.last_truncated[turn]}
        info: MultiAgentDict = {turn: self.last_info[turn]}
        if terminated[turn]:
            rew[turn] = 0.0
            self.terminateds.add(turn)
        if truncated[turn]:
            rew[turn] = 0.0
            self.truncateds.add(turn)
        self.i = (self.i + 1) % len(self.envs)
        terminated[ALL_AGENTS] = len(self.terminateds) == len(self.envs) - 1
        truncated[ALL_AGENTS] = len(self.truncateds) == len(self.envs) - 1
        if terminated[ALL_AGENTS] or truncated[ALL_AGENTS]:
            self.agents = []
        return obs, rew, terminated, truncated, info


class FlexAgentsMultiAgent(MultiAgentEnv):
    """Agents that join and leave: each plays a :class:`MockEnv` of 25 steps; new ones spawn and old ones are removed at random.

    An episode starts with one agent. After each step with at least one
    action, a new agent joins with probability 0.25 and takes a first step
    (with the last action given, as RLlib's does); then, while more than one
    agent is present, one of them, chosen at random, is removed with
    probability 0.75 (reported terminated, without an observation). Agent ids
    count up over the env's life. ``"__all__"`` is set when as many agents have
    finished their MockEnv as are present. Observations and actions are ``Discrete(2)``.

    Args:
        config: ignored (RLlib's takes no argument; this lets corral make it from the class).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.envs: dict[int, MockEnv] = {}
        self.agentID = 0
        self.possible_agents = [self.agentID]  # the first agent to come, so policies can take its spaces before a reset
        self.terminateds: set[int] = set()
        self.truncateds: set[int] = set()
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Discrete(2)
        self.resetted = False

    def spawn(self) -> int:
        """Add a new agent to the episode, with the next id and a fresh MockEnv of 25 steps; return its id."""
        agent_id = self.agentID
        self.envs[agent_id] = MockEnv(25)
        self.possible_agents.append(agent_id)
        self.agentID += 1
        return agent_id

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start an episode with one new agent.

        Args:
            seed: seeds ``np_random``, which decides when agents join and leave (None: keep drawing from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self.envs, self.possible_agents = {}, []
        self.spawn()
        self.resetted = True
        self.terminateds, self.truncateds = set(), set()
        obs: MultiAgentDict = {}
        infos: MultiAgentDict = {}
        for i, env in self.envs.items():
            obs[i], infos[i] = env.reset()
        self.agents = list(self.envs)
        return obs, infos

    def step(self, action_dict: MultiAgentDict) -> _StepResult:  # type: ignore[override]  # as MultiAgentEnv.step
        """Step the acting agents; maybe add an agent and remove one (see the class docstring)."""
        obs, rew, terminated, truncated, info = _step_mock_envs(self.envs, action_dict, self.terminateds, self.truncateds)
        if action_dict and self.np_random.random() > 0.75:
            last_action = list(action_dict.values())[-1]
            new = self.spawn()
            obs[new], rew[new], terminated[new], truncated[new], info[new] = self.envs[new].step(last_action)
            if terminated[new]:
                self.terminateds.add(new)
            if truncated[new]:
                self.truncateds.add(new)
        if len(self.envs) > 1 and self.np_random.random() > 0.25:
            keys = list(self.envs)
            removed = keys[int(self.np_random.integers(len(keys)))]
            terminated[removed] = True
            del self.envs[removed]
        terminated[ALL_AGENTS] = len(self.terminateds) == len(self.envs)
        truncated[ALL_AGENTS] = len(self.truncateds) == len(self.envs)
        self.agents = [a for a in self.envs if a not in self.terminateds and a not in self.truncateds]
        return obs, rew, terminated, truncated, info


class GuessTheNumberGame(MultiAgentEnv):
    """Agent ``0`` picks a number; agent ``1`` asks whether it is lower, higher or equal to a guess, until right or out of steps.

    Both act in ``MultiDiscrete([3, max_number])`` and observe ``Discrete(2)``
    (always 0). At reset only agent ``0`` acts: the second part of its action is
    the secret number (the first is ignored), and it then sits out. Agent ``1``
    then acts each step with ``(question, number)``:

    - 0 ("is the secret lower than number?") or 1 ("higher?"): agent ``1``
      gets 1 for a yes, 0 for a no; agent ``0`` gets 1 for the wasted step;
    - 2 ("equal?"): a right guess pays agent ``1`` 100, costs agent ``0`` 100
      and terminates; a wrong one pays both 0.

    After ``max_steps`` of agent ``1``'s steps the episode is truncated, and if
    the number was not found agent ``0`` gets 100 instead. Binary search is
    agent ``1``'s best strategy.

    Args:
        config: ``max_number`` (default 3) and ``max_steps`` (default 20).
    """

    MAX_NUMBER = 3
    MAX_STEPS = 20

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        settings = config_dict(config)
        self.possible_agents = [0, 1]
        self.max_number = int(settings.get("max_number", self.MAX_NUMBER))
        self.max_steps = int(settings.get("max_steps", self.MAX_STEPS))
        self._number: int | None = None
        self._step = 0
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.MultiDiscrete([3, self.max_number])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start a game: agent ``0`` is asked to pick the number.

        Args:
            seed: seeds ``np_random`` (nothing here draws from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self._step = 0
        self._number = None
        self.agents = [0]
        return {0: 0}, {}

    def step(self, action_dict: MultiAgentDict) -> _StepResult:  # type: ignore[override]  # as MultiAgentEnv.step
        """Agent ``0``'s pick, or agent ``1``'s question (see the class docstring).

        Raises:
            ValueError: agent ``1`` acts before agent ``0`` picked a number.
        """
        picker_action = action_dict.get(0)
        if picker_action is not None:
            self._number = int(picker_action[1])
            self.agents = [1]
            return {1: 0}, {0: 0.0}, {0: False, ALL_AGENTS: False}, {0: False, ALL_AGENTS: False}, {}
        if self._number is None:
            raise ValueError("No number is selected by agent 0. Have you restarted the environment?")
        direction, number = (int(part) for part in action_dict[1])
        guessed_correctly = False
        terminated: MultiAgentDict = {1: False, ALL_AGENTS: False}
        truncated: MultiAgentDict = {1: False, ALL_AGENTS: False}
        if direction == 0:
            reward: MultiAgentDict = {1: float(number > self._number), 0: 1.0}
        elif direction == 1:
            reward = {1: float(number < self._number), 0: 1.0}
        else:
            guessed_correctly = number == self._number
            reward = {1: 100.0 * guessed_correctly, 0: -100.0 * guessed_correctly}
            terminated = {1: guessed_correctly, ALL_AGENTS: guessed_correctly}
        self._step += 1
        if self._step >= self.max_steps:
            truncated[ALL_AGENTS] = True
            if not guessed_correctly:
                reward[0] = 100.0
        if terminated[ALL_AGENTS] or truncated[ALL_AGENTS]:
            self.agents = []
        return {1: 0}, reward, terminated, truncated, {}


def _named(cls: type[MultiAgentEnv], name: str) -> type[MultiAgentEnv]:
    """Name a ``make_multi_agent`` class where it lives, so configs, checkpoints and pickles find it by its import path."""
    cls.__module__, cls.__qualname__, cls.__name__ = __name__, name, name
    return cls


MultiAgentMountainCar = _named(make_multi_agent("MountainCarContinuous-v0"), "MultiAgentMountainCar")
"""``make_multi_agent("MountainCarContinuous-v0")``: agents ``0`` to ``num_agents - 1`` (config key, default 1)."""

MultiAgentPendulum = _named(make_multi_agent("Pendulum-v1"), "MultiAgentPendulum")
"""``make_multi_agent("Pendulum-v1")``: agents ``0`` to ``num_agents - 1`` (config key, default 1)."""

MultiAgentStatelessCartPole = _named(make_multi_agent(StatelessCartPole), "MultiAgentStatelessCartPole")
"""``make_multi_agent(StatelessCartPole)``: agents ``0`` to ``num_agents - 1`` (config key, default 1)."""

MultiAgentNestedSpaceRepeatAfterMeEnv = _named(
    make_multi_agent(NestedSpaceRepeatAfterMeEnv), "MultiAgentNestedSpaceRepeatAfterMeEnv"
)
"""``make_multi_agent(NestedSpaceRepeatAfterMeEnv)``: agents ``0`` to ``num_agents - 1`` (config key, default 1)."""

"""Small games from RLlib's examples: a corridor, a windy maze (flat and hierarchical), and two-player games.

- :class:`SimpleCorridor` (``examples.env.simple_corridor``);
- :class:`WindyMazeEnv` and :class:`HierarchicalWindyMazeEnv` (``windy_maze_env``);
- :class:`TwoStepGame` (``two_step_game``), the cooperative matrix game of the QMIX paper;
- :class:`RockPaperScissors`, which RLlib 2.9 plays through PettingZoo and later
  versions ship in ``examples/envs/classes/multi_agent/rock_paper_scissors.py``.

Spaces, config keys and defaults, rewards and episode ends are RLlib's;
randomness comes from each env's ``np_random``, so ``reset(seed=...)`` fixes an episode.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from corral.core.environments.multi_agent_env import ALL_AGENTS, MultiAgentDict, MultiAgentEnv
from corral.testing.example_envs._common import config_dict, draw_seed

__all__ = [
    "ENV_STATE",
    "MAP_DATA",
    "HierarchicalWindyMazeEnv",
    "RockPaperScissors",
    "SimpleCorridor",
    "TwoStepGame",
    "WindyMazeEnv",
]

logger = logging.getLogger(__name__)

ENV_STATE = "state"
"""The observation key of the global state in :class:`TwoStepGame`'s ``separate_state_space`` mode (RLlib's ``ENV_STATE``)."""

_StepResult = tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]


class SimpleCorridor(gym.Env[Any, Any]):
    """Walk right down a corridor: action 1 steps right, action 0 steps left (not past the start).

    The observation is the position, ``Box(0, 999, (1,))``, starting at 0. The
    episode ends when the position reaches ``corridor_length``: that step earns
    1 and sets both ``terminated`` and ``truncated`` (as RLlib's does); every other step earns 0.

    Args:
        config: ``corridor_length`` (default 10).
    """

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.end_pos = config_dict(config).get("corridor_length", 10)
        self.cur_pos = 0.0
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, 999.0, shape=(1,), dtype=np.float32)

    def set_corridor_length(self, length: int) -> None:
        """Change where the corridor ends (for curriculum examples that lengthen it as the agent learns).

        Args:
            length: the new end position.
        """
        self.end_pos = length
        logger.info("Updated corridor length to %s", length)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start at position 0.

        Args:
            seed: seeds ``np_random`` (nothing here draws from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self.cur_pos = 0.0
        return np.array([self.cur_pos], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Move one cell; reward 1 on reaching the end of the corridor, which ends the episode."""
        if action not in (0, 1):
            raise ValueError(f"SimpleCorridor takes action 0 or 1, got {action!r}")
        if action == 0 and self.cur_pos > 0:
            self.cur_pos -= 1.0
        elif action == 1:
            self.cur_pos += 1.0
        done = bool(self.cur_pos >= self.end_pos)
        return np.array([self.cur_pos], np.float32), 1.0 if done else 0.0, done, done, {}


MAP_DATA = """
#########
#S      #
####### #
      # #
      # #
####### #
#F      #
#########"""
"""The windy maze: walls ``#``, start ``S``, finish ``F``; rows are x, columns y."""

_MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))  # the wind directions N, E, S, W as (dx, dy)


class WindyMazeEnv(gym.Env[Any, Any]):
    """Cross :data:`MAP_DATA` from ``S`` to ``F``, moving only with the wind.

    The observation is ``(position, wind)``: the position ``(x, y)`` in
    ``Box(0, 100, (2,))`` and the wind direction in ``Discrete(4)`` (N, E, S,
    W), drawn anew at reset and after every step. Action 1 moves one cell with
    the wind (unless a wall is there), action 0 stays. Reaching ``F`` earns 100
    and terminates; after 200 steps the episode is truncated and, as in RLlib,
    terminated too.

    Args:
        env_config: ignored (RLlib's signature).
    """

    def __init__(self, env_config: Mapping[str, Any] | None = None) -> None:
        self.map = [row for row in MAP_DATA.split("\n") if row]
        self.x_dim = len(self.map)
        self.y_dim = len(self.map[0])
        cells = {self.map[x][y]: (x, y) for x in range(self.x_dim) for y in range(self.y_dim)}
        self.start_pos, self.end_pos = cells["S"], cells["F"]
        self.observation_space = gym.spaces.Tuple([gym.spaces.Box(0, 100, shape=(2,), dtype=np.float32), gym.spaces.Discrete(4)])
        self.action_space = gym.spaces.Discrete(2)
        self.pos = self.start_pos
        self.wind_direction = 0
        self.num_steps = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[np.ndarray, int], dict[str, Any]]:
        """Start at ``S`` with a random wind.

        Args:
            seed: seeds ``np_random``, which draws the winds (None: keep drawing from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self.wind_direction = int(self.np_random.integers(4))
        self.pos = self.start_pos
        self.num_steps = 0
        return self._observe(), {}

    def step(self, action: Any) -> tuple[tuple[np.ndarray, int], float, bool, bool, dict[str, Any]]:
        """Move with the wind if the action is 1; the wind turns; 100 at ``F``."""
        if action == 1:
            self.pos = self._get_new_pos(self.pos, self.wind_direction)
        self.num_steps += 1
        self.wind_direction = int(self.np_random.integers(4))
        at_goal = self.pos == self.end_pos
        truncated = self.num_steps >= 200
        return self._observe(), 100.0 * at_goal, at_goal or truncated, truncated, {}

    def _observe(self) -> tuple[np.ndarray, int]:
        return np.array(self.pos, np.float32), self.wind_direction

    def _get_new_pos(self, pos: tuple[int, int], direction: int) -> tuple[int, int]:
        """Where a move from ``pos`` in ``direction`` (0-3: N, E, S, W) lands: ``pos`` itself if a wall or the edge is there."""
        dx, dy = _MOVES[direction]
        x, y = pos[0] + dx, pos[1] + dy
        if 0 <= x < self.x_dim and 0 <= y < self.y_dim and self.map[x][y] != "#":
            return x, y
        return pos


def _copied(obs: tuple[np.ndarray, int]) -> tuple[np.ndarray, int]:
    """A maze observation with its own position array, so no two agents' observations share one."""
    return obs[0].copy(), obs[1]


class HierarchicalWindyMazeEnv(MultiAgentEnv):
    """:class:`WindyMazeEnv` played by a high-level agent that sets goals and low-level agents that reach them.

    ``"high_level_agent"`` sees the maze's observation and picks a direction
    (``Discrete(4)``) as the goal; a new low-level agent, ``"low_level_<n>"``
    for the n-th goal, then acts in the maze (``Discrete(2)``) for up to 25
    steps, observing ``(maze observation, goal)``. It earns +1 for a move in
    the goal's direction, -1 for a move in another, 0 for staying. After 25
    steps it terminates and the high-level agent picks the next goal. When the
    maze episode ends, the high-level agent gets the maze's reward and
    ``"__all__"`` takes the maze's ``terminated`` and ``truncated``.

    RLlib's declares no spaces (its example gives them to the policies);
    :meth:`get_observation_space` and :meth:`get_action_space` answer them here
    for any low-level agent id, and ``high_level_observation_space`` /
    ``high_level_action_space`` / ``low_level_observation_space`` /
    ``low_level_action_space`` hold them for a ``PolicySpec`` (low-level ids are
    made during an episode, so a policy for them cannot take its spaces from
    ``possible_agents``).

    Args:
        env_config: passed to the :class:`WindyMazeEnv` inside (which ignores it).
    """

    HIGH_LEVEL = "high_level_agent"
    """The id of the goal-setting agent."""
    LOW_LEVEL_STEPS = 25
    """How many steps each low-level agent acts for."""

    def __init__(self, env_config: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.flat_env = WindyMazeEnv(env_config)
        self.high_level_observation_space = self.flat_env.observation_space
        self.high_level_action_space = gym.spaces.Discrete(4)
        self.low_level_observation_space = gym.spaces.Tuple([self.flat_env.observation_space, gym.spaces.Discrete(4)])
        self.low_level_action_space = self.flat_env.action_space
        self.possible_agents = [self.HIGH_LEVEL]
        self.observation_spaces = {self.HIGH_LEVEL: self.high_level_observation_space}
        self.action_spaces = {self.HIGH_LEVEL: self.high_level_action_space}
        self.cur_obs: tuple[np.ndarray, int] = self.flat_env._observe()
        self.current_goal = 0
        self.steps_remaining_at_level = 0
        self.num_high_level_steps = 0
        self.low_level_agent_id = "low_level_0"

    def get_observation_space(self, agent_id: Any) -> gym.Space[Any]:
        """The high-level agent's space, or the low-level one for any ``"low_level_<n>"`` id.

        Args:
            agent_id: the agent.
        """
        if self._is_low_level(agent_id):
            return self.low_level_observation_space
        return super().get_observation_space(agent_id)

    def get_action_space(self, agent_id: Any) -> gym.Space[Any]:
        """The high-level agent's space, or the low-level one for any ``"low_level_<n>"`` id.

        Args:
            agent_id: the agent.
        """
        if self._is_low_level(agent_id):
            return self.low_level_action_space
        return super().get_action_space(agent_id)

    @staticmethod
    def _is_low_level(agent_id: Any) -> bool:
        return isinstance(agent_id, str) and agent_id.startswith("low_level_")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start a maze episode; the high-level agent picks the first goal.

        Args:
            seed: seeds ``np_random``, which seeds the maze (None: keep drawing from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self.cur_obs, info = self.flat_env.reset(seed=draw_seed(self.np_random))
        self.current_goal = 0
        self.steps_remaining_at_level = 0
        self.num_high_level_steps = 0
        self.low_level_agent_id = f"low_level_{self.num_high_level_steps}"
        self.agents = [self.HIGH_LEVEL]
        return {self.HIGH_LEVEL: _copied(self.cur_obs)}, {self.HIGH_LEVEL: info}

    def step(self, action_dict: MultiAgentDict) -> _StepResult:  # type: ignore[override]  # as MultiAgentEnv.step
        """A goal from the high-level agent, or a move from the current low-level agent (one of the two per step)."""
        if len(action_dict) != 1:
            raise ValueError(f"HierarchicalWindyMazeEnv takes one agent's action per step, got {action_dict}")
        if self.HIGH_LEVEL in action_dict:
            return self._high_level_step(int(action_dict[self.HIGH_LEVEL]))
        return self._low_level_step(int(next(iter(action_dict.values()))))

    def _high_level_step(self, action: int) -> _StepResult:
        self.current_goal = action
        self.steps_remaining_at_level = self.LOW_LEVEL_STEPS
        self.num_high_level_steps += 1
        self.low_level_agent_id = f"low_level_{self.num_high_level_steps}"
        self.agents = [self.HIGH_LEVEL, self.low_level_agent_id]
        obs = {self.low_level_agent_id: (_copied(self.cur_obs), self.current_goal)}
        return obs, {self.low_level_agent_id: 0.0}, {ALL_AGENTS: False}, {ALL_AGENTS: False}, {}

    def _low_level_step(self, action: int) -> _StepResult:
        self.steps_remaining_at_level -= 1
        cur_pos = self.flat_env.pos
        goal_pos = self.flat_env._get_new_pos(cur_pos, self.current_goal)
        f_obs, f_rew, f_terminated, f_truncated, info = self.flat_env.step(action)
        new_pos = self.flat_env.pos
        self.cur_obs = f_obs
        low = self.low_level_agent_id
        obs: MultiAgentDict = {low: (f_obs, self.current_goal)}
        rew: MultiAgentDict = {low: 0.0 if new_pos == cur_pos else (1.0 if new_pos == goal_pos else -1.0)}
        terminated: MultiAgentDict = {ALL_AGENTS: False}
        truncated: MultiAgentDict = {ALL_AGENTS: False}
        if f_terminated or f_truncated:
            terminated[ALL_AGENTS], truncated[ALL_AGENTS] = f_terminated, f_truncated
            rew[self.HIGH_LEVEL] = f_rew
            obs[self.HIGH_LEVEL] = _copied(f_obs)
            self.agents = []
        elif self.steps_remaining_at_level == 0:
            terminated[low], truncated[low] = True, False
            rew[self.HIGH_LEVEL] = 0.0
            obs[self.HIGH_LEVEL] = _copied(f_obs)
            self.agents = [self.HIGH_LEVEL]
        return obs, rew, terminated, truncated, {low: info}


class TwoStepGame(MultiAgentEnv):
    """The two-step cooperative game of the QMIX paper: agents ``0`` and ``1`` share every reward, half each.

    In the first state agent ``0``'s action picks the second: action 0 leads to
    state 1, where any actions pay 7; action 1 to state 2, where both choosing 1
    pays 8, both 0 pays 0, and disagreeing pays 1. The episode terminates after
    the second step. Actions are ``Discrete(2)``; both agents observe every step.

    Observations by config: the state's index (agent ``0``: 0-2, agent ``1``: 3-5)
    in ``Discrete(6)``; with ``one_hot_state_encoding`` the one-hot state and the
    agent's number (1 or 2) in ``MultiDiscrete([2, 2, 2, 3])``; with
    ``separate_state_space`` too, a dict of that (``"obs"``) and the one-hot state
    (:data:`ENV_STATE`, ``MultiDiscrete([2, 2, 2])``).

    Args:
        env_config: ``actions_are_logits`` (default False: True takes each action as
            two probabilities and samples it, as MADDPG emits), ``one_hot_state_encoding``
            (default False) and ``separate_state_space`` (default False; only read
            with the one-hot encoding).
    """

    action_space = gym.spaces.Discrete(2)

    def __init__(self, env_config: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        settings = config_dict(env_config)
        self.action_space = gym.spaces.Discrete(2)
        self.state = np.array([1, 0, 0])
        self.agent_1 = 0
        self.agent_2 = 1
        self.possible_agents = [self.agent_1, self.agent_2]
        self.actions_are_logits = bool(settings.get("actions_are_logits", False))
        self.one_hot_state_encoding = bool(settings.get("one_hot_state_encoding", False))
        self.with_state = bool(settings.get("separate_state_space", False)) and self.one_hot_state_encoding
        self.observation_space: gym.Space[Any]
        if not self.one_hot_state_encoding:
            self.observation_space = gym.spaces.Discrete(6)
        elif self.with_state:
            self.observation_space = gym.spaces.Dict(
                {"obs": gym.spaces.MultiDiscrete([2, 2, 2, 3]), ENV_STATE: gym.spaces.MultiDiscrete([2, 2, 2])}
            )
        else:
            self.observation_space = gym.spaces.MultiDiscrete([2, 2, 2, 3])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start in the first state; both agents observe it.

        Args:
            seed: seeds ``np_random`` (drawn from only to sample logit actions).
            options: ignored.
        """
        super().reset(seed=seed)
        self.state = np.array([1, 0, 0])
        self.agents = list(self.possible_agents)
        return self._obs(), {}

    def step(self, action_dict: MultiAgentDict) -> _StepResult:  # type: ignore[override]  # as MultiAgentEnv.step
        """Move to the second state, or pay the shared reward and terminate (see the class docstring)."""
        if self.actions_are_logits:
            action_dict = {agent: int(self.np_random.choice(2, p=probs)) for agent, probs in action_dict.items()}
        state_index = int(np.flatnonzero(self.state)[0])
        if state_index == 0:
            action = int(action_dict[self.agent_1])
            if action not in (0, 1):
                raise ValueError(f"TwoStepGame takes action 0 or 1, got {action!r}")
            self.state = np.array([0, 1, 0]) if action == 0 else np.array([0, 0, 1])
            global_rew, terminated = 0.0, False
        elif state_index == 1:
            global_rew, terminated = 7.0, True
        else:
            first, second = int(action_dict[self.agent_1]), int(action_dict[self.agent_2])
            global_rew = 8.0 if first == second == 1 else (0.0 if first == second == 0 else 1.0)
            terminated = True
        if terminated:
            self.agents = []
        rewards = {self.agent_1: global_rew / 2.0, self.agent_2: global_rew / 2.0}
        infos = {self.agent_1: {"done": terminated}, self.agent_2: {"done": terminated}}
        return self._obs(), rewards, {ALL_AGENTS: terminated}, {ALL_AGENTS: False}, infos

    def _obs(self) -> MultiAgentDict:
        if self.with_state:
            return {
                self.agent_1: {"obs": self.agent_1_obs(), ENV_STATE: self.state.copy()},
                self.agent_2: {"obs": self.agent_2_obs(), ENV_STATE: self.state.copy()},
            }
        return {self.agent_1: self.agent_1_obs(), self.agent_2: self.agent_2_obs()}

    def agent_1_obs(self) -> Any:
        """Agent ``0``'s observation: the state's index, or the one-hot state followed by 1."""
        if self.one_hot_state_encoding:
            return np.concatenate([self.state, [1]])
        return int(np.flatnonzero(self.state)[0])

    def agent_2_obs(self) -> Any:
        """Agent ``1``'s observation: the state's index plus 3, or the one-hot state followed by 2."""
        if self.one_hot_state_encoding:
            return np.concatenate([self.state, [2]])
        return int(np.flatnonzero(self.state)[0]) + 3


def _win_matrix(beats: Mapping[int, tuple[int, ...]]) -> dict[tuple[int, int], tuple[int, int]]:
    """The rewards of both players for every pair of moves, from which move beats which."""
    return {
        (move1, move2): (0, 0) if move1 == move2 else ((1, -1) if move2 in beats[move1] else (-1, 1))
        for move1 in beats
        for move2 in beats
    }


class RockPaperScissors(MultiAgentEnv):
    """Rock paper scissors between ``"player1"`` and ``"player2"``, who move together for 10 moves.

    Each player observes the other's last move (0 at reset) and moves in
    ``Discrete(3)`` (0 rock, 1 paper, 2 scissors); with ``sheldon_cooper_mode``
    lizard (3) and Spock (4) join, in ``Discrete(5)``. A move's winner gets +1,
    its loser -1, a draw 0 each. The episode terminates after the 10th move.

    Args:
        config: ``sheldon_cooper_mode`` (default False).
    """

    ROCK = 0
    PAPER = 1
    SCISSORS = 2
    LIZARD = 3
    SPOCK = 4

    BEATS: ClassVar[dict[int, tuple[int, ...]]] = {
        ROCK: (SCISSORS, LIZARD),
        PAPER: (ROCK, SPOCK),
        SCISSORS: (PAPER, LIZARD),
        LIZARD: (SPOCK, PAPER),
        SPOCK: (SCISSORS, ROCK),
    }
    """The moves each move beats."""
    WIN_MATRIX: ClassVar[dict[tuple[int, int], tuple[int, int]]] = _win_matrix(BEATS)
    """``(player1's reward, player2's reward)`` for each pair ``(player1's move, player2's move)``."""

    NUM_MOVES = 10
    """How many moves an episode lasts."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.sheldon_cooper_mode = bool(config_dict(config).get("sheldon_cooper_mode"))
        moves = 5 if self.sheldon_cooper_mode else 3
        self.agents = ["player1", "player2"]
        self.possible_agents = ["player1", "player2"]
        self.observation_spaces = {agent: gym.spaces.Discrete(moves) for agent in self.possible_agents}
        self.action_spaces = {agent: gym.spaces.Discrete(moves) for agent in self.possible_agents}
        self.num_moves = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start a game: neither player has moved, so both observe 0.

        Args:
            seed: seeds ``np_random`` (nothing here draws from it).
            options: ignored.
        """
        super().reset(seed=seed)
        self.num_moves = 0
        self.agents = list(self.possible_agents)
        return {"player1": 0, "player2": 0}, {}

    def step(self, action_dict: MultiAgentDict) -> _StepResult:  # type: ignore[override]  # as MultiAgentEnv.step
        """Both players move; each observes the other's move; the winner gets +1, the loser -1."""
        self.num_moves += 1
        move1, move2 = int(action_dict["player1"]), int(action_dict["player2"])
        for player, move in (("player1", move1), ("player2", move2)):
            if not self.action_spaces[player].contains(move):
                raise ValueError(f"{player} played {move}, which is outside {self.action_spaces[player]}")
        r1, r2 = self.WIN_MATRIX[move1, move2]
        done = self.num_moves >= self.NUM_MOVES
        if done:
            self.agents = []
        observations = {"player1": move2, "player2": move1}
        return observations, {"player1": float(r1), "player2": float(r2)}, {ALL_AGENTS: done}, {ALL_AGENTS: False}, {}

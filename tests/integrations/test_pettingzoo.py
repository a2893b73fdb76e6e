"""PettingZoo's parallel and turn-based (AEC) games, held to corral's multi-agent protocol."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo import ParallelEnv
from pettingzoo.classic import tictactoe_v3

from corral import EnvError, ParallelPettingZooEnv, PettingZooEnv
from corral.core.environments.multi_agent_env import ALL_AGENTS
from corral.core.environments.multi_agent_guard import MultiAgentEnvGuard


def legal_move(observation: dict[str, np.ndarray], rng: np.random.Generator) -> int:
    return int(rng.choice(np.flatnonzero(observation["action_mask"])))


@pytest.mark.parametrize("seed", range(5))
def test_tic_tac_toe_plays_turn_by_turn_to_the_end(seed: int) -> None:
    env = MultiAgentEnvGuard(PettingZooEnv(tictactoe_v3.env()), "tic-tac-toe")
    rng = np.random.default_rng(seed)
    observations, _ = env.reset(seed=seed)
    assert list(observations) == ["player_1"]
    totals = {"player_1": 0.0, "player_2": 0.0}
    movers, done = [], False
    while not done:
        (mover,) = [agent for agent in observations if not done]
        movers.append(mover)
        observations, rewards, terminateds, truncateds, _ = env.step({mover: legal_move(observations[mover], rng)})
        for agent, reward in rewards.items():
            totals[agent] += reward
        done = terminateds[ALL_AGENTS]
        if not done:
            assert len(observations) == 1 and next(iter(observations)) != mover, "the other player moves next"
    assert movers[:2] == ["player_1", "player_2"] and 5 <= len(movers) <= 9
    assert sorted(observations) == ["player_1", "player_2"], "both players see the final board"
    assert sorted(totals.values()) in ([-1.0, 1.0], [0.0, 0.0]) and not truncateds[ALL_AGENTS]


def test_a_move_out_of_turn_is_refused_naming_the_agent_to_move() -> None:
    env = PettingZooEnv(tictactoe_v3.env())
    env.reset(seed=0)
    with pytest.raises(EnvError, match=r"it is agent 'player_1''s turn; .* got actions for \['player_2'\]"):
        env.step({"player_2": 0})


class Relay(ParallelEnv):
    """Agents "a" and "b" act together; "b" finishes at step 2, "a" runs out of time at step 3."""

    def __init__(self) -> None:
        self.metadata = {"name": "relay_v0"}
        self.possible_agents = ["a", "b"]

    def observation_space(self, agent: str) -> gym.Space:
        return gym.spaces.Box(0.0, 10.0, (1,), np.float32)

    def action_space(self, agent: str) -> gym.Space:
        return gym.spaces.Discrete(2)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.agents, self.t = list(self.possible_agents), 0
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        observations = {a: np.full(1, self.t, np.float32) for a in actions}
        terminateds = {a: a == "b" and self.t == 2 for a in actions}
        truncateds = {a: a == "a" and self.t == 3 for a in actions}
        self.agents = [a for a in self.agents if not (terminateds[a] or truncateds[a])]
        return observations, {a: 1.0 for a in actions}, terminateds, truncateds, {a: {} for a in actions}


def test_a_parallel_game_with_an_agent_that_leaves_early() -> None:
    env = MultiAgentEnvGuard(ParallelPettingZooEnv(Relay()), "relay")
    assert env.env.get_action_space("b") == gym.spaces.Discrete(2)
    observations, _ = env.reset(seed=0)
    flags = []
    while True:
        observations, _, terminateds, truncateds, _ = env.step(dict.fromkeys(env.acting, 1))
        flags.append((sorted(observations), terminateds[ALL_AGENTS], truncateds[ALL_AGENTS]))
        if terminateds[ALL_AGENTS]:
            break
    assert flags == [(["a", "b"], False, False), (["a", "b"], False, False), (["a"], True, True)]


def test_something_else_is_not_taken_for_a_pettingzoo_env() -> None:
    with pytest.raises(EnvError, match=r"is not a PettingZoo AECEnv \(pettingzoo.utils.env.AECEnv\)"):
        PettingZooEnv(gym.make("CartPole-v1"))
    with pytest.raises(EnvError, match=r"is a PettingZoo AECEnv; wrap it with corral\.PettingZooEnv"):
        ParallelPettingZooEnv(tictactoe_v3.env())
    with pytest.raises(EnvError, match=r"is a PettingZoo ParallelEnv; wrap it with corral\.ParallelPettingZooEnv"):
        PettingZooEnv(Relay())

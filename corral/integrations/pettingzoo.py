"""PettingZoo environments in corral's multi-agent protocol: parallel games, and turn-based (AEC) games.

PettingZoo is an extra (``pip install corral[pettingzoo]``): these adapters take
an env the user made with it, and import nothing of PettingZoo themselves.

- :class:`ParallelPettingZooEnv`: every live agent acts on every step; PettingZoo
  already speaks in dicts by agent, so only the ``"__all__"`` keys are added.
- :class:`PettingZooEnv`: an AEC game, where one agent acts at a time. Each
  step returns an observation for the agent whose turn it is next only, and
  the reward each agent collected since its last turn. An agent whose game is
  over gets its last observation and reward; PettingZoo's rule that it must be
  stepped with ``None`` before it is removed is followed here, not by the caller.
"""

from __future__ import annotations

from typing import Any

from corral._lazy import is_instance_of_loaded
from corral.core.environments.multi_agent_env import ALL_AGENTS, MultiAgentDict, MultiAgentEnv
from corral.errors import EnvError

_PETTINGZOO_ENVS = "pettingzoo.utils.env"
"""Where PettingZoo's env base classes live: loaded whenever a PettingZoo env exists, never imported here."""


def _require(env: Any, base: str) -> None:
    """Refuse anything but an instance of PettingZoo's ``base`` (``"ParallelEnv"``, ``"AECEnv"``), naming the right adapter."""
    if is_instance_of_loaded(env, _PETTINGZOO_ENVS, base):
        return
    other = "AECEnv" if base == "ParallelEnv" else "ParallelEnv"
    if is_instance_of_loaded(env, _PETTINGZOO_ENVS, other):
        adapter = "PettingZooEnv" if other == "AECEnv" else "ParallelPettingZooEnv"
        raise EnvError(f"{type(env).__name__} is a PettingZoo {other}; wrap it with corral.{adapter}")
    raise EnvError(f"{type(env).__name__} is not a PettingZoo {base} (pettingzoo.utils.env.{base})")


def _episode_flags(terminateds: dict[Any, Any], truncateds: dict[Any, Any], over: bool) -> None:
    """Add ``"__all__"``: the episode is over when no agent is left; truncated if every agent was."""
    truncated_all = over and bool(truncateds) and all(truncateds.values())
    terminateds[ALL_AGENTS] = over
    truncateds[ALL_AGENTS] = truncated_all


class _PettingZooAdapter(MultiAgentEnv):
    """What both adapters share: the agents and their spaces, read once from the game, and render/close."""

    def __init__(self, env: Any, base: str) -> None:
        _require(env, base)
        super().__init__()
        self.game = env
        self.possible_agents = list(env.possible_agents)
        self.observation_spaces = {agent: env.observation_space(agent) for agent in self.possible_agents}
        self.action_spaces = {agent: env.action_space(agent) for agent in self.possible_agents}

    def render(self) -> Any:
        """The game's own rendering."""
        return self.game.render()

    def close(self) -> None:
        """Close the game."""
        self.game.close()


class ParallelPettingZooEnv(_PettingZooAdapter):
    """A PettingZoo ``ParallelEnv`` as a corral multi-agent env.

    Args:
        env: the parallel env (``pettingzoo.utils.ParallelEnv``), e.g. ``rps_v2.parallel_env()``.

    Raises:
        EnvError: ``env`` is not a PettingZoo parallel env.
    """

    def __init__(self, env: Any) -> None:
        super().__init__(env, "ParallelEnv")
        self.par_env = env

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset the game; every agent in it acts first (see :meth:`MultiAgentEnv.reset`)."""
        observations, infos = self.par_env.reset(seed=seed, options=options)
        self.agents = list(self.par_env.agents)
        return dict(observations), {agent: dict(infos.get(agent, {})) for agent in observations}

    def step(  # type: ignore[override]  # as MultiAgentEnv.step
        self, action_dict: MultiAgentDict
    ) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        """Step every agent at once (see :meth:`MultiAgentEnv.step`)."""
        observations, rewards, terminateds, truncateds, infos = self.par_env.step(action_dict)
        self.agents = list(self.par_env.agents)
        terminateds, truncateds = dict(terminateds), dict(truncateds)
        _episode_flags(terminateds, truncateds, over=not self.agents)
        return dict(observations), dict(rewards), terminateds, truncateds, dict(infos)


class PettingZooEnv(_PettingZooAdapter):
    """A turn-based PettingZoo ``AECEnv`` as a corral multi-agent env: only the agent to move gets an observation.

    Args:
        env: the AEC env, e.g. ``pettingzoo.classic.tictactoe_v3.env()``.

    Raises:
        EnvError: ``env`` is not a PettingZoo AEC env.
    """

    def __init__(self, env: Any) -> None:
        super().__init__(env, "AECEnv")
        self.aec_env = env

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Reset the game; the agent that moves first gets the first observation (see :meth:`MultiAgentEnv.reset`)."""
        self.aec_env.reset(seed=seed, options=options)
        observations, _, _, _, infos = self._collect()
        return observations, infos

    def step(  # type: ignore[override]  # as MultiAgentEnv.step
        self, action_dict: MultiAgentDict
    ) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        """Play the move of the agent whose turn it is (see :meth:`MultiAgentEnv.step`).

        Raises:
            EnvError: ``action_dict`` holds no action for that agent, or actions for others.
        """
        mover = self.aec_env.agent_selection
        if set(action_dict) != {mover}:
            given = ", ".join(sorted(map(repr, action_dict)))
            raise EnvError(f"it is agent {mover!r}'s turn; step() needs an action for it alone, got actions for [{given}]")
        self.aec_env.step(action_dict[mover])
        return self._collect()

    def _collect(self) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        """What the agents see after a move: the next mover's observation, and each finished agent's last one."""
        observations: MultiAgentDict = {}
        rewards: MultiAgentDict = {}
        terminateds: MultiAgentDict = {}
        truncateds: MultiAgentDict = {}
        infos: MultiAgentDict = {}
        env = self.aec_env
        while env.agents:
            agent = env.agent_selection
            observation, reward, terminated, truncated, info = env.last()  # reward: collected since its last move
            observations[agent], rewards[agent], infos[agent] = observation, reward, info
            terminateds[agent], truncateds[agent] = bool(terminated), bool(truncated)
            if not (terminated or truncated):
                break
            env.step(None)  # PettingZoo removes a finished agent only once it is stepped with None
        self.agents = list(env.agents)
        _episode_flags(terminateds, truncateds, over=not env.agents)
        return observations, rewards, terminateds, truncateds, infos

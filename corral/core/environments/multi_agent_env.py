"""The multi-agent env contract: RLlib's dict protocol, with agents that act on some steps only, join and leave.

Every step exchanges dicts keyed by agent id. ``reset`` returns the first
observations (and infos) of the agents that act first; ``step`` takes an action
for each agent that was given an observation, and returns observations for the
agents that act next, plus rewards, ``terminateds``, ``truncateds`` and infos
for any agent. ``terminateds["__all__"]`` / ``truncateds["__all__"]`` end the
episode for everyone. An agent whose ``terminateds`` or ``truncateds`` entry is
True has left; new agents may appear in any observation dict. A turn-based
game gives an observation only to the player whose turn it is.

:class:`~corral.core.environments.multi_agent_guard.MultiAgentEnvGuard` holds
an env to this protocol and names the agent and the key when it breaks it, so a
mistake in an env surfaces where it is made rather than as a shape error inside
a policy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import numpy as np

from corral.core.common import by_value
from corral.core.environments.envs import EnvContext, env_name, import_env, registered_creators, resolve_creator
from corral.core.environments.external_env import ExternalEnv
from corral.errors import EnvError

if TYPE_CHECKING:
    from corral.core.contracts.config import AlgorithmConfig

ALL_AGENTS = "__all__"
"""The key of ``terminateds`` and ``truncateds`` that ends the episode for every agent."""

MultiAgentDict = dict[Any, Any]
"""A dict keyed by agent id (observations, actions, rewards, ...)."""


class MultiAgentEnv(gym.Env):
    """Base class of an environment with several agents, in RLlib's dict protocol (see the module docstring).

    A subclass sets ``possible_agents`` (every agent id that may ever act) and
    the spaces of each agent, in ``observation_spaces`` and ``action_spaces``
    (dicts by agent id), or one ``observation_space`` / ``action_space`` that
    every agent shares; ``agents`` lists the agents in the episode now. It
    writes :meth:`reset` and :meth:`step`.
    """

    observation_spaces: dict[Any, gym.Space[Any]]
    action_spaces: dict[Any, gym.Space[Any]]
    agents: list[Any]

    def __init__(self) -> None:
        super().__init__()
        # A subclass may have set these before calling this __init__; keep what it set.
        for name, default in (("observation_spaces", dict), ("action_spaces", dict), ("agents", list)):
            if not hasattr(self, name):
                setattr(self, name, default())

    @property
    def possible_agents(self) -> list[Any]:
        """Every agent id that may ever act, as the subclass set it.

        An env written for RLlib 2.9 or before may set only ``_agent_ids`` (or
        only ``agents``), often as a set: those ids then, in one order every
        process agrees on.
        """
        given = self.__dict__.get("_possible_agents")
        if given:
            return cast(list[Any], given)
        ids = self.__dict__.get("_agent_ids") or self.__dict__.get("agents") or []
        return sorted(ids, key=repr) if isinstance(ids, (set, frozenset)) else list(ids)

    @possible_agents.setter
    def possible_agents(self, value: list[Any]) -> None:
        self.__dict__["_possible_agents"] = value

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[MultiAgentDict, MultiAgentDict]:
        """Start an episode; a subclass's ``reset`` calls ``super().reset(seed=seed)`` to seed ``np_random``, as in gymnasium.

        Args:
            seed: seeds the env's random generator (None: keep drawing from it).
            options: env-specific reset options.

        Returns:
            ``(observations, infos)`` of the agents that act first, by agent id
            (here, in the base class, two empty dicts: the subclass fills them).

        Raises:
            NotImplementedError: the subclass does not write ``reset``.
        """
        if type(self).reset is MultiAgentEnv.reset:
            raise NotImplementedError(f"{type(self).__name__} must implement reset(*, seed=None, options=None)")
        super().reset(seed=seed, options=options)
        return {}, {}

    def step(  # type: ignore[override]  # RLlib's dict protocol: each of gymnasium's five values becomes a dict by agent
        self, action_dict: MultiAgentDict
    ) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        """Apply one action per agent that was given an observation.

        Args:
            action_dict: an action for each agent whose observation the last call returned.

        Returns:
            ``(observations, rewards, terminateds, truncateds, infos)``, by agent id;
            ``terminateds`` and ``truncateds`` also hold the ``"__all__"`` key.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement step(action_dict)")

    @property
    def num_agents(self) -> int:
        """How many agents are in the episode now."""
        return len(self.agents)

    @property
    def max_num_agents(self) -> int:
        """How many agents may ever act."""
        return len(self.possible_agents)

    def get_agent_ids(self) -> set[Any]:
        """Every agent id that may ever act, as a set: RLlib's name (``policies=env.get_agent_ids()``)."""
        return set(self.possible_agents)

    def get_observation_space(self, agent_id: Any) -> gym.Space[Any]:
        """The observation space of one agent.

        Args:
            agent_id: the agent.

        Returns:
            ``observation_spaces[agent_id]``, else the agent's entry of a Dict
            ``observation_space`` keyed by agent ids, else the shared ``observation_space``.

        Raises:
            EnvError: the env declares no observation space for this agent.
        """
        return self._space_of(agent_id, "observation")

    def get_action_space(self, agent_id: Any) -> gym.Space[Any]:
        """The action space of one agent.

        Args:
            agent_id: the agent.

        Returns:
            ``action_spaces[agent_id]``, else the agent's entry of a Dict
            ``action_space`` keyed by agent ids, else the shared ``action_space``.

        Raises:
            EnvError: the env declares no action space for this agent.
        """
        return self._space_of(agent_id, "action")

    def _space_of(self, agent_id: Any, kind: str) -> gym.Space[Any]:
        per_agent: Mapping[Any, gym.Space[Any]] = getattr(self, f"{kind}_spaces", None) or {}
        if isinstance(agent_id, Hashable) and agent_id in per_agent:
            return per_agent[agent_id]
        shared = getattr(self, f"{kind}_space", None)
        if isinstance(shared, gym.spaces.Dict) and isinstance(agent_id, str) and agent_id in shared.spaces:
            return shared.spaces[agent_id]  # RLlib's older style: one Dict space keyed by agent id
        if isinstance(shared, gym.Space) and not (isinstance(shared, gym.spaces.Dict) and set(per_agent) & set(shared.spaces)):
            return shared
        raise EnvError(
            f"{type(self).__name__} declares no {kind} space for agent {agent_id!r}; it has {kind} spaces for "
            f"[{', '.join(sorted(map(repr, per_agent)))}]. Set {kind}_spaces[{agent_id!r}] (or one shared {kind}_space)"
        )


def make_multi_agent(env_name_or_creator: Any) -> type[MultiAgentEnv]:
    """A multi-agent env class whose agents each play their own copy of a single-agent env, as RLlib's helper does.

    ``make_multi_agent("CartPole-v1")({"num_agents": 2})`` has agents ``0`` and
    ``1``, each balancing its own pole; an agent leaves when its episode ends,
    and the episode ends when every agent's has. Each copy is reset with its own
    seed, derived from the one ``reset`` is given.

    Args:
        env_name_or_creator: a gymnasium id, a name given to ``corral.register_env``, a
            ``"package.module:Class"`` path, an env class, or a creator taking the env config.

    Returns:
        A :class:`MultiAgentEnv` subclass, built with an env config (a dict or an
        ``EnvContext``) whose ``num_agents`` (default 1) sets the number of agents;
        the rest of the config goes to each copy's creator (as keyword arguments to
        ``gymnasium.make`` for a gymnasium id).

    Raises:
        EnvError: the env is unknown or cannot be imported.
    """
    gym_id, creator = resolve_creator(env_name_or_creator)

    def make_copy(config: EnvContext) -> gym.Env:
        rest = {k: v for k, v in config.items() if k != "num_agents"}
        if gym_id is not None:
            return gym.make(gym_id, **rest)
        assert creator is not None  # resolve_creator returns one of the two
        return creator(EnvContext(rest, config.worker_index, config.vector_index, config.num_workers))

    class MultiEnv(MultiAgentEnv):
        """Independent copies of one single-agent env, one per agent (from :func:`make_multi_agent`)."""

        def __init__(self, config: Mapping[str, Any] | None = None) -> None:
            super().__init__()
            context = config if isinstance(config, EnvContext) else EnvContext(dict(config or {}))
            num_agents = context.get("num_agents", 1)
            if isinstance(num_agents, bool) or not isinstance(num_agents, int) or num_agents < 1:
                raise EnvError(f"env_config num_agents={num_agents!r} must be a positive integer")
            self.envs = [make_copy(context) for _ in range(num_agents)]
            self.possible_agents = list(range(num_agents))
            self.observation_spaces = {i: env.observation_space for i, env in enumerate(self.envs)}
            self.action_spaces = {i: env.action_space for i, env in enumerate(self.envs)}
            self.observation_space, self.action_space = self.envs[0].observation_space, self.envs[0].action_space
            self._truncated: set[int] = set()

        def reset(
            self, *, seed: int | None = None, options: dict[str, Any] | None = None
        ) -> tuple[MultiAgentDict, MultiAgentDict]:
            """Reset every copy; each agent acts (see :meth:`MultiAgentEnv.reset`)."""
            seeds: list[int | None] = (
                [None] * len(self.envs)
                if seed is None
                else [int(s) for s in np.random.SeedSequence(seed).generate_state(len(self.envs))]
            )
            observations, infos = {}, {}
            for i, (env, copy_seed) in enumerate(zip(self.envs, seeds, strict=True)):
                observations[i], infos[i] = env.reset(seed=copy_seed, options=options)
            self.agents = list(self.possible_agents)
            self._truncated = set()
            return observations, infos

        def step(  # type: ignore[override]  # as MultiAgentEnv.step
            self, action_dict: MultiAgentDict
        ) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
            """Step the copy of every agent given an action (see :meth:`MultiAgentEnv.step`)."""
            observations, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
            for agent, action in action_dict.items():
                if agent not in self.agents:
                    raise EnvError(f"an action for agent {agent!r}, which is not in the episode now (agents: {self.agents})")
                result = self.envs[agent].step(action)
                observations[agent], rewards[agent], terminateds[agent], truncateds[agent], infos[agent] = result
                if truncateds[agent] and not terminateds[agent]:
                    self._truncated.add(agent)
            self.agents = [a for a in self.agents if not (terminateds.get(a) or truncateds.get(a))]
            everyone_done = not self.agents
            terminateds[ALL_AGENTS] = everyone_done
            truncateds[ALL_AGENTS] = everyone_done and len(self._truncated) == len(self.envs)
            return observations, rewards, terminateds, truncateds, infos

        def render(self) -> Any:
            """The first copy's rendering."""
            return self.envs[0].render()

        def close(self) -> None:
            """Close every copy."""
            for env in self.envs:
                env.close()

    name = env_name_or_creator if isinstance(env_name_or_creator, str) else getattr(env_name_or_creator, "__name__", "env")
    MultiEnv.__name__ = MultiEnv.__qualname__ = f"MultiAgent[{name}]"
    inner = env_name_or_creator if isinstance(env_name_or_creator, str) else by_value.reference(env_name_or_creator)
    if inner is not None:  # a config writes the class as this, and any process makes it again (else it goes by value)
        setattr(MultiEnv, by_value.REFERENCE_ATTRIBUTE, f"{__name__}:MultiAgent[{inner}]")
    return MultiEnv


_REFERENCE = re.compile(rf"{re.escape(__name__)}:MultiAgent\[(?P<inner>.+)\]")


def multi_agent_of_reference(path: str) -> type[MultiAgentEnv] | None:
    """The class :func:`make_multi_agent` makes again from the reference a config wrote for one, or None.

    ``"corral.core.environments.multi_agent_env:MultiAgent[CartPole-v1]"`` is
    ``make_multi_agent("CartPole-v1")``; the inner env may be any env spec that is a string.

    Args:
        path: an env given as an import path.

    Raises:
        EnvError: the inner env is unknown or cannot be imported.
    """
    inner = multi_agent_inner(path)
    return None if inner is None else make_multi_agent(inner)


def multi_agent_inner(path: str) -> str | None:
    """The single-agent env a ``make_multi_agent`` reference copies per agent, or None if ``path`` is none."""
    match = _REFERENCE.fullmatch(path)
    return None if match is None else match["inner"]


def probe_env(config: AlgorithmConfig, worker_index: int = 0) -> tuple[bool, gym.Env | None]:
    """Whether the config's env is a :class:`MultiAgentEnv`, and the first sub-environment if it took making one.

    A class (or its import path) and a gymnasium id answer by themselves; for a
    creator function the runner's first sub-environment is made and handed back,
    to be used as that sub-environment (so no env is made only to look at it).

    Args:
        config: the config whose ``env`` and ``env_config`` to look at.
        worker_index: the env runner's index, for the first sub-environment's ``EnvContext``.

    Returns:
        ``(is_multi_agent, first_env)``; ``first_env`` is None unless a creator was called.

    Raises:
        EnvError: the env is unknown, cannot be imported, or its creator fails.
    """
    spec = config.env
    if isinstance(spec, str) and ":" in spec and not registered_creators(spec):
        try:
            spec = import_env(spec)
        except Exception as exc:  # ConfigError for a bad path; reported as the env's
            raise EnvError(f"environment {config.env!r} cannot be imported: {exc}") from None
    if isinstance(spec, type) and not issubclass(spec, ExternalEnv):  # an ExternalEnv is made: its runner needs it
        return issubclass(spec, MultiAgentEnv), None
    env_id, creator = resolve_creator(spec)
    if env_id is not None or creator is None:
        return False, None
    env = _create(creator, EnvContext(config.env_config, worker_index=worker_index, num_workers=config.num_env_runners), config)
    return isinstance(env, MultiAgentEnv), env


def multi_agent_env_maker(config: AlgorithmConfig, worker_index: int = 0) -> Callable[[int], MultiAgentEnv]:
    """What makes the sub-environments of a multi-agent env runner, each with its own :class:`EnvContext`.

    Args:
        config: the algorithm's config (``env``, ``env_config``).
        worker_index: the env runner's index (0 local).

    Returns:
        ``make(i)``: a fresh sub-environment ``i``, not yet reset (called again to restart one).

    Raises:
        EnvError: the env is a gymnasium id; ``make`` raises it when the creator fails or makes
            something other than a ``MultiAgentEnv``.
    """
    _, creator = resolve_creator(config.env)
    if creator is None:
        raise EnvError(f"{env_name(config.env)!r} is a gymnasium id, not a multi-agent env")
    context = EnvContext(config.env_config, worker_index=worker_index, num_workers=config.num_env_runners)

    def make(i: int) -> MultiAgentEnv:
        return _multi_agent(_create(creator, context.copy_with(vector_index=i), config), config)

    return make


def _multi_agent(env: Any, config: AlgorithmConfig) -> MultiAgentEnv:
    if not isinstance(env, MultiAgentEnv):
        raise EnvError(f"the creator of {env_name(config.env)!r} returned {type(env).__name__}, not a corral.MultiAgentEnv")
    return env


def _create(creator: Any, context: EnvContext, config: AlgorithmConfig) -> Any:
    try:
        return creator(context)
    except TypeError as exc:
        raise EnvError(
            f"creating environment {env_name(config.env)!r} with env_config={dict(config.env_config)} failed: {exc}"
        ) from exc

"""RLlib's ``BaseEnv``: sub-environments polled for the agents that are ready, and ``convert_to_base_env``.

RLlib's old samplers stepped every env through this interface: ``poll()``
returns what each ready agent of each sub-environment observed, as two-level
dicts ``{env_id: {agent_id: value}}``, and ``send_actions()`` answers them.
Corral's env runners step gymnasium vector envs and multi-agent envs directly,
and the episode hooks' ``base_env`` is the runner's own vector env (a
multi-agent runner's list of sub-environments); a callback's
``base_env: BaseEnv`` annotation is only a name there. ``BaseEnv`` is for code
that polls envs itself: :func:`convert_to_base_env` wraps a gymnasium env, an
RLlib :class:`~corral.rllib.support.vector_env.VectorEnv` or a
:class:`~corral.core.environments.multi_agent_env.MultiAgentEnv`, with RLlib's
behaviour: the first ``poll()`` resets every sub-environment, an episode that
ended is reset by the caller (``try_reset``), and a single-agent env's agent
is ``"agent0"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from corral.core.environments.external_env import ExternalEnv
from corral.core.environments.multi_agent_env import MultiAgentEnv
from corral.rllib.support.vector_env import VectorEnv

ASYNC_RESET_RETURN = "async_reset_return"
"""What RLlib's ``try_reset`` returns where a sub-environment resets asynchronously (its observations come by ``poll``)"""

MultiEnvDict = dict[Any, dict[Any, Any]]
"""``{env_id: {agent_id: value}}``"""

Polled = tuple[MultiEnvDict, MultiEnvDict, MultiEnvDict, MultiEnvDict, MultiEnvDict, MultiEnvDict]
"""``poll()``'s return: observations, rewards, terminateds, truncateds, infos and off-policy actions"""

_DUMMY_AGENT_ID = "agent0"


def with_dummy_agent_id(env_id_to_values: Mapping[Any, Any], dummy_id: Any = _DUMMY_AGENT_ID) -> MultiEnvDict:
    """Single-agent values per sub-environment as RLlib's two-level dicts: ``{0: x}`` -> ``{0: {"agent0": x}}``.

    Args:
        env_id_to_values: a value per sub-environment.
        dummy_id: the agent id to put them under (``"__all__"`` for terminateds and truncateds).

    Returns:
        The two-level dict.
    """
    return {env_id: {dummy_id: value} for env_id, value in env_id_to_values.items()}


class BaseEnv:
    """RLlib's lowest-level env interface: ``poll()`` the ready agents of every sub-environment, ``send_actions()`` back.

    A subclass implements ``poll`` and ``send_actions``, and ``try_reset`` where it can
    reset a sub-environment on request; the others have RLlib's defaults.
    """

    def to_base_env(self, *args: Any, **kwargs: Any) -> BaseEnv:
        """Itself: it is a BaseEnv already (RLlib's arguments are for other env kinds)."""
        return self

    def poll(self) -> Polled:
        """What the ready agents observed, keyed ``{env_id: {agent_id: ...}}``.

        Returns:
            Observations, rewards, terminateds and truncateds (each with ``"__all__"`` for its
            sub-environment), infos, and actions agents took off-policy.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement poll(), as RLlib's BaseEnv says")

    def send_actions(self, action_dict: MultiEnvDict) -> None:
        """Answer the agents that the last ``poll()`` returned.

        Args:
            action_dict: ``{env_id: {agent_id: action}}``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement send_actions(), as RLlib's BaseEnv says")

    def try_reset(
        self, env_id: Any = None, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[MultiEnvDict | None, MultiEnvDict | None]:
        """Reset one sub-environment (None: all), if this env can on request (RLlib's default: it cannot).

        Args:
            env_id: the sub-environment; None: every one.
            seed: its seed (None: do not reseed).
            options: its reset options.

        Returns:
            Its observations and infos as two-level dicts, or ``(None, None)``.
        """
        return None, None

    def try_restart(self, env_id: Any = None) -> None:
        """Make one sub-environment (None: all) anew, if this env can (RLlib's default: it cannot)."""
        return None

    def get_sub_environments(self, as_dict: bool = False) -> list[Any] | dict[Any, Any]:
        """The sub-environments as objects, a list or (``as_dict``) a dict by env id; none by default."""
        return {} if as_dict else []

    def get_agent_ids(self) -> set[Any]:
        """The agent ids there may be (RLlib's default: none known)."""
        return set()

    def try_render(self, env_id: Any = None) -> Any:
        """Render one sub-environment, if this env can (RLlib's default: nothing)."""
        return None

    def stop(self) -> None:
        """Close every sub-environment that has a ``close()``."""
        for env in self.get_sub_environments():
            if hasattr(env, "close"):
                env.close()

    def get_unwrapped(self) -> list[Any]:
        """The sub-environments (RLlib's older name)."""
        return list(self.get_sub_environments())

    @property
    def observation_space(self) -> gym.Space[Any]:
        """One sub-environment's observation space."""
        raise NotImplementedError(f"{type(self).__name__} must give its observation_space")

    @property
    def action_space(self) -> gym.Space[Any]:
        """One sub-environment's action space."""
        raise NotImplementedError(f"{type(self).__name__} must give its action_space")


class VectorEnvWrapper(BaseEnv):
    """A :class:`VectorEnv` polled: its one agent, ``"agent0"``, is ready in every sub-environment at every poll.

    Args:
        vector_env: the vector env.
    """

    def __init__(self, vector_env: VectorEnv) -> None:
        self.vector_env = vector_env
        self.num_envs = vector_env.num_envs
        self._results: tuple[list[Any], list[float], list[bool], list[bool], list[dict]] | None = None

    def poll(self) -> Polled:
        """The last step's results (the first poll resets every sub-environment); each is returned once."""
        if self._results is None:
            observations, infos = self.vector_env.vector_reset()
            n = len(observations)
            self._results = (observations, [0.0] * n, [False] * n, [False] * n, infos)
        observations, rewards, terminateds, truncateds, infos = self._results
        self._results = ([], [], [], [], [])
        return (
            with_dummy_agent_id(dict(enumerate(observations))),
            with_dummy_agent_id(dict(enumerate(rewards))),
            with_dummy_agent_id(dict(enumerate(terminateds)), "__all__"),
            with_dummy_agent_id(dict(enumerate(truncateds)), "__all__"),
            with_dummy_agent_id(dict(enumerate(infos))),
            {},
        )

    def send_actions(self, action_dict: MultiEnvDict) -> None:
        """Step every sub-environment with its agent's action.

        Raises:
            KeyError: a sub-environment has no action (a vector env steps all of them together).
        """
        missing = [i for i in range(self.num_envs) if _DUMMY_AGENT_ID not in action_dict.get(i, {})]
        if missing:
            raise KeyError(f"no action for sub-environment(s) {missing}: send {{env_id: {{'agent0': action}}}} for each")
        self._results = self.vector_env.vector_step([action_dict[i][_DUMMY_AGENT_ID] for i in range(self.num_envs)])

    def try_reset(
        self, env_id: Any = None, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[MultiEnvDict | None, MultiEnvDict | None]:
        """Reset sub-environment ``env_id`` (None: 0); returns its observation and info as two-level dicts.

        Args:
            env_id: the sub-environment; None: the first.
            seed: its seed (None: do not reseed).
            options: its reset options.
        """
        env_id = 0 if env_id is None else env_id
        obs, info = self.vector_env.reset_at(env_id, seed=seed, options=options)
        if isinstance(obs, Exception):  # it failed and was made anew: the caller sees the error, as in RLlib
            return {env_id: obs}, {env_id: info}  # type: ignore[dict-item]
        return {env_id: {_DUMMY_AGENT_ID: obs}}, {env_id: {_DUMMY_AGENT_ID: info}}

    def try_restart(self, env_id: Any = None) -> None:
        """Make sub-environment ``env_id`` (None: 0) anew; the caller resets it (``try_reset``)."""
        self.vector_env.restart_at(env_id)

    def get_sub_environments(self, as_dict: bool = False) -> list[Any] | dict[Any, Any]:
        """The vector env's sub-environments."""
        envs = self.vector_env.get_sub_environments()
        return dict(enumerate(envs)) if as_dict else envs

    def get_agent_ids(self) -> set[Any]:
        """``{"agent0"}``."""
        return {_DUMMY_AGENT_ID}

    def try_render(self, env_id: Any = None) -> Any:
        """The vector env's ``try_render_at(env_id)``."""
        return self.vector_env.try_render_at(env_id)

    @property
    def observation_space(self) -> gym.Space[Any]:
        """The vector env's (one sub-environment's) observation space."""
        return self.vector_env.observation_space

    @property
    def action_space(self) -> gym.Space[Any]:
        """The vector env's (one sub-environment's) action space."""
        return self.vector_env.action_space


class MultiAgentEnvWrapper(BaseEnv):
    """Multi-agent envs polled: the agents each sub-environment's last step (or reset) observed are ready.

    An episode that ended (``"__all__"``) takes no more actions until ``try_reset``.

    Args:
        make_env: ``make_env(index)`` makes sub-environment ``index``, where ``existing_envs`` has too few.
        existing_envs: sub-environments already made, the first ones.
        num_envs: the number of sub-environments.
        restart_failed_sub_environments: RLlib's option: ``try_restart`` makes one anew (needs ``make_env``).

    Raises:
        ValueError: too few existing envs and no ``make_env``.
    """

    def __init__(
        self,
        make_env: Callable[[int], MultiAgentEnv] | None,
        existing_envs: list[MultiAgentEnv],
        num_envs: int,
        restart_failed_sub_environments: bool = False,
    ) -> None:
        if make_env is None and len(existing_envs) < num_envs:
            raise ValueError(f"{len(existing_envs)} existing env(s) for num_envs={num_envs}: pass make_env to make the others")
        self.make_env = make_env
        self.envs = list(existing_envs)
        while len(self.envs) < num_envs:
            self.envs.append(make_env(len(self.envs)))  # type: ignore[misc]  # checked above
        self.num_envs = num_envs
        self.restart_failed_sub_environments = restart_failed_sub_environments
        self._ended: set[int] = set()
        self._pending: dict[int, tuple[dict, dict, dict, dict, dict]] = {}
        self._started = False

    def poll(self) -> Polled:
        """What each sub-environment's last step returned (the first poll resets them all); each is returned once."""
        if not self._started:
            self._started = True
            for i in range(self.num_envs):
                obs, infos = self.envs[i].reset()
                self._pending[i] = (obs, {}, {"__all__": False}, {"__all__": False}, infos)
        polled: tuple[MultiEnvDict, ...] = ({}, {}, {}, {}, {})
        for env_id, results in self._pending.items():
            for column, values in zip(polled, results, strict=True):
                column[env_id] = values
        self._pending = {}
        return (*polled, {})  # type: ignore[return-value]

    def send_actions(self, action_dict: MultiEnvDict) -> None:
        """Step each named sub-environment with its agents' actions.

        Raises:
            ValueError: a sub-environment's episode ended and it was not reset (``try_reset``).
        """
        for env_id, actions in action_dict.items():
            if env_id in self._ended:
                raise ValueError(f"sub-environment {env_id}'s episode ended: try_reset({env_id}) before sending it actions")
            obs, rewards, terminateds, truncateds, infos = self.envs[env_id].step(actions)
            terminateds.setdefault("__all__", False)
            truncateds.setdefault("__all__", False)
            if terminateds["__all__"] or truncateds["__all__"]:
                self._ended.add(env_id)
            self._pending[env_id] = (obs, rewards, terminateds, truncateds, infos)

    def try_reset(
        self, env_id: Any = None, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[MultiEnvDict | None, MultiEnvDict | None]:
        """Reset sub-environment ``env_id`` (None: every one); returns their observations and infos.

        Args:
            env_id: the sub-environment; None: every one.
            seed: their seed (None: do not reseed).
            options: their reset options.
        """
        ids = range(self.num_envs) if env_id is None else [env_id]
        observations, infos = {}, {}
        for i in ids:
            observations[i], infos[i] = self.envs[i].reset(seed=seed, options=options)
            self._ended.discard(i)
            self._pending.pop(i, None)
        self._started = True
        return observations, infos

    def try_restart(self, env_id: Any = None) -> None:
        """Close sub-environment ``env_id`` (None: every one) and make it anew.

        Raises:
            ValueError: this wrapper was given no ``make_env``.
        """
        if self.make_env is None:
            raise ValueError("a sub-environment cannot be made anew: this BaseEnv was given no make_env")
        for i in range(self.num_envs) if env_id is None else [env_id]:
            self.envs[i].close()
            self.envs[i] = self.make_env(i)
            self._ended.add(i)  # a new env starts with try_reset, as after an episode's end

    def get_sub_environments(self, as_dict: bool = False) -> list[Any] | dict[Any, Any]:
        """The multi-agent envs."""
        return dict(enumerate(self.envs)) if as_dict else self.envs

    def get_agent_ids(self) -> set[Any]:
        """The first sub-environment's ``possible_agents``."""
        return set(self.envs[0].possible_agents)

    def try_render(self, env_id: Any = None) -> Any:
        """``render()`` of sub-environment ``env_id`` (None: 0)."""
        return self.envs[0 if env_id is None else env_id].render()

    @property
    def observation_space(self) -> gym.Space[Any]:
        """The first sub-environment's observation space."""
        return self.envs[0].observation_space

    @property
    def action_space(self) -> gym.Space[Any]:
        """The first sub-environment's action space."""
        return self.envs[0].action_space


def convert_to_base_env(
    env: Any,
    make_env: Callable[[int], Any] | None = None,
    num_envs: int = 1,
    remote_envs: bool = False,
    remote_env_batch_wait_ms: int = 0,
    worker: Any = None,
    restart_failed_sub_environments: bool = False,
) -> BaseEnv:
    """An env of any kind RLlib polls, as a :class:`BaseEnv` of ``num_envs`` sub-environments (``env`` the first).

    Args:
        env: a gymnasium env, a :class:`VectorEnv`, a :class:`MultiAgentEnv` or a :class:`BaseEnv`
            (returned as it is).
        make_env: ``make_env(index)`` makes the other sub-environments.
        num_envs: the number of sub-environments.
        remote_envs: RLlib's sub-environments as Ray actors; corral's env runners make those themselves.
        remote_env_batch_wait_ms: RLlib's, for remote sub-environments.
        worker: RLlib's, for remote sub-environments.
        restart_failed_sub_environments: a sub-environment that fails is made anew (needs ``make_env``).

    Returns:
        The BaseEnv.

    Raises:
        ValueError: ``remote_envs=True`` (use the config's ``remote_worker_envs=True``), an ``ExternalEnv``
            (give it as the config's env), or something that is no env.
    """
    del remote_env_batch_wait_ms, worker
    if remote_envs:
        raise ValueError(
            "convert_to_base_env(remote_envs=True): corral's env runners make sub-environment actors themselves; "
            "set config.env_runners(remote_worker_envs=True) instead"
        )
    if isinstance(env, BaseEnv | VectorEnv):
        return env.to_base_env()
    if isinstance(env, ExternalEnv):
        raise ValueError("an ExternalEnv runs its own loop: give it as config.environment(env=...) and corral's runners poll it")
    if isinstance(env, MultiAgentEnv):
        return MultiAgentEnvWrapper(make_env, [env], num_envs, restart_failed_sub_environments)
    if isinstance(env, gym.Env):
        restarts = restart_failed_sub_environments
        return VectorEnvWrapper(VectorEnv.vectorize_gym_envs(make_env, [env], num_envs, restart_failed_sub_environments=restarts))
    raise ValueError(f"convert_to_base_env takes a gymnasium.Env, VectorEnv, MultiAgentEnv or BaseEnv; got {type(env).__name__}")

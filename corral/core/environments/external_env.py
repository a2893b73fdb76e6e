"""Environments that run their own loop: RLlib's ``ExternalEnv``, whose application asks for actions when it needs them.

A simulator, a game or a service that owns its loop cannot be stepped. It
subclasses :class:`ExternalEnv` and writes :meth:`~ExternalEnv.run`, which
runs in a thread of its own and, in any number of concurrent episodes, calls

- :meth:`~ExternalEnv.start_episode` to open one,
- :meth:`~ExternalEnv.get_action` with an observation, which waits for the
  policy's action (on-policy), or :meth:`~ExternalEnv.log_action` with the
  action the application took itself (off-policy),
- :meth:`~ExternalEnv.log_returns` with rewards as they come (summed until
  the next action),
- :meth:`~ExternalEnv.end_episode` with the last observation.

The env runner's side is :meth:`~ExternalEnv.poll`, which waits for what the
episodes did (:class:`ExternalStep`, one per observation), and
:meth:`~ExternalEnv.send_actions`, which answers the episodes waiting in
:meth:`~ExternalEnv.get_action`.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import uuid
from typing import Any

import gymnasium as gym

from corral.errors import EnvError

MAX_UNPOLLED_STEPS = 4096
"""how many steps the episodes may say before the runner polls them; logging more waits for a poll"""


@dataclasses.dataclass(frozen=True)
class ExternalStep:
    """One observation of an external episode, with what happened since the one before it.

    Args:
        episode_id: the episode.
        observation: the observation to act on; with ``ended``, the episode's last one (of an
            :class:`~corral.core.environments.external_multi_agent_env.ExternalMultiAgentEnv`: a dict by agent).
        reward: the rewards logged since the previous observation's action (0 for an episode's first); a multi-agent
            episode's by agent, summed since each agent's rewards were last taken.
        first: whether it is the episode's first observation (no transition leads to it).
        ended: whether the episode ended with it (:meth:`ExternalEnv.end_episode`).
        action: the action the application took itself (:meth:`ExternalEnv.log_action`), else None: the runner
            acts and answers with :meth:`ExternalEnv.send_actions`.
        action_logp: the log-probability (a log-density, for a continuous action) the application gave its action,
            where it said.
        info: the last info logged with the rewards.
        training_enabled: whether the episode's experience is trained on.
        dropped: why the episode was given up (:meth:`ExternalEnv.drop_episode`), else None; such a step has no
            observation, and what the episode had not yet closed is not trained on.
        dones: a multi-agent episode's agents that are done (RLlib's ``multiagent_done_dict``), logged since the
            previous observation.
    """

    episode_id: str
    observation: Any
    reward: Any
    first: bool
    ended: bool = False
    action: Any = None
    action_logp: float | None = None
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    training_enabled: bool = True
    dropped: str | None = None
    dones: dict[Any, bool] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Episode:
    training_enabled: bool
    reward: Any = 0.0
    """the rewards since the last observation: a number, or a multi-agent episode's dict by agent"""
    dones: dict[Any, bool] = dataclasses.field(default_factory=dict)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    first: bool = True
    waiting: bool = False
    """in :meth:`ExternalEnv.get_action`, until the runner's action comes"""
    action: Any = None


class ExternalEnv:
    """An environment whose application drives the loop in :meth:`run`, asking the policy for actions.

    Args:
        action_space: the actions the application takes.
        observation_space: what it observes.
        max_concurrent: how many episodes may run at once.
    """

    _BY_AGENT = False
    """whether observations, actions and rewards are dicts by agent (:class:`ExternalMultiAgentEnv`)"""

    def __init__(self, action_space: gym.Space[Any], observation_space: gym.Space[Any], max_concurrent: int = 100) -> None:
        self.action_space = action_space
        self.observation_space = observation_space
        self.max_concurrent = max_concurrent
        self.__changed = threading.Condition()
        self.__episodes: dict[str, _Episode] = {}
        self.__steps: list[ExternalStep] = []
        self.__thread: threading.Thread | None = None
        self.__error: BaseException | None = None
        self.__returned = False
        self.__closed = False

    @property
    def by_agent(self) -> bool:
        """Whether observations, actions and rewards are dicts by agent id (an ``ExternalMultiAgentEnv``'s)."""
        return self._BY_AGENT

    def run(self) -> None:
        """The application's loop, in a thread of its own: episodes of :meth:`start_episode`, :meth:`get_action`, ...

        Raises:
            NotImplementedError: a subclass must write it.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement run(), the loop that plays its episodes")

    # ---------------------------------------------------------------- the application's side

    def start_episode(self, episode_id: str | None = None, training_enabled: bool = True) -> str:
        """Open an episode.

        Args:
            episode_id: its id; None: a new unique one.
            training_enabled: whether its experience is trained on (False: the policy only acts).

        Returns:
            The episode's id.

        Raises:
            EnvError: the id is in use, or ``max_concurrent`` episodes are running.
        """
        episode_id = uuid.uuid4().hex if episode_id is None else episode_id
        with self.__changed:
            self.__check_open()
            if episode_id in self.__episodes:
                raise EnvError(f"episode {episode_id!r} is already running; end it first, or give another id")
            if len(self.__episodes) >= self.max_concurrent:
                raise EnvError(
                    f"{len(self.__episodes)} episodes are running, max_concurrent={self.max_concurrent}: end one first"
                )
            self.__episodes[episode_id] = _Episode(training_enabled, self.__no_reward())
        return episode_id

    def get_action(self, episode_id: str, observation: Any) -> Any:
        """Record an observation and wait for the policy's action on it.

        Args:
            episode_id: the episode.
            observation: what the application observes now.

        Returns:
            The action to take.

        Raises:
            EnvError: no such episode, it already waits for an action, or the env was closed meanwhile.
        """
        with self.__changed:
            episode = self.__observe(episode_id, observation, action=None, action_logp=None)
            episode.waiting = True
            self.__changed.wait_for(lambda: not episode.waiting or self.__closed)
            if episode.waiting:
                raise EnvError(f"the env closed while episode {episode_id!r} waited for an action")
            action, episode.action = episode.action, None
            return action

    def log_action(
        self,
        episode_id: str,
        observation: Any,
        action: Any,
        action_prob: float | None = None,
        *,
        action_logp: float | None = None,
    ) -> None:
        """Record an observation and the action the application took on it itself (off-policy).

        Args:
            episode_id: the episode.
            observation: what the application observed.
            action: what it did.
            action_prob: the probability its own policy gave the action, if it knows.
            action_logp: or its log (a log-density, for a continuous action), if it knows.

        Raises:
            EnvError: no such episode, it waits for an action, the action is not in the action space, or both
                ``action_prob`` and ``action_logp`` are given.
        """
        self._check_action(episode_id, action)
        if action_prob is not None:
            if action_logp is not None:
                raise EnvError(f"episode {episode_id!r} logged both action_prob and action_logp: give one")
            action_logp = math.log(action_prob)
        with self.__changed:
            self.__observe(episode_id, observation, action=action, action_logp=action_logp)

    def log_returns(self, episode_id: str, reward: float, info: dict[str, Any] | None = None) -> None:
        """Record a reward (summed with the others until the next observation) and, optionally, an info.

        Args:
            episode_id: the episode.
            reward: the reward.
            info: the env's info; the last one logged goes with the next observation.

        Raises:
            EnvError: no such episode, or the reward is not a number.
        """
        self._log_returns(episode_id, reward, info, None)

    def _log_returns(self, episode_id: str, reward: Any, info: dict[str, Any] | None, dones: dict[Any, bool] | None) -> None:
        """Add the rewards (a number, or a dict by agent) and the done flags to the episode's next step."""
        try:
            rewards = {agent: float(value) for agent, value in (reward if self._BY_AGENT else {None: reward}).items()}
        except (AttributeError, TypeError, ValueError):
            wanted = "a dict of numbers by agent" if self._BY_AGENT else "a number"
            raise EnvError(f"episode {episode_id!r} logged the reward {reward!r:.60}: it is {wanted}") from None
        with self.__changed:
            episode = self.__episode(episode_id)
            if self._BY_AGENT:
                for agent, value in rewards.items():
                    episode.reward[agent] = episode.reward.get(agent, 0.0) + value
                episode.dones.update({agent: bool(done) for agent, done in (dones or {}).items()})
            else:
                episode.reward += rewards[None]
            if info is not None:
                episode.info = dict(info)

    def end_episode(self, episode_id: str, observation: Any) -> None:
        """Record the episode's last observation and close it.

        Args:
            episode_id: the episode.
            observation: the last observation.

        Raises:
            EnvError: no such episode, or it waits for an action.
        """
        with self.__changed:
            episode = self.__episode(episode_id)
            self.__push(episode_id, episode, observation, ended=True)
            del self.__episodes[episode_id]

    def drop_episode(self, episode_id: str, reason: str) -> bool:
        """Give up an episode whose application went away (a client that vanished): the runner counts it as dropped.

        Its rows already closed are trained on; its last action, whose outcome never came, is not.

        Args:
            episode_id: the episode.
            reason: why, for the runner's log.

        Returns:
            Whether it was dropped: False if it is not running, or waits for an action (its application is there).
        """
        with self.__changed:
            episode = self.__episodes.get(episode_id)
            if episode is None or episode.waiting:
                return False
            del self.__episodes[episode_id]
            dropped = ExternalStep(episode_id, None, episode.reward, episode.first, dropped=reason, dones=episode.dones)
            self.__steps.append(dropped)
            self.__changed.notify_all()
            return True

    # ---------------------------------------------------------------- the env runner's side

    def start(self) -> None:
        """Start :meth:`run` in its thread (once; the env runner does this before it polls)."""
        if self.__thread is None:
            self.__thread = threading.Thread(target=self.__run, name=f"corral-{type(self).__name__}", daemon=True)
            self.__thread.start()

    def poll(self, timeout: float | None = None) -> list[ExternalStep]:
        """Wait until an episode has something to say (or ``timeout`` seconds pass), and take everything said.

        Starts :meth:`run` first if it has not started.

        Args:
            timeout: the longest wait; None waits as long as it takes.

        Returns:
            The steps since the last poll, in the order they happened (empty after a timeout).

        Raises:
            EnvError: :meth:`run` raised (its error is the cause), or returned while nothing is left to poll.
        """
        self.start()
        with self.__changed:
            self.__changed.wait_for(lambda: self.__steps or self.__error is not None or not self.__running(), timeout)
            steps, self.__steps = self.__steps, []
            self.__changed.notify_all()  # an application waiting for room may log again
            if not steps and self.__error is not None:
                raise EnvError(f"{type(self).__name__}.run() raised {self.__error!r}") from self.__error
            if not steps and not self.__running():
                raise EnvError(f"{type(self).__name__}.run() returned: its application plays no more episodes")
            return steps

    def send_actions(self, actions: dict[str, Any]) -> None:
        """Answer the episodes waiting in :meth:`get_action`.

        Args:
            actions: an action by episode id.

        Raises:
            EnvError: an episode is not waiting for an action.
        """
        with self.__changed:
            for episode_id, action in actions.items():
                episode = self.__episodes.get(episode_id)
                if episode is None or not episode.waiting:
                    raise EnvError(f"episode {episode_id!r} is not waiting for an action")
                episode.action, episode.waiting = action, False
            self.__changed.notify_all()

    def close(self) -> None:
        """Stop answering: every :meth:`get_action` waiting (and any later call) raises ``EnvError``."""
        with self.__changed:
            self.__closed = True
            self.__changed.notify_all()

    # ---------------------------------------------------------------- inside

    def __run(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # said to the runner at its next poll
            with self.__changed:
                self.__error = exc
        finally:
            with self.__changed:
                self.__returned = True  # said here, not by the thread's liveness: it is still alive while it notifies
                self.__changed.notify_all()

    def _check_action(self, episode_id: str, action: Any) -> None:
        """Refuse a logged action outside the action space (each agent's, for dicts by agent)."""
        if not self._BY_AGENT:
            if not self.action_space.contains(action):
                raise EnvError(f"episode {episode_id!r} logged the action {action!r:.60}, which is not in {self.action_space}")
            return
        for agent, value in action.items():
            space = agent_space(self.action_space, agent)
            if not space.contains(value):
                raise EnvError(f"episode {episode_id!r}: agent {agent!r} logged the action {value!r:.60}, not in {space}")

    def __no_reward(self) -> Any:
        return {} if self._BY_AGENT else 0.0

    def __running(self) -> bool:
        return self.__thread is not None and not self.__returned

    def __check_open(self) -> None:
        if self.__closed:
            raise EnvError(f"{type(self).__name__} is closed: its env runner stopped")

    def __episode(self, episode_id: str) -> _Episode:
        self.__check_open()
        episode = self.__episodes.get(episode_id)
        if episode is None:
            raise EnvError(f"no episode {episode_id!r} is running; start_episode() opens one")
        if episode.waiting:
            raise EnvError(f"episode {episode_id!r} is waiting for an action (get_action) in another thread")
        return episode

    def __observe(self, episode_id: str, observation: Any, action: Any, action_logp: float | None) -> _Episode:
        episode = self.__episode(episode_id)
        self.__push(episode_id, episode, observation, action=action, action_logp=action_logp)
        return episode

    def __push(self, episode_id: str, episode: _Episode, observation: Any, **step: Any) -> None:
        # an application that logs its own actions never waits for the runner: it waits here, so memory stays bounded
        self.__changed.wait_for(lambda: len(self.__steps) < MAX_UNPOLLED_STEPS or self.__closed)
        self.__check_open()
        self.__steps.append(
            ExternalStep(
                episode_id,
                observation,
                episode.reward,
                episode.first,
                info=episode.info,
                training_enabled=episode.training_enabled,
                dones=episode.dones,
                **step,
            )
        )
        episode.reward, episode.dones, episode.info, episode.first = self.__no_reward(), {}, {}, False
        self.__changed.notify_all()


def agent_space(space: gym.Space[Any], agent: Any) -> gym.Space[Any]:
    """An agent's space: its entry of a ``Dict`` space keyed by agent id, else the space every agent shares.

    Args:
        space: the env's observation or action space.
        agent: the agent id.

    Returns:
        The agent's space.
    """
    if isinstance(space, gym.spaces.Dict) and agent in space.spaces:
        return space.spaces[agent]
    return space

"""RLlib's ``SingleAgentEpisode``: one agent's episode (or a chunk of one) built step by step, read with a lookback.

RLlib's new API stack keeps its samples as these episodes; scripts build them
by hand too (``add_env_reset``, ``add_env_step``) to record, cut and read
trajectories. corral's samplers keep their own arrays, so this is the data
structure alone, as RLlib documents it: the getters index the chunk's steps
from 0, or with ``neg_index_as_lookback`` reach back into the data before the
chunk (its lookback buffer), and ``fill`` pads what lies outside both.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from corral.rllib.support.spaces import batch


class InfiniteLookbackBuffer:
    """One kind of an episode's data (observations, actions, ...): the chunk's items after ``lookback`` earlier ones.

    Args:
        data: the items, the lookback ones first.
        lookback: how many of the first items lie before the chunk.
        space: the items' space, for ``fill`` and ``one_hot_discrete``; None: items of any kind.
    """

    def __init__(self, data: list[Any] | None = None, lookback: int = 0, space: gym.Space[Any] | None = None) -> None:
        self.data: list[Any] = list(data or [])
        self.lookback = lookback
        self.space = space
        self.finalized = False

    def __len__(self) -> int:
        """The chunk's items (the lookback ones not counted)."""
        return len(self.data) - self.lookback

    def __iter__(self) -> Iterator[Any]:
        """The chunk's items."""
        return iter(self.data[self.lookback :])

    def __getitem__(self, index: int | slice | list[int]) -> Any:
        """:meth:`get` of ``index``."""
        return self.get(index)

    def append(self, item: Any) -> None:
        """Add an item at the end."""
        self.data.append(item)

    def get(
        self,
        indices: int | slice | list[int] | None = None,
        *,
        neg_index_as_lookback: bool = False,
        fill: Any = None,
        one_hot_discrete: bool = False,
    ) -> Any:
        """Items by their step in the chunk, as RLlib's buffer reads them.

        Args:
            indices: a step (0 is the chunk's first; -1 the last item of all), a list of them, a slice; None: the chunk.
            neg_index_as_lookback: a negative step counts back from the chunk's start, into the lookback.
            fill: the value of a step outside the data (each leaf of the space, if there is one); None: such a step
                is an ``IndexError`` (a slice is cut to the data instead).
            one_hot_discrete: Discrete and MultiDiscrete values (leaves) as one-hot vectors.

        Returns:
            One item for one step; a list for a list or a slice (arrays, once :meth:`finalize` d).

        Raises:
            IndexError: a step outside the data, without ``fill``.
        """
        if isinstance(indices, list):
            return self._collected([self.get(i, neg_index_as_lookback=neg_index_as_lookback, fill=fill,
                                             one_hot_discrete=one_hot_discrete) for i in indices])  # fmt: skip
        if indices is None:
            indices = slice(None, None)
        if isinstance(indices, slice):
            if indices.step not in (None, 1):
                raise ValueError("an episode's data is read in steps of 1")
            start = self.lookback if indices.start is None else self._position(indices.start, neg_index_as_lookback)
            stop = len(self.data) if indices.stop is None else self._position(indices.stop, neg_index_as_lookback)
            if fill is None:
                start, stop = max(start, 0), min(stop, len(self.data))
            return self._collected([self._item(p, fill, one_hot_discrete) for p in range(start, stop)])
        return self._item(self._position(int(indices), neg_index_as_lookback), fill, one_hot_discrete)

    def _position(self, index: int, neg_index_as_lookback: bool) -> int:
        if index >= 0:
            return self.lookback + index
        return (self.lookback if neg_index_as_lookback else len(self.data)) + index

    def _item(self, position: int, fill: Any, one_hot_discrete: bool) -> Any:
        if 0 <= position < len(self.data):
            value = self.data[position]
            return _one_hot(value, self.space) if one_hot_discrete and self.space is not None else value
        if fill is None:
            raise IndexError(
                f"step {position - self.lookback} lies outside this episode's {len(self)} steps and its lookback of "
                f"{self.lookback}; pass fill=... to pad it"
            )
        return fill if self.space is None else _filled(self.space, fill, one_hot_discrete)

    def _collected(self, items: list[Any]) -> Any:
        if not self.finalized:
            return items
        if isinstance(self.space, (gym.spaces.Dict, gym.spaces.Tuple)) and items:
            return batch(items)
        return np.asarray(items)

    def finalize(self) -> None:
        """Read lists of items as arrays from now on (RLlib's numpy form)."""
        self.finalized = True


def _one_hot(value: Any, space: gym.Space[Any]) -> Any:
    if isinstance(space, gym.spaces.Discrete):
        return np.eye(int(space.n), dtype=np.float32)[int(value) - int(space.start)]
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.concatenate(
            [np.eye(int(n), dtype=np.float32)[int(v)] for v, n in zip(np.ravel(value), np.ravel(space.nvec), strict=True)]
        )
    if isinstance(space, gym.spaces.Dict):
        return {key: _one_hot(value[key], sub) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_one_hot(v, sub) for v, sub in zip(value, space.spaces, strict=True))
    return value


def _filled(space: gym.Space[Any], fill: Any, one_hot_discrete: bool) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return {key: _filled(sub, fill, one_hot_discrete) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_filled(sub, fill, one_hot_discrete) for sub in space.spaces)
    if one_hot_discrete and isinstance(space, gym.spaces.Discrete):
        return np.zeros(int(space.n), dtype=np.float32)
    if one_hot_discrete and isinstance(space, gym.spaces.MultiDiscrete):
        return np.zeros(int(np.sum(space.nvec)), dtype=np.float32)
    if space.shape:
        return np.full(space.shape, fill, dtype=space.dtype)
    return np.asarray(fill, dtype=space.dtype)[()] if space.dtype is not None else fill


class SingleAgentEpisode:
    """One agent's episode, or a chunk of one, with RLlib's API (see the module docstring).

    Observations and infos have one item more than actions and rewards (the
    reset's). The first ``len_lookback_buffer`` items of the data given lie
    before the chunk (``"auto"``: all of them, so a new chunk continues them).

    Args:
        id_: the episode's id; None draws one.
        observations: the observations, the lookback ones first.
        observation_space: their space (for ``fill`` and ``one_hot_discrete``).
        infos: one info dict per observation; None: empty ones.
        actions: the actions.
        action_space: their space.
        rewards: the rewards.
        terminated: whether the episode ended in a terminal state.
        truncated: whether it was cut short.
        extra_model_outputs: other per-step data by name (``action_logp``, ...).
        t_started: the episode step the chunk starts at.
        len_lookback_buffer: how many of the given steps lie before the chunk, or ``"auto"`` (all).
        agent_id: RLlib's id of the agent, in a multi-agent episode.
        module_id: RLlib's id of the module acting for it.
        multi_agent_episode_id: the id of the multi-agent episode it is part of.

    Raises:
        ValueError: the data's lengths do not fit one another or the lookback.
    """

    def __init__(
        self,
        id_: str | None = None,
        *,
        observations: list[Any] | None = None,
        observation_space: gym.Space[Any] | None = None,
        infos: list[Any] | None = None,
        actions: list[Any] | None = None,
        action_space: gym.Space[Any] | None = None,
        rewards: list[Any] | None = None,
        terminated: bool = False,
        truncated: bool = False,
        extra_model_outputs: dict[str, list[Any]] | None = None,
        t_started: int | None = None,
        len_lookback_buffer: int | str = "auto",
        agent_id: Any = None,
        module_id: Any = None,
        multi_agent_episode_id: str | None = None,
    ) -> None:
        observations, actions, rewards = list(observations or []), list(actions or []), list(rewards or [])
        lookback = len(rewards) if len_lookback_buffer == "auto" else int(len_lookback_buffer)
        if not (
            len(actions) == len(rewards) and len(observations) in ((len(rewards) + 1) if observations else 0, len(rewards) + 1)
        ):
            raise ValueError("an episode has one observation more than actions and rewards (the reset's), and as many of those")
        if not 0 <= lookback <= len(rewards):
            raise ValueError(f"len_lookback_buffer={len_lookback_buffer!r} must lie between 0 and the {len(rewards)} steps given")
        self.id_ = id_ or uuid.uuid4().hex
        self.observations = InfiniteLookbackBuffer(observations, lookback, observation_space)
        self.infos = InfiniteLookbackBuffer(infos if infos is not None else [{} for _ in observations], lookback)
        self.actions = InfiniteLookbackBuffer(actions, lookback, action_space)
        self.rewards = InfiniteLookbackBuffer(rewards, lookback)
        self.extra_model_outputs = {
            key: InfiniteLookbackBuffer(list(v), lookback) for key, v in (extra_model_outputs or {}).items()
        }
        self.is_terminated = terminated
        self.is_truncated = truncated
        self.t_started = t_started or 0
        self.t = self.t_started + len(self.rewards)
        self.agent_id, self.module_id, self.multi_agent_episode_id = agent_id, module_id, multi_agent_episode_id
        self.is_finalized = False

    def __len__(self) -> int:
        """The chunk's steps."""
        return self.t - self.t_started

    @property
    def is_done(self) -> bool:
        """Whether the episode ended (terminated or truncated)."""
        return self.is_terminated or self.is_truncated

    @property
    def observation_space(self) -> gym.Space[Any] | None:
        """The observations' space, if given."""
        return self.observations.space

    @property
    def action_space(self) -> gym.Space[Any] | None:
        """The actions' space, if given."""
        return self.actions.space

    def add_env_reset(self, observation: Any, infos: Any = None) -> None:
        """The episode's first observation (and info), from the env's reset.

        Args:
            observation: the reset's observation.
            infos: its info dict; None: an empty one.

        Raises:
            ValueError: the episode has observations already.
        """
        if self.observations.data:
            raise ValueError("add_env_reset() starts an episode; this one has observations already")
        self.observations.append(observation)
        self.infos.append(infos if infos is not None else {})

    def add_env_step(
        self,
        observation: Any,
        action: Any,
        reward: Any,
        infos: Any = None,
        *,
        terminated: bool = False,
        truncated: bool = False,
        extra_model_outputs: dict[str, Any] | None = None,
    ) -> None:
        """One step: the action taken, the reward and the observation (and info) it led to.

        Args:
            observation: the observation the step led to.
            action: the action taken.
            reward: the reward it got.
            infos: the step's info dict; None: an empty one.
            terminated: whether the episode ended in a terminal state.
            truncated: whether it was cut short.
            extra_model_outputs: other data of the step by name (``action_logp``, ...).

        Raises:
            ValueError: the episode has no reset observation, or has ended.
        """
        if not self.observations.data:
            raise ValueError("add_env_reset() first: a step follows an observation")
        if self.is_done:
            raise ValueError("the episode has ended (terminated or truncated); start a new one")
        self.observations.append(observation)
        self.infos.append(infos if infos is not None else {})
        self.actions.append(action)
        self.rewards.append(reward)
        for key, value in (extra_model_outputs or {}).items():
            self.extra_model_outputs.setdefault(key, InfiniteLookbackBuffer([], self.rewards.lookback)).append(value)
        self.is_terminated, self.is_truncated = terminated, truncated
        self.t += 1

    def get_observations(self, indices: Any = None, **options: Any) -> Any:
        """Observations by step (see :meth:`InfiniteLookbackBuffer.get` for ``indices`` and its options)."""
        return self.observations.get(indices, **options)

    def get_infos(self, indices: Any = None, **options: Any) -> Any:
        """Infos by step, as :meth:`get_observations`."""
        return self.infos.get(indices, **options)

    def get_actions(self, indices: Any = None, **options: Any) -> Any:
        """Actions by step, as :meth:`get_observations`."""
        return self.actions.get(indices, **options)

    def get_rewards(self, indices: Any = None, **options: Any) -> Any:
        """Rewards by step, as :meth:`get_observations`."""
        return self.rewards.get(indices, **options)

    def get_extra_model_outputs(self, key: str, indices: Any = None, **options: Any) -> Any:
        """One of the per-step extra outputs by step, as :meth:`get_observations`.

        Args:
            key: the output's name.
            indices: the steps.
            **options: as :meth:`InfiniteLookbackBuffer.get` takes them.
        """
        return self.extra_model_outputs[key].get(indices, **options)

    def get_return(self) -> float:
        """The sum of the chunk's rewards."""
        return float(np.sum(list(self.rewards)))

    def __getitem__(self, item: slice) -> SingleAgentEpisode:
        """:meth:`slice`."""
        return self.slice(item)

    def slice(self, slice_: slice) -> SingleAgentEpisode:
        """The steps of ``slice_`` (from the chunk's start) as a chunk of their own, with their observations.

        Raises:
            ValueError: a step other than 1, or a step outside the chunk.
        """
        start, stop, step = slice_.indices(len(self))
        if step != 1:
            raise ValueError("an episode is sliced in steps of 1")
        first = self.rewards.lookback + start
        ended = stop == len(self)
        return self._window(
            first, self.rewards.lookback + max(stop, start), 0, self.t_started + start,
            terminated=self.is_terminated and ended, truncated=self.is_truncated and ended,
        )  # fmt: skip

    def cut(self, len_lookback_buffer: int = 0) -> SingleAgentEpisode:
        """The episode's next chunk, empty, starting where this one ends, with this one's last steps as its lookback.

        Args:
            len_lookback_buffer: how many of this chunk's last steps the next one keeps as its lookback.

        Raises:
            ValueError: the episode has ended.
        """
        if self.is_done:
            raise ValueError("the episode has ended: there is no next chunk to cut")
        back = min(len_lookback_buffer, len(self.rewards.data))
        return self._window(len(self.rewards.data) - back, len(self.rewards.data), back, self.t)

    def _window(
        self, first: int, last: int, lookback: int, t_started: int, terminated: bool = False, truncated: bool = False
    ) -> SingleAgentEpisode:
        """The data of steps ``first`` to ``last`` (positions in the data, lookback included) as an episode of its own,
        with their observations (one more) and the first ``lookback`` of them as its lookback."""
        return SingleAgentEpisode(
            self.id_,
            observations=self.observations.data[first : last + 1],
            observation_space=self.observation_space,
            infos=self.infos.data[first : last + 1],
            actions=self.actions.data[first:last],
            action_space=self.action_space,
            rewards=self.rewards.data[first:last],
            extra_model_outputs={key: buffer.data[first:last] for key, buffer in self.extra_model_outputs.items()},
            terminated=terminated,
            truncated=truncated,
            t_started=t_started,
            len_lookback_buffer=lookback,
            agent_id=self.agent_id,
            module_id=self.module_id,
            multi_agent_episode_id=self.multi_agent_episode_id,
        )

    def finalize(self) -> SingleAgentEpisode:
        """Read lists of items as arrays from now on (RLlib's numpy form, to batch for learning); returns itself."""
        for buffer in (self.observations, self.infos, self.actions, self.rewards, *self.extra_model_outputs.values()):
            buffer.finalize()
        self.is_finalized = True
        return self

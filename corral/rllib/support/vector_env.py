"""RLlib's ``VectorEnv``: several sub-environments stepped as one, each reset by its caller where it ends.

RLlib's samplers stepped every env through this API (``vector_reset``,
``vector_step``, ``reset_at``). Corral's env runners step gymnasium vector envs
instead (:func:`corral.core.environments.envs.make_vector_env`), so a
``VectorEnv`` is for code that drives envs itself, as RLlib's scripts and
custom samplers do: ``VectorEnv.vectorize_gym_envs`` makes one of gymnasium
envs, and :func:`~corral.rllib.support.base_env.convert_to_base_env` turns it
into a :class:`~corral.rllib.support.base_env.BaseEnv` to poll. Unlike
gymnasium's vector envs, a sub-environment that ends is not reset on its own:
the caller calls ``reset_at(i)``, as with RLlib.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym

if TYPE_CHECKING:
    from corral.rllib.support.base_env import BaseEnv

logger = logging.getLogger("corral")

StepResults = tuple[list[Any], list[float], list[bool], list[bool], list[dict[str, Any]]]
"""``vector_step``'s return: the sub-environments' observations, rewards, terminateds, truncateds and infos"""


class VectorEnv:
    """RLlib's base class of a vectorised env: subclasses implement ``vector_reset``, ``reset_at`` and ``vector_step``.

    Args:
        observation_space: one sub-environment's observation space.
        action_space: one sub-environment's action space.
        num_envs: the number of sub-environments.
    """

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any], num_envs: int) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.num_envs = num_envs

    @staticmethod
    def vectorize_gym_envs(
        make_env: Callable[[int], gym.Env[Any, Any]] | None = None,
        existing_envs: list[gym.Env[Any, Any]] | None = None,
        num_envs: int = 1,
        action_space: gym.Space[Any] | None = None,
        observation_space: gym.Space[Any] | None = None,
        restart_failed_sub_environments: bool = False,
        env_config: Any = None,
    ) -> VectorEnv:
        """A ``VectorEnv`` of gymnasium envs, stepped one after another in this process.

        Args:
            make_env: ``make_env(index)`` makes sub-environment ``index``; needed where ``existing_envs``
                holds fewer than ``num_envs``, and to restart one.
            existing_envs: sub-environments already made, the first ones.
            num_envs: the number of sub-environments.
            action_space: one sub-environment's action space; None takes the first one's.
            observation_space: one sub-environment's observation space; None takes the first one's.
            restart_failed_sub_environments: a sub-environment whose ``step`` or ``reset`` raises is made
                anew (its error is logged and returned as that step's observation) instead of the error
                propagating.
            env_config: unused; RLlib's signature has it.

        Returns:
            The vector env.

        Raises:
            ValueError: fewer existing envs than ``num_envs`` and no ``make_env``, or ``num_envs < 1``.
        """
        del env_config
        return _VectorizedGymEnv(
            make_env, existing_envs or [], num_envs, observation_space, action_space, restart_failed_sub_environments
        )

    def vector_reset(
        self, *, seeds: list[int | None] | None = None, options: list[dict | None] | None = None
    ) -> tuple[list[Any], list[dict]]:
        """Reset every sub-environment.

        Args:
            seeds: a seed per sub-environment (None: do not reseed).
            options: reset options per sub-environment.

        Returns:
            The observations and the infos, one per sub-environment.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement vector_reset(), as RLlib's VectorEnv says")

    def reset_at(self, index: int | None = None, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Reset one sub-environment.

        Args:
            index: the sub-environment (None: the first).
            seed: its seed (None: do not reseed).
            options: its reset options.

        Returns:
            Its observation and info (or, where it failed and was restarted, the error twice).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement reset_at(), as RLlib's VectorEnv says")

    def restart_at(self, index: int | None = None) -> None:
        """Close one sub-environment and make it anew (RLlib's default: not supported)."""
        raise NotImplementedError(f"{type(self).__name__} cannot restart a sub-environment (it implements no restart_at())")

    def vector_step(self, actions: list[Any]) -> StepResults:
        """Step every sub-environment with its action.

        Args:
            actions: one action per sub-environment.

        Returns:
            The observations, rewards, terminateds, truncateds and infos, one per sub-environment.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement vector_step(), as RLlib's VectorEnv says")

    def get_sub_environments(self) -> list[Any]:
        """The sub-environments as objects, where there are any (RLlib's default: none)."""
        return []

    def try_render_at(self, index: int | None = None) -> Any:
        """Render one sub-environment, if it can (RLlib's default: nothing)."""
        return None

    def to_base_env(
        self,
        make_env: Callable[[int], Any] | None = None,
        num_envs: int = 1,
        remote_envs: bool = False,
        remote_env_batch_wait_ms: int = 0,
        restart_failed_sub_environments: bool = False,
    ) -> BaseEnv:
        """This vector env as a :class:`~corral.rllib.support.base_env.BaseEnv` to poll.

        Args:
            make_env: RLlib's, for other env kinds (a vector env already has its sub-environments).
            num_envs: likewise.
            remote_envs: likewise.
            remote_env_batch_wait_ms: likewise.
            restart_failed_sub_environments: likewise.

        Returns:
            The BaseEnv.
        """
        from corral.rllib.support.base_env import VectorEnvWrapper

        return VectorEnvWrapper(self)


class _VectorizedGymEnv(VectorEnv):
    """What :meth:`VectorEnv.vectorize_gym_envs` makes: gymnasium envs in a list, stepped in a loop."""

    def __init__(
        self,
        make_env: Callable[[int], gym.Env[Any, Any]] | None,
        existing_envs: list[gym.Env[Any, Any]],
        num_envs: int,
        observation_space: gym.Space[Any] | None,
        action_space: gym.Space[Any] | None,
        restart_failed_sub_environments: bool,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs={num_envs}: a vector env needs at least one sub-environment")
        if make_env is None and len(existing_envs) < num_envs:
            raise ValueError(f"{len(existing_envs)} existing env(s) for num_envs={num_envs}: pass make_env to make the others")
        self.make_env = make_env
        self.envs = list(existing_envs)
        while len(self.envs) < num_envs:
            self.envs.append(self._make(len(self.envs)))
        self.restart_failed_sub_environments = restart_failed_sub_environments
        first = self.envs[0]
        super().__init__(observation_space or first.observation_space, action_space or first.action_space, num_envs)

    def _make(self, index: int) -> gym.Env[Any, Any]:
        assert self.make_env is not None
        return self.make_env(index)

    def vector_reset(
        self, *, seeds: list[int | None] | None = None, options: list[dict | None] | None = None
    ) -> tuple[list[Any], list[dict]]:
        """Reset every sub-environment, sub-environment ``i`` with ``seeds[i]`` and ``options[i]``."""
        seeds = seeds if seeds is not None else [None] * self.num_envs
        options = options if options is not None else [None] * self.num_envs
        results = [self.reset_at(i, seed=seeds[i], options=options[i]) for i in range(self.num_envs)]
        return [obs for obs, _ in results], [info for _, info in results]

    def reset_at(self, index: int | None = None, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """Reset sub-environment ``index`` (None: 0); a failure restarts it where the vector env was told to."""
        index = 0 if index is None else index
        try:
            return self.envs[index].reset(seed=seed, options=options)
        except Exception as error:
            if not self.restart_failed_sub_environments:
                raise
            logger.exception("sub-environment %d failed to reset; it is made anew", index)
            self.restart_at(index)
            return error, error  # type: ignore[return-value]  # RLlib's signal to its caller: this one failed

    def restart_at(self, index: int | None = None) -> None:
        """Close sub-environment ``index`` (None: 0) and make it anew with ``make_env``.

        Raises:
            ValueError: this vector env was given no ``make_env``.
        """
        index = 0 if index is None else index
        if self.make_env is None:
            raise ValueError(f"sub-environment {index} cannot be made anew: this vector env was given no make_env")
        try:
            self.envs[index].close()
        except Exception:  # a broken env may fail to close too; it is replaced either way
            logger.warning("closing the failed sub-environment %d raised", index, exc_info=True)
        self.envs[index] = self._make(index)

    def vector_step(self, actions: list[Any]) -> StepResults:
        """Step sub-environment ``i`` with ``actions[i]``; one that raises, where restarts are asked for, is made anew
        and reports its error as the observation, a zero reward and an ended episode (as RLlib's does)."""
        observations, rewards, terminateds, truncateds, infos = [], [], [], [], []
        for i, env in enumerate(self.envs):
            try:
                obs, reward, terminated, truncated, info = env.step(actions[i])
            except Exception as error:
                if not self.restart_failed_sub_environments:
                    raise
                logger.exception("sub-environment %d failed to step; it is made anew", i)
                self.restart_at(i)
                obs, reward, terminated, truncated, info = error, 0.0, True, True, {}
            observations.append(obs)
            rewards.append(float(reward))
            terminateds.append(bool(terminated))
            truncateds.append(bool(truncated))
            infos.append(info)
        return observations, rewards, terminateds, truncateds, infos

    def get_sub_environments(self) -> list[Any]:
        """The gymnasium envs, in order."""
        return self.envs

    def try_render_at(self, index: int | None = None) -> Any:
        """``render()`` of sub-environment ``index`` (None: 0)."""
        return self.envs[0 if index is None else index].render()

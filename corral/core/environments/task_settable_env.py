"""Curriculum learning: environments whose task the algorithm sets between training iterations.

RLlib's ``TaskSettableEnv`` contract, and what ``environment(env_task_fn=...)``
does with it: after each iteration, every sub-environment of every env runner
gets ``set_task(env_task_fn(result, env, env_context))``, so the next samples
come from the task the results call for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from corral.core.environments.envs import EnvContext
from corral.errors import ConfigError


class TaskSettableEnv(gym.Env):
    """A gymnasium env whose task (a difficulty, a level, a goal) can be read and set from outside.

    Subclasses implement :meth:`get_task` and :meth:`set_task`, and may implement
    :meth:`sample_tasks` for task distributions (meta-learning).
    """

    def sample_tasks(self, n_tasks: int) -> list[Any]:
        """``n_tasks`` tasks drawn from the env's task distribution.

        Args:
            n_tasks: how many.

        Raises:
            NotImplementedError: the env has no task distribution.
        """
        raise NotImplementedError(f"{type(self).__name__} does not sample tasks")

    def get_task(self) -> Any:
        """The task the env runs now.

        Raises:
            NotImplementedError: a subclass must say.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement get_task()")

    def set_task(self, task: Any) -> None:
        """Run ``task`` from the next episode on (or at once, as the env decides).

        Args:
            task: one of the env's tasks.

        Raises:
            NotImplementedError: a subclass must say.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement set_task()")


TaskFunction = Callable[[dict[str, Any], Any, EnvContext], Any]
"""``env_task_fn(result, env, env_context) -> task``: the next task of one sub-environment"""


def task_settable(env: Any) -> Any:
    """The object whose ``set_task`` to call: ``env``, or the env inside its wrappers.

    Raises:
        ConfigError: neither has a ``set_task`` method.
    """
    for candidate in (env, getattr(env, "unwrapped", None)):
        if callable(getattr(candidate, "set_task", None)):
            return candidate
    raise ConfigError(
        f"env_task_fn sets tasks with set_task(task), which {type(env).__name__} does not have; "
        "make the env a corral.TaskSettableEnv (get_task and set_task), or drop env_task_fn"
    )


def set_tasks(envs: list[Any], contexts: list[EnvContext], function: TaskFunction, result: dict[str, Any]) -> list[Any]:
    """Give each sub-environment the task ``function`` picks for it from the iteration's ``result``.

    Args:
        envs: the sub-environments of one env runner.
        contexts: each one's EnvContext (its ``env_config``, worker and vector index).
        function: ``env_task_fn``.
        result: the training iteration's result.

    Returns:
        The tasks set, one per sub-environment.

    Raises:
        ConfigError: a sub-environment cannot have its task set.
    """
    tasks = []
    for env, context in zip(envs, contexts, strict=True):
        target = task_settable(env)
        task = function(result, target, context)
        target.set_task(task)
        tasks.append(task)
    return tasks

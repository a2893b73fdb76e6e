"""An algorithm's state in memory: ``get_state()``, ``set_state()`` and ``from_state()``, as RLlib's.

The same state a checkpoint writes, as a dict: counters, generators, the
config, every policy's state, and the arrays (replay buffers) a plugin keeps.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.core.common.restored import restored_count, restored_float
from corral.core.seeding import generator_state, set_generator_state
from corral.core.training.part import COUNTERS, AlgorithmPart
from corral.errors import CheckpointError

IN_MEMORY_STATE = ("algorithm_class", "config", "policy_states", "checkpoint_arrays")
"""the keys of :meth:`Algorithm.get_state` that a checkpoint keeps in files of their own (or, the class and config, names)"""

if TYPE_CHECKING:  # the class these methods are part of
    from corral.core.training.algorithm import Algorithm


class AlgorithmState(AlgorithmPart):
    """Part of :class:`~corral.core.training.algorithm.Algorithm` (see the module docstring)."""

    def get_state(self) -> dict[str, Any]:
        """The whole algorithm, in memory: ``Algorithm.from_state(algo.get_state())`` goes on exactly as it would.

        Its class (``algorithm_class``), its ``config``, each policy's state
        (``policy_states``: weights, optimizer, exploration, generators, filter;
        copies) and ``checkpoint_arrays`` (replay buffers), and the JSON state a
        checkpoint's ``algorithm_state.json`` holds: counters, generators, the
        episode history and where sampling stands (the env runners' generators,
        episodes in progress and environments, see :meth:`EnvRunner.get_state`,
        remote ones included).
        """
        self.settle_learning()
        state: dict[str, Any] = {
            "algorithm_class": type(self),
            "config": self.config,  # frozen
            "policy_states": {pid: copy.deepcopy(policy.get_state()) for pid, policy in self.policies.items()},
            "checkpoint_arrays": self.get_checkpoint_arrays(),
            "iteration": self.iteration,
            "counters": dict(self.counters),
            "time_total_s": self.time_total_s,
            "episodes_total": self.history.total,
            "seed": self.config.seed,
            "rng_state": generator_state(self.rng),
            "episode_history": self.history.get_state(),
            "env_runners": self.env_runner_group.get_state(),
        }
        if self._eval_group is not None:
            state["evaluation_env_runners"] = self._eval_group.get_state()
        if self.experience_input is not None:
            state["experience_input"] = self.experience_input.get_state()
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (the keys corral 0.1 wrote are enough); its class and config are not used.

        Raises:
            ValueError: a value has the wrong type or range (a tampered checkpoint), or
                the state holds a policy this algorithm does not have.
        """
        self.settle_learning()
        policy_states = state.get("policy_states") or {}
        unknown = sorted(set(policy_states) - set(self.policies))
        if unknown:
            raise ValueError(f"the state holds policies {unknown}, which this algorithm does not have: {sorted(self.policies)}")
        iteration = restored_count(state["iteration"], "iteration")
        counters = state["counters"]
        if not isinstance(counters, dict) or not set(COUNTERS) <= set(counters):
            raise ValueError(f"counters must be a dict with at least the keys {sorted(COUNTERS)}")
        counters = {key: restored_count(value, f"counters.{key}") for key, value in counters.items()}
        time_total_s = restored_float(state.get("time_total_s", 0.0), "time_total_s", minimum=0.0)
        history = self.new_episode_history()
        if "episode_history" in state:
            history.set_state(state["episode_history"])
        history.total = restored_count(state.get("episodes_total", history.total), "episodes_total")
        rng = np.random.default_rng()
        if "rng_state" in state:
            set_generator_state(rng, state["rng_state"])
        for pid, policy_state in policy_states.items():  # first, as from a checkpoint: the runners' state comes after
            self.policies[pid].set_state(policy_state)
        self.iteration, self.time_total_s, self.history, self.rng = iteration, time_total_s, history, rng
        self.counters.update(counters)
        if "env_runners" in state:
            self.env_runner_group.set_state(state["env_runners"])
        if "evaluation_env_runners" in state:
            self._evaluation_runners().set_state(state["evaluation_env_runners"])
        if "experience_input" in state and self.experience_input is not None:
            self.experience_input.set_state(state["experience_input"])
        if "checkpoint_arrays" in state:
            self.set_checkpoint_arrays(state["checkpoint_arrays"])

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Algorithm:
        """A new algorithm from what :meth:`get_state` returned: its class built with its config, then its state set.

        Args:
            state: the dict of :meth:`get_state`.

        Returns:
            The algorithm, ready to ``train()`` on from where the state was taken.

        Raises:
            CheckpointError: ``state`` lacks its algorithm class or config, or is of another
                algorithm than the class this is called on.
        """
        from corral.core.training.algorithm import Algorithm  # it is built from this part

        algorithm_class, config = state.get("algorithm_class"), state.get("config")
        if not (isinstance(algorithm_class, type) and issubclass(algorithm_class, Algorithm)) or config is None:
            raise CheckpointError(
                "from_state needs what Algorithm.get_state() returns, with its 'algorithm_class' and 'config'; "
                "for a checkpoint folder use Algorithm.from_checkpoint(path)"
            )
        if not issubclass(algorithm_class, cls):
            raise CheckpointError(
                f"the state is of {algorithm_class.__name__}, not {cls.__name__}; call Algorithm.from_state(state)"
            )
        algo = algorithm_class(config=config)
        try:
            algo.set_state(state)
        except BaseException:
            algo.stop()
            raise
        return algo

    def get_checkpoint_arrays(self) -> dict[str, dict[str, np.ndarray]]:
        """Named groups of numpy arrays to checkpoint beside the policies (replay buffers). Default none."""
        return {}

    def set_checkpoint_arrays(self, arrays: dict[str, dict[str, np.ndarray]]) -> None:
        """Restore what :meth:`get_checkpoint_arrays` returned (groups absent from the checkpoint are missing)."""

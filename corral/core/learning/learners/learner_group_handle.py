"""``algo.learner_group``: RLlib's LearnerGroup calls on an algorithm's Learners, in this process or on actors.

An RLlib ``training_step()`` written for the new stack updates with
``self.learner_group.update_from_batch(batch)`` and reads weights with
``self.learner_group.get_weights()``, whether ``num_learners`` is 0 (RLlib's
local Learner) or not. corral's algorithm learns through one path either
way (:meth:`~corral.core.training.algorithm.Algorithm.learn_on_batch`: in
this process, or on the Learner actors of a
:class:`~corral.core.learning.learners.learner_group.LearnerGroup`); this
handle gives that path RLlib's names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.core.learning.learners.learner import check_update_options
from corral.core.learning.learners.learner_group import LearnerGroup

if TYPE_CHECKING:  # types only: the policies import the learners package
    from corral.core.learning.policy import Policy


class LearningAlgorithm(Protocol):
    """What the handle calls on its algorithm."""

    def learn_on_batch(self, samples: MultiAgentBatch) -> dict[str, dict[str, Any]]:
        """Update every policy to train on its rows; stats by policy id."""

    def _policy(self, policy_id: str) -> Policy:
        """The policy with this id; an unknown id is a ConfigError."""

    def get_weights(self, policies: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Weights by policy id."""

    def set_weights(self, weights: dict[str, dict[str, Any]]) -> None:
        """Load weights by policy id."""


class LearnerGroupHandle:
    """What ``algo.learner_group`` is (see the module docstring).

    Args:
        algorithm: the algorithm whose policies the Learners update.
        actors: its Learner actors, or None when it learns in this process.
    """

    def __init__(self, algorithm: LearningAlgorithm, actors: LearnerGroup | None) -> None:
        self._algorithm, self.actors = algorithm, actors

    @property
    def is_local(self) -> bool:
        """True when the algorithm learns in this process (``num_learners=0``), as RLlib's."""
        return self.actors is None

    @property
    def is_remote(self) -> bool:
        """True when Learner actors update the policies."""
        return self.actors is not None

    @property
    def num_restarts(self) -> int:
        """How often the Learner actors were started again after one died (0 in this process)."""
        return 0 if self.actors is None else self.actors.num_restarts

    def update_from_batch(self, batch: SampleBatch | MultiAgentBatch, **kwargs: Any) -> dict[str, dict[str, Any]]:
        """One update of every policy to train on its rows of ``batch``, as the algorithm's own step makes it.

        The steps trained on are counted, as ``train_one_step`` counts them.

        Args:
            batch: a single-agent batch (the default policy's rows) or a multi-agent one.
            **kwargs: RLlib's ``minibatch_size``, ``num_epochs`` (``num_iters``), ``shuffle_batch_per_epoch``
                and ``timesteps``: the config decides them, and a value that differs is refused.

        Returns:
            The stats by policy id (RLlib's results by module id).

        Raises:
            ConfigError: a keyword names a value a policy's config does not hold.
            TypeError: a keyword RLlib's method does not take.
        """
        if isinstance(batch, SampleBatch):
            batch = batch.as_multi_agent()
        for policy_id in batch.policy_batches:
            check_update_options(self._algorithm._policy(policy_id).config, kwargs)
        return self._algorithm.learn_on_batch(batch)

    def get_weights(self, module_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """The weights of the policies (all, or ``module_ids``) by policy id, as numpy arrays.

        Args:
            module_ids: the policies; None: every one.

        Returns:
            The weights by policy id.
        """
        return self._algorithm.get_weights(module_ids)

    def set_weights(self, weights: dict[str, dict[str, Any]]) -> None:
        """Load weights by policy id (what :meth:`get_weights` returns); Learner actors get them with their next update.

        Args:
            weights: the weights by policy id.
        """
        self._algorithm.set_weights(weights)

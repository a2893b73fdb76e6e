"""What every part of an ``Algorithm`` may read: the attributes ``Algorithm.__init__`` sets, typed once.

``Algorithm`` is composed of parts (the training loop, evaluation, the policy
set, checkpoints, state), each a class of its own module that it inherits
from. A part reads the algorithm's attributes and calls the other parts'
methods through ``self``; this base names their types, for readers and the
type checker, and holds nothing at run time.
"""

from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import gymnasium as gym
import numpy as np

from corral.core.contracts.callbacks import CallbackRunner
from corral.core.contracts.config import AlgorithmConfig
from corral.core.learning.learners.learner_group import LearnerGroup
from corral.core.learning.learners.learner_group_handle import LearnerGroupHandle
from corral.core.learning.learners.learner_thread import LearnerThread
from corral.core.learning.policy import Policy, PolicyBuild
from corral.core.learning.policy_map import PolicyMap
from corral.core.persistence.loggers import CustomResultLogger, ResultWriter
from corral.core.sampling.env_runner_group import EnvRunnerGroup, EvaluationRound
from corral.core.sampling.metrics import EpisodeHistory
from corral.core.sampling.system_usage import SystemUsage
from corral.core.threads import TorchThreads
from corral.core.training.off_policy_evaluation import OffPolicyEvaluation
from corral.core.training.offline_input import ExperienceInput

if TYPE_CHECKING:  # the class the parts make up
    from corral.core.training.algorithm import Algorithm
    from corral.core.training.checkpointing import SavedCheckpoint


COUNTERS = ("num_env_steps_sampled", "num_env_steps_trained", "num_agent_steps_sampled", "num_agent_steps_trained")
"""the counters every algorithm keeps (``algo.counters``); an algorithm may count more"""


class AlgorithmPart:
    """The attributes of an algorithm, for the parts that read them (see the module docstring)."""

    config_class: ClassVar[type[AlgorithmConfig]]
    policy_class: ClassVar[type[Policy]]
    name: ClassVar[str | None]
    supported_action_spaces: ClassVar[tuple[type[gym.Space[Any]], ...]]
    sample_whole_fragments: ClassVar[bool]

    config: AlgorithmConfig
    rng: np.random.Generator
    callbacks: CallbackRunner
    policies: PolicyMap
    policy_builds: dict[str, PolicyBuild]
    learner_actors: LearnerGroup | None
    learner_group: LearnerGroupHandle
    experience_input: ExperienceInput | None
    off_policy_evaluation: OffPolicyEvaluation | None
    env_runner_group: EnvRunnerGroup
    workers: EnvRunnerGroup
    iteration: int
    counters: Counter[str]
    time_total_s: float
    history: EpisodeHistory
    _custom_logger: Any
    _torch_threads: TorchThreads
    _logdir: Path | None
    _eval_group: EnvRunnerGroup | None
    _last_evaluation: dict[str, Any] | None
    _last_result: dict[str, Any] | None
    _stopped: bool
    _system_usage: SystemUsage | None
    _fragments_reported: bool
    _learner_pool: ThreadPoolExecutor | None
    learner_thread: LearnerThread[Any, Any] | None
    _num_learner_threads: int
    _writer: ResultWriter | CustomResultLogger | None

    @property
    def _as_algorithm(self) -> Algorithm:
        """This part as the algorithm it is part of, for the calls that take one (the callbacks' ``algorithm``)."""
        return cast("Algorithm", self)

    # What the parts call on each other and on Algorithm itself, declared once for the type checker (each
    # is defined in the module named beside it); at run time the methods come from the parts.
    if TYPE_CHECKING:

        def setup(self, config: Any = None) -> None:
            """Defined in algorithm.py."""

        def training_step(self) -> dict[str, dict[str, Any]]:
            """Defined in algorithm.py."""

        def _check_not_stopped(self, what: str) -> None:
            """Defined in algorithm.py."""

        def _runner_config(self, config: AlgorithmConfig) -> AlgorithmConfig:
            """Defined in algorithm.py."""

        def _policy_build(self, policy_id: str, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> PolicyBuild:
            """Defined in algorithm.py."""

        @property
        def logdir(self) -> Path:
            """Defined in training_loop.py."""

        def is_policy_to_train(self, policy_id: str, batch: Any = None) -> bool:
            """Defined in training_loop.py."""

        def settle_learning(self) -> None:
            """Defined in training_loop.py."""

        def new_episode_history(self) -> EpisodeHistory:
            """Defined in algorithm.py."""

        def evaluate(self) -> dict[str, Any]:
            """Defined in evaluation.py."""

        def _evaluation_runners(self) -> EnvRunnerGroup:
            """Defined in evaluation.py."""

        def _start_evaluation(self) -> EvaluationRound | None:
            """Defined in evaluation.py."""

        def _finish_evaluation(self, pending: EvaluationRound | None) -> dict[str, Any]:
            """Defined in evaluation.py."""

        def save(self, checkpoint_dir: str | os.PathLike[str] | None = None) -> SavedCheckpoint:
            """Defined in checkpointing.py."""

        def _write_checkpoint(self, path: Path, saved: list[str]) -> str:
            """Defined in checkpointing.py."""

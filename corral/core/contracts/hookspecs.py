"""The training lifecycle hooks, as pluggy hookspecs. Specs only; no logic.

Every argument is a keyword, and an implementation may declare any subset of
them, so adding an argument here never breaks an existing callback. Names
follow RLlib's callbacks, and every argument RLlib documents for a hook is
passed where corral has it: ``worker`` beside ``env_runner`` (the same
object), ``base_env`` beside ``env``, ``episode``, ``policies`` and
``original_batches``, so a callback class written from RLlib's docs (either
API) runs as it is. RLlib's ``metrics_logger`` is the exception: corral has
none (see :data:`NOT_PASSED`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # the types the hooks receive; at run time nothing is imported
    from gymnasium.vector import VectorEnv

    from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
    from corral.core.environments.envs import EnvContext
    from corral.core.environments.multi_agent_env import MultiAgentEnv
    from corral.core.learning.policy import Policy
    from corral.core.sampling.env_runner import EnvRunner, Episode
    from corral.core.sampling.env_runner_group import EnvRunnerGroup
    from corral.core.sampling.multi_agent_env_runner import MultiAgentEnvRunner, MultiAgentEpisode
    from corral.core.training.algorithm import Algorithm

PROJECT = "corral"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def on_algorithm_init(algorithm: Algorithm) -> None:
    """The algorithm finished building (env runners, policies, loggers exist)."""


@hookspec
def on_environment_created(
    env_runner: EnvRunner | MultiAgentEnvRunner,
    worker: EnvRunner | MultiAgentEnvRunner,
    env: VectorEnv | MultiAgentEnv,
    env_context: EnvContext,
) -> None:
    """An env runner created its vector environment."""


@hookspec
def on_sub_environment_created(
    env_runner: EnvRunner | MultiAgentEnvRunner,
    worker: EnvRunner | MultiAgentEnvRunner,
    sub_environment: Any,
    env_context: EnvContext,
    env_index: int,
) -> None:
    """An env runner made one of its sub-environments, at the start or anew after a restart.

    ``sub_environment`` is the env as the user made it (what ``worker.foreach_env``
    gives); a natively vectorised env has no sub-environment objects and comes whole, once.
    """


@hookspec
def on_create_policy(policy_id: str, policy: Policy) -> None:
    """A policy was built: each of the algorithm's at the start, one added by ``add_policy``, and each remote runner's copy."""


@hookspec
def on_episode_start(
    episode: Episode | MultiAgentEpisode,
    env_runner: EnvRunner | MultiAgentEnvRunner,
    worker: EnvRunner | MultiAgentEnvRunner,
    base_env: VectorEnv | list[MultiAgentEnv],
    env: VectorEnv | MultiAgentEnv,
    env_index: int,
    policies: Mapping[str, Policy],
    rl_module: Any,
) -> None:
    """A sub-environment was reset and a new episode begins (``episode`` has its first observation)."""


@hookspec
def on_episode_step(
    episode: Episode | MultiAgentEpisode,
    env_runner: EnvRunner | MultiAgentEnvRunner,
    worker: EnvRunner | MultiAgentEnvRunner,
    base_env: VectorEnv | list[MultiAgentEnv],
    env: VectorEnv | MultiAgentEnv,
    env_index: int,
    policies: Mapping[str, Policy],
    rl_module: Any,
) -> None:
    """A sub-environment stepped; ``episode`` holds the latest observation, action, reward and info."""


@hookspec
def on_episode_end(
    episode: Episode | MultiAgentEpisode,
    env_runner: EnvRunner | MultiAgentEnvRunner,
    worker: EnvRunner | MultiAgentEnvRunner,
    base_env: VectorEnv | list[MultiAgentEnv],
    env: VectorEnv | MultiAgentEnv,
    env_index: int,
    policies: Mapping[str, Policy],
    rl_module: Any,
) -> None:
    """An episode finished, before its sub-environment resets; ``episode`` is complete."""


@hookspec
def on_sample_end(
    env_runner: EnvRunner | MultiAgentEnvRunner, worker: EnvRunner | MultiAgentEnvRunner, samples: MultiAgentBatch
) -> None:
    """An env runner finished one ``sample()`` call (``samples`` is a MultiAgentBatch)."""


@hookspec
def on_postprocess_trajectory(
    env_runner: EnvRunner | MultiAgentEnvRunner,
    worker: EnvRunner | MultiAgentEnvRunner,
    episode: Episode | MultiAgentEpisode,
    agent_id: Any,
    policy_id: str,
    policy: Policy,
    policies: Mapping[str, Policy],
    postprocessed_batch: SampleBatch,
    original_batches: dict[Any, tuple[Any, ...]],
) -> None:
    """A policy postprocessed one trajectory (advantages computed); the batch may be edited.

    A trajectory is one sub-environment's rows of a sample call (in a multi-agent
    run, one agent's in one sub-environment); ``agent_id`` is None in a single-agent
    run. corral postprocesses a sub-environment's whole fragment at once, where
    RLlib cuts it at episode ends, so the batch may hold the end of one episode
    and the start of the next; ``episode`` is the one its last row belongs to.
    A trajectory without any transition (only reset rows) has no hook call.
    """


@hookspec
def on_learn_on_batch(policy: Policy, train_batch: SampleBatch, result: dict[str, Any]) -> None:
    """A policy is about to learn on ``train_batch``; ``result`` may be extended with stats."""


@hookspec
def on_train_result(algorithm: Algorithm, result: dict[str, Any]) -> None:
    """``algorithm.train()`` built its result dict; the hook may add to it."""


@hookspec
def on_evaluate_start(algorithm: Algorithm) -> None:
    """Evaluation is about to start."""


@hookspec
def on_evaluate_end(algorithm: Algorithm, evaluation_metrics: dict[str, Any]) -> None:
    """Evaluation ended; ``evaluation_metrics`` is what goes under ``result['evaluation']``."""


@hookspec
def on_env_runners_recreated(
    algorithm: Algorithm, env_runner_group: EnvRunnerGroup, env_runner_indices: list[int], is_evaluation: bool
) -> None:
    """Remote env runners that had failed were started anew (``recreate_failed_env_runners``); they hold the latest weights."""


@hookspec
def on_workers_recreated(algorithm: Algorithm, worker_set: EnvRunnerGroup, worker_ids: list[int], is_evaluation: bool) -> None:
    """RLlib's older name of :func:`on_env_runners_recreated`, with its older argument names; called with it."""


@hookspec
def on_checkpoint_loaded(algorithm: Algorithm) -> None:
    """The algorithm's state was restored from a checkpoint."""


@hookspec
def on_algorithm_stop(algorithm: Algorithm) -> None:
    """The algorithm is stopping (``stop()``, once): close what the hook opened for the run, such as a logger's run."""


HOOK_ARGUMENTS: dict[str, str] = {
    "algorithm": "the Algorithm being trained",
    "env_runner": "the EnvRunner (or MultiAgentEnvRunner) that is sampling",
    "worker": "the same EnvRunner, under RLlib's older name",
    "env": "the vector environment the runner created (a multi-agent runner: each sub-environment in turn; "
    "in the episode hooks, the one the episode runs in)",
    "sub_environment": "the sub-environment as the user made it, without corral's wrappers (a natively vectorised "
    "env: the vector env)",
    "env_context": "the EnvContext (env_config plus worker_index, num_workers, vector_index) the env was made with",
    "episode": "the Episode (a MultiAgentEpisode in a multi-agent run: agent_rewards, policy_for(agent_id)): "
    "observations, actions, rewards, infos so far, plus user_data and custom_metrics",
    "base_env": "the runner's vector environment (a multi-agent runner's: its list of sub-environments)",
    "env_index": "which sub-environment of the vector the episode runs in (or the one made)",
    "policies": "the env runner's policies by policy id (its policy map)",
    "rl_module": "the model that acts (RLlib's RLModule): the policy's model in a single-agent run, else a mapping "
    "of policy id to model",
    "samples": "the MultiAgentBatch the sample() call returns",
    "agent_id": "the agent whose trajectory it is (multi-agent runs; None in a single-agent run)",
    "policy_id": "the id of the policy whose fragment it is",
    "policy": "the Policy",
    "postprocessed_batch": "the SampleBatch after postprocessing, editable in place",
    "original_batches": "the trajectories of the sample call before postprocessing, of every agent in the same "
    "sub-environment: agent_id -> (policy_id, policy, SampleBatch of its transitions); (policy, SampleBatch) with "
    "enable_connectors=False, as RLlib's older sampler gave them",
    "train_batch": "the SampleBatch the policy is about to learn on",
    "result": "the dict of results, extendable in place",
    "evaluation_metrics": "the evaluation results, stored under result['evaluation']",
    "env_runner_group": "the EnvRunnerGroup whose runners were started anew (algo.env_runner_group, or the evaluation one)",
    "worker_set": "the same EnvRunnerGroup, under RLlib's older name",
    "env_runner_indices": "the worker indexes (1..num_env_runners) of the runners started anew",
    "worker_ids": "the same indexes, under RLlib's older name",
    "is_evaluation": "whether the runners are evaluation runners",
}
"""Every hook argument and what it holds (the reference docs are generated from it)."""

NOT_PASSED: dict[str, str] = {
    "metrics_logger": "corral has no MetricsLogger: record a number per episode in episode.custom_metrics (its mean, "
    "min and max reach result['custom_metrics']), or add to the result in on_train_result",
    "prev_episode_chunks": "episode: corral's episode object is the whole episode, not a chunk of it",
}
"""Arguments RLlib documents that corral does not pass, and what to use instead (a callback requiring one is refused)"""

NOT_CALLED: dict[str, str] = {
    "on_trainer_init": "on_algorithm_init(algorithm=...), RLlib's later name for it",
    "on_episode_created": "on_episode_start: corral's sub-environments reset inside the vector env's step, so it has "
    "no moment between an episode's creation and its reset",
    "on_evaluate_offline_start": "on_evaluate_start: corral has no offline evaluation runners",
    "on_evaluate_offline_end": "on_evaluate_end: corral has no offline evaluation runners",
    "on_offline_eval_runners_recreated": "on_env_runners_recreated, for the runners corral has (it has no offline "
    "evaluation runners)",
}
"""RLlib's hooks that corral never calls, and what to use instead (a callback defining one is refused at build)"""

HOOK_NAMES = tuple(name for name, obj in list(globals().items()) if name.startswith("on_") and callable(obj))

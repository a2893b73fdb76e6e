"""The training lifecycle hooks, as pluggy hookspecs. Specs only; no logic.

Every argument is a keyword, and an implementation may declare any subset of
them, so adding an argument here never breaks an existing callback. Names
follow RLlib's callbacks. ``worker`` is passed beside ``env_runner`` (the same
object), and episode hooks get ``base_env`` (the runner's vector env), for
callbacks written against RLlib's older API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # the types the hooks receive; at run time nothing is imported
    from gymnasium.vector import VectorEnv

    from corral.core.contracts.algorithm import Algorithm
    from corral.core.contracts.policy import Policy
    from corral.core.environments.envs import EnvContext
    from corral.core.environments.multi_agent_env import MultiAgentEnv
    from corral.core.sampling.env_runner import EnvRunner, Episode
    from corral.core.sampling.multi_agent_env_runner import MultiAgentEnvRunner, MultiAgentEpisode
    from corral.core.sampling.sample_batch import MultiAgentBatch, SampleBatch

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
def on_episode_start(
    episode: Episode | MultiAgentEpisode,
    env_runner: EnvRunner | MultiAgentEnvRunner,
    worker: EnvRunner | MultiAgentEnvRunner,
    base_env: VectorEnv | MultiAgentEnv,
    env_index: int,
    policies: Mapping[str, Policy],
) -> None:
    """A sub-environment was reset and a new episode begins (``episode`` has its first observation)."""


@hookspec
def on_episode_step(
    episode: Episode | MultiAgentEpisode,
    env_runner: EnvRunner | MultiAgentEnvRunner,
    worker: EnvRunner | MultiAgentEnvRunner,
    base_env: VectorEnv | MultiAgentEnv,
    env_index: int,
    policies: Mapping[str, Policy],
) -> None:
    """A sub-environment stepped; ``episode`` holds the latest observation, action, reward and info."""


@hookspec
def on_episode_end(
    episode: Episode | MultiAgentEpisode,
    env_runner: EnvRunner | MultiAgentEnvRunner,
    worker: EnvRunner | MultiAgentEnvRunner,
    base_env: VectorEnv | MultiAgentEnv,
    env_index: int,
    policies: Mapping[str, Policy],
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
    agent_id: Any,
    policy_id: str,
    policy: Policy,
    postprocessed_batch: SampleBatch,
) -> None:
    """A policy postprocessed a fragment of samples (advantages computed); the batch may be edited.

    In a multi-agent run the fragment is one agent's (``agent_id``); in a
    single-agent run it holds every sub-environment's and ``agent_id`` is None.
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
def on_checkpoint_loaded(algorithm: Algorithm) -> None:
    """The algorithm's state was restored from a checkpoint."""


@hookspec
def on_algorithm_stop(algorithm: Algorithm) -> None:
    """The algorithm is stopping (``stop()``, once): close what the hook opened for the run, such as a logger's run."""


HOOK_ARGUMENTS: dict[str, str] = {
    "algorithm": "the Algorithm being trained",
    "env_runner": "the EnvRunner (or MultiAgentEnvRunner) that is sampling",
    "worker": "the same EnvRunner, under RLlib's older name",
    "env": "the vector environment the runner created (a multi-agent runner: each sub-environment in turn)",
    "env_context": "the EnvContext (env_config plus worker_index, num_workers, vector_index) the env was made with",
    "episode": "the Episode (a MultiAgentEpisode in a multi-agent run: agent_rewards, policy_for(agent_id)): "
    "observations, actions, rewards, infos so far, plus user_data and custom_metrics",
    "base_env": "the runner's vector environment (a multi-agent runner's: its list of sub-environments)",
    "env_index": "which sub-environment of the vector the episode runs in",
    "policies": "the policies by policy id",
    "samples": "the MultiAgentBatch the sample() call returns",
    "agent_id": "the agent whose trajectory it is (multi-agent runs; None in a single-agent run)",
    "policy_id": "the id of the policy whose fragment it is",
    "policy": "the Policy",
    "postprocessed_batch": "the SampleBatch after postprocessing, editable in place",
    "train_batch": "the SampleBatch the policy is about to learn on",
    "result": "the dict of results, extendable in place",
    "evaluation_metrics": "the evaluation results, stored under result['evaluation']",
}
"""Every hook argument and what it holds (the reference docs are generated from it)."""

HOOK_NAMES = tuple(name for name, obj in list(globals().items()) if name.startswith("on_") and callable(obj))

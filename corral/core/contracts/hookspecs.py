"""The training lifecycle hooks, as pluggy hookspecs. Specs only; no logic.

Every argument is a keyword, and an implementation may declare any subset of
them, so adding an argument here never breaks an existing callback. Names
follow RLlib's callbacks. ``worker`` is passed beside ``env_runner`` (the same
object), and episode hooks get ``base_env`` (the runner's vector env), for
callbacks written against RLlib's older API.
"""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "corral"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def on_algorithm_init(algorithm: Any) -> None:
    """The algorithm finished building (env runners, policies, loggers exist)."""


@hookspec
def on_environment_created(env_runner: Any, worker: Any, env: Any, env_context: Any) -> None:
    """An env runner created its vector environment."""


@hookspec
def on_episode_start(episode: Any, env_runner: Any, worker: Any, base_env: Any, env_index: int, policies: Any) -> None:
    """A sub-environment was reset and a new episode begins (``episode`` has its first observation)."""


@hookspec
def on_episode_step(episode: Any, env_runner: Any, worker: Any, base_env: Any, env_index: int, policies: Any) -> None:
    """A sub-environment stepped; ``episode`` holds the latest observation, action, reward and info."""


@hookspec
def on_episode_end(episode: Any, env_runner: Any, worker: Any, base_env: Any, env_index: int, policies: Any) -> None:
    """An episode finished, before its sub-environment resets; ``episode`` is complete."""


@hookspec
def on_sample_end(env_runner: Any, worker: Any, samples: Any) -> None:
    """An env runner finished one ``sample()`` call (``samples`` is a MultiAgentBatch)."""


@hookspec
def on_postprocess_trajectory(env_runner: Any, worker: Any, policy_id: str, policy: Any, postprocessed_batch: Any) -> None:
    """A policy postprocessed its fragment of samples (advantages computed); the batch may be edited."""


@hookspec
def on_learn_on_batch(policy: Any, train_batch: Any, result: dict) -> None:
    """A policy is about to learn on ``train_batch``; ``result`` may be extended with stats."""


@hookspec
def on_train_result(algorithm: Any, result: dict) -> None:
    """``algorithm.train()`` built its result dict; the hook may add to it."""


@hookspec
def on_evaluate_start(algorithm: Any) -> None:
    """Evaluation is about to start."""


@hookspec
def on_evaluate_end(algorithm: Any, evaluation_metrics: dict) -> None:
    """Evaluation ended; ``evaluation_metrics`` is what goes under ``result['evaluation']``."""


@hookspec
def on_checkpoint_loaded(algorithm: Any) -> None:
    """The algorithm's state was restored from a checkpoint."""


HOOK_ARGUMENTS: dict[str, str] = {
    "algorithm": "the Algorithm being trained",
    "env_runner": "the EnvRunner that is sampling",
    "worker": "the same EnvRunner, under RLlib's older name",
    "env": "the vector environment the runner created",
    "env_context": "the EnvContext (env_config plus worker_index, num_workers, vector_index) the env was made with",
    "episode": "the Episode: observations, actions, rewards, infos so far, plus user_data and custom_metrics",
    "base_env": "the runner's vector environment",
    "env_index": "which sub-environment of the vector the episode runs in",
    "policies": "the policies by policy id",
    "samples": "the MultiAgentBatch the sample() call returns",
    "policy_id": "the id of the policy whose fragment it is",
    "policy": "the Policy",
    "postprocessed_batch": "the SampleBatch after postprocessing, editable in place",
    "train_batch": "the SampleBatch the policy is about to learn on",
    "result": "the dict of results, extendable in place",
    "evaluation_metrics": "the evaluation results, stored under result['evaluation']",
}
"""Every hook argument and what it holds (the reference docs are generated from it)."""

HOOK_NAMES = tuple(name for name, obj in list(globals().items()) if name.startswith("on_") and callable(obj))

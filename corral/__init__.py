"""corral: reinforcement learning with a small core and algorithms as plugins.

This module is the public face and holds re-exports only. They are resolved on
first access (PEP 562), so ``import corral`` stays light and ``corral list``
never imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import corral.errors as errors
from corral._lazy import alias_moved_modules, lazy_exports
from corral._version import __version__

if TYPE_CHECKING:  # the same names, for type checkers (at run time they resolve on first access)
    from corral.core.common.sample_batch import (
        DEFAULT_POLICY_ID as DEFAULT_POLICY_ID,
        MultiAgentBatch as MultiAgentBatch,
        SampleBatch as SampleBatch,
    )
    from corral.core.contracts.callbacks import (
        Callbacks as Callbacks,
        DefaultCallbacks as DefaultCallbacks,
        MultiCallbacks as MultiCallbacks,
    )
    from corral.core.contracts.config import AlgorithmConfig as AlgorithmConfig
    from corral.core.contracts.hookspecs import hookimpl as hookimpl
    from corral.core.contracts.options.input_names import register_input as register_input
    from corral.core.contracts.policy_spec import PolicySpec as PolicySpec
    from corral.core.environments.envs import EnvContext as EnvContext, register_env as register_env
    from corral.core.environments.external_env import ExternalEnv as ExternalEnv
    from corral.core.environments.external_multi_agent_env import ExternalMultiAgentEnv as ExternalMultiAgentEnv
    from corral.core.environments.multi_agent_env import MultiAgentEnv as MultiAgentEnv, make_multi_agent as make_multi_agent
    from corral.core.environments.task_settable_env import TaskSettableEnv as TaskSettableEnv
    from corral.core.learning.exploration import Exploration as Exploration
    from corral.core.learning.policy import Policy as Policy
    from corral.core.learning.random_policy import RandomPolicy as RandomPolicy
    from corral.core.sampling.external.io_context import IOContext as IOContext
    from corral.core.training.algorithm import Algorithm as Algorithm
    from corral.errors import (
        CheckpointError as CheckpointError,
        ConfigError as ConfigError,
        CorralError as CorralError,
        EnvError as EnvError,
        EnvRunnerError as EnvRunnerError,
        LearnerError as LearnerError,
        ObservationError as ObservationError,
        PluginLoadError as PluginLoadError,
        TrainingError as TrainingError,
        UnknownAlgorithmError as UnknownAlgorithmError,
        UnknownPluginError as UnknownPluginError,
    )
    from corral.integrations.pettingzoo import (
        ParallelPettingZooEnv as ParallelPettingZooEnv,
        PettingZooEnv as PettingZooEnv,
    )
    from corral.integrations.serving.policy_client import PolicyClient as PolicyClient
    from corral.integrations.serving.policy_server_input import PolicyServerInput as PolicyServerInput
    from corral.registry import (
        get_algorithm as get_algorithm,
        get_config as get_config,
        get_estimator as get_estimator,
        get_exploration as get_exploration,
        list_algorithms as list_algorithms,
        list_estimators as list_estimators,
        list_explorations as list_explorations,
        register_algorithm as register_algorithm,
        register_estimator as register_estimator,
        register_exploration as register_exploration,
    )

_EXPORTS = {
    **dict.fromkeys(errors.__all__, "corral.errors"),
    # registry
    "list_algorithms": "corral.registry",
    "get_algorithm": "corral.registry",
    "get_config": "corral.registry",
    "register_algorithm": "corral.registry",
    "list_explorations": "corral.registry",
    "get_exploration": "corral.registry",
    "register_exploration": "corral.registry",
    "list_estimators": "corral.registry",
    "get_estimator": "corral.registry",
    "register_estimator": "corral.registry",
    "hookimpl": "corral.core.contracts.hookspecs",
    # core contracts
    "Algorithm": "corral.core.training.algorithm",
    "AlgorithmConfig": "corral.core.contracts.config",
    "Policy": "corral.core.learning.policy",
    "Exploration": "corral.core.learning.exploration",
    "Callbacks": "corral.core.contracts.callbacks",
    "DefaultCallbacks": "corral.core.contracts.callbacks",
    "MultiCallbacks": "corral.core.contracts.callbacks",
    "SampleBatch": "corral.core.common.sample_batch",
    "MultiAgentBatch": "corral.core.common.sample_batch",
    "DEFAULT_POLICY_ID": "corral.core.common.sample_batch",
    "register_env": "corral.core.environments.envs",
    "register_input": "corral.core.contracts.options.input_names",
    "MultiAgentEnv": "corral.core.environments.multi_agent_env",
    "ExternalEnv": "corral.core.environments.external_env",
    "ExternalMultiAgentEnv": "corral.core.environments.external_multi_agent_env",
    "IOContext": "corral.core.sampling.external.io_context",
    "PolicyServerInput": "corral.integrations.serving.policy_server_input",
    "PolicyClient": "corral.integrations.serving.policy_client",
    "TaskSettableEnv": "corral.core.environments.task_settable_env",
    "make_multi_agent": "corral.core.environments.multi_agent_env",
    "PolicySpec": "corral.core.contracts.policy_spec",
    "RandomPolicy": "corral.core.learning.random_policy",
    "PettingZooEnv": "corral.integrations.pettingzoo",
    "ParallelPettingZooEnv": "corral.integrations.pettingzoo",
    "EnvContext": "corral.core.environments.envs",
}

__all__ = ["__version__", *_EXPORTS]


__getattr__, __dir__ = lazy_exports("corral", globals(), _EXPORTS)

# modules of the command line that moved into its package (main until the split)
alias_moved_modules({"corral.cli_progress": "corral.cli.progress", "corral.cli_stop": "corral.cli.stop"})

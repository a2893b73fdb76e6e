"""The core every algorithm builds on; plugins import from here.

Eight rooms, each with one job (its ``__init__`` says which), listed from the
bottom up: each imports only the rooms before it.

- ``common``: the shared types the others read (batches, spaces, import paths, codecs);
- ``contracts``: what a user declares and a plugin extends (``AlgorithmConfig``,
  ``ModelConfig``, ``PolicySpec``, RLlib's spellings, callbacks and hooks, and
  the seams integrations answer);
- ``environments``: making environments, checking their steps, their spaces and state;
- ``persistence``: checkpoints, safe loading, result files and policy export;
- ``networks``: models and the action distributions over their outputs;
- ``learning``: ``Policy``, explorations, filters, optimizers, targets, replay;
- ``sampling``: env runners turning a policy and its environments into sample batches;
- ``training``: ``Algorithm``, the loop that composes them, and the off-policy loop.

Beside them, modules that serve all the rooms and import none: ``seeding`` (every
generator derived from one seed), ``results`` (the keys and numbers of a
result), and what the machine gives a run: ``memory`` (sizes checked before
allocation), ``threads`` (torch's thread count) and ``devices`` (where
policies compute). This module re-exports the public
names, resolved on first access so that importing the registry or the errors
(``corral list``) does not import torch; modules that moved into the rooms, or out of
the core into ``corral.integrations``, stay importable under their old paths
(``corral.core.policy``), which checkpoints of corral 0.1 record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import corral.errors as errors
from corral._lazy import alias_moved_modules, lazy_exports

if TYPE_CHECKING:  # the same names, for type checkers (at run time they resolve on first access)
    from corral.core.common.restored import restored_count as restored_count, restored_float as restored_float
    from corral.core.common.sample_batch import (
        DEFAULT_POLICY_ID as DEFAULT_POLICY_ID,
        Columns as Columns,
        MultiAgentBatch as MultiAgentBatch,
        SampleBatch as SampleBatch,
    )
    from corral.core.contracts.actor_critic import ActorCriticConfig as ActorCriticConfig, GAEConfig as GAEConfig
    from corral.core.contracts.callbacks import (
        Callbacks as Callbacks,
        DefaultCallbacks as DefaultCallbacks,
        MultiCallbacks as MultiCallbacks,
    )
    from corral.core.contracts.config import AlgorithmConfig as AlgorithmConfig, ModelConfig as ModelConfig, option as option
    from corral.core.contracts.hookspecs import hookimpl as hookimpl
    from corral.core.contracts.options.input_names import register_input as register_input
    from corral.core.contracts.policy_spec import (
        MultiAgentRLModuleSpec as MultiAgentRLModuleSpec,
        MultiRLModuleSpec as MultiRLModuleSpec,
        PolicySpec as PolicySpec,
        RLModuleSpec as RLModuleSpec,
        SingleAgentRLModuleSpec as SingleAgentRLModuleSpec,
    )
    from corral.core.environments.envs import EnvContext as EnvContext, register_env as register_env
    from corral.core.environments.external_env import ExternalEnv as ExternalEnv
    from corral.core.environments.multi_agent_env import MultiAgentEnv as MultiAgentEnv, make_multi_agent as make_multi_agent
    from corral.core.environments.task_settable_env import TaskSettableEnv as TaskSettableEnv
    from corral.core.learning.exploration import Exploration as Exploration
    from corral.core.learning.filters import MeanStdFilter as MeanStdFilter
    from corral.core.learning.fused_adam import FusedAdam as FusedAdam
    from corral.core.learning.learners.learner import Learner as Learner, TorchLearner as TorchLearner
    from corral.core.learning.learners.learner_thread import LearnerThread as LearnerThread
    from corral.core.learning.nonfinite import saturate as saturate
    from corral.core.learning.off_policy import OffPolicyConfig as OffPolicyConfig, OffPolicyPolicy as OffPolicyPolicy
    from corral.core.learning.policies.heuristic_policies import (
        overrides_rllib_loss as overrides_rllib_loss,
        update_loss as update_loss,
    )
    from corral.core.learning.policies.optimizer_set import Optimizer as Optimizer, OptimizerSet as OptimizerSet
    from corral.core.learning.policies.target_networks import (
        TargetNetworkPolicy as TargetNetworkPolicy,
        update_target as update_target,
    )
    from corral.core.learning.policy import (
        POLICY_GRADIENT_COLUMNS as POLICY_GRADIENT_COLUMNS,
        ActorCriticPolicy as ActorCriticPolicy,
        Policy as Policy,
        adam as adam,
        build_optimizer as build_optimizer,
        joint_norm as joint_norm,
        standardize as standardize,
        to_floats as to_floats,
    )
    from corral.core.learning.postprocessing import (
        add_discounted_returns as add_discounted_returns,
        add_gae as add_gae,
        compute_gae as compute_gae,
        compute_nstep as compute_nstep,
    )
    from corral.core.learning.random_policy import RandomPolicy as RandomPolicy
    from corral.core.learning.replay.replay_buffers import (
        PrioritizedReplayBuffer as PrioritizedReplayBuffer,
        ReplayBuffer as ReplayBuffer,
    )
    from corral.core.learning.schedules import PiecewiseSchedule as PiecewiseSchedule, linear_schedule as linear_schedule
    from corral.core.learning.vtrace_targets import vtrace as vtrace
    from corral.core.networks.catalog import (
        FullyConnectedNetwork as FullyConnectedNetwork,
        ModelCatalog as ModelCatalog,
        TorchFC as TorchFC,
    )
    from corral.core.networks.custom_distribution import (
        TorchCategorical as TorchCategorical,
        TorchDiagGaussian as TorchDiagGaussian,
        TorchDistributionWrapper as TorchDistributionWrapper,
    )
    from corral.core.networks.custom_model import build_q_model as build_q_model
    from corral.core.networks.default_models import (
        ActorCriticModel as ActorCriticModel,
        Model as Model,
        QModel as QModel,
        build_encoder as build_encoder,
        build_model as build_model,
        mlp as mlp,
    )
    from corral.core.networks.distributions import (
        ActionDistribution as ActionDistribution,
        Categorical as Categorical,
        Deterministic as Deterministic,
        DiagGaussian as DiagGaussian,
        MultiCategorical as MultiCategorical,
        SquashedGaussian as SquashedGaussian,
    )
    from corral.core.networks.model_v2 import (
        RecurrentNetwork as RecurrentNetwork,
        TorchModelV2 as TorchModelV2,
        restore_original_dimensions as restore_original_dimensions,
    )
    from corral.core.networks.recurrent import LSTMModel as LSTMModel, RecurrentModel as RecurrentModel
    from corral.core.networks.rl_module import (
        RLModule as RLModule,
        RLModuleConfig as RLModuleConfig,
        TorchRLModule as TorchRLModule,
    )
    from corral.core.networks.torch_layers import SlimFC as SlimFC, normc_initializer as normc_initializer
    from corral.core.sampling.async_sampling import AsyncSampler as AsyncSampler
    from corral.core.sampling.env_runner import EnvRunner as EnvRunner, Episode as Episode
    from corral.core.sampling.external.io_context import IOContext as IOContext
    from corral.core.training.algorithm import Algorithm as Algorithm
    from corral.core.training.off_policy import OffPolicyAlgorithm as OffPolicyAlgorithm
    from corral.core.training.training_step_helpers import (
        multi_gpu_train_one_step as multi_gpu_train_one_step,
        standardize_fields as standardize_fields,
        synchronous_parallel_sample as synchronous_parallel_sample,
        train_one_step as train_one_step,
    )
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
    from corral.plugin_api import PLUGIN_API_VERSION as PLUGIN_API_VERSION

_EXPORTS = {
    "Algorithm": "corral.core.training.algorithm",
    "synchronous_parallel_sample": "corral.core.training.training_step_helpers",
    "standardize_fields": "corral.core.training.training_step_helpers",
    "train_one_step": "corral.core.training.training_step_helpers",
    "multi_gpu_train_one_step": "corral.core.training.training_step_helpers",
    "AlgorithmConfig": "corral.core.contracts.config",
    "ActorCriticConfig": "corral.core.contracts.actor_critic",
    "GAEConfig": "corral.core.contracts.actor_critic",
    "ModelConfig": "corral.core.contracts.config",
    "option": "corral.core.contracts.config",
    "Policy": "corral.core.learning.policy",
    "ActorCriticPolicy": "corral.core.learning.policy",
    "adam": "corral.core.learning.policy",
    "build_optimizer": "corral.core.learning.policy",
    "FusedAdam": "corral.core.learning.fused_adam",
    "Optimizer": "corral.core.learning.policies.optimizer_set",
    "OptimizerSet": "corral.core.learning.policies.optimizer_set",
    "Learner": "corral.core.learning.learners.learner",
    "TorchLearner": "corral.core.learning.learners.learner",
    "LearnerThread": "corral.core.learning.learners.learner_thread",
    "standardize": "corral.core.learning.policy",
    "to_floats": "corral.core.learning.policy",
    "joint_norm": "corral.core.learning.policy",
    "POLICY_GRADIENT_COLUMNS": "corral.core.learning.policy",
    "update_loss": "corral.core.learning.policies.heuristic_policies",
    "overrides_rllib_loss": "corral.core.learning.policies.heuristic_policies",
    "Model": "corral.core.networks.default_models",
    "ActorCriticModel": "corral.core.networks.default_models",
    "QModel": "corral.core.networks.default_models",
    "build_encoder": "corral.core.networks.default_models",
    "build_model": "corral.core.networks.default_models",
    "mlp": "corral.core.networks.default_models",
    "build_q_model": "corral.core.networks.custom_model",
    "ModelCatalog": "corral.core.networks.catalog",
    "FullyConnectedNetwork": "corral.core.networks.catalog",
    "TorchFC": "corral.core.networks.catalog",
    "TorchDistributionWrapper": "corral.core.networks.custom_distribution",
    "TorchCategorical": "corral.core.networks.custom_distribution",
    "TorchDiagGaussian": "corral.core.networks.custom_distribution",
    "TorchModelV2": "corral.core.networks.model_v2",
    "RecurrentNetwork": "corral.core.networks.model_v2",
    "RecurrentModel": "corral.core.networks.recurrent",
    "SlimFC": "corral.core.networks.torch_layers",
    "normc_initializer": "corral.core.networks.torch_layers",
    "LSTMModel": "corral.core.networks.recurrent",
    "TorchRLModule": "corral.core.networks.rl_module",
    "RLModule": "corral.core.networks.rl_module",
    "RLModuleConfig": "corral.core.networks.rl_module",
    "RLModuleSpec": "corral.core.contracts.policy_spec",
    "SingleAgentRLModuleSpec": "corral.core.contracts.policy_spec",
    "MultiRLModuleSpec": "corral.core.contracts.policy_spec",
    "MultiAgentRLModuleSpec": "corral.core.contracts.policy_spec",
    "restore_original_dimensions": "corral.core.networks.model_v2",
    "ActionDistribution": "corral.core.networks.distributions",
    "Categorical": "corral.core.networks.distributions",
    "MultiCategorical": "corral.core.networks.distributions",
    "DiagGaussian": "corral.core.networks.distributions",
    "Deterministic": "corral.core.networks.distributions",
    "SquashedGaussian": "corral.core.networks.distributions",
    "Exploration": "corral.core.learning.exploration",
    "Callbacks": "corral.core.contracts.callbacks",
    "DefaultCallbacks": "corral.core.contracts.callbacks",
    "MultiCallbacks": "corral.core.contracts.callbacks",
    "hookimpl": "corral.core.contracts.hookspecs",
    "SampleBatch": "corral.core.common.sample_batch",
    "MultiAgentBatch": "corral.core.common.sample_batch",
    "Columns": "corral.core.common.sample_batch",
    "DEFAULT_POLICY_ID": "corral.core.common.sample_batch",
    "EnvRunner": "corral.core.sampling.env_runner",
    "AsyncSampler": "corral.core.sampling.async_sampling",
    "Episode": "corral.core.sampling.env_runner",
    "EnvContext": "corral.core.environments.envs",
    "register_env": "corral.core.environments.envs",
    "register_input": "corral.core.contracts.options.input_names",
    "MultiAgentEnv": "corral.core.environments.multi_agent_env",
    "ExternalEnv": "corral.core.environments.external_env",
    "IOContext": "corral.core.sampling.external.io_context",
    "TaskSettableEnv": "corral.core.environments.task_settable_env",
    "make_multi_agent": "corral.core.environments.multi_agent_env",
    "PolicySpec": "corral.core.contracts.policy_spec",
    "RandomPolicy": "corral.core.learning.random_policy",
    "PettingZooEnv": "corral.integrations.pettingzoo",
    "ParallelPettingZooEnv": "corral.integrations.pettingzoo",
    "add_discounted_returns": "corral.core.learning.postprocessing",
    "add_gae": "corral.core.learning.postprocessing",
    "compute_gae": "corral.core.learning.postprocessing",
    "vtrace": "corral.core.learning.vtrace_targets",
    "PiecewiseSchedule": "corral.core.learning.schedules",
    "linear_schedule": "corral.core.learning.schedules",
    "MeanStdFilter": "corral.core.learning.filters",
    **dict.fromkeys(errors.__all__, "corral.errors"),
    "PLUGIN_API_VERSION": "corral.plugin_api",
    "OffPolicyConfig": "corral.core.learning.off_policy",
    "OffPolicyPolicy": "corral.core.learning.off_policy",
    "OffPolicyAlgorithm": "corral.core.training.off_policy",
    "update_target": "corral.core.learning.policies.target_networks",
    "TargetNetworkPolicy": "corral.core.learning.policies.target_networks",
    "compute_nstep": "corral.core.learning.postprocessing",
    "ReplayBuffer": "corral.core.learning.replay.replay_buffers",
    "restored_count": "corral.core.common.restored",
    "saturate": "corral.core.learning.nonfinite",
    "restored_float": "corral.core.common.restored",
    "PrioritizedReplayBuffer": "corral.core.learning.replay.replay_buffers",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports("corral.core", globals(), _EXPORTS)

# The modules of the flat core (corral 0.1, and main until the split), by the room each moved into.
_FLAT_CORE_ROOMS = {
    "contracts": ("algorithm", "config", "actor_critic", "policy", "callbacks", "hookspecs", "exploration"),
    "environments": ("envs", "env_state"),
    "sampling": ("env_runner", "env_runner_group", "remote_env_runner", "async_sampling", "filters", "metrics"),
    "learning": ("models", "distributions", "postprocessing", "vtrace_targets", "replay_buffers", "sum_tree",
                 "schedules", "nonfinite"),
    "training": ("off_policy",),  # its policy and config bases are in learning; this module re-exports them
    "persistence": ("checkpoints", "loggers", "safe_loading"),
    "common": ("sample_batch", "spaces", "state_codec"),
}  # fmt: skip
# The shared types that moved from their rooms down into the common room (main until the layering), by room.
_INTO_COMMON = {
    "sampling": ("sample_batch",),
    "environments": ("spaces",),
    "persistence": ("state_codec", "space_codec", "by_value"),
}
# What moved when the rooms were put in order (each imports only those below it), old room path: new.
_LAYERED = {
    "contracts.algorithm": "training.algorithm",
    "contracts.acting": "learning.acting",
    "contracts.policy": "learning.policy",
    "contracts.exploration": "learning.exploration",
    "contracts.random_policy": "learning.random_policy",
    "sampling.filters": "learning.filters",
    "learning.models": "networks.default_models",
    "learning.distributions": "networks.distributions",
    "learning.action_masking": "networks.action_masking",
    "learning.replay_buffers": "learning.replay.replay_buffers",
    "learning.sum_tree": "learning.replay.sum_tree",
}
# What left the core for corral/integrations/, plugged into its seams (issue 30): old path in the core, new in the integrations.
_OUT_OF_THE_CORE = {
    "environments.pettingzoo_envs": "pettingzoo",
    **{f"environments.{name}": name for name in ("atari", "old_gym", "rendering")},
    **{
        f"persistence.{name}": f"offline.{name}"
        for name in (
            "experience_reader",
            "experience_input",
            "experience_output",
            "input_files",
            "input_check",
            "input_columns",
            "ray_data_input",
        )
    },
    # a room that left whole: the package and each of its modules, so that both give the new module objects
    "estimation": "estimation",
    **{
        f"estimation.{name}": f"estimation.{name}"
        for name in ("estimator", "importance_sampling", "direct_method", "fitted_q", "offline_evaluation")
    },
}


def _collapsed(moves: dict[str, str]) -> dict[str, str]:
    """Each old path straight to where its module is now, through any later move of the path it moved to."""
    final = {}
    for old, new in moves.items():
        while new in moves:
            new = moves[new]
        final[old] = new
    return final


_MOVED_MODULES = _collapsed(
    {
        **{f"corral.core.{name}": f"corral.core.{room}.{name}" for room, names in _FLAT_CORE_ROOMS.items() for name in names},
        **{f"corral.core.{room}.{name}": f"corral.core.common.{name}" for room, names in _INTO_COMMON.items() for name in names},
        **{f"corral.core.{old}": f"corral.core.{new}" for old, new in _LAYERED.items()},
        **{f"corral.core.{old}": f"corral.integrations.{new}" for old, new in _OUT_OF_THE_CORE.items()},
        "corral.core.errors": "corral.errors",
        "corral.core.plugin_api": "corral.plugin_api",
    }
)
alias_moved_modules(_MOVED_MODULES)

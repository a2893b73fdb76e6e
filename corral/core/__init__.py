"""The contracts every algorithm builds on; plugins import from here.

Re-exports only, resolved on first access so that importing the registry or
the errors (``corral list``) does not import torch.
"""

from __future__ import annotations

import corral.errors as errors
from corral._lazy import lazy_exports

_EXPORTS = {
    "Algorithm": "corral.core.algorithm",
    "AlgorithmConfig": "corral.core.config",
    "ActorCriticConfig": "corral.core.actor_critic",
    "GAEConfig": "corral.core.actor_critic",
    "ModelConfig": "corral.core.config",
    "option": "corral.core.config",
    "Policy": "corral.core.policy",
    "ActorCriticPolicy": "corral.core.policy",
    "adam": "corral.core.policy",
    "standardize": "corral.core.policy",
    "to_floats": "corral.core.policy",
    "POLICY_GRADIENT_COLUMNS": "corral.core.policy",
    "Model": "corral.core.models",
    "ActorCriticModel": "corral.core.models",
    "QModel": "corral.core.models",
    "build_encoder": "corral.core.models",
    "build_model": "corral.core.models",
    "mlp": "corral.core.models",
    "ActionDistribution": "corral.core.distributions",
    "Categorical": "corral.core.distributions",
    "MultiCategorical": "corral.core.distributions",
    "DiagGaussian": "corral.core.distributions",
    "SquashedGaussian": "corral.core.distributions",
    "Exploration": "corral.core.exploration",
    "Callbacks": "corral.core.callbacks",
    "DefaultCallbacks": "corral.core.callbacks",
    "MultiCallbacks": "corral.core.callbacks",
    "hookimpl": "corral.core.hookspecs",
    "SampleBatch": "corral.core.sample_batch",
    "MultiAgentBatch": "corral.core.sample_batch",
    "DEFAULT_POLICY_ID": "corral.core.sample_batch",
    "EnvRunner": "corral.core.env_runner",
    "AsyncSampler": "corral.core.async_sampling",
    "Episode": "corral.core.env_runner",
    "EnvContext": "corral.core.envs",
    "register_env": "corral.core.envs",
    "compute_gae": "corral.core.postprocessing",
    "vtrace": "corral.core.vtrace_targets",
    "PiecewiseSchedule": "corral.core.schedules",
    "linear_schedule": "corral.core.schedules",
    "MeanStdFilter": "corral.core.filters",
    **dict.fromkeys(errors.__all__, "corral.errors"),
    "PLUGIN_API_VERSION": "corral.plugin_api",
    "OffPolicyConfig": "corral.core.off_policy",
    "OffPolicyPolicy": "corral.core.off_policy",
    "OffPolicyAlgorithm": "corral.core.off_policy",
    "update_target": "corral.core.off_policy",
    "compute_nstep": "corral.core.postprocessing",
    "ReplayBuffer": "corral.core.replay_buffers",
    "restored_count": "corral.core.checkpoints",
    "saturate": "corral.core.nonfinite",
    "restored_float": "corral.core.checkpoints",
    "PrioritizedReplayBuffer": "corral.core.replay_buffers",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports("corral.core", globals(), _EXPORTS)

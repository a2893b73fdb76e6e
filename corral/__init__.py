"""corral: reinforcement learning with a small core and algorithms as plugins.

This module is the public face and holds re-exports only. They are resolved on
first access (PEP 562), so ``import corral`` stays light and ``corral list``
never imports torch.
"""

from __future__ import annotations

import corral.errors as errors
from corral._lazy import lazy_exports
from corral._version import __version__

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
    "hookimpl": "corral.core.contracts.hookspecs",
    # core contracts
    "Algorithm": "corral.core.contracts.algorithm",
    "AlgorithmConfig": "corral.core.contracts.config",
    "Policy": "corral.core.contracts.policy",
    "Exploration": "corral.core.contracts.exploration",
    "Callbacks": "corral.core.contracts.callbacks",
    "DefaultCallbacks": "corral.core.contracts.callbacks",
    "MultiCallbacks": "corral.core.contracts.callbacks",
    "SampleBatch": "corral.core.sampling.sample_batch",
    "MultiAgentBatch": "corral.core.sampling.sample_batch",
    "DEFAULT_POLICY_ID": "corral.core.sampling.sample_batch",
    "register_env": "corral.core.sampling.envs",
    "EnvContext": "corral.core.sampling.envs",
}

__all__ = ["__version__", *_EXPORTS]


__getattr__, __dir__ = lazy_exports("corral", globals(), _EXPORTS)

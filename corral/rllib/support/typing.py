"""RLlib's type aliases and a few constants that scripts import beside them.

The aliases are what RLlib's are for a type checker (``ModelConfigDict`` is
``dict``); tensors are torch tensors or numpy arrays in corral.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from corral.core.contracts.options.model_config import ModelConfig

TensorType = np.ndarray | torch.Tensor
TensorStructType = TensorType | dict | tuple
AlgorithmConfigDict = dict
PartialAlgorithmConfigDict = dict
ModelConfigDict = dict
EnvConfigDict = dict
EnvType = Any | gym.Env
AgentID = Any
PolicyID = str
MultiAgentDict = dict[AgentID, Any]
ResultDict = dict
ModelWeights = dict
SampleBatchType = Any
"""a SampleBatch or a MultiAgentBatch"""
TaskType = Any
"""A task of a :class:`TaskSettableEnv`: whatever the env takes (an int, a dict, ...)"""

ENV_STATE = "state"
"""RLlib's key of a multi-agent env's global state in an observation dict"""

MODEL_DEFAULTS: dict[str, Any] = ModelConfig().model_dump()
"""The ``model`` dict's defaults (RLlib's ``MODEL_DEFAULTS``), as corral's ModelConfig has them"""

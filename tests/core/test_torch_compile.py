"""``framework(torch_compile_learner=..., torch_compile_worker=...)``: the models' forward passes through torch.compile.

The tests compile with dynamo's ``eager`` backend, which traces as every
backend does and runs the graph without generating code: fast, and the same
numbers as no compile at all.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from corral import ConfigError
from corral.core.networks.compiling import CompiledCall
from corral.plugins.dqn import DQNConfig
from corral.plugins.ppo import PPOConfig


def _ppo() -> PPOConfig:
    return (
        PPOConfig().environment("CartPole-v1").training(train_batch_size=256, minibatch_size=64, num_epochs=2).debugging(seed=0)
    )


def test_compiled_learner_and_worker_passes_learn_what_eager_ones_learn() -> None:
    eager = _ppo().build()
    compiled = (
        _ppo()
        .framework(
            torch_compile_learner=True,
            torch_compile_learner_dynamo_backend="eager",
            torch_compile_worker=True,
            torch_compile_worker_dynamo_backend="eager",
        )
        .build()
    )
    try:
        model = compiled.get_policy().model
        assert isinstance(model.__dict__["forward_train"], CompiledCall)
        assert isinstance(model.__dict__["forward_exploration"], CompiledCall)
        for algo in (eager, compiled):
            algo.train()
        before, after = eager.get_policy().get_weights(), compiled.get_policy().get_weights()
        assert max(float(np.abs(before[k] - after[k]).max()) for k in before) < 1e-5
    finally:
        eager.stop()
        compiled.stop()


def test_a_copy_of_a_compiled_model_runs_its_own_weights() -> None:
    config = DQNConfig().environment("CartPole-v1")
    algo = config.framework(torch_compile_learner=True, torch_compile_learner_dynamo_backend="eager").build()
    try:
        policy = algo.get_policy()
        target = policy.target_model  # a deep copy of the compiled model
        assert target.__dict__["forward_train"].module is target
        clone = copy.deepcopy(policy.model)
        assert clone.__dict__["forward_train"].module is clone
    finally:
        algo.stop()


def test_a_backend_torch_lacks_and_a_whole_update_are_refused_saying_what_is_there() -> None:
    with pytest.raises(ConfigError, match=r"'onnxrt' is not one this torch has: .*inductor"):
        _ppo().framework(torch_compile_worker=True, torch_compile_worker_dynamo_backend="onnxrt").build()
    with pytest.raises(ConfigError, match=r"torch_compile_learner_what_to_compile"):
        _ppo().framework(torch_compile_learner_what_to_compile="complete_update")
    config = _ppo().framework(torch_compile_learner=True)
    assert config.torch_compile_learner_dynamo_backend == "inductor"
    assert config.to_dict()["torch_compile_learner"] is True

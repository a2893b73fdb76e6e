"""Where policies live: the learner on ``num_gpus``, each remote env runner on its own ``num_gpus_per_env_runner``.

RLlib's ``_fake_gpus=True`` runs a GPU configuration on the CPU, so these run
everywhere; the ``gpu`` tests run the same paths on a CUDA device where there
is one (and are skipped, for that reason only, where there is none).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import corral
from corral import Algorithm, Policy
from corral.core.common.sample_batch import DEFAULT_POLICY_ID
from corral.errors import ConfigError

SMALL = {"train_batch_size": 128, "num_envs_per_env_runner": 2, "seed": 0, "log_to_tensorboard": False}
ON_POLICY = {"minibatch_size": 64, "num_epochs": 1}
OFF_POLICY = {"learning_starts": 0, "training_intensity": None, "min_sample_timesteps_per_iteration": 0}


def small(name: str = "PPO", **overrides: Any) -> Any:
    """A config of ``name`` on CartPole-v1 that trains an iteration in a moment."""
    config = corral.get_config(name).environment("CartPole-v1").update_from_dict(SMALL)
    config.update_from_dict({k: v for k, v in {**ON_POLICY, **OFF_POLICY}.items() if k in config})
    return config.update_from_dict(overrides)


def devices_of(algo: Any) -> list[str]:
    """The device of the default policy in every env runner: the local one (the learner's copy) first."""
    return algo.env_runner_group.foreach_env_runner(lambda runner: str(runner.policies[DEFAULT_POLICY_ID].device))


def weights_everywhere_match(algo: Any) -> bool:
    """Whether every remote runner acts with the learner's weights (after a broadcast)."""
    learner = algo.get_policy().get_weights()
    remote = algo.env_runner_group.foreach_env_runner(
        lambda runner: runner.policies[DEFAULT_POLICY_ID].get_weights(), local_env_runner=False
    )
    return all(set(w) == set(learner) and all(np.array_equal(w[k], learner[k]) for k in learner) for w in remote)


# ---------------------------------------------------------------------- #
# everywhere: the checks, and the GPU configuration on fake GPUs
# ---------------------------------------------------------------------- #
@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch sees no CUDA device in this test, as on a machine without one (where it changes nothing)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.mark.usefixtures("no_cuda")
def test_num_gpus_without_cuda_is_refused_naming_both_ways_out() -> None:
    with pytest.raises(ConfigError, match=r"num_gpus=1 but torch sees 0 CUDA devices.*num_gpus=0.*_fake_gpus=True"):
        small().resources(num_gpus=1).build()


def test_fake_gpus_trains_a_gpu_configuration_on_the_cpu(make_algo) -> None:
    config = small().resources(num_gpus=1, _fake_gpus=True)
    assert config["_fake_gpus"] is True and config.to_dict()["fake_gpus"] is True
    algo = make_algo(config)
    assert algo.get_policy().device == torch.device("cpu")
    assert algo.train()["num_env_steps_trained"] > 0
    assert corral.get_config("PPO").update_from_dict({"_fake_gpus": True}).fake_gpus  # RLlib's config-dict spelling


def test_more_than_one_gpu_says_the_learner_trains_on_one_device(make_algo, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="corral"):
        make_algo(small().resources(num_gpus=2, _fake_gpus=True))
    assert "num_gpus=2 (fake GPUs: the CPU): the main process learns on one device" in caplog.text
    assert "learners(num_learners=N, num_gpus_per_learner=1)" in caplog.text


def test_local_gpu_idx_picks_the_main_process_s_cuda_device(monkeypatch) -> None:
    from corral.core.devices import learner_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert learner_device(small().resources(num_gpus=1).learners(local_gpu_idx=1)) == torch.device("cuda", 1)
    with pytest.raises(ConfigError, match=r"local_gpu_idx=2\) but torch sees 2 CUDA devices here \(0 to 1\)"):
        learner_device(small().resources(num_gpus=1).learners(local_gpu_idx=2))


@pytest.mark.usefixtures("ray_on_two_cpus")
def test_fake_gpus_start_remote_runners_that_reserve_no_gpu_and_act_on_the_cpu(make_algo) -> None:
    # the Ray instance has no GPU: an actor that asked for one would never start
    config = small(num_env_runners=1, num_gpus_per_env_runner=1).resources(num_gpus=1, _fake_gpus=True)
    algo = make_algo(config)
    assert algo.train()["num_healthy_env_runners"] == 1
    assert devices_of(algo) == ["cpu", "cpu"]
    algo.env_runner_group.sample()
    assert weights_everywhere_match(algo)


def test_a_tune_trial_with_fake_gpus_reserves_no_gpu() -> None:
    from corral.tune import trainable

    asked = {"num_gpus": 1, "num_env_runners": 1, "num_gpus_per_env_runner": 0.5}
    real = trainable("PPO").default_resource_request(asked).bundles
    fake = trainable("PPO").default_resource_request({**asked, "_fake_gpus": True}).bundles
    assert [bundle.get("GPU", 0) for bundle in real] == [1, 0.5]
    assert [bundle.get("GPU", 0) for bundle in fake] == [0, 0]


@pytest.mark.usefixtures("no_cuda")
def test_a_checkpoint_trained_on_a_gpu_restores_on_a_machine_without_one(make_algo, restored_algos, tmp_path, caplog) -> None:
    algo = make_algo(small().resources(num_gpus=1, _fake_gpus=True))
    algo.train()
    path = Path(algo.save(tmp_path / "ckpt"))
    config_file = path / "config.json"
    # a checkpoint written on a GPU machine holds num_gpus=1 and no fake GPUs
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "fake_gpus": False}))
    with caplog.at_level(logging.WARNING, logger="corral"):
        restored = Algorithm.from_checkpoint(path)
        restored_algos.append(restored)
        policy = Policy.from_checkpoint(path)
    assert caplog.text.count("trained with num_gpus=1; torch sees no CUDA device here, so it is restored on the CPU") == 2
    assert restored.config.num_gpus == 0 and restored.get_policy().device == policy.device == torch.device("cpu")
    weights = algo.get_policy().get_weights()
    assert all(np.array_equal(policy.get_weights()[k], weights[k]) for k in weights)
    restored.train()
    with pytest.raises(ConfigError, match="num_gpus=1 but torch sees 0 CUDA devices"):  # asked for, so not changed
        Algorithm.from_checkpoint(path, config_overrides={"num_gpus": 1})


# ---------------------------------------------------------------------- #
# on a CUDA device
# ---------------------------------------------------------------------- #
ONLINE = ["A2C", "DQN", "IMPALA", "PG", "PPO", "REINFORCE", "SAC", "SimpleQ"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ONLINE)
def test_every_algorithm_learns_on_cuda_and_its_checkpoint_restores_on_the_cpu(name, make_algo, restored_algos, tmp_path) -> None:
    algo = make_algo(small(name).resources(num_gpus=1))
    policy = algo.get_policy()
    assert policy.device.type == "cuda" and all(p.device.type == "cuda" for p in policy.model.parameters())
    for _ in range(2):
        result = algo.train()
    assert result["num_env_steps_trained"] > 0
    assert all(isinstance(w, np.ndarray) for w in policy.get_weights().values())
    path = Path(algo.save(tmp_path / "ckpt"))
    on_cpu = Algorithm.from_checkpoint(path, config_overrides={"num_gpus": 0})
    restored_algos.append(on_cpu)
    assert on_cpu.get_policy().device == torch.device("cpu")
    weights = policy.get_weights()
    assert all(np.array_equal(on_cpu.get_policy().get_weights()[k], weights[k]) for k in weights)
    on_cpu.train()


@pytest.mark.gpu
@pytest.mark.usefixtures("ray_on_two_cpus")
@pytest.mark.parametrize(("runner_gpus", "runner_device"), [(0, "cpu"), (0.5, "cuda")])
def test_remote_runners_act_on_the_device_their_own_actor_reserved(runner_gpus, runner_device, make_algo) -> None:
    config = small(num_env_runners=1, num_gpus_per_env_runner=runner_gpus).resources(num_gpus=1)
    config.evaluation(evaluation_num_env_runners=1, evaluation_duration=2)  # an evaluation actor alike
    algo = make_algo(config)
    assert devices_of(algo) == ["cuda", runner_device]
    algo.train()
    algo.env_runner_group.sample()
    assert weights_everywhere_match(algo)
    assert algo.evaluate()["episodes_this_iter"] == 2

"""The conformance kit passes corral's own algorithms and catches the defects it exists to catch."""

from __future__ import annotations

import tempfile

import gymnasium as gym
import pytest
import torch

import corral
import corral.registry
from corral.plugins.dqn import DQN
from corral.plugins.ppo import PPO
from corral.plugins.ppo.policy import PPOPolicy
from corral.testing import CHECKS, ConformanceError, Subject, check_algorithm

# Overrides that keep one train() of each built-in algorithm well under a second.
QUICK = {
    "PPO": {"train_batch_size": 128, "minibatch_size": 64, "num_epochs": 1, "num_envs_per_env_runner": 2},
    "A2C": {"num_envs_per_env_runner": 2, "rollout_fragment_length": 16},
    "PG": {"num_envs_per_env_runner": 2, "train_batch_size": 32},
    "A3C": {"num_env_runners": 0, "num_envs_per_env_runner": 2, "min_time_s_per_iteration": 0},
    "ES": {"num_env_runners": 0, "noise_size": 100_000, "episodes_per_batch": 4, "train_batch_size": 40},
    "ARS": {"num_env_runners": 0, "noise_size": 100_000, "num_rollouts": 4},
    "DQN": {
        "learning_starts": 32,
        "train_batch_size": 16,
        "num_envs_per_env_runner": 2,
        "min_sample_timesteps_per_iteration": 64,
    },
    "APEX": {
        "num_env_runners": 0,
        "num_replay_buffer_shards": 2,
        "replay_buffer_config": {"capacity": 1000},
        "learning_starts": 32,
        "train_batch_size": 16,
        "min_time_s_per_iteration": 0,
        "min_sample_timesteps_per_iteration": 64,
        "model": {"fcnet_hiddens": [16]},
        "hiddens": [16],
    },
    "IMPALA": {"train_batch_size": 64, "rollout_fragment_length": 16, "num_envs_per_env_runner": 4},
    "SAC": {
        "learning_starts": 32,
        "train_batch_size": 16,
        "training_intensity": 16,
        "min_sample_timesteps_per_iteration": 64,
        "model": {"fcnet_hiddens": [16, 16]},
    },
}
QUICK["DDPG"] = QUICK["TD3"] = {
    "learning_starts": 32,
    "train_batch_size": 16,
    "min_sample_timesteps_per_iteration": 64,
    "actor_hiddens": [16, 16],
    "critic_hiddens": [16, 16],
}
PPO_QUICK = QUICK["PPO"]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", list(QUICK))
def test_every_built_in_algorithm_passes_every_check(name, check, tmp_path) -> None:
    check(Subject(name, QUICK[name], workdir=tmp_path))


@pytest.fixture
def register():
    """Register defective algorithms in-process; forget them afterwards."""
    yield corral.register_algorithm
    corral.registry.refresh()


class _ForgetfulPolicy(PPOPolicy):
    def set_state(self, state):  # drops everything a checkpoint holds
        pass


class ForgetfulPPO(PPO):
    """Restores nothing from a checkpoint."""

    policy_class = _ForgetfulPolicy


class UnseededPPO(PPO):
    """Re-initialises its weights from the wall clock, ignoring the seed."""

    def setup(self) -> None:
        generator = torch.Generator().manual_seed(torch.seed())
        with torch.no_grad():
            for p in self.get_policy().model.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * 0.1)


class OverclaimingDQN(DQN):
    """Claims Box actions it cannot handle."""

    supported_action_spaces = (gym.spaces.Discrete, gym.spaces.Box)


@pytest.mark.parametrize(
    "cls, config, failing_check",
    [
        (ForgetfulPPO, PPO_QUICK, "check_checkpoint_round_trip"),
        (UnseededPPO, PPO_QUICK, "check_seed_determinism"),
        (OverclaimingDQN, QUICK["DQN"], "check_action_spaces"),
    ],
)
def test_a_defective_algorithm_fails_the_check_for_its_defect(register, tmp_path, cls, config, failing_check) -> None:
    register("Defective", cls)
    with pytest.raises(ConformanceError) as error:
        check_algorithm("Defective", config, workdir=tmp_path)
    assert f"- {failing_check}:" in str(error.value)
    assert "check_train_result" not in str(error.value)  # the defects are specific; training still works


def test_unbounded_config_value_is_reported(register, tmp_path) -> None:
    from corral.plugins.ppo import PPOConfig

    class LaxConfig(PPOConfig):
        def __setattr__(self, name, value):  # accepts anything for clip_param, skipping validation
            if name == "clip_param":
                object.__setattr__(self, "__dict__", {**self.__dict__, name: value})
            else:
                super().__setattr__(name, value)

    class LaxPPO(PPO):
        config_class = LaxConfig

    register("Lax", LaxPPO)
    with pytest.raises(ConformanceError, match=r"check_invalid_config_is_refused: .*clip_param=0"):
        check_algorithm("Lax", PPO_QUICK, workdir=tmp_path, checks=[CHECKS[1]])


pytest_plugins = ["pytester"]


def test_the_pytest_fixture_is_registered_for_plugin_authors(pytester) -> None:
    pytester.makepyfile(
        f"""
        def test_ppo(corral_conformance):
            corral_conformance("PPO", {PPO_QUICK!r})
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_pytest_plugin_costs_nothing_to_load() -> None:
    import subprocess
    import sys

    code = "import sys, corral.testing.pytest_plugin; print(sorted({'torch', 'gymnasium', 'numpy'} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("given", [False, True], ids=["own scratch folder", "workdir given"])
def test_check_algorithm_leaves_nothing_in_the_temp_folder(tmp_path, monkeypatch, given: bool) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where tempfile makes folders, as TMPDIR would say
    workdir = tmp_path / "work" if given else None
    check_algorithm("PPO", PPO_QUICK, workdir=workdir, checks=[CHECKS[3]])  # check_checkpoint_round_trip writes a checkpoint
    assert [p.name for p in temp.iterdir() if p.name.startswith("corral-conformance-")] == []
    if workdir is not None:
        assert list(workdir.iterdir())  # a folder the caller gave keeps what the checks wrote

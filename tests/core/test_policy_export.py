"""export_policy_model: a TorchScript file that acts as compute_single_action(explore=False), with torch alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import corral
from corral import ConfigError
from tests.toy_envs import DictObsEnv, ImageEnv

# Runs the exported file in a fresh interpreter that refuses to import corral.
WITHOUT_CORRAL = textwrap.dedent("""
    import sys

    class NoCorral:
        def find_spec(self, name, path=None, target=None):
            if name == "corral" or name.startswith("corral."):
                raise ImportError("the exported model must run without corral")
            return None

    sys.meta_path.insert(0, NoCorral())
    import numpy as np
    import torch

    model = torch.jit.load(sys.argv[1])
    actions, inputs = model(torch.as_tensor(np.load(sys.argv[2])))
    np.save(sys.argv[3], actions.numpy())
    assert not any(name.split(".")[0] == "corral" for name in sys.modules)
""")

CASES = {
    "PPO CartPole (Discrete, filtered)": ("PPO", "CartPole-v1", {"observation_filter": "MeanStdFilter", "minibatch_size": 64}),
    "SAC Pendulum (Box)": ("SAC", "Pendulum-v1", {}),
    "PPO images (CNN)": ("PPO", ImageEnv, {"minibatch_size": 64, "model": {"conv_filters": [[8, 3, 1], [16, 3, 1]]}}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_exported_model_acts_as_the_policy_in_a_process_without_corral(case: str, tmp_path: Path) -> None:
    name, env, options = CASES[case]
    algo = (
        corral.get_config(name).environment(env).update_from_dict({"train_batch_size": 64, **options}).debugging(seed=0).build()
    )
    algo.train()
    path = algo.export_policy_model(tmp_path / "export")
    space = algo.get_policy().observation_space
    space.seed(0)
    observations = np.stack([space.sample() for _ in range(1000)])
    expected = np.stack([np.asarray(algo.compute_single_action(obs, explore=False)) for obs in observations])
    algo.stop()
    np.save(tmp_path / "obs.npy", observations)
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_CORRAL, str(path), str(tmp_path / "obs.npy"), str(tmp_path / "actions.npy")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    actions = np.load(tmp_path / "actions.npy")
    assert actions.shape == expected.shape and actions.dtype.kind == expected.dtype.kind
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actions, expected, rtol=0, atol=1e-5)  # batch of 1 against 1,000: float rounding
    else:
        np.testing.assert_array_equal(actions, expected)
    description = json.loads((tmp_path / "export" / "model.json").read_text())
    assert description["format"] == "torchscript" and description["policy_id"] == "default_policy"


def test_corral_export_writes_the_model_from_a_checkpoint(run_cli: Any, tmp_path: Path) -> None:
    algo = corral.get_config("PPO").environment("CartPole-v1").training(train_batch_size=64, minibatch_size=64).build()
    checkpoint = algo.save(str(tmp_path / "checkpoint"))
    algo.stop()
    proc = run_cli("export", checkpoint, "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "Wrote" in proc.stdout and (tmp_path / "out" / "model.pt").is_file()


def test_a_policy_whose_observations_are_not_one_array_is_refused_naming_its_space(tmp_path: Path) -> None:
    algo = corral.get_config("PPO").environment(DictObsEnv).training(train_batch_size=64, minibatch_size=64).build()
    with pytest.raises(ConfigError, match=r"one array \(Box, Discrete, MultiDiscrete, MultiBinary\); .* Dict"):
        algo.export_policy_model(tmp_path / "export")
    algo.stop()
    assert not (tmp_path / "export").exists()

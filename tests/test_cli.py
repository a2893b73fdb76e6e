"""The ``corral`` command, run as a user runs it: in a subprocess."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import corral
from corral.cli import main

from .conftest import SMALL_PPO

SMALL = json.dumps(SMALL_PPO)
EXPLORATIONS = ("StochasticSampling", "EpsilonGreedy", "SoftQ", "GaussianNoise", "OrnsteinUhlenbeckNoise", "Random")


def cli(*args: str, results: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CORRAL_RESULTS_DIR": str(results)}
    env.pop("COLUMNS", None)
    return subprocess.run([sys.executable, "-m", "corral.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def experiment_dirs(results: Path) -> list[Path]:
    return sorted(p for p in results.iterdir() if p.is_dir()) if results.exists() else []


def progress_rows(logdir: Path) -> list[dict[str, str]]:
    with open(logdir / "progress.csv", newline="") as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------------- #
# list
# ---------------------------------------------------------------------- #
def test_list_shows_ppo_and_the_explorations_from_corral(run_cli) -> None:
    proc = run_cli("list")
    assert proc.returncode == 0, proc.stderr
    rows = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in re.split(r"[│|]", line) if c.strip()]
        if cells:
            rows[cells[0]] = cells
    for name in ("PPO", *EXPLORATIONS):
        assert name in rows, f"{name} missing from:\n{proc.stdout}"
        assert rows[name][2] == "corral", rows[name]
    assert "corral.plugins.ppo:PPO" in rows["PPO"]
    # each with the first line of its docstring, read from its source (the plugin is not imported)
    assert rows["PPO"][1] == "Proximal Policy Optimization with GAE, for Discrete, MultiDiscrete and Box actions."
    assert rows["TD3"][1].startswith("Twin delayed DDPG: twin critics, delayed actor updates")


def test_list_json(run_cli) -> None:
    proc = run_cli("list", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    ppo = [a for a in data["algorithms"] if a["name"] == "PPO"]
    assert len(ppo) == 1
    assert ppo[0]["dist"] == "corral" and ppo[0]["version"] == corral.__version__
    assert isinstance(ppo[0]["status"], str) and ppo[0]["status"]
    for entry in data["algorithms"]:
        assert {"name", "dist", "version", "status"} <= set(entry)
        assert entry["description"], entry  # every algorithm corral and its example plugin ship has a docstring
    (pg,) = [a for a in data["algorithms"] if a["name"] == "PG"]
    assert (
        pg["description"] == "Vanilla policy gradient for Discrete, MultiDiscrete, Box and structured actions (RLlib's ``PG``)."
    )
    assert set(EXPLORATIONS) <= {e["name"] for e in data["explorations"]}
    assert isinstance(data["hook_plugins"], list)
    assert {"atari", "old_gym", "rendering"} <= {i["name"] for i in data["integrations"]}


def test_list_does_not_import_torch_nor_any_plugin() -> None:
    code = (
        "import sys; from corral.cli import main; main(['list']); "
        "print('torch' in sys.modules, any(name.startswith(('corral.plugins.', 'corral_reinforce')) for name in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False False"


# ---------------------------------------------------------------------- #
# train, then evaluate what it saved
# ---------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """``corral train ... --checkpoint-at-end``: (the process, its results folder, the checkpoint it printed)."""
    results = tmp_path_factory.mktemp("cli_results")
    proc = cli(
        "train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", '{"training_iteration": 2}',
        "--config", SMALL, "--checkpoint-at-end", "--seed", "0", results=results,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    match = re.search(r"^last checkpoint: (\S+)$", proc.stdout, re.MULTILINE)
    assert match, proc.stdout
    return proc, results, Path(match.group(1))


def test_train_prints_progress_the_checkpoint_and_the_evaluate_command(trained_run) -> None:
    proc, results, checkpoint = trained_run
    progress = [line for line in proc.stdout.splitlines() if line.startswith("iter")]
    assert len(progress) == 2
    assert re.match(r"iter\s+2\s+steps\s+[\d,]+\s+reward\s+[\d.]+", progress[1]), progress[1]
    assert f"corral evaluate {checkpoint}" in proc.stdout
    assert "Traceback" not in proc.stderr

    (logdir,) = experiment_dirs(results)
    assert logdir.name.startswith("PPO_CartPole-v1_")
    assert checkpoint == (logdir / "checkpoint_000002").resolve()
    assert (checkpoint / "corral_checkpoint.json").is_file()
    assert [int(r["training_iteration"]) for r in progress_rows(logdir)] == [1, 2]
    params = json.loads((logdir / "params.json").read_text())
    assert params["seed"] == 0 and params["train_batch_size"] == 256 and params["algorithm"] == "PPO"


def test_evaluate_a_checkpoint(trained_run, tmp_path: Path) -> None:
    _, _, checkpoint = trained_run
    proc = cli("evaluate", str(checkpoint), "--episodes", "2", results=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^2 episodes: reward mean [\d.]+", proc.stdout, re.MULTILINE), proc.stdout
    assert not list(tmp_path.glob("PPO_*"))  # evaluating writes no experiment folder


def test_evaluate_out_writes_the_episodes_as_offline_data_that_input_reads(trained_run, tmp_path: Path, make_algo) -> None:
    import corral

    _, _, checkpoint = trained_run
    out = tmp_path / "episodes"
    proc = cli("evaluate", str(checkpoint), "--episodes", "3", "--out", str(out), results=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^3 episodes: reward mean [\d.]+", proc.stdout, re.MULTILINE), proc.stdout
    assert f"Wrote them to {out}" in proc.stdout and list(out.glob("*.parquet"))
    reader = make_algo(corral.get_config("BC").environment("CartPole-v1").offline_data(input_=str(out)))
    rows = reader.sample().policy_batches["default_policy"]
    assert rows["terminateds"].sum() + rows["truncateds"].sum() >= 3  # the three episodes' ends are in the data
    assert set(np.unique(rows["actions"])) <= {0, 1}


def test_evaluate_an_experiment_folder_runs_its_latest_checkpoint_and_names_it(trained_run, tmp_path: Path) -> None:
    _, results, checkpoint = trained_run
    (logdir,) = experiment_dirs(results)
    proc = cli("evaluate", str(logdir), "--episodes", "1", results=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"{logdir} is an experiment folder: using its latest checkpoint, {checkpoint}"
    assert re.search(r"^1 episodes: reward mean [\d.]+", proc.stdout, re.MULTILINE), proc.stdout


def test_rollout_is_an_alias_of_evaluate_and_steps_work(trained_run, tmp_path: Path) -> None:
    _, _, checkpoint = trained_run
    proc = cli("rollout", str(checkpoint), "--steps", "300", results=tmp_path)
    assert proc.returncode == 0, proc.stderr
    match = re.search(r"^(\d+) episodes: reward mean [\d.]+", proc.stdout, re.MULTILINE)
    assert match, proc.stdout
    assert int(match.group(1)) >= 1


def test_evaluate_on_an_env_with_other_spaces_fails_cleanly(trained_run, capsys) -> None:
    _, _, checkpoint = trained_run
    assert main(["evaluate", str(checkpoint), "--env", "Acrobot-v1", "--episodes", "1"]) == 2
    assert_one_line_error_text(capsys.readouterr().err, "observation_space")


def test_run_alias_checkpoint_freq_and_storage_path(run_cli, results_dir, tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    proc = run_cli(
        "train", "--run", "PPO", "--env", "CartPole-v1", "--stop", '{"training_iteration": 2}',
        "--config", SMALL, "--checkpoint-freq", "1", "--storage-path", str(elsewhere),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert experiment_dirs(results_dir) == []  # --storage-path wins over CORRAL_RESULTS_DIR
    (logdir,) = experiment_dirs(elsewhere)
    assert logdir.name.startswith("PPO_CartPole-v1_")
    assert len(progress_rows(logdir)) == 2
    assert sorted(p.name for p in logdir.glob("checkpoint_*")) == ["checkpoint_000001", "checkpoint_000002"]
    assert f"last checkpoint: {logdir / 'checkpoint_000002'}" in proc.stdout


YAML = """\
cartpole-ppo:
  env: CartPole-v1
  run: PPO
  stop:
    training_iteration: 2
  config:
    train_batch_size: 256
    minibatch_size: 64
    num_epochs: 1
    seed: 0
    gamma: 0.95
"""


def check_yaml_run(results_dir: Path) -> None:
    (logdir,) = experiment_dirs(results_dir)
    assert logdir.name.startswith("PPO_CartPole-v1_")
    assert [int(r["training_iteration"]) for r in progress_rows(logdir)] == [1, 2]
    assert json.loads((logdir / "params.json").read_text())["gamma"] == 0.95


@pytest.mark.parametrize("form", ["file", "-f"])
def test_train_from_an_rllib_yaml(run_cli, results_dir, tmp_path, form: str) -> None:
    file = tmp_path / "cartpole.yaml"
    file.write_text(YAML)
    proc = run_cli("train", form, str(file))
    assert proc.returncode == 0, proc.stderr
    check_yaml_run(results_dir)


# ---------------------------------------------------------------------- #
# bad input: one line, status 2, before any work
# ---------------------------------------------------------------------- #
def assert_one_line_error_text(stderr: str, *fragments: str) -> None:
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("corral: error:"), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


TRAIN = ["train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", '{"training_iteration": 1}']

BAD_INPUT: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "unknown algorithm": (
        ["train", "--algo", "PPOO", "--env", "CartPole-v1", "--stop", '{"training_iteration": 1}'],
        ("PPOO", "Did you mean 'PPO'"),
    ),
    "unknown env": (
        ["train", "--algo", "PPO", "--env", "CartPol-v1", "--stop", '{"training_iteration": 1}'],
        ("CartPol-v1", "Did you mean 'CartPole-v1'"),
    ),
    "invalid config value": ([*TRAIN, "--config", '{"lr": -1}'], ("lr", "-1")),
    "unknown config key": ([*TRAIN, "--config", '{"lrr": 0.1}'], ("lrr", "Did you mean 'lr'")),
    "minibatch larger than batch": ([*TRAIN, "--config", '{"train_batch_size": 64, "minibatch_size": 128}'], ("minibatch_size",)),
    "unknown stop key": (
        ["train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", '{"episode_reward_meen": 1}'],
        ("episode_reward_meen", "Did you mean 'episode_reward_mean'"),
    ),
    "missing algo": (["train", "--env", "CartPole-v1"], ("--algo",)),
    "missing yaml file": (["train", "-f", "{tmp}/nowhere.yaml"], ("nowhere.yaml", "does not exist")),
    "malformed yaml file": (["train", "file", "{tmp}/bad.yaml"], ("bad.yaml", "not valid YAML")),
    "evaluate missing checkpoint": (["evaluate", "{tmp}/no_checkpoint"], ("no_checkpoint", "does not exist")),
    "rollout missing checkpoint": (["rollout", "{tmp}/no_checkpoint"], ("no_checkpoint",)),
    "evaluate a non-checkpoint folder": (["evaluate", "{tmp}"], ("not a corral checkpoint",)),
    "evaluate an experiment folder without checkpoints": (
        ["evaluate", "{tmp}/experiment"],
        ("is an experiment folder without a checkpoint_* folder in it", "--checkpoint-at-end"),
    ),
    "a statistic's stem as stop key": ([*TRAIN[:-2], "--stop", '{"episode_reward": 1}'], ("Did you mean 'episode_reward_mean'",)),
    "help-config of unknown algorithm": (["train", "--algo", "PPOO", "--help-config"], ("Did you mean 'PPO'",)),
}
# These run as real subprocesses (exit status, stderr, no traceback end to end); the rest
# call the same main() in-process, which is what `python -m corral.cli` runs, to stay fast.
SUBPROCESS_CASES = {
    "unknown algorithm", "unknown env", "invalid config value", "unknown config key", "unknown stop key",
    "missing yaml file", "malformed yaml file", "evaluate missing checkpoint",
}  # fmt: skip


def bad_args(case: str, tmp_path: Path) -> list[str]:
    (tmp_path / "bad.yaml").write_text("exp:\n  run: [PPO\n  env: {\n")
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "params.json").write_text("{}")  # results of a run that saved no checkpoint
    return [a.replace("{tmp}", str(tmp_path)) for a in BAD_INPUT[case][0]]


@pytest.mark.parametrize("case", sorted(SUBPROCESS_CASES))
def test_bad_input_exits_2_with_one_line(run_cli, results_dir, tmp_path, case: str) -> None:
    proc = run_cli(*bad_args(case, tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert_one_line_error_text(proc.stderr, *BAD_INPUT[case][1])
    assert experiment_dirs(results_dir) == []  # rejected before any work started


@pytest.mark.parametrize("case", sorted(set(BAD_INPUT) - SUBPROCESS_CASES))
def test_bad_input_returns_2_with_one_line(results_dir, tmp_path, capsys, case: str) -> None:
    assert main(bad_args(case, tmp_path)) == 2
    assert_one_line_error_text(capsys.readouterr().err, *BAD_INPUT[case][1])
    assert experiment_dirs(results_dir) == []


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--config", '{"lr": '), ("--stop", '{"training_iteration": 1'), ("--stop", "[1]"), ("--config", '"lr"')],
)
def test_malformed_json_flags_are_argparse_errors(run_cli, results_dir, flag: str, value: str) -> None:
    proc = run_cli("train", "--algo", "PPO", "--env", "CartPole-v1", flag, value)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith("corral train: error:") and flag in error, proc.stderr
    assert experiment_dirs(results_dir) == []


def test_help_config_lists_ppo_options_with_their_meaning(run_cli) -> None:
    proc = run_cli("train", "--algo", "PPO", "--help-config")
    assert proc.returncode == 0, proc.stderr
    first_cells = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0]:
            first_cells[cells[0]] = cells
    assert first_cells["clip_param"][1:3] == [".training()", "0.3"]
    assert first_cells["clip_param"][3].startswith("the PPO clipping range")
    for option in ("lr", "train_batch_size", "minibatch_size", "kl_coeff", "seed"):
        assert option in first_cells, option

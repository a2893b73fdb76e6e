"""``corral train`` as a user lives it: why a run stopped, Ctrl-C, --resume, checkpoints kept tidy, TensorBoard's axis."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from corral import Callbacks

from .conftest import SMALL_PPO

SMALL = json.dumps(SMALL_PPO)
TRAIN = ["train", "--algo", "PPO", "--env", "CartPole-v1", "--config", SMALL, "--seed", "0"]
SCORES = [3, 9, 1, 4, 2, 8, 5, 0, 6, 7]
"""the score ScoreByIteration gives iterations 1..10: the best is iteration 2, the lowest iteration 8"""


class ScoreByIteration(Callbacks):
    """Puts ``SCORES[iteration - 1]`` into each result as ``custom_score``, so a test knows which checkpoint is best."""

    def on_train_result(self, *, algorithm: Any, result: dict[str, Any], **kwargs: Any) -> None:
        result["custom_score"] = SCORES[(result["training_iteration"] - 1) % len(SCORES)]


def experiment(results: Path) -> Path:
    (logdir,) = [p for p in results.iterdir() if p.is_dir()]
    return logdir


def iterations_in(logdir: Path) -> tuple[list[int], list[int]]:
    """The training_iteration of each row of result.json and of progress.csv."""
    lines = [json.loads(line)["training_iteration"] for line in (logdir / "result.json").read_text().splitlines()]
    with open(logdir / "progress.csv", newline="") as f:
        rows = [int(row["training_iteration"]) for row in csv.DictReader(f)]
    return lines, rows


# ---------------------------------------------------------------------- #
# why it stopped
# ---------------------------------------------------------------------- #
def test_the_last_line_names_the_reward_that_was_reached(run_cli) -> None:
    proc = run_cli(*TRAIN, "--stop", '{"episode_reward_mean": 15, "timesteps_total": 100000}')
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^stopped: episode_reward_mean [\d.]+ >= 15 at iteration \d+, [\d,]+ env steps$", proc.stdout, re.M)


def test_a_budget_that_runs_out_says_so_with_the_best_reward_and_fail_below_exits_3(run_cli) -> None:
    stop = '{"episode_reward_mean": 475, "timesteps_total": 500}'
    proc = run_cli(*TRAIN, "--stop", stop)
    assert proc.returncode == 0, proc.stderr
    budget = r"^stopped: timesteps_total budget 500 reached at iteration 2, [\d,]+ env steps; best episode_reward_mean [\d.]+$"
    assert re.search(budget, proc.stdout, re.M), proc.stdout
    failed = run_cli(*TRAIN, "--stop", stop, "--fail-below")  # the --stop reward
    assert failed.returncode == 3
    assert re.search(
        r"^failed: best episode_reward_mean [\d.]+ is below 475 \(--fail-below\): exit status 3$", failed.stdout, re.M
    )
    passed = run_cli(*TRAIN, "--stop", stop, "--fail-below", "1")
    assert passed.returncode == 0, passed.stdout


@pytest.mark.parametrize(
    ("key", "listed"),
    [("info/learner/default_policy/klx", "Did you mean 'kl'"), ("custom_metrics/nothing", "Under custom_metrics: nothing")],
)
def test_a_stop_key_missing_under_its_group_is_an_error_after_the_first_result(run_cli, key: str, listed: str) -> None:
    proc = run_cli(*TRAIN, "--stop", json.dumps({key: 1}))
    assert proc.returncode == 2
    assert f"--stop key {key!r} is not in the results" in proc.stderr and listed in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------- #
# Ctrl-C and --resume
# ---------------------------------------------------------------------- #
def interrupt_after(args: list[str], results: Path, iteration: int) -> tuple[int, str]:
    """Run corral train, send SIGINT once it printed ``iteration``; return its exit status and output."""
    env = {**os.environ, "CORRAL_RESULTS_DIR": str(results), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "corral.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    output = []
    for line in proc.stdout:
        output.append(line)
        if re.match(rf"iter\s+{iteration}\s", line):
            proc.send_signal(signal.SIGINT)
            break
    rest, _ = proc.communicate(timeout=120)
    return proc.returncode, "".join(output) + rest


def test_ctrl_c_finishes_the_iteration_saves_a_consistent_checkpoint_exits_130_and_resume_goes_on(run_cli, results_dir) -> None:
    status, output = interrupt_after([*TRAIN, "--stop", '{"episode_reward_mean": 1000}'], results_dir, iteration=2)
    assert status == 130, output
    assert re.search(
        r"^stopped: interrupted \(Ctrl-C\) at iteration \d+, [\d,]+ env steps; best episode_reward_mean", output, re.M
    )
    checkpoint = Path(re.search(r"^resume with: corral train --resume (\S+)$", output, re.M).group(1))
    state = json.loads((checkpoint / "algorithm_state.json").read_text())
    counters = state["counters"]
    assert counters["num_env_steps_sampled"] == counters["num_env_steps_trained"] > 0  # no half-done iteration
    saved_at = state["iteration"]

    resumed = run_cli("train", "--resume", str(checkpoint), "--stop", json.dumps({"training_iteration": saved_at + 2}))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming PPO_CartPole-v1 at iteration {saved_at}" in resumed.stdout
    logdir = experiment(results_dir)  # the same experiment folder, no new one
    expected = list(range(1, saved_at + 3))
    assert iterations_in(logdir) == (expected, expected)  # each iteration once, the history kept


def test_ctrl_c_stops_every_experiment_of_a_file(tmp_path, results_dir) -> None:
    file = tmp_path / "two.yaml"
    body = {"run": "PPO", "env": "CartPole-v1", "config": SMALL_PPO}
    file.write_text(json.dumps({"first": body, "second": {**body, "stop": {"training_iteration": 1}}}))  # JSON is YAML
    status, output = interrupt_after(["train", "-f", str(file)], results_dir, iteration=1)
    assert status == 130, output
    assert len([p for p in results_dir.iterdir() if p.is_dir()]) == 1  # the second never started


def test_resume_refuses_algo_env_and_file(run_cli, tmp_path) -> None:
    proc = run_cli("train", "--resume", str(tmp_path), "--algo", "PPO")
    assert proc.returncode == 2 and "drop -f, --algo and --env" in proc.stderr


# ---------------------------------------------------------------------- #
# checkpoints kept tidy
# ---------------------------------------------------------------------- #
@pytest.mark.parametrize(("attribute", "kept"), [("custom_score", [2, 10]), ("min-custom_score", [8, 10])])
def test_keep_checkpoints_num_2_over_10_checkpoints_leaves_the_best_and_the_latest(run_cli, results_dir, attribute, kept) -> None:
    config = json.dumps({**SMALL_PPO, "callbacks_class": "tests.test_cli_run:ScoreByIteration"})
    proc = run_cli(
        "train", "--algo", "PPO", "--env", "CartPole-v1", "--config", config, "--stop", '{"training_iteration": 10}',
        "--checkpoint-freq", "1", "--keep-checkpoints-num", "2", "--checkpoint-score-attr", attribute,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in experiment(results_dir).iterdir() if p.name.startswith("checkpoint"))
    assert names == [f"checkpoint_{i:06d}" for i in kept]  # no leftovers, hidden or not


def test_without_a_score_the_newest_are_kept(make_algo, ppo_config) -> None:
    algo = make_algo(ppo_config.checkpointing(keep_checkpoints_num=2))
    for _ in range(4):
        algo.train()
        algo.save()
    assert sorted(p.name for p in algo.logdir.glob("checkpoint_*")) == ["checkpoint_000003", "checkpoint_000004"]


# ---------------------------------------------------------------------- #
# TensorBoard
# ---------------------------------------------------------------------- #
def scalar_steps(logdir: Path, tag: str) -> list[int]:
    """The steps at which the event files hold ``tag`` (TFRecord framing read by hand: no TensorBoard needed)."""
    from tensorboardX.proto import event_pb2

    steps = []
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
            offset += 12 + length + 4
            steps += [event.step for value in event.summary.value if value.tag == tag]
    return steps


def test_tensorboard_scalars_are_indexed_by_env_steps_sampled(make_algo, ppo_config) -> None:
    algo = make_algo(ppo_config.reporting(log_to_tensorboard=True))
    sampled = [algo.train()["num_env_steps_sampled"] for _ in range(2)]
    algo.stop()
    assert scalar_steps(algo.logdir, "corral/episode_reward_mean") == sampled
    assert scalar_steps(algo.logdir, "corral/training_iteration") == sampled  # the iteration is kept, as a scalar

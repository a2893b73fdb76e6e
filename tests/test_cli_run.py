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

import corral
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
    [
        ("info/learner/default_policy/learner_stats/klx", "Did you mean 'kl'"),
        ("custom_metrics/nothing", "Under custom_metrics: nothing"),
    ],
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


# ---------------------------------------------------------------------- #
# without --stop
# ---------------------------------------------------------------------- #
@pytest.mark.parametrize(
    ("env", "first_line", "stop"),
    [
        (
            "CartPole-v1",
            "no --stop given: stopping at episode_reward_mean 475 (CartPole-v1's reward_threshold in gymnasium's registry) "
            "or at timesteps_total 1,000,000, whichever comes first; --stop sets others",
            {"episode_reward_mean": 475.0, "timesteps_total": 1_000_000},
        ),
        (
            "Pendulum-v1",
            "no --stop given: stopping at timesteps_total 1,000,000 (Pendulum-v1 registers no reward_threshold); "
            "--stop sets others",
            {"timesteps_total": 1_000_000},
        ),
    ],
)
def test_without_stop_a_run_stops_at_the_envs_reward_threshold_or_a_budget_and_says_so_first(
    results_dir, env: str, first_line: str, stop: dict[str, float]
) -> None:
    args = ["train", "--algo", "PPO", "--env", env, "--config", SMALL, "--seed", "0"]
    environ = {**os.environ, "CORRAL_RESULTS_DIR": str(results_dir), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "corral.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().rstrip("\n")
    for line in proc.stdout:
        if line.startswith("iter"):
            proc.send_signal(signal.SIGINT)  # the run goes on past its first iteration: stop it there
            break
    _, errors = proc.communicate(timeout=120)
    assert first == first_line, errors
    assert proc.returncode == 130, errors
    assert json.loads((experiment(results_dir) / "corral_run.json").read_text())["stop"] == stop  # what --resume goes on to


# ---------------------------------------------------------------------- #
# stop keys
# ---------------------------------------------------------------------- #
def test_a_perf_key_stops_the_run_where_results_carry_perf(run_cli) -> None:
    proc = run_cli(*TRAIN, "--stop", '{"perf/cpu_util_percent": 0, "training_iteration": 5}')
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^stopped: perf/cpu_util_percent [\d.]+ >= 0 at iteration 1,", proc.stdout, re.M), proc.stdout
    off = run_cli(*TRAIN, "--stop", '{"perf/cpu_util_percent": 0}', "--config", json.dumps({**SMALL_PPO, "log_sys_usage": False}))
    assert off.returncode == 2 and "--stop key 'perf/cpu_util_percent' needs" in off.stderr and "log_sys_usage" in off.stderr


# ---------------------------------------------------------------------- #
# what each iteration prints
# ---------------------------------------------------------------------- #
EXPERT_DATA = Path(corral.__file__).parent / "tuned_examples" / "data" / "cartpole_expert.parquet"
BC = ["train", "--algo", "BC", "--env", "CartPole-v1", "--seed", "0", "--stop", '{"training_iteration": 2}']
BC_CONFIG = {"input": str(EXPERT_DATA), "train_batch_size": 500, "min_sample_timesteps_per_iteration": 1000}


def test_offline_training_shows_the_evaluation_and_the_loss_instead_of_a_reward_of_nan(run_cli) -> None:
    config = {**BC_CONFIG, "evaluation_interval": 2, "evaluation_duration": 2}
    proc = run_cli(*BC, "--config", json.dumps(config))
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("iter")]
    assert re.match(r"iter\s+1\s+steps\s+[\d,]+\s+eval\s+-\s+loss\s+\d+\.\d+\s+time", lines[0]), lines[0]  # not evaluated
    assert re.match(r"iter\s+2\s+steps\s+[\d,]+\s+eval\s+\d+\.\d+\s+loss\s+\d+\.\d+\s+time", lines[1]), lines[1]
    assert "nan" not in proc.stdout.lower()


def strict_json_documents(text: str) -> list[dict[str, Any]]:
    """The JSON documents printed one after another at the start of ``text`` (NaN and Infinity refused, as JSON does)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    decoder, documents, at = json.JSONDecoder(parse_constant=refuse), [], 0
    while text[at:].lstrip().startswith("{"):
        at += len(text[at:]) - len(text[at:].lstrip())
        document, at = decoder.raw_decode(text, at)
        documents.append(document)
    return documents


def test_vv_prints_each_result_as_valid_json(run_cli) -> None:
    proc = run_cli(*BC, "--config", json.dumps(BC_CONFIG), "-vv")
    assert proc.returncode == 0, proc.stderr
    results = strict_json_documents(proc.stdout)
    assert [r["training_iteration"] for r in results] == [1, 2]
    assert results[0]["episode_reward_mean"] is None  # no episode is played learning from data: null, not NaN
    assert results[0]["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"] > 0


def test_v_adds_each_policys_learner_stats_and_corrals_info_messages(run_cli) -> None:
    config = json.dumps({**SMALL_PPO, "rollout_fragment_length": 16})  # said at INFO: a batch joins several sample calls
    args = [*TRAIN, "--config", config, "--stop", '{"training_iteration": 1}']
    quiet, verbose = run_cli(*args), run_cli(*args, "-v")
    assert quiet.returncode == verbose.returncode == 0, quiet.stderr + verbose.stderr
    stats = r"^\s+default_policy: total_loss -?\d[\d.e+-]*\s+policy_loss .*entropy"
    assert re.search(stats, verbose.stdout, re.M) and not re.search(stats, quiet.stdout, re.M), verbose.stdout
    assert "INFO corral: rollout_fragment_length=16" in verbose.stderr and "rollout_fragment_length" not in quiet.stderr

"""corral plot and train --plot: learning curves read back from the picture and from the data drawn."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from corral.plot import plot_runs

from .conftest import SMALL_PPO


@pytest.fixture
def two_runs(run_cli, results_dir, make_algo, ppo_config) -> list[Path]:
    """A PPO run trained by ``corral train --plot`` and another seed's from Python, 3 iterations each."""
    proc = run_cli(
        "train", "--algo", "PPO", "--env", "CartPole-v1", "--config", json.dumps(SMALL_PPO), "--seed", "0",
        "--stop", '{"training_iteration": 3}', "--plot",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (first,) = list(results_dir.iterdir())
    assert f"learning curve: {first / 'progress.png'}" in proc.stdout
    algo = make_algo(ppo_config.debugging(seed=1))
    for _ in range(3):
        algo.train()
    return [first, algo.logdir]


def column(run: Path, name: str) -> list[float]:
    with open(run / "progress.csv", newline="") as f:
        return [float(row[name]) for row in csv.DictReader(f)]


def test_train_plot_and_corral_plot_draw_two_runs_against_env_steps(run_cli, two_runs, tmp_path) -> None:
    import matplotlib.image

    first, second = two_runs
    image = matplotlib.image.imread(first / "progress.png")  # train --plot wrote a readable picture
    assert image.ndim == 3 and image.shape[0] > 100 and image.std() > 0

    out = tmp_path / "curves.png"
    proc = run_cli("plot", str(first), str(second), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"Wrote {out}: episode_reward_mean against env_steps for 2 runs"
    picture = matplotlib.image.imread(out)
    assert picture.shape[:2] == (462, 770) and len({tuple(p) for p in picture.reshape(-1, picture.shape[2])[::97]}) > 3

    curves = plot_runs([first, second], tmp_path / "again.svg")  # the data drawn: progress.csv, env steps on x
    assert [c.label for c in curves] == [first.name, second.name]
    for curve, run in zip(curves, (first, second), strict=True):
        assert curve.x == column(run, "num_env_steps_sampled") and curve.y == column(run, "episode_reward_mean")
    assert (tmp_path / "again.svg").read_text().startswith("<?xml")


def test_a_storage_folder_plots_every_run_in_it_and_time_is_an_axis(two_runs, tmp_path) -> None:
    assert two_runs[0].parent == two_runs[1].parent  # both in the test's results folder
    curves = plot_runs([two_runs[0].parent], tmp_path / "all.png", x="time", y="episode_len_mean")
    runs = sorted(two_runs)
    assert [c.label for c in curves] == [run.name for run in runs]
    assert [c.x for c in curves] == [column(run, "time_total_s") for run in runs]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--y", "episode_reward_meen"], "has no column 'episode_reward_meen'. Did you mean 'episode_reward_mean'"),
        (["--out", "curves.jpg"], "must end in .png, .svg or .pdf"),
    ],
)
def test_plot_mistakes_are_one_line_errors(run_cli, two_runs, tmp_path, args, said) -> None:
    proc = run_cli("plot", str(two_runs[0]), *args)
    assert proc.returncode == 2 and said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_folder_without_runs_is_an_error(run_cli, tmp_path) -> None:
    proc = run_cli("plot", str(tmp_path))
    assert proc.returncode == 2 and "holds no progress.csv" in proc.stderr

"""render_env and record_env: sub-environment 0 of the first runner that steps, in a window or on video.

Windows open on SDL's dummy video driver, so the tests need no display;
videos are read back with moviepy, frame by frame.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import corral
from corral.errors import ConfigError, EnvError
from corral.integrations import rendering

SELF_DRAWING = "tests.toy_envs:SelfDrawingCartPole"


@pytest.fixture(autouse=True)
def _no_display(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("SDL_AUDIODRIVER", "dummy")


def ppo(env: str = "CartPole-v1", **environment: Any) -> Any:
    return (
        corral.get_config("PPO")
        .environment(env, **environment)
        .env_runners(num_envs_per_env_runner=3)
        .training(train_batch_size=300, minibatch_size=100, num_epochs=1)
        .debugging(seed=0)
    )


def video_frames(path: Path) -> list[np.ndarray]:
    from moviepy import VideoFileClip

    with VideoFileClip(str(path)) as clip:
        return list(clip.iter_frames())


def encoded_frames(path: Path) -> int:
    """Counts the frames in the file itself (moviepy's reader, going by the duration, may miss the last one)."""
    import imageio_ffmpeg

    count, _ = imageio_ffmpeg.count_frames_and_secs(str(path))
    return int(count)


def test_record_env_true_writes_training_episodes_on_gymnasiums_schedule_into_the_experiment_folder(make_algo) -> None:
    algo = make_algo(ppo(record_env=True))
    for _ in range(2):
        algo.train()
    algo.stop()  # the episode in progress is written when its env closes
    videos = algo.logdir / "videos"
    names = sorted(p.name for p in videos.iterdir())
    assert names[:2] == ["training-episode-0.mp4", "training-episode-1.mp4"]
    assert all(name in {"training-episode-0.mp4", "training-episode-1.mp4", "training-episode-8.mp4"} for name in names)
    frames = video_frames(videos / "training-episode-0.mp4")
    assert len(frames) > 5 and frames[0].shape == (400, 600, 3)  # CartPole's frames, one per step and the reset
    assert frames[0].std() > 0  # a drawn cart, not a blank screen


def test_render_env_opens_a_window_for_sub_environment_0_of_the_sampling_runner_only(make_algo) -> None:
    algo = make_algo(ppo(render_env=True))
    algo.train()
    envs = algo.env_runner_group.local_env_runner.sub_environments
    assert envs[0].unwrapped.render_mode == "human"
    assert envs[0].unwrapped.screen is not None  # pygame drew into its window
    assert [env.unwrapped.render_mode for env in envs[1:]] == [None, None]


def test_an_env_without_a_render_mode_has_render_called_at_every_reset_and_step(make_algo, tmp_path) -> None:
    frames = tmp_path / "frames.txt"
    algo = make_algo(ppo(SELF_DRAWING, env_config={"frames_file": str(frames)}, render_env=True))
    runner = algo.env_runner_group.local_env_runner
    runner.sample(num_steps=40)
    # sub-environment 0 alone: one frame at the reset and at each of its steps (autoreset steps are resets)
    assert len(frames.read_text().splitlines()) >= 40


def test_record_env_of_an_env_that_gives_no_frames_is_refused_before_training(tmp_path) -> None:
    config = ppo(SELF_DRAWING, env_config={"frames_file": str(tmp_path / "f")}, record_env=str(tmp_path / "v"))
    with pytest.raises(EnvError, match=r"record_env needs frames.*render_mode=None.*render_mode='rgb_array'"):
        config.build()


def test_a_missing_moviepy_or_pygame_names_the_render_extra(monkeypatch, tmp_path) -> None:
    real = rendering.importlib.util.find_spec
    for package, option in (("moviepy", {"record_env": str(tmp_path)}), ("pygame", {"render_env": True})):
        monkeypatch.setattr(rendering.importlib.util, "find_spec", lambda name, p=package: None if name == p else real(name))
        with pytest.raises(EnvError, match=rf"needs {package} .*pip install 'corral\[render\]'"):
            ppo(**option).build()


def test_render_env_with_native_vectorisation_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"native vector env cannot render.*vectorize_mode='auto'"):
        ppo(render_env=True).env_runners(vectorize_mode="native").build()


def test_rllibs_monitor_true_is_record_env() -> None:
    config = corral.get_config("PPO").update_from_dict({"monitor": True})
    assert config.record_env is True and "record_env" in config.to_dict() and "monitor" not in config.to_dict()


def test_evaluation_records_every_episode_of_its_one_sub_environment(make_algo, tmp_path) -> None:
    config = ppo().evaluation(evaluation_duration=3, evaluation_num_envs=1, evaluation_config={"record_env": str(tmp_path / "v")})
    algo = make_algo(config)
    algo.evaluate()
    algo.stop()
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == [f"evaluation-episode-{i}.mp4" for i in range(3)]
    assert not list(algo.logdir.glob("videos"))  # training records nothing: only evaluation_config asks


def test_a_multi_agent_env_renders_itself_and_is_not_recorded(make_algo, tmp_path) -> None:
    config = ppo("corral.testing.envs:MultiAgentCartPole", env_config={"num_agents": 2})
    with pytest.raises(ConfigError, match=r"record_env records single-agent envs.*render_env"):
        config.copy().environment(record_env=str(tmp_path)).build()
    algo = make_algo(config.environment(render_env=True))
    rendered: list[int] = []
    for env in algo.env_runner_group.local_env_runner.sub_environments:
        env.render = lambda env=env: rendered.append(id(env))
    algo.env_runner_group.local_env_runner.sample(num_steps=10)
    first = algo.env_runner_group.local_env_runner.sub_environments[0]
    assert len(rendered) >= 10 and set(rendered) == {id(first)}


def test_cli_evaluate_video_records_each_episode_as_a_playable_file(run_cli, tmp_path) -> None:
    trained = run_cli(
        "train", "--algo", "PPO", "--env", "CartPole-v1", "--stop", '{"training_iteration": 1}', "--storage-path", str(tmp_path)
    )
    assert trained.returncode == 0, trained.stderr
    checkpoint = next(tmp_path.glob("*/checkpoint_*"))
    result = run_cli("evaluate", str(checkpoint), "--episodes", "2", "--video", str(tmp_path / "videos"))
    assert result.returncode == 0, result.stderr
    assert "Recorded them in" in result.stdout
    names = sorted(p.name for p in (tmp_path / "videos").iterdir())
    assert names == ["evaluation-episode-0.mp4", "evaluation-episode-1.mp4"]
    # a frame at each reset and step: CartPole's reward is its length, so the frames match the mean reported;
    # moviepy's writer may drop an episode's last frame (it rounds the clip's duration down), hence 2 frames' slack
    steps = sum(encoded_frames(tmp_path / "videos" / name) - 1 for name in names)
    mean = float(result.stdout.split("reward mean ")[1].split()[0])
    assert 2 * mean - 2 <= steps <= 2 * mean


def test_cli_evaluate_render_draws_every_step_of_sub_environment_0(run_cli, tmp_path) -> None:
    frames = tmp_path / "frames.txt"
    config = f'{{"env_config": {{"frames_file": "{frames}"}}}}'
    trained = run_cli(
        "train", "--algo", "PPO", "--env", SELF_DRAWING, "--config", config, "--stop", '{"training_iteration": 1}',
        "--storage-path", str(tmp_path),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    assert not frames.exists()  # training drew nothing: render_env was not set
    result = run_cli("evaluate", str(next(tmp_path.glob("*/checkpoint_*"))), "--episodes", "1", "--render", "--env", SELF_DRAWING)
    assert result.returncode == 0, result.stderr
    assert len(frames.read_text().splitlines()) > 5


def test_record_env_format_gif_writes_animated_gifs(make_algo, tmp_path) -> None:
    from PIL import Image, ImageSequence

    folder = tmp_path / "gifs"
    config = ppo().evaluation(
        evaluation_duration=2,
        evaluation_num_envs=1,
        evaluation_config={"record_env": str(folder), "record_env_format": "gif"},
    )
    algo = make_algo(config)
    metrics = algo.evaluate()
    algo.stop()
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["evaluation-episode-0.gif", "evaluation-episode-1.gif"]
    with Image.open(folder / names[0]) as gif:
        assert gif.size == (600, 400) and gif.n_frames > 5
    # a frame at each reset and step, 1/50 s each (CartPole's render_fps); a GIF merges repeated frames into one
    durations = [sum(frame.info["duration"] for frame in ImageSequence.Iterator(Image.open(folder / n))) for n in names]
    assert sum(durations) / 20 - 2 == pytest.approx(2 * metrics["episode_reward_mean"], abs=2)


def test_an_env_that_gives_frames_is_shown_through_a_window_of_its_frames(make_algo, monkeypatch) -> None:
    import gymnasium as gym

    corral.register_env("FramesCartPole", lambda ctx: gym.make("CartPole-v1", render_mode="rgb_array"))
    algo = make_algo(ppo("FramesCartPole", render_env=True))
    algo.env_runner_group.local_env_runner.sample(num_steps=5)
    shown = algo.env_runner_group.local_env_runner.base_env.envs[0].env  # inside the sub-environment's guard
    assert isinstance(shown, gym.wrappers.HumanRendering) and shown.window is not None  # pygame drew the frames
    real = rendering.importlib.util.find_spec
    monkeypatch.setattr(rendering.importlib.util, "find_spec", lambda name: None if name == "pygame" else real(name))
    with pytest.raises(EnvError, match=r"needs pygame to show the frames of FramesCartPole.*corral\[render\]"):
        ppo("FramesCartPole", render_env=True).build()

"""Showing and recording one sub-environment: RLlib's ``render_env`` and ``record_env`` (``"monitor": true``).

One sub-environment renders: sub-environment 0 of the first env runner that
steps (remote runner 1 when there are remote runners, else the local one), of
the sampling runners and of the evaluation runners alike. It is made in the
render mode it needs (gymnasium's ``render_mode``: ``"human"`` for a window,
``"rgb_array"`` for video frames) and stepped in a loop even where the env has
a native vectorised implementation, which cannot render.

- **A window** (``render_env``): a gymnasium id is made with
  ``render_mode="human"`` and draws itself at every step. An env made by a
  class or creator draws as its own ``render_mode`` says: an ``"rgb_array"``
  env is shown through gymnasium's ``HumanRendering``; one with no render
  mode has its ``render()`` called after every reset and step, RLlib's
  contract (the env opens its window itself).
- **Video** (``record_env``): gymnasium's ``RecordVideo`` writes MP4 files
  (through moviepy) of the training episodes 0, 1, 8, 27, ..., 1000 and every
  1000th after (its default schedule), and of every evaluation episode, named
  ``training-episode-N.mp4`` and ``evaluation-episode-N.mp4`` (``.gif`` with
  ``record_env_format="gif"``). An episode's
  file is written when the next episode starts, or when the runner stops.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from corral.core.contracts.integration_specs import integration
from corral.errors import EnvError

if TYPE_CHECKING:
    from corral.core.contracts.config import AlgorithmConfig

RENDER_EXTRA = "pip install 'corral[render]'"
"""how to install what rendering needs (pygame for gymnasium's own envs' windows, moviepy for video)"""

PYGAME_ENVS = ("gymnasium.envs.classic_control", "gymnasium.envs.box2d", "gymnasium.envs.toy_text")
"""the modules of gymnasium's envs that draw with pygame"""


@dataclass(frozen=True)
class Display:
    """How an env runner's sub-environment 0 is shown: in a window, recorded to a folder, or both.

    Args:
        window: draw it in a window at every step.
        video_folder: record its episodes as MP4 files here; None records none.
        every_episode: record every episode (evaluation), else gymnasium's schedule (training).
        prefix: the start of each video's file name.
        file_format: ``"mp4"`` or ``"gif"``.
    """

    window: bool
    video_folder: str | None
    every_episode: bool
    prefix: str
    file_format: str = "mp4"

    @property
    def render_mode(self) -> str:
        """The render mode the sub-environment is made in: frames for a video, else a window."""
        return "rgb_array" if self.video_folder is not None else "human"

    def check(self, env_id: str | None, label: str) -> None:
        """Refuse, before anything is made, what this display cannot show (see :func:`check_display`).

        Args:
            env_id: the gymnasium id the env is made from, if it is one.
            label: the env's name, for the message.
        """
        check_display(self, env_id, label)

    def wrap(self, env: gym.Env, label: str) -> gym.Env:
        """Sub-environment 0 wrapped to be shown or recorded (see :func:`displayed`).

        Args:
            env: the sub-environment, made in :attr:`render_mode` where it could be.
            label: the env's name, for messages.

        Returns:
            The wrapped env.
        """
        return displayed(env, self, label)


@integration
def sub_environment_display(config: AlgorithmConfig, worker_index: int, stream: str) -> Display | None:
    """The seam's answer: the display of this runner's sub-environment 0 (see :func:`display_for`).

    Args:
        config: the runner's config.
        worker_index: the runner's index (0 local).
        stream: ``"sampling"`` or ``"evaluation"``.

    Returns:
        The display, or None when this runner shows nothing.
    """
    return display_for(config, worker_index, stream)


def display_for(config: AlgorithmConfig, worker_index: int, stream: str) -> Display | None:
    """Whether (and how) this env runner shows its sub-environment 0: only the first runner that steps does.

    Args:
        config: the runner's config (the evaluation config for evaluation runners):
            ``render_env`` and ``record_env``, already a folder (the algorithm resolves ``True``).
        worker_index: the runner's index (0 local).
        stream: ``"sampling"`` or ``"evaluation"``.

    Returns:
        The display, or None when this runner shows nothing.
    """
    record = config.record_env
    if not config.render_env and not record:
        return None
    remote = config.evaluation_num_env_runners if stream == "evaluation" else config.num_env_runners
    if worker_index != (1 if remote > 0 else 0):
        return None
    folder = str(record) if record and record is not True else None
    evaluation = stream == "evaluation"
    prefix = "evaluation" if evaluation else "training"
    return Display(bool(config.render_env), folder, evaluation, prefix, config.record_env_format)


def check_display(display: Display, env_id: str | None, label: str) -> None:
    """Refuse, before anything is made, a display whose optional dependencies are missing.

    Args:
        display: what is to be shown.
        env_id: the gymnasium id the env is made from, if it is one.
        label: the env's name, for the message.

    Raises:
        EnvError: moviepy (for video) or pygame (for a window of gymnasium's own envs) is not installed.
    """
    if display.video_folder is not None and importlib.util.find_spec("moviepy") is None:
        raise EnvError(f"record_env needs moviepy to write the videos of {label}: {RENDER_EXTRA}")
    # (frames shown in a window, from any env, are checked where HumanRendering is put around it)
    entry = str(gym.spec(env_id).entry_point) if env_id is not None else ""
    if display.window and entry.startswith(PYGAME_ENVS) and importlib.util.find_spec("pygame") is None:
        raise EnvError(f"render_env needs pygame to draw {label} in a window: {RENDER_EXTRA}")


def displayed(env: gym.Env, display: Display, label: str) -> gym.Env:
    """``env`` (sub-environment 0, made in ``display.render_mode`` if it could be) wrapped to show or record it.

    Args:
        env: the sub-environment.
        display: what to show.
        label: the env's name, for messages.

    Returns:
        The env behind ``RecordVideo`` and a window, as asked.

    Raises:
        EnvError: a video is asked of an env that gives no frames (its ``render_mode`` is not ``"rgb_array"``),
            or its frames are to be shown in a window without pygame.
    """
    mode = getattr(env, "render_mode", None)
    if display.video_folder is not None:
        if mode not in ("rgb_array", "rgb_array_list"):
            raise EnvError(
                f"record_env needs frames, but {label} was made with render_mode={mode!r}; make it with "
                "render_mode='rgb_array' (a gymnasium id is; an env class takes it from env_config, e.g. "
                "env_config={'render_mode': 'rgb_array'}, if its constructor does)"
            )
        trigger = (lambda episode: True) if display.every_episode else None
        with warnings.catch_warnings():  # training and evaluation may share the folder: each names its own files
            warnings.filterwarnings("ignore", message="Overwriting existing videos", module="gymnasium")
            recorder = RecordGif if display.file_format == "gif" else gym.wrappers.RecordVideo
            env = recorder(env, display.video_folder, episode_trigger=trigger, name_prefix=display.prefix)
    if not display.window or mode == "human":
        return env
    if mode in ("rgb_array", "rgb_array_list"):
        if importlib.util.find_spec("pygame") is None:  # HumanRendering draws the frames with pygame
            raise EnvError(f"render_env needs pygame to show the frames of {label} in a window: {RENDER_EXTRA}")
        return gym.wrappers.HumanRendering(env)
    return RenderEveryStep(env)


class RecordGif(gym.wrappers.RecordVideo):
    """gymnasium's RecordVideo, writing each episode as an animated GIF (moviepy's ``write_gif``) instead of an MP4."""

    def stop_recording(self) -> None:
        """Write the frames recorded so far as ``<name>.gif`` and stop recording."""
        if self.recorded_frames:
            from moviepy.video.io.ImageSequenceClip import ImageSequenceClip

            clip = ImageSequenceClip(self.recorded_frames, fps=self.frames_per_sec)
            clip.write_gif(os.path.join(self.video_folder, f"{self._video_name}.gif"), logger=None)
        self.recorded_frames, self.recording, self._video_name = [], False, None


class RenderEveryStep(gym.Wrapper):
    """Calls ``render()`` after every reset and step: RLlib's ``render_env`` contract for an env that draws itself.

    Args:
        env: an env made without a gymnasium render mode, whose ``render()`` opens and updates its own window.
    """

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset, then render."""
        result = self.env.reset(**kwargs)
        self.env.render()
        return result

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step, then render."""
        result = self.env.step(action)
        self.env.render()
        return result

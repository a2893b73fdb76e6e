"""Atari games (the ``atari`` extra: ale-py and OpenCV) with DeepMind's preprocessing, as RLlib gives them.

A gymnasium id of an ale-py game (``ALE/Pong-v5``, ``PongNoFrameskip-v4``) is
an Atari env (``is_atari=None`` detects it; ``True``/``False`` decide). Each
sub-environment is made with ``frameskip=1`` and wrapped in gymnasium's
``AtariPreprocessing`` (up to 30 no-op starts, the action repeated 4 frames
with the last two max-pooled, 84x84 grayscale) and the last 4 frames stacked
channels-last, (84, 84, 4) uint8, which the catalog's DQN-paper CNN reads.
Rewards are sign-clipped unless ``clip_rewards`` says otherwise.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from corral.core.contracts.integration_specs import integration
from corral.core.environments.env_creators import env_name
from corral.errors import ConfigError, EnvError

if TYPE_CHECKING:
    from corral.core.contracts.config import AlgorithmConfig

ATARI_ID = re.compile(r"[A-Z][A-Za-z]*(NoFrameskip|Deterministic)?-v[045]")
"""the shape of ale-py's older game ids (``PongNoFrameskip-v4``): only such an unknown id registers ale-py's games"""
FRAME_STACK = 4
"""frames an observation holds"""
SCREEN_SIZE = 84
"""the side of a preprocessed frame, in pixels"""
ATARI_EXTRA = "pip install 'corral[atari]' (ale-py and opencv-python-headless)"
"""what installs what Atari envs need"""


def register_ale() -> None:
    """Register ale-py's games with gymnasium (gymnasium 1.x does not find them by itself).

    Raises:
        EnvError: ale-py is not installed, naming the extra that installs it.
    """
    try:
        import ale_py
    except ImportError:
        raise EnvError(f"Atari games need ale-py: {ATARI_EXTRA}") from None
    gym.register_envs(ale_py)


def is_ale_id(env: Any) -> bool:
    """Whether ``env`` names an ale-py game: ``ALE/<Game>-v5`` or one of the older ``<Game>[NoFrameskip]-v0/v4`` ids.

    An id gymnasium does not know yet registers ale-py's games first (an ``ALE/`` id without
    ale-py installed is an :class:`EnvError` naming the extra).
    """
    if not isinstance(env, str) or ":" in env:
        return False
    if env not in gym.registry:
        if env.startswith("ALE/"):
            register_ale()  # without ale-py: an error naming the extra
        elif ATARI_ID.fullmatch(env) and importlib.util.find_spec("ale_py") is not None:
            register_ale()
    return env in gym.registry and str(gym.registry[env].entry_point).startswith("ale_py")


def atari_wanted(config: Any) -> bool:
    """Whether a config's env gets DeepMind's preprocessing: ``is_atari``, or by default whether it is an ale-py game."""
    return bool(config.is_atari) if config.is_atari is not None else is_ale_id(config.env)


def make_atari(env_id: str, env_config: dict[str, Any], check: bool = True) -> gym.Env:
    """One Atari sub-environment with DeepMind's preprocessing, channels-last.

    Args:
        env_id: the game's gymnasium id.
        env_config: keyword arguments for ``gym.make`` (``frameskip`` is 1 unless given:
            the preprocessing repeats actions itself).
        check: wrap the game in gymnasium's env checker, as ``gym.make`` does by default.

    Returns:
        The wrapped env: observations (84, 84, 4) uint8.

    Raises:
        EnvError: OpenCV, which the preprocessing resizes with, is not installed.
    """
    env = gym.make(env_id, disable_env_checker=not check, **{"frameskip": 1, **env_config})
    try:
        env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=SCREEN_SIZE, grayscale_obs=True)
    except gym.error.DependencyNotInstalled:
        raise EnvError(f"Atari preprocessing needs OpenCV: {ATARI_EXTRA}") from None
    env = gym.wrappers.FrameStackObservation(env, FRAME_STACK)
    space = gym.spaces.Box(0, 255, (SCREEN_SIZE, SCREEN_SIZE, FRAME_STACK), np.uint8)
    return gym.wrappers.TransformObservation(env, lambda frames: np.moveaxis(frames, 0, -1), space)


@integration
def known_env_id(env_id: str) -> bool | None:
    """The seam's answer: True for an ale-py game's id, registering ale-py's games with gymnasium first."""
    return True if is_ale_id(env_id) else None


@integration
def sub_environment_maker(env_id: str, config: AlgorithmConfig) -> Callable[[dict[str, Any]], gym.Env] | None:
    """The seam's answer: every ale-py game is made here, preprocessed unless ``is_atari=False``.

    A game with ``is_atari=False`` is made by ``gym.make`` as it is, one sub-environment
    at a time: ale-py's own vector env would preprocess it.

    Args:
        env_id: the gymnasium id the config's ``env`` names.
        config: the algorithm's config (``is_atari``, ``disable_env_checking``).

    Returns:
        A function making one sub-environment from ``gym.make``'s keyword arguments, or None
        for an id that is no ale-py game.

    Raises:
        ConfigError: ``is_atari=True`` for a gymnasium id that is no ale-py game.
    """
    ale = is_ale_id(env_id)
    if config.is_atari and not ale:
        raise ConfigError(f"is_atari=True wraps ale-py games, given by their gymnasium id; {env_name(config.env)!r} is none")
    if not ale:
        return None
    check = not config.disable_env_checking
    if config.is_atari is False:
        return lambda kwargs: gym.make(env_id, disable_env_checker=not check, **kwargs)
    return lambda kwargs: make_atari(env_id, kwargs, check=check)


@integration
def default_clip_rewards(config: AlgorithmConfig) -> bool | None:
    """The seam's answer: RLlib's default for Atari, rewards clipped to their sign."""
    return True if atari_wanted(config) else None

"""The options of ``environment()`` and ``env_runners()``: what is sampled, and how."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from corral.core.contracts.options.declaring import (
    OPTIONS_MODEL_CONFIG,
    is_search_space,
    option,
)


class SamplingOptions(BaseModel):
    """A group of :class:`~corral.core.contracts.config.AlgorithmConfig`'s options (see the module docstring)."""

    model_config = OPTIONS_MODEL_CONFIG

    # --- environment -------------------------------------------------------
    env: Any = option(None, "environment")
    """a gymnasium id, a 'package.module:Class' path, a class, or a name given to corral.register_env"""
    env_config: dict[str, Any] = option({}, "environment")
    """keyword arguments for the environment's creator (an EnvContext with worker and vector indices)"""
    normalize_actions: bool = option(True, "environment")
    """for Box actions: the policy acts in [-1, 1] and actions are scaled to the env's bounds"""
    clip_actions: bool = option(False, "environment")
    """for Box actions without normalize_actions: clip actions to the env's bounds"""
    clip_rewards: bool | float | None = option(None, "environment")
    """clip rewards before learning: a number x clips to [-x, x], True takes their sign (-1, 0 or 1, as for Atari);
    None or False keeps them as they are"""
    action_mask_key: str | None = option("action_mask", "environment", min_length=1)
    """the key of a Dict observation's legal-action flags (Discrete actions): masked actions are never
    sampled or picked, and the model sees the rest of the Dict (a ModelV2 or RLModule the whole Dict, to mask
    by itself as RLlib's do); None reads no mask"""
    env_task_fn: Any = option(None, "environment")
    """curriculum: fn(result, env, env_context) -> the next task of each sub-environment, set with env.set_task()
    after every iteration (a corral.TaskSettableEnv), or its 'module:qualname'; None sets no tasks"""
    observation_space: Any = option(None, "environment")
    """the env's observation space, for an env that declares none or to replace the one it declares (observations
    are checked against it); a gymnasium space or its JSON form; None: the env's own"""
    action_space: Any = option(None, "environment")
    """the env's action space, as observation_space (a multi-agent env's policies take theirs from PolicySpec)"""
    is_atari: bool | None = option(None, "environment")
    """DeepMind's Atari preprocessing (no-op starts, frame skip 4, 84x84 grayscale, 4 stacked frames, sign-clipped
    rewards unless clip_rewards says otherwise); None: for ale-py games (the atari extra), detected by their id"""
    auto_wrap_old_gym_envs: bool = option(True, "environment")
    """wrap an env written to the old gym API (the gym package's, or reset() without a seed and a four-value step)
    to gymnasium's; False refuses it"""
    disable_env_checking: bool = option(False, "environment")
    """skip gymnasium's env checker (the spaces, and the form of the first reset and step) and the check of each
    observation against the env's observation space (NaN and inf rewards are refused regardless)"""
    render_env: bool = option(False, "environment")
    """show sub-environment 0 of the first env runner that steps (remote runner 1, else the local one; evaluation
    runners alike) in a window at every step: a gymnasium id is made with render_mode='human', an env made without
    a render mode has its render() called; needs a display, and pygame for gymnasium's own envs (the render extra)"""
    record_env: bool | Annotated[str, Field(min_length=1)] = option(False, "environment")
    """record that sub-environment's episodes as MP4 files (gymnasium's RecordVideo, with moviepy: the render extra):
    training episodes 0, 1, 8, 27, ..., 1000 and every 1000th after, and all its evaluation episodes; True writes them
    into <experiment folder>/videos, a string names the folder (RLlib's 'monitor': true is True)"""
    record_env_format: Literal["mp4", "gif"] = option("mp4", "environment")
    """the file format of record_env's videos: 'mp4' (H.264, small) or 'gif' (plays anywhere, larger)"""

    # --- env runners -------------------------------------------------------
    num_env_runners: int = option(0, "env_runners", ge=0, le=65_536)
    """number of Ray actors that sample in parallel (needs the ray extra); 0 samples in the calling process without Ray"""
    num_envs_per_env_runner: int = option(8, "env_runners", ge=1, le=65_536)
    """sub-environments each runner steps as one vector, with one batched forward pass per step"""
    rollout_fragment_length: Annotated[int, Field(ge=1, le=2**31 - 1)] | Literal["auto"] = option("auto", "env_runners")
    """steps per sub-environment in one sample call; 'auto' divides train_batch_size evenly"""
    horizon: int | None = option(None, "env_runners", ge=1, le=2**31 - 1)
    """cut every episode after this many steps (a truncation, so bootstrapped unless no_done_at_end=False), as
    gymnasium's TimeLimit does; None: episodes end when the env ends them"""
    no_done_at_end: bool = option(True, "env_runners")
    """True: an episode cut short (truncated: a time limit, horizon) bootstraps its last step from the value of its
    final observation, as gymnasium's truncated flag means; False: it is learned from as if it had terminated, with no
    value after its last step (RLlib's default before gymnasium's truncated flag replaced this option)"""
    env_to_module_connector: Any = option(None, "env_runners")
    """RLlib's new stack's fn(env) -> its env-to-module connector pieces: accepted where corral's env runners (or a
    setting) do each piece's work, said when they are built; any other piece is refused, naming what to use"""
    batch_mode: Literal["truncate_episodes", "complete_episodes"] = option("truncate_episodes", "env_runners")
    """'truncate_episodes': a sample call steps each sub-environment rollout_fragment_length times, cutting episodes
    (the cut is bootstrapped); 'complete_episodes': it steps on until each fragment holds whole episodes only"""
    enable_connectors: bool = option(True, "env_runners")
    """RLlib's switch between its two samplers, which callbacks see differently in one place: True (RLlib 2.x's
    default) gives on_postprocess_trajectory's original_batches as (policy_id, policy, batch) per agent; False as
    (policy, batch), as RLlib's older sampler did. Sampling is the same either way"""
    vectorize_mode: Literal["auto", "native", "sync"] = option("auto", "env_runners")
    """'native': the env's own vectorised implementation (gymnasium make_vec); 'sync': copies in a loop; 'auto': native if any"""
    remote_worker_envs: bool = option(False, "env_runners")
    """make each sub-environment a Ray actor (needs the ray extra), all stepped in parallel: for slow simulators. An
    env class becomes the actor itself, so a callback calls its methods with .remote() (foreach_env gives the actors)"""
    observation_filter: Literal["NoFilter", "MeanStdFilter"] = option("NoFilter", "env_runners")
    """normalise observations by running mean and std (saved in checkpoints)"""
    num_cpus_per_env_runner: float = option(1, "env_runners", ge=0, le=1024)
    """CPUs Ray reserves for each remote env runner"""
    num_gpus_per_env_runner: float = option(0, "env_runners", ge=0, le=1024)
    """GPUs Ray reserves for each remote env runner, whose policies act on them (for a large network); with 0 they act
    on the CPU, whatever num_gpus gives the learner"""
    custom_resources_per_env_runner: dict[str, float] = option({}, "env_runners")
    """other Ray resources each remote env runner needs, e.g. {'sim_license': 1}"""

    @field_validator("observation_space", "action_space", mode="before")
    @classmethod
    def _decode_space(cls, value: Any, info: ValidationInfo) -> Any:
        import gymnasium as gym

        from corral.core.common.space_codec import decode_space

        if value is None or isinstance(value, gym.Space) or is_search_space(value):
            return value
        if isinstance(value, dict):
            return decode_space(value, str(info.field_name))
        raise ValueError(
            f"{info.field_name} must be a gymnasium space, its JSON form (a dict) or None, not {type(value).__name__}"
        )

    @field_validator("clip_rewards", mode="before")
    @classmethod
    def _check_clip_rewards(cls, value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and 0 < value < float("inf"):
            return float(value)
        raise ValueError("clip_rewards takes True (each reward's sign), a number x > 0 (clip to [-x, x]), or None or False")

    @field_validator("env", mode="before")
    @classmethod
    def _check_env(cls, value: Any) -> Any:
        if value is None or isinstance(value, str) or callable(value):
            return value
        raise ValueError("env must be a gymnasium id, a 'module:Class' path, a class or a creator function")

"""Reading a config's keys: RLlib's spellings to corral's option names, and errors that name the option.

``AlgorithmConfig`` reads every key through :func:`canonical_keys`, so a key
RLlib has had in any 2.x era is understood wherever a config is given (builder
methods, ``from_dict``, ``update_from_dict``, Tune's ``param_space``,
``evaluation_config``, a checkpoint's ``config_overrides``). The tables of
names it reads are :mod:`corral.core.contracts.rllib_names`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from corral.core.common import by_value
from corral.core.common.space_codec import restore_spaces
from corral.core.contracts.options.declaring import MAX_NESTING, SCHEDULED_BY
from corral.core.contracts.options.model_config import ModelConfig
from corral.core.contracts.rllib_compat import check_framework, note_flag
from corral.core.contracts.rllib_names import (
    ABSENT_KEYS,
    BEHAVIOUR_KEYS,
    EXPERIMENTAL_FLAGS,
    LEGACY_KEYS,
    OPTIMIZATION_KEYS,
    TF_ONLY_KEYS,
)
from corral.errors import ConfigError, did_you_mean, short_repr

if TYPE_CHECKING:  # the config module imports this one
    from corral.core.contracts.config import AlgorithmConfig


logger = logging.getLogger("corral")


def canonical_keys(config_class: type[AlgorithmConfig], values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with every key in corral's spelling: RLlib's older names, its ``optimization`` group and its
    schedules given as an option's value are translated; RLlib keys that set no corral option are answered.

    Args:
        config_class: the config whose options the keys name.
        values: the keys and values as given (what ``to_dict()`` wrote by value is restored).

    Returns:
        The values by corral's option names.

    Raises:
        ConfigError: a key names no option of ``config_class`` (with the closest), or is one corral does not have.
    """
    out: dict[str, Any] = {}
    buffer_type: str | None = None
    values = by_value.restore(values, MAX_NESTING)  # what to_dict() wrote by value: its objects again
    values = {key: restore_spaces(value, str(key), 1, MAX_NESTING) for key, value in values.items()}  # spaces in options
    for key, value in values.items():
        if not isinstance(key, str):
            kind = type(key).__name__
            raise ConfigError(f"the config key {short_repr(key)} ({kind}) is no option name; config keys are strings")
        if answer_rllib_key(key, value):
            continue
        if key == "prioritized_replay" and "replay_buffer_config" in config_class.model_fields:  # Ray 1.x's buffer switch
            if not isinstance(value, bool):
                raise ConfigError(f"prioritized_replay takes True or False, not {short_repr(value)}")
            buffer_type = "PrioritizedReplayBuffer" if value else "ReplayBuffer"
            continue
        if key in ("optimization", "optimization_config") and isinstance(value, dict):  # Ray 1.x's name, then 2.x's
            for inner, inner_value in value.items():
                name = OPTIMIZATION_KEYS.get(inner)
                if name is None or name not in config_class.model_fields:
                    raise unknown_key(config_class, f"{key}.{inner}")
                out[name] = inner_value
            continue
        name = LEGACY_KEYS.get(key, key)
        if name not in config_class.model_fields:
            raise unknown_key(config_class, key)
        schedule = SCHEDULED_BY.get(name)
        if schedule in config_class.model_fields and isinstance(value, (list, tuple)):  # RLlib: lr=[[0, 1e-3], [1e6, 1e-5]]
            out[schedule] = value
            first = value[0] if value else None
            if isinstance(first, (list, tuple)) and len(first) == 2:
                out[name] = first[1]
            continue
        out[name] = value
    if buffer_type is not None:  # a replay_buffer_config's own type wins
        replay = out.get("replay_buffer_config")
        out["replay_buffer_config"] = {"type": buffer_type, **(replay if isinstance(replay, dict) else {})}
    if isinstance(out.get("input_config"), dict) and "paths" in out["input_config"]:
        _read_dataset_paths(out)
    return out


def _read_dataset_paths(out: dict[str, Any]) -> None:
    """RLlib 2.x's ``input_="dataset"`` with ``input_config={"paths": [...]}``: corral's ``input_`` names the files.

    As in RLlib, the paths are read only with ``input_="dataset"``; another
    input leaves them unread, which is said in a warning.

    Raises:
        ConfigError: ``input_="dataset"`` without the paths in the same call, or paths that are not strings.
    """
    input_config = dict(out["input_config"])
    paths = input_config.pop("paths")
    out["input_config"] = input_config
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise ConfigError(f"input_config paths is a file path or a list of them, not {short_repr(paths)}")
    if out.get("input_") == "dataset":
        out["input_"] = paths
        return
    logger.warning(
        "input_config paths %s are read only with input_='dataset', as in RLlib; this run's input is %s",
        short_repr(paths),
        short_repr(out.get("input_", "the env runners' sampling")),
    )


def unknown_key(config_class: type[AlgorithmConfig], key: str) -> ConfigError:
    """The error for a key that names no option: why, for an RLlib option corral does not have; else the closest name.

    Args:
        config_class: the config.
        key: the key as given.

    Returns:
        The error, to raise.
    """
    if key in ABSENT_KEYS:
        return ConfigError(f"{key!r} is an RLlib option that corral does not have: {ABSENT_KEYS[key]}")
    hint = did_you_mean(
        key, [*config_class.model_fields, *(old for old, new in LEGACY_KEYS.items() if new in config_class.model_fields)]
    )
    return ConfigError(f"{config_class.__name__} has no option {key!r}.{hint or ' `corral train --help-config` lists them.'}")


def config_error(config_class: type[AlgorithmConfig], exc: ValidationError) -> ConfigError:
    """Pydantic's validation errors as one ConfigError naming each option, the value and what is allowed.

    Args:
        config_class: the config.
        exc: pydantic's error.

    Returns:
        The error, to raise.
    """
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not isinstance(p, int))
        error = err.get("ctx", {}).get("error")
        if isinstance(error, ConfigError):  # a validator's own message names the option and the value
            lines.append(str(error))
        elif err["type"] == "extra_forbidden":
            parent = loc.rpartition(".")[0]
            key = str(err["loc"][-1])
            choices = list(ModelConfig.model_fields) if parent == "model" else list(config_class.model_fields)
            lines.append(f"{parent or config_class.__name__} has no key {key!r}.{did_you_mean(key, choices)}")
        else:
            lines.append(f"{loc}={err['input']!r} is invalid: {err['msg']}")
    return ConfigError("; ".join(dict.fromkeys(lines)))


def answer_rllib_key(key: str, value: Any) -> bool:
    """Answer an RLlib key that sets no corral option (framework, TensorFlow's, behaviour, experimental flags).

    Args:
        key: the key as given.
        value: its value.

    Returns:
        Whether ``key`` was one of them (said at INFO or in a warning).

    Raises:
        ConfigError: a value corral does not take for it.
    """
    if key in ("framework", "framework_str"):  # framework_str: the attribute .framework() sets, as a key
        check_framework(value)
    elif key in EXPERIMENTAL_FLAGS:
        note_flag(key, value)
    elif key in TF_ONLY_KEYS:
        logger.warning("%s is a TensorFlow option; corral runs on torch and ignores it", key)
    elif key == "env_runner_cls":
        check_env_runner_class(value)
    elif key in BEHAVIOUR_KEYS:
        kept, why = BEHAVIOUR_KEYS[key]
        if not any(value is v for v in kept):
            raise ConfigError(f"{key}={short_repr(value)} is not what corral does: {why}; remove it or set {key}={kept[0]}")
        logger.info("%s=%r: corral always does this (%s)", key, value, why)
    else:
        return False
    return True


ENV_RUNNER_CLASSES = (
    "corral.core.sampling.env_runner:EnvRunner",
    "corral.core.sampling.multi_agent_env_runner:MultiAgentEnvRunner",
)
"""RLlib's SingleAgentEnvRunner and MultiAgentEnvRunner in corral: the two env runners it picks between by the env"""


def check_env_runner_class(value: Any) -> None:
    """Accept RLlib's ``env_runner_cls`` where it names one of corral's env runners (or none), which corral picks itself.

    Args:
        value: the class given.

    Raises:
        ConfigError: another class (corral takes no env runner classes of a user's).
    """
    path = f"{getattr(value, '__module__', '')}:{getattr(value, '__qualname__', '')}"
    if value is not None and path not in ENV_RUNNER_CLASSES:
        raise ConfigError(
            f"env_runner_cls={short_repr(value)}: corral samples with its own env runners (RLlib's SingleAgentEnvRunner and "
            "MultiAgentEnvRunner), picked by the env; remove env_runner_cls, and change how episodes are sampled "
            "with callbacks (on_episode_step, on_sample_end) or an env wrapper"
        )
    logger.info("env_runner_cls=%s: corral picks its single- or multi-agent env runner by the env", short_repr(value))

"""What a checkpoint may make corral import: only what is registered or installed, unless the user trusts it.

A checkpoint's ``config.json`` names code as strings: the environment
(``"pkg.mod:Env"``), callbacks classes and a custom model; its
``corral_checkpoint.json`` names the algorithm. Resolving such a string imports
a module and calls what it finds, so a tampered checkpoint could run any code
(``"subprocess:getoutput"`` as an env creator runs a shell command with
``env_config`` as its argument). Loading therefore resolves names only
against what was registered or installed on purpose:

- environments: names given to ``corral.register_env`` (or Ray Tune's) and gymnasium ids;
- custom models: names given to ``ModelCatalog.register_custom_model`` (a name is data: the
  script that loads the checkpoint registers it again, and an unknown name is refused by name);
- algorithms: registered plugin names (from the distribution the checkpoint records);
- explorations: registered plugin names (the only way they are named);
- callbacks, models and environments that are corral's own classes, and
  ``make_multi_agent``'s classes of an env that is itself allowed.

Any other import path is refused with a :class:`CheckpointError` that names it
and the two ways to proceed: pass the object yourself
(``from_checkpoint(path, env=..., policy_mapping_fn=..., callbacks=...)`` or
``config_overrides``), or ``trust_code=True`` (``corral evaluate --trust-code``)
for a checkpoint you trust. Even then, no module inside the checkpoint folder is
ever imported. What the saving script defined itself (``__main__``, lambdas) is
in ``config.json`` by value (:mod:`corral.core.common.by_value`): refused
the same way, and unpickled only with ``trust_code=True``; in the process that
saved it (RLlib's save-then-reload scripts) it is that process's own object
again, matched by its exact pickle, and nothing is unpickled.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from corral.core.common import by_value
from corral.core.common.import_paths import is_import_path, split_import_path
from corral.core.persistence.loggers import NOOP_LOGGERS
from corral.errors import CheckpointError

CODE_FIELDS = {
    "env": "environment",
    "callbacks_class": "callbacks class",
    "custom_model": "custom model",
    "custom_action_dist": "custom action distribution",
    "policy_mapping_fn": "policy mapping function",
    "policies_to_train": "policies_to_train function",
    "observation_fn": "observation function",
    "custom_evaluation_function": "custom evaluation function",
    "env_task_fn": "env task function",
    "env_to_module_connector": "env-to-module connector builder",
    "exploration": "exploration class",
    "policy_class": "policy class",
    "logger": "result logger class",
    "replay_buffer": "replay buffer class",
    "learner_class": "Learner class",
    "config_class": "policy's config class",
}
"""Config fields whose strings are import paths, and what each names."""

FUNCTION_FIELDS = (
    "policy_mapping_fn",
    "policies_to_train",
    "observation_fn",
    "custom_evaluation_function",
    "env_task_fn",
    "env_to_module_connector",
)
"""config fields holding a function, which a string names by its import path"""

_TYPED_GROUPS = {"exploration_config": "exploration", "logger_config": "logger", "replay_buffer_config": "replay_buffer"}
"""config groups whose 'type' may be a class's import path, and the kind of code each names"""

_LEGACY_NAMES = {"callbacks": "callbacks_class"}
_MODEL_CLASS_KEYS = ("custom_model", "custom_action_dist")
"""the keys of a model's options that name a class: a name given to ModelCatalog, or an import path"""
_HOW_TO_PASS = {
    "env": "from_checkpoint(path, env=...)",
    "callbacks_class": "from_checkpoint(path, callbacks=[...])",
    "custom_model": 'config_overrides={"model": {...}}',
    "custom_action_dist": 'config_overrides={"model": {...}}',
    "policy_mapping_fn": "from_checkpoint(path, policy_mapping_fn=...)",
    "policies_to_train": "from_checkpoint(path, policies_to_train=...)",
    "observation_fn": 'config_overrides={"observation_fn": ...}',
    "custom_evaluation_function": 'config_overrides={"custom_evaluation_function": ...}',
    "env_task_fn": 'config_overrides={"env_task_fn": ...}',
    "env_to_module_connector": 'config_overrides={"env_to_module_connector": ...}',
    "exploration": 'config_overrides={"exploration_config": {...}}',
    "policy_class": 'config_overrides={"policies": {...}}',
    "logger": 'config_overrides={"logger_config": {...}}',
    "replay_buffer": 'config_overrides={"replay_buffer_config": {...}}',
    "learner_class": 'config_overrides={"learner_class": ...}',
    "config_class": 'config_overrides={"policies": {...}}',
}


def check_config_references(config: dict[str, Any], folder: Path, trust_code: bool, supplied: Collection[str]) -> None:
    """Refuse every import path in a checkpoint's config that is neither registered nor trusted.

    Args:
        config: the checkpoint's ``config.json``.
        folder: the checkpoint folder; nothing inside it may be imported, trusted or not.
        trust_code: the user trusts this checkpoint: import paths outside the folder are allowed.
        supplied: config fields the user passes themselves; the checkpoint's values for them are ignored.

    Raises:
        CheckpointError: a name would import code that is neither registered nor trusted,
            or lies inside the checkpoint folder.
    """
    try:
        written_by_value = by_value.table_of(config)
    except ValueError as exc:
        raise CheckpointError(f"{folder / 'config.json'}: {exc}") from None
    for field, where, value in _references(config):
        if field in supplied and where == field:
            continue
        what = CODE_FIELDS[field]
        if value in written_by_value:
            if trust_code or by_value.written_here(written_by_value[value]):
                continue  # unpickled when the config is read, inside by_value.trusted(); or the script's own object
            raise CheckpointError(
                f"{folder / 'config.json'} holds the {what} {value!r} ({where}) by value, pickled by the script that "
                f"saved it; unpickling it would run code from the checkpoint. Pass it yourself "
                f"({_HOW_TO_PASS[field]}), or, if you trust this checkpoint, load it with trust_code=True "
                "(corral evaluate --trust-code)"
            )
        if _is_registered(field, value):
            continue
        if trust_code:
            check_outside(value, folder, f"{where}={value!r}")
            continue
        raise CheckpointError(
            f"{folder / 'config.json'} names the {what} {value!r} ({where}), which is not registered with corral; "
            f"loading it would import and run code named by the checkpoint. Pass it yourself "
            f"({_HOW_TO_PASS[field]}), or, if you trust this checkpoint, load it with trust_code=True "
            "(corral evaluate --trust-code)"
        )


def check_outside(path: str, folder: Path, label: str) -> None:
    """Refuse an import path whose module lies inside the checkpoint folder (found without importing anything).

    Args:
        path: an import path from the checkpoint, ``"package.module:Name"`` or
            ``"package.module.Name"``.
        folder: the checkpoint folder.
        label: names the path's place in the checkpoint (``"callbacks_class='pkg.mod:MyCallbacks'"``), for the error message.

    Raises:
        CheckpointError: the path is relative, or its top-level module or package is in ``folder``.
    """
    module = split_import_path(path)[0]
    if not module or module.startswith("."):
        raise CheckpointError(f"{label} is not an absolute import path ('package.module:Name')")
    top = module.split(".")[0]
    root = folder.resolve()
    for location in _locations(top):
        if location == root or root in location.parents:
            raise CheckpointError(
                f"{label} would import {top!r} from inside the checkpoint folder ({location}); "
                "corral never imports code shipped in a checkpoint, even with trust_code=True"
            )


def _locations(top: str) -> list[Path]:
    """Where the top-level module ``top`` is, or would be imported from (its spec is found, not executed)."""
    module = sys.modules.get(top)
    if module is not None:
        paths = list(getattr(module, "__path__", []) or [])
        file = getattr(module, "__file__", None)
        return [Path(p).resolve() for p in [*paths, *([file] if file else [])]]
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: finders only, no module code runs
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    found = list(spec.submodule_search_locations or [])
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        found.append(spec.origin)
    return [Path(p).resolve() for p in found]


def _references(config: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str, str]]:
    """``(field, where, path)`` for every string in ``config`` that would be imported (or is written by value)."""
    for key, value in config.items():
        field = _LEGACY_NAMES.get(key, key)
        where = f"{prefix}{key}"
        if field == "env" and isinstance(value, str):
            yield field, where, _copied_env(value)
        elif field == "callbacks_class":
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str):
                    yield field, where, item
        elif isinstance(value, dict) and any(isinstance(value.get(name), str) for name in _MODEL_CLASS_KEYS):
            # model, and any other network's options an algorithm has (SAC's policy_model_config, q_model_config)
            yield from ((name, f"{where}.{name}", value[name]) for name in _MODEL_CLASS_KEYS if isinstance(value.get(name), str))
        elif (field in FUNCTION_FIELDS or field == "learner_class") and isinstance(value, str):
            yield field, where, value
        elif field in _TYPED_GROUPS and isinstance(value, dict):
            if isinstance(value.get("type"), str) and value["type"] not in NOOP_LOGGERS:
                yield _TYPED_GROUPS[field], f"{where}.type", value["type"]
            underlying = value.get("underlying_replay_buffer_config")  # RLlib's: the buffer each policy gets
            if isinstance(underlying, dict) and isinstance(underlying.get("type"), str):
                yield _TYPED_GROUPS[field], f"{where}.underlying_replay_buffer_config.type", underlying["type"]
        elif field == "policies" and isinstance(value, dict):
            for policy_id, spec in value.items():
                if isinstance(spec, dict):
                    yield from _spec_references(spec, f"{where}.{policy_id}")
        elif field == "evaluation_config" and isinstance(value, dict) and not prefix:
            yield from _references(value, "evaluation_config.")


def _spec_references(spec: dict[str, Any], where: str) -> Iterator[tuple[str, str, str]]:
    """What :func:`_references` yields for one policy spec: its class, its config's class and its own options."""
    if isinstance(spec.get("policy_class"), str):
        yield "policy_class", f"{where}.policy_class", spec["policy_class"]
    own = spec.get("config")
    if isinstance(own, dict):  # a policy's own custom model, or a whole config of the policy's own algorithm
        if isinstance(own.get("config_class"), str):
            yield "config_class", f"{where}.config.config_class", own["config_class"]
        yield from _references(own, f"{where}.config.")


def _copied_env(env: str) -> str:
    """The env a ``make_multi_agent`` reference copies per agent (what resolving it imports), else ``env`` itself."""
    from corral.core.environments.multi_agent_env import multi_agent_inner

    inner = multi_agent_inner(env)
    return env if inner is None else _copied_env(inner)


def _is_import_path(field: str, value: str) -> bool:
    """Whether an env, exploration or custom model name would be imported, as resolving it decides (registered names first)."""
    if not is_import_path(value):
        return False
    if field in _MODEL_CLASS_KEYS:
        from corral.core.contracts.options.model_names import registered_model_class

        return registered_model_class(value) is None
    if field == "env" and ":" not in value:
        import gymnasium as gym

        from corral.core.environments.envs import registered_creators

        return value not in gym.registry and not registered_creators(value)
    return True


def _is_registered(field: str, value: str) -> bool:
    """Whether resolving ``value`` imports only what was registered or installed on purpose."""
    if field in ("env", "exploration", "replay_buffer", *_MODEL_CLASS_KEYS) and not _is_import_path(field, value):
        return True  # a registered name (or a gymnasium id), or unknown (refused later): never an import
    # A path into corral's own package (already imported, so it cannot come from elsewhere).
    module = split_import_path(value)[0]
    return module == "corral" or module.startswith("corral.")

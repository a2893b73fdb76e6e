"""How a config option is declared (:func:`option`), and the limits and checks that every option shares."""

from __future__ import annotations

import copy as _copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from corral._lazy import is_instance_of_loaded
from corral.core.common import by_value
from corral.errors import ConfigError

OPTIONS_MODEL_CONFIG = ConfigDict(
    extra="forbid",
    validate_assignment=True,
    use_attribute_docstrings=True,
    arbitrary_types_allowed=True,
    protected_namespaces=(),
    allow_inf_nan=False,
)
"""how every group of options reads and checks its values (the docstring under a field is its description)"""

GROUPS = (
    "environment",
    "env_runners",
    "training",
    "evaluation",
    "exploration",
    "callbacks",
    "debugging",
    "reporting",
    "resources",
    "learners",
    "fault_tolerance",
    "checkpointing",
    "framework",
    "multi_agent",
    "offline_data",
)

ALSO_SET_IN = {
    ("training", "learner_class"),
    ("training", "learner_config_dict"),
    ("training", "clip_actions"),  # RLlib's SAC and CQL take it in training() too
    # Ray 2.x until 2.10 set the env runners' resources in resources(num_cpus_per_worker=..., num_gpus_per_worker=...)
    ("resources", "num_cpus_per_env_runner"),
    ("resources", "num_gpus_per_env_runner"),
    ("resources", "custom_resources_per_env_runner"),
}
"""(builder method, option) pairs where a method other than the option's group sets it, as Ray 2.10-2.30 had
them, and Ray 2.9's resources() its env runners' (Ray 2.5-2.9 also set every Learner option in resources())"""

MERGED_GROUPS = ("model", "replay_buffer_config", "q_model_config", "policy_model_config", "optimizer", "exploration_config")
"""options holding a group of settings: a partial dict given for one keeps the current value's other keys
(an ``optimizer`` or ``exploration_config`` of another type replaces the current one: its arguments would not fit)"""

OPTIMIZERS = {
    "adam": "Adam",
    "adamw": "AdamW",
    "rmsprop": "RMSprop",
    "sgd": "SGD",
    "adagrad": "Adagrad",
    "adamax": "Adamax",
    "nadam": "NAdam",
    "radam": "RAdam",
}
"""the ``optimizer`` option's types and the ``torch.optim`` class each names"""


def is_search_space(value: Any) -> bool:
    """Whether ``value`` is a Ray Tune search space: ``tune.grid_search([...])`` or a sampler (``tune.uniform``, ...).

    A config carries one in place of a value until a Tune trial gives it a concrete value.
    """
    if isinstance(value, dict):
        return set(value) == {"grid_search"} and isinstance(value["grid_search"], list)
    return is_instance_of_loaded(value, "ray.tune.search.sample", "Domain")


def option(default: Any, group: str, **constraints: Any) -> Any:
    """Declare a config field: its default, its builder group and its constraints.

    Args:
        default: the default value (lists and dicts are copied per instance).
        group: the builder method that sets it, one of :data:`GROUPS`.
        **constraints: pydantic ``Field`` constraints such as ``gt=0``.
    """
    if group not in GROUPS:
        raise ValueError(f"unknown config group {group!r}; groups are {', '.join(GROUPS)}")
    if isinstance(default, (list, dict, BaseModel)):
        return Field(default_factory=lambda: _copy.deepcopy(default), json_schema_extra={"group": group}, **constraints)
    return Field(default, json_schema_extra={"group": group}, **constraints)


OUTPUT_FORMATS = ("parquet", "json")
"""the file formats of offline output and input (``output_config`` / ``input_config`` ``format``)"""
MAP_BATCHES_KEYS = ("concurrency", "num_cpus", "num_gpus", "memory")
"""the Ray Data ``map_batches`` arguments corral passes to the tasks that read input files"""

MAX_NESTING = 32
"""How deep dicts and lists inside a config may nest."""


def check_plain_data(name: str, value: Any) -> None:
    """Refuse a config value that ``to_dict()`` could not write as JSON and read back.

    Dicts (with string keys), lists, tuples, strings, numbers, booleans and None
    are data; classes and functions are allowed too (stored as
    ``"module:qualname"``). A container inside itself, nesting deeper than
    :data:`MAX_NESTING`, and any other object are refused.

    Args:
        name: the field's name; error messages locate the bad value from it
            (``name.key[0]``).
        value: the value to check; pydantic models inside it pass as they are.

    Raises:
        ConfigError: naming the field, the place inside it and what was found.
    """
    stack: list[tuple[Any, str, int, tuple[int, ...]]] = [(value, name, 0, ())]
    while stack:
        item, where, depth, ancestors = stack.pop()
        if isinstance(item, (set, frozenset)):
            item = sorted(item, key=repr)  # written as a list
        if isinstance(item, (dict, list, tuple)):
            if id(item) in ancestors:
                raise ConfigError(f"{where} contains itself; a config holds plain data (dicts, lists, numbers, strings)")
            if depth >= MAX_NESTING:
                raise ConfigError(f"{where} nests deeper than {MAX_NESTING} levels; a config holds plain, shallow data")
            inner = (*ancestors, id(item))
            if isinstance(item, dict):
                for key, element in item.items():
                    if not isinstance(key, str):
                        raise ConfigError(f"{where} has the key {key!r}; keys in a config are strings")
                    stack.append((element, f"{where}.{key}", depth + 1, inner))
            else:
                stack.extend((element, f"{where}[{i}]", depth + 1, inner) for i, element in enumerate(item))
        elif not (
            item is None
            or isinstance(item, (bool, int, float, str, BaseModel, type))
            or (callable(item) and hasattr(item, "__qualname__"))
            or is_instance_of_loaded(item, "corral.core.contracts.policy_spec", "PolicySpec")
            or is_instance_of_loaded(item, "gymnasium", "Space")  # a PolicySpec's space, given as a tuple item
        ):
            raise ConfigError(
                f"{where}={item!r} is a {type(item).__name__}; a config holds plain data "
                "(dicts, lists, numbers, strings, booleans, None) and classes or functions"
            )


MAX_SEED = 2**63 - 1
"""The largest seed: torch and numpy take any integer in [0, 2**63)."""

SCHEDULES = {"lr_schedule": "lr", "entropy_coeff_schedule": "entropy_coeff"}
"""Schedule fields and the field each schedules; every value of a schedule must be valid for its field."""

SCHEDULED_BY = {name: schedule for schedule, name in SCHEDULES.items()}
"""the schedule of each option that has one: RLlib accepts the schedule as the option's own value"""

MAX_UPDATES_PER_ENV_STEP = 128
"""The largest replay ratio in gradient updates per sampled env step (``training_intensity / train_batch_size``)."""


def to_jsonable(value: Any, nested: bool = False) -> Any:
    """``value`` as JSON data: models dumped, spaces encoded, classes and functions by name (or by value).

    Args:
        value: an option's value.
        nested: whether ``value`` sits inside another value; a space there is marked
            (:data:`~corral.core.common.space_codec.SPACE_KEY`) so that reading the config turns it back into one.
    """
    if isinstance(value, BaseModel):
        return value.model_dump()
    if is_instance_of_loaded(value, "corral.core.contracts.policy_spec", "PolicySpec"):
        return to_jsonable(value.to_dict())  # its own config may hold classes too
    if is_instance_of_loaded(value, "gymnasium.spaces.space", "Space"):
        from corral.core.common.space_codec import SPACE_KEY, encode_space

        return {SPACE_KEY: encode_space(value)} if nested else encode_space(value)
    if isinstance(value, type) or (callable(value) and hasattr(value, "__qualname__")):
        return by_value.encode(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, nested=True) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, nested=True) for v in value]
    return value

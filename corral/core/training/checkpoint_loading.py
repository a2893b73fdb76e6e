"""Reading an algorithm checkpoint back: its config with the user's overrides, its policies one by one.

Module functions that :class:`~corral.core.training.checkpointing.Checkpointing`
and :class:`~corral.core.training.state.AlgorithmState` share: they never import
what the checkpoint names unless the user gave it or ``trust_code`` allows it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral.core.common import by_value
from corral.core.common.space_codec import decode_space
from corral.core.common.spaces import space_to_json
from corral.core.contracts.config import LEGACY_KEYS, AlgorithmConfig
from corral.core.contracts.multi_agent_config import policy_config
from corral.core.devices import restorable_here
from corral.core.learning.policy import Policy, build_policy
from corral.core.persistence import checkpoints
from corral.core.persistence.safe_loading import check_config_references
from corral.core.results import finite_number
from corral.errors import CheckpointError, ConfigError, CorralError

if TYPE_CHECKING:  # the class these functions serve
    from corral.core.training.algorithm import Algorithm


def checkpoint_config(
    ckpt: checkpoints.Checkpoint, algo_class: type[Algorithm], overrides: dict[str, Any], trust_code: bool
) -> AlgorithmConfig:
    """The checkpoint's config with ``overrides`` on top; what the overrides replace is never resolved or imported.

    Args:
        ckpt: the checkpoint, read.
        algo_class: the algorithm whose config class reads it.
        overrides: options the user gives again (env, callbacks, ...), in any spelling the config takes.
        trust_code: import what the checkpoint names by path even if it is not registered.

    Returns:
        The config, with the options that fit this machine (devices) adjusted and said so.

    Raises:
        CheckpointError: the stored config is not a valid config of ``algo_class``, or names code not registered.
    """
    supplied = set(algo_class.config_class._canonical_keys(overrides))
    check_config_references(ckpt.config, ckpt.folder, trust_code, supplied)
    saved = {k: v for k, v in ckpt.config.items() if LEGACY_KEYS.get(k, k) not in supplied}
    try:
        with by_value.trusted() if trust_code else contextlib.nullcontext():  # objects stored by value unpickle
            config = algo_class.config_class.from_dict(saved)
    except ConfigError as exc:
        raise CheckpointError(f"{ckpt.folder / checkpoints.CONFIG_FILE} is not a valid {algo_class.name} config: {exc}") from None
    return restorable_here(config.update_from_dict(overrides), supplied)


def class_and_config(
    config: AlgorithmConfig, policy_id: str, algo_class: type[Algorithm]
) -> tuple[type[Policy], AlgorithmConfig]:
    """A policy's class (its spec's, else the algorithm's) and frozen config (the algorithm's, with the spec's options on top).

    Args:
        config: the algorithm's config.
        policy_id: the policy.
        algo_class: the algorithm, whose ``get_default_policy_class(config)`` (else ``policy_class``) a spec
            without a class gets.

    Returns:
        The class and the config to build the policy with.
    """
    spec = config.policies.get(policy_id)
    policy_class = spec.policy_class if spec is not None else None
    if policy_class is None:
        policy_class = algo_class.get_default_policy_class(config) or algo_class.policy_class
    return policy_class, policy_config(config, policy_id).freeze() if spec is not None and spec.config else config


def policy_subset(ckpt: checkpoints.Checkpoint, policy_ids: list[str], trust_code: bool, keep_to_train: bool) -> dict[str, Any]:
    """Config overrides that keep only ``policy_ids`` of a checkpoint's policies (their specs checked like the rest).

    Args:
        ckpt: the checkpoint, read.
        policy_ids: the policies to keep.
        trust_code: import what their specs name by path even if it is not registered.
        keep_to_train: keep ``policies_to_train`` too, narrowed to the kept policies.

    Returns:
        ``{"policies": ..., "policies_to_train": ...}`` to lay over the checkpoint's config.

    Raises:
        CheckpointError: an id is not one of the checkpoint's policies, or a spec names code not registered.
    """
    stored = ckpt.meta["policies"]
    unknown = [pid for pid in policy_ids if pid not in stored]
    if unknown or not policy_ids:
        raise CheckpointError(f"policy_ids {policy_ids} must name some of the checkpoint's policies: {sorted(stored)}")
    saved_specs = ckpt.config.get("policies") or {}
    subset = {pid: saved_specs.get(pid) if isinstance(saved_specs, dict) else None for pid in policy_ids}
    check_config_references({"policies": subset}, ckpt.folder, trust_code, set())
    overrides: dict[str, Any] = {"policies": subset}
    saved_to_train = ckpt.config.get("policies_to_train")
    if keep_to_train and isinstance(saved_to_train, list):
        overrides["policies_to_train"] = [pid for pid in saved_to_train if pid in policy_ids]
    return overrides


def policy_of_checkpoint(algo_class: type[Algorithm], ckpt: checkpoints.Checkpoint, policy_id: str, trust_code: bool) -> Policy:
    """One policy of an algorithm checkpoint, built alone: no env, no env runners (see :meth:`Policy.from_checkpoint`).

    Args:
        algo_class: the algorithm the checkpoint names (:func:`algorithm_class_of`).
        ckpt: an algorithm checkpoint, read.
        policy_id: the policy to load.
        trust_code: as for :meth:`Algorithm.from_checkpoint` (a custom model or algorithm class by path).

    Returns:
        The policy, with the checkpoint's weights, filter statistics and timestep.

    Raises:
        CheckpointError: the checkpoint is damaged, has no such policy, stores its spaces
            only as descriptions (corral 0.1), or names code that is not registered.
    """
    spaces = ckpt.meta["policies"].get(policy_id)
    if not isinstance(spaces, dict):
        raise CheckpointError(
            f"checkpoint {str(ckpt.folder)!r} has no policy {policy_id!r}; it has {sorted(ckpt.meta['policies'])}"
        )
    try:
        observation_space, action_space = (decode_space(spaces.get(kind), kind) for kind in ("observation_space", "action_space"))
    except ValueError as exc:
        raise CheckpointError(
            f"{ckpt.folder / checkpoints.META_FILE} does not hold policy {policy_id!r}'s spaces exactly ({exc}); "
            "checkpoints of corral 0.1 describe them only: load the whole algorithm with Algorithm.from_checkpoint"
        ) from None
    # One policy needs neither the env, the callbacks nor the multi-agent functions: what the checkpoint names
    # for them is never imported.
    unused: dict[str, Any] = {
        "env": None,
        "callbacks_class": [],
        "policy_mapping_fn": None,
        "policies_to_train": None,
        "observation_fn": None,
    }
    config = checkpoint_config(ckpt, algo_class, unused, trust_code).freeze()
    policy_class, own_config = class_and_config(config, policy_id, algo_class)
    policy = build_policy(policy_class, observation_space, action_space, own_config, "policy", policy_id, "sampling", 0)
    with blame(ckpt.folder / "policies" / policy_id / checkpoints.POLICY_FILE):
        policy.set_state(ckpt.policy_states[policy_id])
    return policy


def stored_space_description(stored: Any) -> Any:
    """The description (:func:`space_to_json`) of a space a checkpoint stores: exactly, or described (corral 0.1)."""
    try:
        return space_to_json(decode_space(stored))
    except ValueError:
        return stored


@contextlib.contextmanager
def blame(file: Path) -> Iterator[None]:
    """Turn any failure while applying a checkpoint file into a CheckpointError that names the file."""
    try:
        yield
    except CorralError:
        raise
    except Exception as exc:  # a tampered file can make set_state fail in any way
        raise CheckpointError(
            f"{file} does not fit this algorithm: {type(exc).__name__}: {checkpoints._first_line(exc)}"
        ) from exc


def checkpoint_score(path: Path) -> float:
    """The score a checkpoint was saved with (for pruning); -inf for one without (unscored, or saved before any result)."""
    try:
        value = checkpoints.read_meta(path).get("score", {}).get("value")
    except CorralError:
        return -math.inf
    score = finite_number(value)
    return -math.inf if score is None else score

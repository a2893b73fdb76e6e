"""The multi-agent options of a config, read from the forms RLlib users write them in.

``config.multi_agent(policies=..., policy_mapping_fn=..., policies_to_train=...)``:
``policies`` is a set of ids, or a dict of ids to :class:`PolicySpec` (or
RLlib's 4-tuples, or ``None``); functions are given as callables or as
``"module:qualname"`` strings (YAML files, Tune); a policy may set options of
its own (``PolicySpec(config={"lr": 1e-4})``) from the training and
exploration groups. These helpers turn each form into one and say what is
wrong, naming the policy and the option.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.core.common.import_paths import import_object
from corral.core.contracts.policy_spec import OWN_CONFIG_CLASS, PolicySpec
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.contracts.config import AlgorithmConfig

PER_POLICY_GROUPS = ("training", "exploration")
"""The option groups a policy may override for itself; the rest (env, runners, ...) are the algorithm's."""


def policy_per_agent(agent_id: Any, episode: Any = None, **kwargs: Any) -> str:
    """Map agent ``agent_id`` to policy ``f"p{agent_id}"`` (agent 0 to ``p0``, ...): one policy per agent.

    A mapping a YAML file can name
    (``policy_mapping_fn: corral.core.contracts.multi_agent_config:policy_per_agent``).

    Args:
        agent_id: the agent.
        episode: the episode (unused).
        **kwargs: what else the runner passes (``worker``), unused.

    Returns:
        The policy id.
    """
    return f"p{agent_id}"


def normalize_policies(value: Any) -> dict[str, PolicySpec]:
    """``policies`` as a dict of ids to specs.

    Args:
        value: None, a set, list or tuple of policy ids, or a dict of ids to a
            :class:`PolicySpec`, a 4-tuple, a spec's dict form or None.

    Returns:
        The specs by policy id, in the order given (a set in sorted order).

    Raises:
        ValueError: an id is not a non-empty string, or a spec is malformed (naming the policy).
    """
    if value is None:
        return {}
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=str)
    if isinstance(value, (list, tuple)):
        for policy_id in value:
            if not isinstance(policy_id, str) or not policy_id:  # checked here: dict.fromkeys needs hashable ids
                raise ValueError(f"the policy id {policy_id!r} is not a non-empty string")
        value = dict.fromkeys(value)
    if not isinstance(value, dict):
        raise ValueError(f"policies must be a set of policy ids or a dict of ids to PolicySpec, not {type(value).__name__}")
    specs = {}
    for policy_id, spec in value.items():
        if not isinstance(policy_id, str) or not policy_id:
            raise ValueError(f"the policy id {policy_id!r} is not a non-empty string")
        try:
            specs[policy_id] = PolicySpec.of(spec)
        except ValueError as exc:
            raise ValueError(f"policy {policy_id!r}: {exc}") from None
    return specs


def resolve_function(value: Any, name: str) -> Callable[..., Any] | None:
    """A function option (``policy_mapping_fn``, ``observation_fn``) as a callable.

    Args:
        value: None, a callable, or its ``"module:qualname"``.
        name: the option, for the message.

    Returns:
        The callable, or None.

    Raises:
        ValueError: the value is neither, or its path does not name a callable.
    """
    if value is None:
        return None
    function: object = import_object(value) if isinstance(value, str) else value
    if not callable(function):
        raise ValueError(f"{name} must be a function or its 'module:qualname', not {type(value).__name__}")
    return function


def normalize_policies_to_train(value: Any) -> list[str] | Callable[..., Any] | None:
    """``policies_to_train`` as a list of ids or a predicate.

    Args:
        value: None (every policy learns), ids in a list, tuple or set, or
            ``fn(policy_id, batch) -> bool`` (or its ``"module:qualname"``).

    Returns:
        The ids (a set in sorted order), the predicate, or None.

    Raises:
        ValueError: an id is not a non-empty string, or a path names no callable.
    """
    if value is None or callable(value) or (isinstance(value, str) and ":" in value):
        return resolve_function(value, "policies_to_train")
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=str)
    if not isinstance(value, (list, tuple)) or not all(isinstance(i, str) and i for i in value):
        raise ValueError(f"policies_to_train must be policy ids (a list or set of strings) or a function, not {value!r:.200}")
    return list(value)


def is_policy_to_train(config: AlgorithmConfig, policy_id: str, batch: Any = None) -> bool:
    """Whether ``policy_id`` learns: it is in ``policies_to_train``, or the predicate there says so (default: all).

    Args:
        config: the algorithm's config.
        policy_id: the policy.
        batch: the samples it would learn on, for a predicate ``fn(policy_id, batch)``.

    Returns:
        True if the policy learns.
    """
    to_train = config.policies_to_train
    if to_train is None:
        return True
    if callable(to_train):
        return bool(to_train(policy_id, batch))
    return policy_id in to_train


def check_multi_agent(config: AlgorithmConfig) -> None:
    """What no single multi-agent option can check: the ids to train exist, and each policy's own options are valid.

    A policy's options are checked as they will apply: the algorithm's config
    with the policy's overrides on top, validated as a whole.

    Args:
        config: the algorithm's config.

    Raises:
        ConfigError: naming the policy id or option, and what exists.
    """
    policies, to_train = config.policies, config.policies_to_train
    if isinstance(to_train, list) and policies:
        unknown = [i for i in to_train if i not in policies]
        if unknown:
            raise ConfigError(f"policies_to_train names {unknown}, which are not in policies: {sorted(policies)}")
    for policy_id, spec in policies.items():
        if spec.config:
            own = policy_config(config, policy_id)
            try:
                own.validate()
            except ConfigError as exc:
                raise ConfigError(f"policies[{policy_id!r}].config: {exc}") from None


def policy_config(config: AlgorithmConfig, policy_id: str) -> AlgorithmConfig:
    """The config one policy trains with: the algorithm's, with the policy's own options on top.

    A policy that brings a whole config of its own algorithm (its spec's
    config an ``AlgorithmConfig``, RLlib's way to train a PPO policy and a DQN
    policy side by side) trains with that config's class and its training and
    exploration options; every other option (env, runners, seed, resources,
    ...) is the algorithm's, as for any policy.

    Args:
        config: the algorithm's config.
        policy_id: one of ``config.policies``.

    Returns:
        A new, unfrozen config without multi-agent options of its own.

    Raises:
        ConfigError: the policy's options are not options of this algorithm, belong to a
            group every policy shares, or have invalid values (naming the policy).
    """
    overrides = config.policies[policy_id].config or {}
    where = f"policies[{policy_id!r}].config"
    if OWN_CONFIG_CLASS in overrides:
        return _own_algorithm_config(config, overrides, where)
    try:
        canonical = type(config)._canonical_keys(overrides)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    shared = [key for key in canonical if type(config).field_group(key) not in PER_POLICY_GROUPS]
    if shared:
        raise ConfigError(
            f"{where} sets {shared}, which every policy shares; a policy may set options of the "
            f"{' and '.join(PER_POLICY_GROUPS)} groups only (lr, gamma, model, exploration_config, ...)"
        )
    own = config.copy()
    own.policies, own.policies_to_train, own.policy_mapping_fn = {}, None, None
    try:
        return own.update_from_dict(canonical)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _own_algorithm_config(config: AlgorithmConfig, own_options: dict[str, Any], where: str) -> AlgorithmConfig:
    """A policy's own algorithm's config: its class and per-policy options, the algorithm's shared options."""
    own_class: type[AlgorithmConfig] = own_options[OWN_CONFIG_CLASS]
    try:
        own = own_class.from_dict({key: value for key, value in own_options.items() if key != OWN_CONFIG_CLASS})
        shared = {
            name: getattr(config, name)
            for name in type(config).model_fields
            if name in own_class.model_fields and type(config).field_group(name) not in (*PER_POLICY_GROUPS, "multi_agent")
        }
        own = own.update_from_dict(shared)
    except ConfigError as exc:
        raise ConfigError(f"{where} ({own_class.__name__}): {exc}") from None
    own.policies, own.policies_to_train, own.policy_mapping_fn = {}, None, None
    return own

"""What one policy of a multi-agent config is: its class, its spaces and its own config overrides.

RLlib users write a policy as a ``PolicySpec``, a 4-tuple
``(policy_class, observation_space, action_space, config)`` or ``None``
(everything inferred); :meth:`PolicySpec.of` accepts all three, and its dict
form (:meth:`PolicySpec.to_dict`) carries the class as ``"module:qualname"``
and the spaces in :mod:`~corral.core.common.space_codec`'s JSON, so a
multi-agent config goes through YAML, Tune and checkpoints and comes back equal.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym

from corral._lazy import is_subclass_of_loaded
from corral.core.common import by_value
from corral.core.common.import_paths import import_object
from corral.core.common.space_codec import decode_space, encode_space


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """One policy of a multi-agent config; a field left None is inferred or inherited.

    Attributes:
        policy_class: the ``Policy`` subclass (or its ``"module:qualname"``); None: the algorithm's own.
        observation_space: None: inferred from the agents mapped to this policy.
        action_space: None: inferred from the agents mapped to this policy.
        config: options that differ for this policy (``{"lr": 1e-4, "gamma": 0.95}``); None: none.
    """

    policy_class: Any = None
    observation_space: gym.Space[Any] | None = None
    action_space: gym.Space[Any] | None = None
    config: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for name in ("observation_space", "action_space"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, gym.Space):
                raise ValueError(f"{name} must be a gymnasium space or None, not {type(value).__name__}")
        if self.config is not None and not isinstance(self.config, dict):
            raise ValueError(f"config must be a dict of options or None, not {type(self.config).__name__}")
        if isinstance(self.policy_class, str):
            object.__setattr__(self, "policy_class", import_object(self.policy_class))
        # the Policy class lives in a room above this one; a class deriving from it has loaded it
        is_policy = is_subclass_of_loaded(self.policy_class, "corral.core.learning.policy", "Policy")
        if self.policy_class is not None and not is_policy:
            raise ValueError(
                f"policy_class must be a corral Policy subclass, its 'module:qualname' or None, not {self.policy_class!r}"
            )

    @classmethod
    def of(cls, value: Any) -> PolicySpec:
        """A spec from any form a config may give: a spec, None, a 4-tuple or list, or the dict of :meth:`to_dict`.

        Args:
            value: the policy's entry in ``policies``.

        Returns:
            The spec; spaces in JSON form are decoded and a class path is imported.

        Raises:
            ValueError: the value has another form, unknown keys, or bad fields.
        """
        if isinstance(value, PolicySpec):
            return value
        if value is None:
            return cls()
        if isinstance(value, (tuple, list)):
            if len(value) > len(_FIELDS):
                raise ValueError(
                    f"a policy as a tuple is (policy_class, observation_space, action_space, config); got {len(value)} items"
                )
            return cls(*value)
        if isinstance(value, dict):
            unknown = sorted(set(value) - set(_FIELDS))
            if unknown:
                raise ValueError(f"unknown keys {unknown} in a policy spec; the keys are {', '.join(_FIELDS)}")
            spaces = {
                name: decode_space(value[name], name) if isinstance(value.get(name), dict) else value.get(name)
                for name in ("observation_space", "action_space")
            }
            return cls(value.get("policy_class"), spaces["observation_space"], spaces["action_space"], value.get("config"))
        raise ValueError(
            f"a policy is a PolicySpec, None, a (policy_class, observation_space, action_space, config) tuple "
            f"or a dict with those keys, not {type(value).__name__}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON values: the class as ``"module:qualname"`` (or by value, see ``to_dict``), the spaces encoded.

        Returns:
            A dict that :meth:`of` turns back into an equal spec.

        Raises:
            ValueError: a space is of a type that has no JSON form.
        """
        return {
            "policy_class": None if self.policy_class is None else by_value.encode(self.policy_class),
            "observation_space": None if self.observation_space is None else encode_space(self.observation_space),
            "action_space": None if self.action_space is None else encode_space(self.action_space),
            "config": None if self.config is None else dict(self.config),
        }


_FIELDS = tuple(field.name for field in dataclasses.fields(PolicySpec))

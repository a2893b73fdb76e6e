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
from corral.core.contracts.options.default_model_config import model_options_of

CATALOG_MODEL = "corral.rllib.support.catalogs:CatalogModel"
"""the model corral builds from an RLlib catalog class's parts (it lives with RLlib's catalogs)"""


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """One policy of a multi-agent config; a field left None is inferred or inherited.

    Attributes:
        policy_class: the ``Policy`` subclass (or its ``"module:qualname"``); None: the algorithm's own.
        observation_space: None: inferred from the agents mapped to this policy.
        action_space: None: inferred from the agents mapped to this policy.
        config: options that differ for this policy (``{"lr": 1e-4, "gamma": 0.95}``); or a whole config of the
            policy's own algorithm (``PPOConfig().training(...)``, as RLlib's two-trainer examples give it), whose
            training and exploration options the policy trains with (held as a dict whose
            :data:`OWN_CONFIG_CLASS` is its class); None: none.
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
        if is_subclass_of_loaded(type(self.config), "corral.core.contracts.config", "AlgorithmConfig"):
            whole: Any = self.config
            object.__setattr__(self, "config", {OWN_CONFIG_CLASS: type(whole), **whole.to_dict()})
        if self.config is not None and not isinstance(self.config, dict):
            raise ValueError(f"config must be a dict of options, an AlgorithmConfig or None, not {type(self.config).__name__}")
        if isinstance(self.config, dict) and isinstance(self.config.get(OWN_CONFIG_CLASS), str):
            object.__setattr__(self, "config", {**self.config, OWN_CONFIG_CLASS: import_object(self.config[OWN_CONFIG_CLASS])})
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
            "config": None if self.config is None else _config_dict(self.config),
        }


OWN_CONFIG_CLASS = "config_class"
"""the key that marks a policy spec's config as a whole config of the policy's own algorithm, holding its class"""


def _config_dict(config: dict[str, Any]) -> dict[str, Any]:
    own_class = config.get(OWN_CONFIG_CLASS)
    return dict(config) if own_class is None else {**config, OWN_CONFIG_CLASS: by_value.encode(own_class)}


_FIELDS = tuple(field.name for field in dataclasses.fields(PolicySpec))


class RLModuleSpec:
    """RLlib's ``RLModuleSpec`` (Ray 2.5-2.9: ``SingleAgentRLModuleSpec``): which module a policy computes with.

    ``config.rl_module(rl_module_spec=...)`` turns it into model options: a
    ``module_class`` becomes ``model.custom_model`` and its ``model_config``
    ``model.custom_model_config`` (the module's own options, its
    ``self.model_config``); without a ``module_class``, ``model_config`` holds
    options of corral's own models (``fcnet_hiddens``, ``use_lstm``, ...), as
    RLlib's default modules read theirs. So the module is stored in configs and
    checkpoints as any custom model is: by its import path or registered name.

    Args:
        module_class: a ``TorchRLModule`` subclass (or its path, or a name given to
            ``ModelCatalog.register_custom_model``); None: corral's own model.
        observation_space: the module's observations; None: the env's (the policy's, in a multi-agent run).
        action_space: the module's actions; None as ``observation_space``.
        inference_only: RLlib's flag for modules that only act; corral's modules always learn, so it must be False.
        learner_only: RLlib's flag for modules that only learn; it must be False.
        model_config: the module's options: a dict, or RLlib's ``DefaultModelConfig``.
        catalog_class: RLlib's catalog class (a ``PPOCatalog`` subclass), which builds corral's own
            actor-critic model (with no ``module_class``).
        load_state_path: RLlib's path to weights to start from: not in corral.
        model_config_dict: Ray 2.5-2.9's name for ``model_config``.

    Raises:
        ValueError: a field corral cannot honour is set (naming what to use instead).
    """

    def __init__(
        self,
        module_class: Any = None,
        observation_space: gym.Space[Any] | None = None,
        action_space: gym.Space[Any] | None = None,
        inference_only: bool = False,
        learner_only: bool = False,
        model_config: Any = None,
        catalog_class: Any = None,
        load_state_path: str | None = None,
        model_config_dict: dict[str, Any] | None = None,
    ) -> None:
        if catalog_class is not None and module_class is not None:
            raise ValueError(
                f"RLModuleSpec(catalog_class={catalog_class!r}) with a module_class: corral's modules of your own build "
                "their layers in setup(); a catalog shapes corral's own model, with no module_class"
            )
        if load_state_path is not None:
            raise ValueError(
                f"RLModuleSpec(load_state_path={load_state_path!r}): corral does not start modules from saved weights "
                "this way; restore them with Algorithm.from_checkpoint(...) or algo.get_policy().set_weights(...)"
            )
        if inference_only or learner_only:
            raise ValueError("RLModuleSpec: corral's modules both act and learn; leave inference_only and learner_only False")
        for name, space in (("observation_space", observation_space), ("action_space", action_space)):
            if space is not None and not isinstance(space, gym.Space):
                raise ValueError(f"RLModuleSpec({name}=...) must be a gymnasium space or None, not {type(space).__name__}")
        if model_config is not None and model_config_dict is not None:
            raise ValueError("RLModuleSpec takes model_config or (Ray 2.5-2.9) model_config_dict, not both")
        options = model_config if model_config is not None else model_config_dict
        self.module_class = module_class
        self.observation_space = observation_space
        self.action_space = action_space
        self.inference_only = inference_only
        self.learner_only = learner_only
        self.model_config: dict[str, Any] = {} if options is None else model_options_of(options, "RLModuleSpec(model_config=...)")
        self.catalog_class = catalog_class

    @property
    def model_config_dict(self) -> dict[str, Any]:
        """Ray 2.5-2.9's name for :attr:`model_config`."""
        return self.model_config

    def model_options(self) -> dict[str, Any]:
        """The ``model`` options this spec stands for (see the class docstring).

        Returns:
            ``{"custom_model": module_class, "custom_model_config": model_config}``, or the model config itself.
        """
        if self.module_class is None and self.catalog_class is not None:  # corral's model, built from the catalog's parts
            catalog = {"custom_model": CATALOG_MODEL, "custom_model_config": {"catalog_class": self.catalog_class}}
            return {**self.model_config, **catalog}
        if self.module_class is None:
            return dict(self.model_config)
        return {"custom_model": self.module_class, "custom_model_config": dict(self.model_config)}

    def build(self) -> Any:
        """The module itself, built from this spec's class, spaces and config (RLlib's ``build()``).

        Returns:
            The ``module_class`` instance.

        Raises:
            ValueError: no module class, or a space is missing.
        """
        if not isinstance(self.module_class, type) or self.observation_space is None or self.action_space is None:
            raise ValueError("RLModuleSpec.build() needs a module_class (a class), an observation_space and an action_space")
        return self.module_class(
            observation_space=self.observation_space, action_space=self.action_space, model_config=dict(self.model_config)
        )

    def __repr__(self) -> str:
        cls = getattr(self.module_class, "__qualname__", self.module_class)
        return f"RLModuleSpec(module_class={cls}, model_config={self.model_config!r})"


SingleAgentRLModuleSpec = RLModuleSpec
"""Ray 2.5-2.9's name for :class:`RLModuleSpec`"""


class MultiRLModuleSpec:
    """RLlib's ``MultiRLModuleSpec`` (Ray 2.5-2.9: ``MultiAgentRLModuleSpec``): a module per policy (module id).

    ``config.rl_module(rl_module_spec=...)`` gives each policy its module:
    ``rl_module_specs[policy_id]`` becomes that policy's own ``model`` options
    (its ``PolicySpec.config``), so the policies may differ in their modules.
    One :class:`RLModuleSpec` instead of a dict is every policy's.

    Args:
        multi_rl_module_class: RLlib's class holding the modules: corral keeps a policy per module, so it must be None.
        rl_module_specs: the spec of each module id (policy id), or one spec for all.
        module_specs: Ray 2.5-2.9's name for ``rl_module_specs``.
        **unsupported: RLlib's other fields (``load_state_path``, ``modules_to_load``, ...), which corral refuses.

    Raises:
        ValueError: a field corral cannot honour, or a spec that is not an :class:`RLModuleSpec`.
    """

    def __init__(
        self,
        multi_rl_module_class: Any = None,
        rl_module_specs: dict[str, RLModuleSpec] | RLModuleSpec | None = None,
        module_specs: dict[str, RLModuleSpec] | RLModuleSpec | None = None,
        **unsupported: Any,
    ) -> None:
        given = sorted(key for key, value in unsupported.items() if value is not None)
        if multi_rl_module_class is not None or given:
            what = "multi_rl_module_class" if multi_rl_module_class is not None else given[0]
            raise ValueError(
                f"MultiRLModuleSpec({what}=...): corral keeps one policy per module id and no multi-module class; give "
                "each module's spec in rl_module_specs={policy_id: RLModuleSpec(...)}"
            )
        specs = rl_module_specs if rl_module_specs is not None else module_specs
        values = [specs] if isinstance(specs, RLModuleSpec) else list((specs or {}).values())
        if not all(isinstance(spec, RLModuleSpec) for spec in values):
            raise ValueError("MultiRLModuleSpec.rl_module_specs maps module ids to RLModuleSpec objects (or is one)")
        self.rl_module_specs = specs if specs is not None else {}

    @property
    def module_specs(self) -> dict[str, RLModuleSpec] | RLModuleSpec:
        """Ray 2.5-2.9's name for :attr:`rl_module_specs`."""
        return self.rl_module_specs


MultiAgentRLModuleSpec = MultiRLModuleSpec
"""Ray 2.5-2.9's name for :class:`MultiRLModuleSpec`"""

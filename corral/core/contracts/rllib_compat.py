"""RLlib's config names of every 2.x era, answered for what they mean in corral.

RLlib's experimental flags (``_enable_new_api_stack``, ``_disable_execution_plan_api``,
...) and its API-stack switches name ways RLlib itself is built. Each one either
asks for what corral does anyway (said at INFO), or for something corral does
not have: then a warning says what corral does instead, or, where carrying on
would change what is learned, a :class:`~corral.errors.ConfigError` says what
to use. None of them is stored: ``to_dict()`` holds corral's options only.
RLlib's model keys for recurrent and attention nets get the same treatment.

:class:`RLlibConfigMethods` gives ``AlgorithmConfig`` RLlib's builder methods
for these (``experimental()``, ``api_stack()``, ``rl_module()``),
``is_multi_agent``, which RLlib has had both as a method and as a property,
and RLlib's names that read corral's options (``total_train_batch_size``,
``build_algo()``).
A config object of a base class given to an algorithm (``AlgorithmConfig(algo_class=PPO)``)
brings every option of that class, defaults included, as in RLlib (:func:`as_config_of`);
one given as ``evaluation_config`` stands for the options it was given (:func:`options_set`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from corral.core.contracts.rllib_names import (
    BEHAVIOUR_KEYS as BEHAVIOUR_KEYS,
    EXPERIMENTAL_FLAGS as EXPERIMENTAL_FLAGS,
    EXPERIMENTAL_KEYWORDS as EXPERIMENTAL_KEYWORDS,
    LEGACY_KEYS,
    NOOP_LOGGERS as NOOP_LOGGERS,
    RECURRENT_MODEL_SETTINGS as RECURRENT_MODEL_SETTINGS,
    TF_FRAMEWORKS,
    Flag as Flag,
)
from corral.errors import ConfigError, short_repr

if TYPE_CHECKING:  # the config module imports this one
    from corral.core.contracts.config import AlgorithmConfig
    from corral.core.training.algorithm import Algorithm

logger = logging.getLogger("corral")


def _asks_for_corral(flag: Flag, value: Any) -> bool:
    if flag.corral_values is None:
        return True
    # `is` for booleans and None; equality of the same type for numbers and empty containers (so 1 is not True)
    return any(value is v or (type(value) is type(v) and value == v) for v in flag.corral_values)


def note_flag(key: str, value: Any) -> None:
    """Answer one of RLlib's experimental settings: INFO, a warning, or an error, as :data:`EXPERIMENTAL_FLAGS` says.

    A Tune grid over a flag (``{"grid_search": [True, False]}``, as RLlib's own
    tuned examples have) answers each of its values; every value then trains the
    same in corral, so the grid is dropped (said at INFO).

    Args:
        key: the flag's name, a key of :data:`EXPERIMENTAL_FLAGS`.
        value: its value.

    Raises:
        ConfigError: a boolean flag given something else, or a value asking for what corral
            cannot do where going on would change what is learned.
    """
    from corral.core.contracts.options.declaring import is_search_space

    if is_search_space(value):
        for item in value["grid_search"] if isinstance(value, dict) else getattr(value, "categories", []):
            note_flag(key, item)
        logger.info("%s: each value of its Tune search space trains the same in corral, so it makes no trials of its own", key)
        return
    flag = EXPERIMENTAL_FLAGS[key]
    if flag.kind is bool and not isinstance(value, bool):
        raise ConfigError(f"{key} takes True or False, not {short_repr(value)}")
    if flag.kind is int and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        raise ConfigError(f"{key} takes a count (an integer >= 0), not {short_repr(value)}")
    if _asks_for_corral(flag, value):
        logger.info("%s=%s: %s", key, short_repr(value), flag.does)
        return
    if flag.refuse:
        raise ConfigError(f"{key}={short_repr(value)}: {flag.otherwise}")
    logger.warning("%s=%s: %s", key, short_repr(value), flag.otherwise)


class CallableBool:
    """A truth value that may also be called: RLlib's ``is_multi_agent`` was a method in older Ray 2.x, now a property.

    ``if config.is_multi_agent:`` and ``if config.is_multi_agent():`` both read
    it right, so scripts of either era work, and neither is silently always true.
    """

    __slots__ = ("_value",)

    def __init__(self, value: bool) -> None:
        self._value = bool(value)

    def __bool__(self) -> bool:
        return self._value

    def __call__(self) -> bool:
        """The value, for RLlib's ``config.is_multi_agent()``."""
        return self._value

    def __eq__(self, other: object) -> bool:
        return self._value == (bool(other) if isinstance(other, CallableBool) else other)

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return repr(self._value)


def options_set(config: AlgorithmConfig) -> dict[str, Any]:
    """The options a config was given (by its builder methods, a dict or assignment), not its defaults.

    Args:
        config: the config.

    Returns:
        The given options' values (a Tune search space where one was given), by name.
    """
    given = {name: getattr(config, name) for name in config.model_fields_set}
    return {**given, **config.search_space}


def as_config_of(config: AlgorithmConfig, config_class: type[AlgorithmConfig]) -> AlgorithmConfig | None:
    """``config`` as a ``config_class``, when it is of a base class (``AlgorithmConfig(algo_class=PPO)``).

    RLlib's rule: the algorithm's default config is updated with the whole
    given config, defaults included. So every option the base class defines
    takes the given config's value (``AlgorithmConfig``'s ``lr`` of 0.001 where
    PG's own default is 0.0004), and only the options the algorithm adds (PPO's
    ``clip_param``) keep the algorithm's defaults. Where a base default replaces
    one of the algorithm's, INFO names it.

    Args:
        config: the config given to the algorithm.
        config_class: the algorithm's config class.

    Returns:
        The new config, or None when ``config`` is not of a base class of ``config_class``.

    Raises:
        ConfigError: a given option is invalid for ``config_class``.
    """
    if not issubclass(config_class, type(config)):
        return None
    converted = config_class()
    replaced = []
    for name in type(config).model_fields:
        value, own = getattr(config, name), getattr(converted, name)
        if name not in config.model_fields_set and value != own:
            replaced.append(f"{name}={short_repr(value)} (where {config_class.__name__}'s is {short_repr(own)})")
        setattr(converted, name, value)
    for name, value in config.search_space.items():
        setattr(converted, name, value)
    logger.info(
        "%s with algo_class: its options, defaults included, replace %s's, as in RLlib%s",
        type(config).__name__, config_class.__name__, f"; its defaults: {', '.join(replaced)}" if replaced else "",
    )  # fmt: skip
    return converted


def evaluation_overrides(config: AlgorithmConfig) -> dict[str, Any]:
    """A config object given as ``evaluation_config``, as the overrides corral stores.

    RLlib evaluates with such an object as it is. It is a copy of the training
    config with a few changes, or a fresh config with those changes: corral
    stores the options it was given (not its defaults, which would replace the
    training config's env and the rest), without its own evaluation options,
    which evaluation does not nest.

    Args:
        config: the config object.

    Returns:
        The options to override for evaluation.
    """
    return {name: value for name, value in options_set(config).items() if config.field_group(name) != "evaluation"}


class RLlibConfigMethods:
    """RLlib's builder methods for its API stack and experimental flags, and ``is_multi_agent``, on AlgorithmConfig.

    A flag reads back as the script set it, or as RLlib's default
    (``config._enable_new_api_stack`` is False): scripts branch on them, and
    corral's results have the layout of RLlib's old stack whatever they say.
    """

    if not TYPE_CHECKING:  # a type checker would take every misspelt attribute of a config for a flag

        def __getattr__(self, name: str) -> Any:
            flag = EXPERIMENTAL_FLAGS.get(name)
            if flag is not None:
                return self._flags.get(name, flag.default)
            if LEGACY_KEYS.get(name) in type(self).model_fields:  # an older RLlib's name: config.num_rollout_workers
                return getattr(self, LEGACY_KEYS[name])
            return super().__getattr__(name)  # pydantic's: its private attributes, else AttributeError

    def _field_name(self: Any, name: str) -> str:
        """The option a public attribute name sets: itself, or the one an older RLlib's name stands for.

        Raises:
            ConfigError: neither names an option of this config.
        """
        fields = type(self).model_fields
        if name not in fields and LEGACY_KEYS.get(name) in fields:
            return LEGACY_KEYS[name]
        if name not in fields:
            raise self._unknown_key(name)
        return name

    def _set_flags(self: Any, flags: dict[str, Any]) -> None:
        """Answer RLlib's experimental flags (:func:`note_flag`) and keep their values to read back (a Tune grid over
        one is dropped: each of its values trains the same)."""
        from corral.core.contracts.options.declaring import is_search_space

        for key, value in flags.items():
            note_flag(key, value)
        kept = {key: value for key, value in flags.items() if not is_search_space(value)}
        self._flags = {**self._flags, **kept}  # a new dict: a copy of the config shares the old one

    def _take_flags(self: Any, values: dict[str, Any]) -> dict[str, Any]:
        """Set RLlib's experimental flags among ``values`` (:meth:`_set_flags`); returns the other values."""
        self._set_flags({key: value for key, value in values.items() if key in EXPERIMENTAL_FLAGS})
        return {key: value for key, value in values.items() if key not in EXPERIMENTAL_FLAGS}

    @property
    def framework_str(self: Any) -> str:
        """RLlib's attribute for the framework: always ``"torch"``, which corral runs on."""
        return "torch"

    @property
    def total_train_batch_size(self: Any) -> int:
        """RLlib's property: the env steps of one whole train batch, ``train_batch_size_per_learner`` times the
        Learners (at least one) where that is set, else ``train_batch_size``."""
        if self.train_batch_size_per_learner is None:
            return int(self.train_batch_size)
        return int(self.train_batch_size_per_learner * max(1, self.num_learners))

    def build_algo(self: Any, env: Any = None, logger_creator: Any = None) -> Algorithm:
        """RLlib's name for ``build()`` since Ray 2.40: the same call.

        Args:
            env: optionally the environment, overriding ``config.env``.
            logger_creator: RLlib's ``fn(config_dict) -> logger`` (see ``build()``).

        Returns:
            A new algorithm, ready to ``train()``.
        """
        return cast("Algorithm", self.build(env, logger_creator))

    def experimental(self: Any, **flags: Any) -> AlgorithmConfig:
        """RLlib's ``.experimental(...)``: each flag answered as :data:`EXPERIMENTAL_FLAGS` says.

        Args:
            **flags: keywords RLlib's ``experimental()`` has taken in Ray 2.x
                (``_enable_new_api_stack``, ``_disable_execution_plan_api``, ...).

        Returns:
            This config.

        Raises:
            ConfigError: a keyword RLlib's method never took, or a value corral refuses.
        """
        for key in flags:
            if key not in EXPERIMENTAL_KEYWORDS:
                takes = ", ".join(sorted(EXPERIMENTAL_KEYWORDS))
                raise ConfigError(f"experimental() takes no option {key!r}; RLlib's takes {takes}")
        self._canonical_keys({key: value for key, value in flags.items() if key not in EXPERIMENTAL_FLAGS})
        self._set_flags({key: value for key, value in flags.items() if key in EXPERIMENTAL_FLAGS})
        return cast("AlgorithmConfig", self)  # the methods are only ever AlgorithmConfig's (see the class docstring)

    def framework(self: Any, framework: str | None = "torch", **options: Any) -> AlgorithmConfig:
        """RLlib's ``.framework(...)``: corral runs on torch, and ``torch_compile_learner``/``torch_compile_worker``
        (with their dynamo backends and modes) compile the models' forward passes.

        ``"tf"``, ``"tf2"`` and ``"tfe"`` run the same config on torch, with a
        warning; so do RLlib's TensorFlow-only options (``eager_tracing``, ...),
        which are ignored.

        Args:
            framework: ``"torch"`` (or None), or one of RLlib's TensorFlow frameworks.
            **options: the torch_compile options, or RLlib's TensorFlow-only ones.

        Returns:
            This config.

        Raises:
            ConfigError: another framework, or an option that is not one of RLlib's for ``framework()``.
        """
        canonical = self._canonical_keys({"framework": framework, **options})
        return cast("AlgorithmConfig", self._set_group("framework", canonical))

    def api_stack(
        self: Any, enable_rl_module_and_learner: bool | None = None, enable_env_runner_and_connector_v2: bool | None = None
    ) -> AlgorithmConfig:
        """RLlib's ``.api_stack(...)`` (Ray 2.10 on): corral has one API stack, so either value is said at INFO.

        Args:
            enable_rl_module_and_learner: RLlib's RLModule and Learner classes.
            enable_env_runner_and_connector_v2: RLlib's EnvRunner with ConnectorV2 pipelines.

        Returns:
            This config.
        """
        given = {"enable_rl_module_and_learner": enable_rl_module_and_learner}
        given["enable_env_runner_and_connector_v2"] = enable_env_runner_and_connector_v2
        self._set_flags({key: value for key, value in given.items() if value is not None})
        return cast("AlgorithmConfig", self)

    def rl_module(
        self: Any,
        *,
        rl_module_spec: Any = None,
        model_config: Any = None,
        model_config_dict: dict[str, Any] | None = None,
        **flags: Any,
    ) -> AlgorithmConfig:
        """RLlib's ``.rl_module(...)``: the policies' modules, as model options (see ``RLModuleSpec``).

        A :class:`~corral.core.contracts.policy_spec.RLModuleSpec` sets ``model``
        (``custom_model`` and ``custom_model_config``, or corral's own model's
        options); a ``MultiRLModuleSpec`` sets each named policy's own ``model``
        (a policy not yet in ``policies`` is added, inferred as RLlib infers
        it), or every policy's for one spec. ``model_config`` (Ray 2.5-2.9:
        ``model_config_dict``) updates ``model``, as RLlib's default modules read it.

        Args:
            rl_module_spec: an ``RLModuleSpec`` or ``MultiRLModuleSpec``.
            model_config: options of corral's own model (``fcnet_hiddens``, ``use_lstm``, ...), or RLlib's
                ``DefaultModelConfig``.
            model_config_dict: Ray 2.5-2.9's name for ``model_config``.
            **flags: Ray 2.5's switch ``_enable_rl_module_api``.

        Returns:
            This config.

        Raises:
            ConfigError: another keyword, or a spec of another type.
        """
        from corral.core.contracts.options.default_model_config import model_options_of
        from corral.core.contracts.policy_spec import MultiRLModuleSpec, PolicySpec, RLModuleSpec

        others = sorted(set(flags) - {"_enable_rl_module_api"})
        if others:
            raise ConfigError(
                f"rl_module() takes no option {others[0]!r}; it takes rl_module_spec, model_config (model_config_dict) "
                "and _enable_rl_module_api"
            )
        self._canonical_keys(flags)
        for options in (model_config, model_config_dict):
            if options is not None:
                self.training(model=model_options_of(options, "rl_module(model_config=...)"))
        if rl_module_spec is None:
            return cast("AlgorithmConfig", self)
        if isinstance(rl_module_spec, RLModuleSpec):
            self.training(model=rl_module_spec.model_options())
            spaces = {"observation_space": rl_module_spec.observation_space, "action_space": rl_module_spec.action_space}
            self.environment(**{name: space for name, space in spaces.items() if space is not None})
            return cast("AlgorithmConfig", self)
        if not isinstance(rl_module_spec, MultiRLModuleSpec):
            raise ConfigError(
                f"rl_module(rl_module_spec=...) takes an RLModuleSpec or a MultiRLModuleSpec, not {type(rl_module_spec).__name__}"
            )
        specs = rl_module_spec.rl_module_specs
        if isinstance(specs, RLModuleSpec):  # one spec for every policy: the shared model options
            return cast("AlgorithmConfig", self.rl_module(rl_module_spec=specs))
        policies = dict(self.policies)
        for policy_id, spec in specs.items():
            current = policies.get(policy_id) or PolicySpec()
            own = {**(current.config or {}), "model": {**(current.config or {}).get("model", {}), **spec.model_options()}}
            policies[policy_id] = PolicySpec(
                current.policy_class,
                spec.observation_space or current.observation_space,
                spec.action_space or current.action_space,
                own,
            )
        self.multi_agent(policies=policies)
        return cast("AlgorithmConfig", self)

    @property
    def is_multi_agent(self: Any) -> CallableBool:
        """Whether this config asks for more than the one ``default_policy`` acting for a single agent.

        Read it as RLlib's property or call it as RLlib's older method (``config.is_multi_agent()``).
        """
        from corral.core.common.sample_batch import DEFAULT_POLICY_ID

        return CallableBool(bool(set(self.policies) - {DEFAULT_POLICY_ID}) or self.policy_mapping_fn is not None)


def check_framework(value: Any) -> None:
    """Accept RLlib's ``framework`` values: torch silently, TensorFlow's with a warning (the config runs on torch).

    Args:
        value: the ``framework`` given.

    Raises:
        ConfigError: any other value.
    """
    if value is None or (isinstance(value, str) and value == "torch"):  # an array cannot be asked `in`
        return
    if isinstance(value, str) and value in TF_FRAMEWORKS:
        logger.warning("framework=%r: corral runs this config on torch, where its options mean the same", value)
        return
    raise ConfigError(
        f"framework={short_repr(value)} is not supported; corral runs on 'torch' (RLlib's 'tf' and 'tf2' run on torch too)"
    )


def move_older_replay_keys(canonical: dict[str, Any]) -> None:
    """Move RLlib's older places for ``learning_starts`` out of ``replay_buffer_config`` into the option, in place.

    ``replay_buffer_config["learning_starts"]`` and ``["min_size_for_sampling"]``
    (the buffer returns no batch until it holds that many steps) both mean
    the option ``learning_starts``; a ``learning_starts`` given as an option wins.

    Args:
        canonical: the settings being applied, with a ``replay_buffer_config`` dict (copied, not changed).
    """
    replay = canonical["replay_buffer_config"] = dict(canonical["replay_buffer_config"])
    for older in ("learning_starts", "min_size_for_sampling"):
        if older in replay:
            canonical.setdefault("learning_starts", replay.pop(older))


def read_rllib_optimizer(canonical: dict[str, Any], own_options: set[str]) -> None:
    """Read an ``optimizer`` given as RLlib takes it, in place: a type's name alone, or a dict holding own options.

    A name alone means that type with its current arguments. An algorithm's own
    options in the dict (RLlib kept Ape-X's shard settings there) become those options.

    Args:
        canonical: the settings being applied (an ``optimizer`` dict is copied, not changed).
        own_options: the options the algorithm has beyond every algorithm's; one given outside the dict wins.
    """
    if isinstance(canonical.get("optimizer"), str):
        canonical["optimizer"] = {"type": canonical["optimizer"]}
    given = canonical.get("optimizer")
    if not isinstance(given, dict):
        return
    canonical["optimizer"] = {key: value for key, value in given.items() if key not in own_options}
    for key in given.keys() & own_options:
        canonical.setdefault(key, given[key])


def of_another_type(given: dict[str, Any], current: Any) -> bool:
    """Whether a partial ``optimizer`` or ``exploration_config`` names another type than the current one's.

    RLlib merges such a dict into the current one when it names no type or the
    same one, and replaces it otherwise: the other type's arguments would not fit.

    Args:
        given: the dict being set.
        current: the option's current value (a dict with a ``type``).

    Returns:
        True where ``given`` replaces ``current`` whole.
    """
    current_type = str(current.get("type", ""))
    return str(given.get("type", current_type)).lower() != current_type.lower()

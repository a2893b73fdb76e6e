"""AlgorithmConfig: every setting of a run, validated the moment it is given.

The config is a pydantic v2 model. Each field is written exactly once, with its
default, its constraint, the builder group it belongs to and a docstring (the
docstring is the field's description, shown by ``corral train --help-config``
and checked against the docs by the tests). Builder methods
(``.training(lr=...)``) set fields of their own group and raise
:class:`~corral.errors.ConfigError` at once for a bad value or a misspelt
key, naming the field, the value and what is allowed.

An algorithm plugin subclasses the config, adds its own fields (group
``"training"``) and may change inherited defaults without restating them::

    class PPOConfig(AlgorithmConfig, defaults={"lr": 3e-4}):
        clip_param: float = option(0.2, "training", ge=0)
        '''the PPO clipping range for the probability ratio'''
"""

from __future__ import annotations

import copy as _copy
import logging
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

import corral.registry as registry
from corral.core.common import by_value
from corral.core.contracts.options.config_checks import check_config
from corral.core.contracts.options.config_keys import canonical_keys, config_error, unknown_key
from corral.core.contracts.options.declaring import (
    ALSO_SET_IN,
    GROUPS as GROUPS,
    MAX_NESTING as MAX_NESTING,
    MAX_SEED as MAX_SEED,
    MAX_UPDATES_PER_ENV_STEP as MAX_UPDATES_PER_ENV_STEP,
    MERGED_GROUPS as MERGED_GROUPS,
    OPTIMIZERS as OPTIMIZERS,
    OPTIONS_MODEL_CONFIG,
    OUTPUT_FORMATS as OUTPUT_FORMATS,
    SCHEDULED_BY as SCHEDULED_BY,
    SCHEDULES as SCHEDULES,
    check_plain_data as check_plain_data,
    is_search_space as is_search_space,
    option as option,
    to_jsonable,
)
from corral.core.contracts.options.learning_options import LearningOptions
from corral.core.contracts.options.model_config import MAX_LAYER_SIZE as MAX_LAYER_SIZE, ModelConfig as ModelConfig
from corral.core.contracts.options.run_options import RunOptions
from corral.core.contracts.options.sampling_options import SamplingOptions
from corral.core.contracts.rllib_compat import (
    EXPERIMENTAL_FLAGS,
    RLlibConfigMethods,
    move_older_replay_keys,
    of_another_type,
    read_rllib_optimizer,
)
from corral.core.contracts.rllib_names import (
    ABSENT_KEYS as ABSENT_KEYS,
    BEHAVIOUR_KEYS as BEHAVIOUR_KEYS,
    LEGACY_KEYS as LEGACY_KEYS,
    OPTIMIZATION_KEYS as OPTIMIZATION_KEYS,
    TF_FRAMEWORKS as TF_FRAMEWORKS,
    TF_ONLY_KEYS as TF_ONLY_KEYS,
)
from corral.errors import ConfigError

if TYPE_CHECKING:  # the algorithm module imports this one
    from corral.core.training.algorithm import Algorithm

logger = logging.getLogger("corral")
_ENV_NOT_GIVEN: Any = object()  # environment()'s default: the env is left as it is


class AlgorithmConfig(RLlibConfigMethods, RunOptions, LearningOptions, SamplingOptions):
    """The settings of one training run, shared by every algorithm.

    Build it with the builder methods, then ``build()`` the algorithm. Plugins
    subclass it; ``defaults={...}`` in the class statement changes inherited
    defaults for that algorithm.
    """

    model_config = OPTIONS_MODEL_CONFIG

    # The algorithm this config builds; bound by Algorithm.__init_subclass__.
    algo_class: ClassVar[type[Algorithm] | None] = None
    _frozen: bool = PrivateAttr(default=False)
    _is_evaluation_copy: bool = PrivateAttr(default=False)
    _algo_class_override: type[Algorithm] | None = PrivateAttr(default=None)
    _search_space: dict[str, Any] = PrivateAttr(default_factory=dict)
    """options given a Tune search space: to_dict() carries it, and each trial validates its own value"""
    _flags: dict[str, Any] = PrivateAttr(default_factory=dict)  # RLlib's experimental flags as set (read back as set)

    # ------------------------------------------------------------------ #
    # subclassing
    # ------------------------------------------------------------------ #
    __corral_defaults__: ClassVar[dict[str, Any]]
    """a subclass's own defaults (``class PPOConfig(AlgorithmConfig, defaults={...})``)"""

    def __init_subclass__(cls, defaults: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__corral_defaults__ = dict(defaults or {})

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        defaults = cls.__dict__.get("__corral_defaults__", {})
        for name, value in defaults.items():
            if name not in cls.__pydantic_fields__:
                raise TypeError(f"{cls.__name__}: defaults names unknown field {name!r}")
            field = _copy.copy(cls.__pydantic_fields__[name])
            field.default, field.default_factory = value, None
            if isinstance(value, (list, dict, BaseModel)):
                field.default, field.default_factory = None, (lambda v=value: _copy.deepcopy(v))
            cls.__pydantic_fields__[name] = field
        if defaults:
            cls.model_rebuild(force=True)

    def __init__(self, algo_class: type[Algorithm] | str | None = None, **values: Any) -> None:
        values = self._canonical_keys(values)
        searched = {name: values.pop(name) for name in list(values) if is_search_space(values[name])}
        for name, value in values.items():
            check_plain_data(name, value)
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise self._config_error(exc) from None
        # RLlib's AlgorithmConfig(algo_class="PG") names a registered algorithm
        self._algo_class_override = registry.get_algorithm(algo_class) if isinstance(algo_class, str) else algo_class
        for name, value in searched.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in EXPERIMENTAL_FLAGS:  # RLlib's `config._enable_new_api_stack = True`
            self._set_flags({name: value})
            return
        if not name.startswith("_"):
            if self._frozen:
                raise ConfigError(
                    f"this {type(self).__name__} is frozen (an algorithm was built from it); change a copy instead: config.copy()"
                )
            name = self._field_name(name)
            if is_search_space(value):
                self._check_search_space(name, value)
                self._search_space[name] = value
                return
            check_plain_data(name, value)
            try:
                super().__setattr__(name, value)
            except ValidationError as exc:
                raise self._config_error(exc) from None
            self._search_space.pop(name, None)
            return
        super().__setattr__(name, value)

    def _check_search_space(self, name: str, space: Any) -> None:
        """Refuse a grid or choice value that no trial could use, at once; a sampled value is checked in its trial."""
        values = space["grid_search"] if isinstance(space, dict) else getattr(space, "categories", [])
        for value in values:
            probe = self.copy()
            try:
                probe.update_from_dict({name: value})
            except ConfigError as exc:
                raise ConfigError(f"{name}: the Tune search space's value {value!r} is invalid: {exc}") from None

    @property
    def search_space(self) -> dict[str, Any]:
        """The options given a Ray Tune search space (``tune.grid_search``, ``tune.uniform``, ...), by name."""
        return dict(self._search_space)

    # ------------------------------------------------------------------ #
    # builder methods
    # ------------------------------------------------------------------ #
    def environment(self, env: Any = _ENV_NOT_GIVEN, **kwargs: Any) -> AlgorithmConfig:
        """Set the environment and its options (``env_config``, ...); ``env=None`` clears it, as in RLlib (a served run)."""
        if env is not _ENV_NOT_GIVEN:
            kwargs["env"] = env
        return self._set_group("environment", kwargs)

    def env_runners(self, **kwargs: Any) -> AlgorithmConfig:
        """Set how samples are collected (``num_env_runners``, ``num_envs_per_env_runner``, ...)."""
        return self._set_group("env_runners", kwargs)

    def rollouts(self, **kwargs: Any) -> AlgorithmConfig:
        """The older name of :meth:`env_runners`; ``num_rollout_workers`` maps to ``num_env_runners``."""
        return self.env_runners(**kwargs)

    def training(self, **kwargs: Any) -> AlgorithmConfig:
        """Set the learning hyperparameters (``lr``, ``gamma``, ``train_batch_size``, ``model``, ...)."""
        return self._set_group("training", kwargs)

    def evaluation(self, **kwargs: Any) -> AlgorithmConfig:
        """Set when and how the policy is evaluated (``evaluation_interval``, ``evaluation_config``, ...)."""
        return self._set_group("evaluation", kwargs)

    def exploration(self, **kwargs: Any) -> AlgorithmConfig:
        """Set ``explore`` and the ``exploration_config`` (its ``type`` names an exploration plugin)."""
        return self._set_group("exploration", kwargs)

    def callbacks(self, callbacks_class: Any) -> AlgorithmConfig:
        """Register one Callbacks subclass or a list of them; their hooks compose."""
        return self._set_group("callbacks", {"callbacks_class": callbacks_class})

    def multi_agent(self, **kwargs: Any) -> AlgorithmConfig:
        """Set the policies, which agent each serves and which learn (``policies``, ``policy_mapping_fn``, ...)."""
        return self._set_group("multi_agent", kwargs)

    def offline_data(self, **kwargs: Any) -> AlgorithmConfig:
        """Set where training samples come from (``input_``) and where sampled ones are written (``output``)."""
        return self._set_group("offline_data", kwargs)

    def debugging(self, **kwargs: Any) -> AlgorithmConfig:
        """Set ``seed``, ``log_level`` and what a NaN update does (``on_nonfinite``)."""
        return self._set_group("debugging", kwargs)

    def reporting(self, **kwargs: Any) -> AlgorithmConfig:
        """Set metric smoothing, iteration length and where results are written."""
        return self._set_group("reporting", kwargs)

    def resources(self, **kwargs: Any) -> AlgorithmConfig:
        """Set ``num_gpus``, ``_fake_gpus`` (``fake_gpus``), threads and how a Tune trial's resources are placed."""
        return self._set_group("resources", kwargs)

    def learners(self, **kwargs: Any) -> AlgorithmConfig:
        """Set the Learner actors that update the policies data-parallel (``num_learners``, ``num_gpus_per_learner``, ...)."""
        return self._set_group("learners", kwargs)

    def fault_tolerance(self, **kwargs: Any) -> AlgorithmConfig:
        """Set what happens when an env runner or a sub-environment fails."""
        return self._set_group("fault_tolerance", kwargs)

    def checkpointing(self, **kwargs: Any) -> AlgorithmConfig:
        """Set automatic checkpoint frequency, at-end saving and how many to keep."""
        return self._set_group("checkpointing", kwargs)

    # ------------------------------------------------------------------ #
    # dict round trip, copies, freezing
    # ------------------------------------------------------------------ #
    def to_dict(self) -> dict[str, Any]:
        """Return every field as JSON-serialisable values; classes and functions become 'module:qualname'.

        What no other process could import (defined in the running script, a
        lambda) is written by value: under its name, pickled in the dict's
        ``__corral_by_value__`` table (:mod:`corral.core.common.by_value`), so
        Tune trials get the script's own env, callbacks and functions. An option
        given a Tune search space holds the search space, so the dict is a
        ``Tuner``'s ``param_space`` as it is.
        """
        data = {name: to_jsonable(self._search_space.get(name, getattr(self, name))) for name in type(self).model_fields}
        table = by_value.pickles(data)
        return {**data, by_value.TABLE_KEY: table} if table else data

    # ------------------------------------------------------------------ #
    # read as a mapping, as RLlib's config is
    # ------------------------------------------------------------------ #
    def __getitem__(self, key: str) -> Any:
        """``config["lr"]``: an option's value by its name or RLlib's (``config["lambda"]``).

        Raises:
            KeyError: no option has that name.
        """
        if key == "framework":
            return "torch"
        name = LEGACY_KEYS.get(key, key)
        if not isinstance(key, str) or name not in type(self).model_fields:
            raise KeyError(str(self._unknown_key(str(key))))
        return self._search_space.get(name, getattr(self, name))

    def get(self, key: str, default: Any = None) -> Any:
        """``config.get("lr", default)``: an option's value, or ``default`` when no option has that name.

        Args:
            key: the option's name (or RLlib's).
            default: what to return for a name that is no option.

        Returns:
            The value, or ``default``.
        """
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        """``"lr" in config``: whether an option has that name (or RLlib's)."""
        return key == "framework" or (isinstance(key, str) and LEGACY_KEYS.get(key, key) in type(self).model_fields)

    def keys(self) -> list[str]:
        """Every option's name."""
        return list(type(self).model_fields)

    def values(self) -> list[Any]:
        """Every option's value, in the order of :meth:`keys`."""
        return [getattr(self, name) for name in self.keys()]

    def items(self) -> list[tuple[str, Any]]:
        """Every option's name and value."""
        return [(name, getattr(self, name)) for name in self.keys()]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AlgorithmConfig:
        """Build a config from a (possibly partial) dict such as :meth:`to_dict` returns."""
        return cls().update_from_dict(values)

    @classmethod
    def overrides(cls, **kwargs: Any) -> dict[str, Any]:
        """Options that differ from a main config, checked now: RLlib's way to write ``evaluation_config``.

        ``evaluation_config=PPOConfig.overrides(explore=False)`` (or a policy's
        ``config``) checks the names and values at once, as a builder method does.

        Args:
            **kwargs: option names (RLlib's too) and their values.

        Returns:
            The options as a dict, as given.

        Raises:
            ConfigError: an option this config does not have, or a bad value.
        """
        cls().update_from_dict(kwargs)
        return dict(kwargs)

    def update_from_dict(self, values: dict[str, Any]) -> AlgorithmConfig:
        """Set any fields from a flat dict (RLlib's legacy key names accepted); returns self."""
        if not isinstance(values, dict):
            raise ConfigError(f"a config must be a mapping of option names to values, got {type(values).__name__}")
        for name, value in self._merged(self._canonical_keys(self._take_flags(values))).items():
            setattr(self, name, value)
        return self

    def _merged(self, canonical: dict[str, Any]) -> dict[str, Any]:
        """Settings to assign, a partial nested group merged into its current value, as RLlib does.

        ``model`` (a dict), ``replay_buffer_config`` and the other dict options of
        :data:`MERGED_GROUPS` keep the keys they are not given. A
        ``replay_buffer_config``'s ``learning_starts`` or ``min_size_for_sampling``
        (RLlib's older places for it) becomes the option ``learning_starts``, an algorithm's own option in
        ``optimizer`` (Ape-X's shards) that option. A number given for a scheduled option
        (``lr``) without its schedule replaces the schedule: the user asked for a constant.
        """
        fields = type(self).model_fields
        if isinstance(canonical.get("replay_buffer_config"), dict) and "learning_starts" in fields:
            move_older_replay_keys(canonical)
        for name, schedule in SCHEDULED_BY.items():  # a constant given alone replaces a schedule (DQN's default one, say)
            if name in canonical and schedule not in canonical and schedule in fields and getattr(self, schedule) is not None:
                canonical[schedule] = None
        read_rllib_optimizer(canonical, set(fields) - set(AlgorithmConfig.model_fields))
        for name in MERGED_GROUPS:
            given = canonical.get(name)
            if isinstance(given, dict) and name in fields and not is_search_space(given):
                current = getattr(self, name)
                if name in ("optimizer", "exploration_config") and of_another_type(given, current):
                    continue
                canonical[name] = {**(current.model_dump() if isinstance(current, BaseModel) else current), **given}
        return canonical

    def copy(self, copy_frozen: bool = False) -> AlgorithmConfig:  # type: ignore[override]
        """Return a deep copy; unfrozen unless ``copy_frozen``."""
        new = self.model_copy(deep=True)
        object.__setattr__(new, "__pydantic_private__", {**(new.__pydantic_private__ or {}), "_frozen": False})
        new.model._frozen = False
        if copy_frozen and self._frozen:
            new.freeze()
        return new

    def freeze(self) -> AlgorithmConfig:
        """Make the config read-only; every later assignment raises ConfigError (to ``model``'s options too)."""
        self._frozen = True
        self.model._frozen = True
        return self

    @property
    def is_frozen(self) -> bool:
        """Whether :meth:`freeze` was called."""
        return self._frozen

    # ------------------------------------------------------------------ #
    # validation and building
    # ------------------------------------------------------------------ #
    def validate(self) -> None:  # type: ignore[override]
        """Check what no single field can: combinations, the env, the exploration, overrides.

        Plugins extend this (call ``super().validate()``). Raises ConfigError.
        """
        check_config(self)

    def get_rollout_fragment_length(self) -> int:
        """Steps per sub-environment per sample call, resolving ``'auto'``."""
        per_step = self.num_envs_per_env_runner * max(1, self.num_env_runners)
        if self.rollout_fragment_length == "auto":
            return max(1, -(-self.total_train_batch_size // per_step))
        if self.rollout_fragment_length <= 0:
            raise ConfigError(f"rollout_fragment_length must be a positive integer or 'auto', got {self.rollout_fragment_length}")
        return self.rollout_fragment_length

    def get_evaluation_config(self) -> AlgorithmConfig:
        """This config with ``evaluation_config`` applied, for the evaluation runner.

        The evaluation runner samples its env whatever ``input_`` says, and writes ``output`` as
        RLlib's do (``evaluation_config={"output": None}`` keeps its episodes out of the files).
        """
        evaluation = self.copy().update_from_dict(self.evaluation_config)
        evaluation.input_ = "sampler"
        evaluation._is_evaluation_copy = True
        return evaluation

    def build(self, env: Any = None, logger_creator: Any = None) -> Algorithm:
        """Validate and build the algorithm this config belongs to.

        Args:
            env: optionally the environment, overriding ``config.env``.
            logger_creator: RLlib's ``fn(config_dict) -> logger``: an object given each result with
                ``on_result(result)`` in place of corral's result files (its ``logdir``, if it has
                one, is the experiment folder).

        Returns:
            A new algorithm, ready to ``train()``.

        Raises:
            ConfigError: the config is invalid, or belongs to no algorithm.
        """
        config = self.copy()
        if env is not None:
            config.env = env
        algo_class = self._algo_class_override or type(self).algo_class
        if algo_class is None:
            raise ConfigError(
                f"{type(self).__name__} belongs to no algorithm; build from an algorithm's config, e.g. corral.get_config('PPO')"
            )
        if logger_creator is None:  # a plugin's own __init__ may not take it
            return algo_class(config=config)
        return algo_class(config=config, logger_creator=logger_creator)

    # ------------------------------------------------------------------ #
    # helpers
    # ------------------------------------------------------------------ #
    @classmethod
    def field_group(cls, name: str) -> str:
        """The builder group a field belongs to."""
        extra = cls.model_fields[name].json_schema_extra
        return extra["group"] if isinstance(extra, dict) else "training"  # type: ignore[return-value]

    @classmethod
    def _canonical_keys(cls, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` by corral's option names (see :func:`~corral.core.contracts.options.config_keys.canonical_keys`)."""
        return canonical_keys(cls, values)

    @classmethod
    def _unknown_key(cls, key: str) -> ConfigError:
        return unknown_key(cls, key)

    def _set_group(self, group: str, values: dict[str, Any]) -> AlgorithmConfig:
        canonical = self._canonical_keys(values)
        for name in canonical:
            owner = self.field_group(name)
            if owner != group and (group, owner) != ("resources", "learners") and (group, name) not in ALSO_SET_IN:
                raise ConfigError(f"{name!r} is set with .{owner}(), not .{group}()")
        for name, value in self._merged(canonical).items():
            setattr(self, name, value)
        return self

    @classmethod
    def _config_error(cls, exc: ValidationError) -> ConfigError:
        return config_error(cls, exc)

    @field_validator("policy_mapping_fn", "observation_fn", "custom_evaluation_function", "env_task_fn", mode="before")
    @classmethod
    def _resolve_function(cls, value: Any, info: ValidationInfo) -> Any:
        from corral.core.contracts.multi_agent_config import resolve_function

        return resolve_function(value, str(info.field_name))

    @field_validator(*SCHEDULES, mode="after", check_fields=False)  # plugins' configs declare some of them
    @classmethod
    def _check_schedule(cls, value: list[tuple[int, float]] | None, info: ValidationInfo) -> list[tuple[int, float]] | None:
        if value is not None:
            steps = [t for t, _ in value]
            if not value or steps != sorted(steps) or steps[0] < 0:
                raise ValueError("a schedule is a non-empty list of [timestep, value] with increasing timesteps from >= 0")
            # a schedule interpolates between its values: each obeying the field's bounds, every value it takes does
            scheduled = SCHEDULES[str(info.field_name)]
            # Annotated[float, *constraints], called directly: mypy refuses a starred subscript below Python 3.11
            annotated = Annotated.__class_getitem__((float, *cls.model_fields[scheduled].metadata))  # type: ignore[attr-defined]
            adapter = TypeAdapter(annotated, config=ConfigDict(allow_inf_nan=False))
            for _, v in value:
                try:
                    adapter.validate_python(v)
                except ValidationError as exc:
                    raise ValueError(f"the value {v!r} is not a valid {scheduled}: {exc.errors()[0]['msg']}") from None
        return value

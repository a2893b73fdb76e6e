"""RLlib's config names of every 2.x era, answered for what they mean in corral.

RLlib's experimental flags (``_enable_new_api_stack``, ``_disable_execution_plan_api``,
...) and its API-stack switches name ways RLlib itself is built. Each one either
asks for what corral does anyway (said at INFO), or for something corral does
not have: then a warning says what corral does instead, or, where carrying on
would change what is learned, a :class:`~corral.errors.ConfigError` says what
to use. None of them is stored: ``to_dict()`` holds corral's options only.
RLlib's model keys for recurrent and attention nets get the same treatment.

:class:`RLlibConfigMethods` gives ``AlgorithmConfig`` RLlib's builder methods
for these (``experimental()``, ``api_stack()``, ``rl_module()``) and
``is_multi_agent``, which RLlib has had both as a method and as a property.
A config object where RLlib takes one, as an algorithm's config of a base class
(``AlgorithmConfig(algo_class=PPO)``) or as ``evaluation_config``, stands for
the options it was given (:func:`options_set`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from corral.errors import ConfigError, short_repr

if TYPE_CHECKING:  # the config module imports this one
    from corral.core.contracts.config import AlgorithmConfig

logger = logging.getLogger("corral")

_OLD_STACK = "corral's policies and models work as RLlib's old API stack does, which this asks for"
_NEW_STACK = (
    "RLlib's new API stack (RLModule and Learner classes) is not in corral yet; corral trains this config with its "
    "own policies and models, as RLlib's old API stack does (the same algorithm and options)"
)


@dataclass(frozen=True)
class Flag:
    """What corral does about one of RLlib's experimental settings.

    Attributes:
        does: what corral does, for a value that asks for it (said at INFO).
        corral_values: the values that ask for what corral does; None: every value does.
        otherwise: for any other value, what corral lacks and what it does instead (said in a warning).
        refuse: whether another value is refused (a ConfigError saying ``otherwise``) rather than warned
            about: where going on would change what is learned.
        kind: the type of value RLlib takes (``bool``, ``int`` for a count >= 0, ``object`` for anything).
    """

    does: str
    corral_values: tuple[Any, ...] | None = None
    otherwise: str = ""
    refuse: bool = False
    kind: type = bool


EXPERIMENTAL_FLAGS: dict[str, Flag] = {
    # Ray 2.7-2.9: .experimental(_enable_new_api_stack=...); Ray 2.5-2.6: .rl_module(...) and .training(...)
    "_enable_new_api_stack": Flag(_OLD_STACK, (False,), _NEW_STACK),
    "_enable_rl_module_api": Flag(_OLD_STACK, (False,), _NEW_STACK),
    "_enable_learner_api": Flag(_OLD_STACK, (False,), _NEW_STACK),
    # Ray 2.10 on: .api_stack(...)
    "enable_rl_module_and_learner": Flag(_OLD_STACK, (False,), _NEW_STACK),
    "enable_env_runner_and_connector_v2": Flag(
        "corral's env runners preprocess observations and actions in one place, as RLlib's old API stack does, which "
        "this asks for",
        (False,),
        "RLlib's ConnectorV2 pipelines are not in corral yet; corral's env runners preprocess observations and actions "
        "in one place, as RLlib's old API stack does",
    ),
    # Ray 1.x-2.9
    "_disable_execution_plan_api": Flag(
        "corral's algorithms always run training_step(), which this asks for",
        (True,),
        "RLlib's execution-plan API is not in corral; its algorithms always run training_step() (the same algorithm)",
    ),
    "_disable_preprocessor_api": Flag(
        "corral preprocesses observations by their space (Discrete one-hot, Dict and Tuple flattened into one vector), "
        "as RLlib does by default",
        (False,),
        "corral always preprocesses observations by their space before the model (Discrete one-hot, Dict and Tuple "
        "flattened into one vector): the catalog's models learn as RLlib's do, and a custom_model gets that vector, "
        "not the env's own observations",
    ),
    "_disable_action_flattening": Flag(
        "corral's action spaces (Discrete, MultiDiscrete, Box) are never nested, so there is nothing to flatten"
    ),
    "_disable_initialize_loss_from_dummy_batch": Flag(
        "corral builds no loss on a dummy batch; it checks the model's outputs on a probe batch when it builds a policy"
    ),
    "_tf_policy_handles_more_than_one_loss": Flag(
        "a TensorFlow policy's switch: corral runs on torch, where a policy takes any number of losses and optimizers"
    ),
    # Ray 2.10 on
    "_validate_config": Flag(
        "corral validates every config before it builds, which this asks for",
        (True,),
        "corral validates every config before it builds, whatever this says",
    ),
    "_use_msgpack_checkpoints": Flag(
        "corral's checkpoints hold JSON and tensors; what a script defined is kept pickled in config.json and "
        "unpickled only with trust_code=True"
    ),
    "_torch_grad_scaler_class": Flag(
        "corral trains in float32 and scales no losses",
        (None,),
        "corral trains in float32 and scales no losses; the class is not used",
        kind=object,
    ),
    "_torch_lr_scheduler_classes": Flag(
        "corral schedules the learning rate with lr_schedule",
        (None, [], {}),
        "torch LR scheduler classes are not available in corral; schedule the learning rate with lr_schedule "
        "([[timestep, lr], ...]) and remove this",
        refuse=True,
        kind=object,
    ),
    # Ray 2.5-2.9 .resources(num_learner_workers=...), Ray 2.10 on .learners(num_learners=...): until corral has
    # learner actors (a LearnerGroup), the learner is the main process
    **dict.fromkeys(
        ("num_learner_workers", "num_learners"),
        Flag(
            "corral learns in the main process, as RLlib does with 0 learners",
            (0,),
            "remote learner actors are not in corral yet; corral learns in the main process, on the whole train batch "
            "(the update one learner, or data-parallel learners averaging their gradients, make)",
            kind=int,
        ),
    ),
}
"""RLlib's experimental and API-stack settings, each with what corral does about it"""

EXPERIMENTAL_KEYWORDS = frozenset(
    {
        "_enable_new_api_stack",
        "_tf_policy_handles_more_than_one_loss",
        "_disable_preprocessor_api",
        "_disable_action_flattening",
        "_disable_execution_plan_api",
        "_disable_initialize_loss_from_dummy_batch",
        "_validate_config",
        "_use_msgpack_checkpoints",
        "_torch_grad_scaler_class",
        "_torch_lr_scheduler_classes",
    }
)
"""the keywords RLlib's ``AlgorithmConfig.experimental()`` has taken in Ray 2.0 to 2.x"""


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
    from corral.core.contracts.config import is_search_space

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


RECURRENT_MODEL_KEYS = {
    "use_lstm": "recurrent (LSTM) models",
    "use_attention": "attention (GTrXL) models",
}
"""RLlib's model switches for nets with memory, which corral does not have yet: False is accepted (at INFO)"""

RECURRENT_MODEL_SETTINGS = (
    "max_seq_len",
    "lstm_cell_size",
    "lstm_use_prev_action",
    "lstm_use_prev_reward",
    "lstm_use_prev_action_reward",
    "_time_major",
    "attention_num_transformer_units",
    "attention_dim",
    "attention_num_heads",
    "attention_head_dim",
    "attention_memory_inference",
    "attention_memory_training",
    "attention_position_wise_mlp_dim",
    "attention_init_gru_gate_bias",
    "attention_use_n_prev_actions",
    "attention_use_n_prev_rewards",
)
"""RLlib's settings of those nets: they configure a net this config does not ask for, so they are ignored (at INFO)"""

_NO_MEMORY_YET = (
    "are not available in corral yet: its models see one observation at a time. Until they land, stack recent "
    "observations into one (gymnasium's FrameStackObservation wrapper), and set {key}=False or remove it"
)


def rllib_model_keys(model: dict[str, Any], fields: Collection[str] = ()) -> dict[str, Any]:
    """A ``model`` dict without RLlib's keys that corral answers itself, each answered.

    ``use_lstm``/``use_attention`` True is refused (recurrent and attention nets
    are not in corral yet); False, the settings of those nets, an empty
    ``post_fcnet_hiddens`` and ``post_fcnet_activation`` are dropped at INFO,
    since they ask for nothing corral does not do; RLlib's copies of
    ``_disable_preprocessor_api`` and ``_disable_action_flattening`` in the
    model dict mean what the flags mean.

    Args:
        model: the ``model`` dict as given.
        fields: the model config's own options, which are never answered here (a key corral
            implements is its option from then on).

    Returns:
        The dict with those keys removed (the same dict when it has none).

    Raises:
        ConfigError: a recurrent or attention net is asked for, or ``post_fcnet_hiddens`` holds layers.
    """
    answered = {key for key in model if isinstance(key, str) and key not in fields} & {
        *RECURRENT_MODEL_KEYS,
        *RECURRENT_MODEL_SETTINGS,
        "post_fcnet_hiddens",
        "post_fcnet_activation",
        "_disable_preprocessor_api",
        "_disable_action_flattening",
    }
    if not answered:
        return model
    asked = [key for key in RECURRENT_MODEL_KEYS if key in answered and model[key] is not False]
    if asked:
        key = asked[0]
        raise ConfigError(f"model.{key}={short_repr(model[key])}: {RECURRENT_MODEL_KEYS[key]} {_NO_MEMORY_YET.format(key=key)}")
    layers = model.get("post_fcnet_hiddens", []) if "post_fcnet_hiddens" in answered else []
    if not (isinstance(layers, (list, tuple)) and len(layers) == 0):
        raise ConfigError(
            f"model.post_fcnet_hiddens={short_repr(layers)}: corral has no separate option for layers after the hidden "
            "layers (RLlib stacks them after fcnet_hiddens, or after the conv layers for images); append them to fcnet_hiddens"
        )
    for key in sorted(answered):
        if key.startswith("_disable"):
            note_flag(key, model[key])
        else:
            why = "ignored; it configures layers or nets this config does not ask for"
            logger.info("model.%s=%s: %s", key, short_repr(model[key]), why)
    return {key: value for key, value in model.items() if key not in answered}


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

    RLlib builds an algorithm from any config by copying its settings into the
    algorithm's own default config. corral copies the options the config was
    given onto ``config_class``'s defaults, so the algorithm's own defaults hold
    for the rest (said at INFO).

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
    for name, value in options_set(config).items():
        setattr(converted, name, value)
    logger.info("%s with algo_class: its options are applied to %s's defaults", type(config).__name__, config_class.__name__)
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
    """RLlib's builder methods for its API stack and experimental flags, and ``is_multi_agent``, on AlgorithmConfig."""

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
        self._canonical_keys(flags)
        return cast("AlgorithmConfig", self)  # the methods are only ever AlgorithmConfig's (see the class docstring)

    def api_stack(
        self: Any, enable_rl_module_and_learner: bool | None = None, enable_env_runner_and_connector_v2: bool | None = None
    ) -> AlgorithmConfig:
        """RLlib's ``.api_stack(...)`` (Ray 2.10 on): False for both is corral's way; True gets a warning.

        Args:
            enable_rl_module_and_learner: RLlib's RLModule and Learner classes.
            enable_env_runner_and_connector_v2: RLlib's EnvRunner with ConnectorV2 pipelines.

        Returns:
            This config.
        """
        given = {"enable_rl_module_and_learner": enable_rl_module_and_learner}
        given["enable_env_runner_and_connector_v2"] = enable_env_runner_and_connector_v2
        self._canonical_keys({key: value for key, value in given.items() if value is not None})
        return cast("AlgorithmConfig", self)

    def rl_module(self: Any, **kwargs: Any) -> AlgorithmConfig:
        """RLlib's ``.rl_module(...)``: only its Ray 2.5 switch ``_enable_rl_module_api``, which corral answers.

        Args:
            **kwargs: ``_enable_rl_module_api``.

        Returns:
            This config.

        Raises:
            ConfigError: any other option: RLModules are not in corral yet.
        """
        others = sorted(set(kwargs) - {"_enable_rl_module_api"})
        if others:
            raise ConfigError(
                f"rl_module({others[0]}=...): RLlib's RLModules are not in corral yet; set the network with "
                "training(model={...}) (fcnet_hiddens, conv_filters, custom_model)"
            )
        self._canonical_keys(kwargs)
        return cast("AlgorithmConfig", self)

    @property
    def is_multi_agent(self: Any) -> CallableBool:
        """Whether this config asks for more than the one ``default_policy`` acting for a single agent.

        Read it as RLlib's property or call it as RLlib's older method (``config.is_multi_agent()``).
        """
        from corral.core.common.sample_batch import DEFAULT_POLICY_ID

        return CallableBool(bool(set(self.policies) - {DEFAULT_POLICY_ID}) or self.policy_mapping_fn is not None)

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
import inspect
import logging
import os
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from corral._lazy import is_instance_of_loaded
from corral.core.common import by_value
from corral.core.common.import_paths import import_object
from corral.core.contracts.plugin_classes import check_estimation_methods, validate_exploration_config
from corral.core.contracts.rllib_compat import (
    EXPERIMENTAL_FLAGS,
    NOOP_LOGGERS,
    RLlibConfigMethods,
    evaluation_overrides,
    note_flag,
    rllib_model_keys,
)
from corral.errors import ConfigError, did_you_mean, short_repr

if TYPE_CHECKING:  # the algorithm module imports this one
    from corral.core.training.algorithm import Algorithm

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
    "fault_tolerance",
    "checkpointing",
    "multi_agent",
    "offline_data",
)

# Names from older RLlib APIs that map one-to-one onto a corral field.
LEGACY_KEYS = {
    "num_workers": "num_env_runners",
    "num_rollout_workers": "num_env_runners",
    "num_envs_per_worker": "num_envs_per_env_runner",
    "lambda": "lambda_",
    "input": "input_",
    "num_sgd_iter": "num_epochs",
    "sgd_minibatch_size": "minibatch_size",
    "callbacks": "callbacks_class",
    "num_cpus_per_worker": "num_cpus_per_env_runner",
    "num_gpus_per_worker": "num_gpus_per_env_runner",
    "custom_resources_per_worker": "custom_resources_per_env_runner",
    "recreate_failed_workers": "recreate_failed_env_runners",
    "ignore_worker_failures": "ignore_env_runner_failures",
    "num_consecutive_worker_failures_tolerance": "num_consecutive_env_runner_failures_tolerance",
    "timesteps_per_iteration": "min_sample_timesteps_per_iteration",
    "min_sample_timesteps_per_reporting": "min_sample_timesteps_per_iteration",
    "min_iter_time_s": "min_time_s_per_iteration",
    "min_time_s_per_reporting": "min_time_s_per_iteration",
    "metrics_smoothing_episodes": "metrics_num_episodes_for_smoothing",
    "evaluation_num_workers": "evaluation_num_env_runners",
    "num_cpus_for_local_worker": "num_cpus_for_main_process",
    "num_cpus_for_driver": "num_cpus_for_main_process",
    "Q_model": "q_model_config",
    "policy_model": "policy_model_config",
    "monitor": "record_env",
    "_fake_gpus": "fake_gpus",  # RLlib's name: pydantic keeps names with a leading underscore for private attributes
}

MERGED_GROUPS = ("model", "replay_buffer_config", "q_model_config", "policy_model_config", "optimizer")
"""options holding a group of settings: a partial dict given for one keeps the current value's other keys
(an ``optimizer`` of another type replaces the current one: its arguments would not fit)"""

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

OPTIMIZATION_KEYS = {"actor_learning_rate": "actor_lr", "critic_learning_rate": "critic_lr", "entropy_learning_rate": "alpha_lr"}
"""RLlib's ``optimization: {...}`` group (SAC and its kin): each key maps to one corral option"""

ABSENT_KEYS = {
    "sample_async": "IMPALA samples asynchronously on remote env runners; the other algorithms sample in step with learning",
    "simple_optimizer": "each policy has one torch optimizer; there is no multi-GPU tower optimizer to opt out of",
    "preprocessor_pref": "observations are flattened or kept as images by their space; wrap Atari envs in gymnasium's "
    "AtariPreprocessing",
    "compress_observations": "samples stay arrays in memory; output files compress columns by output_compress_columns",
    "synchronize_filters": "observation filters are always merged across env runners after each sample call",
    "remote_worker_envs": "sub-environments run inside their env runner; num_env_runners samples in parallel processes",
}
"""RLlib options corral deliberately does not have, and why: naming one is an error that says so"""

logger = logging.getLogger("corral")

BEHAVIOUR_KEYS: dict[str, tuple[tuple[bool, ...], str]] = {
    "soft_horizon": ((False,), "episodes end when the env (or horizon) ends them; none goes on after a reset"),
    "vtrace_drop_last_ts": ((False,), "V-trace uses every step of a sequence and bootstraps from the value after it"),
    "enable_connectors": ((True, False), "env runners always preprocess observations and actions in one place"),
}
"""RLlib options whose value corral's behaviour always has: accepted with such a value (said at INFO); any other
value is an error that says why"""

TF_FRAMEWORKS = ("tf", "tf2", "tfe")
"""RLlib's TensorFlow frameworks: a config that names one runs on torch, with a warning"""
TF_ONLY_KEYS = ("eager_tracing", "eager_max_retraces", "tf_session_args", "local_tf_session_args", "enable_tf1_exec_eagerly")
"""RLlib options that only TensorFlow reads: accepted and ignored, with a warning"""


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


MAX_LAYER_SIZE = 8192
"""The widest layer (or most channels, the largest kernel or stride) a model config may ask for."""

MAX_SEED = 2**63 - 1
"""The largest seed: torch and numpy take any integer in [0, 2**63)."""

SCHEDULES = {"lr_schedule": "lr", "entropy_coeff_schedule": "entropy_coeff"}
"""Schedule fields and the field each schedules; every value of a schedule must be valid for its field."""

SCHEDULED_BY = {name: schedule for schedule, name in SCHEDULES.items()}
"""the schedule of each option that has one: RLlib accepts the schedule as the option's own value"""

MAX_UPDATES_PER_ENV_STEP = 128
"""The largest replay ratio in gradient updates per sampled env step (``training_intensity / train_batch_size``)."""


class ModelConfig(BaseModel):
    """How the policy's neural network is built (RLlib's ``model`` dict)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True, allow_inf_nan=False)

    fcnet_hiddens: list[int] = Field(default_factory=lambda: [64, 64], max_length=64)
    """sizes of the hidden layers of the fully connected network"""
    fcnet_activation: Literal["tanh", "relu", "swish", "elu", "linear"] = "tanh"
    """activation function between the fully connected layers"""
    vf_share_layers: bool = False
    """whether the value head shares the policy's hidden layers (False: a separate network)"""
    free_log_std: bool = True
    """for Box actions: a state-independent, learned log standard deviation instead of a network output"""
    conv_filters: list[list[int]] | None = None
    """for image observations: [[out_channels, kernel, stride], ...]; None picks a default by image size"""
    conv_activation: Literal["tanh", "relu", "swish", "elu"] = "relu"
    """activation function between the convolution layers"""
    custom_model: Any = None
    """a torch.nn.Module subclass or its 'package.module:Class' path, built with RLlib's arguments (obs_space, action_space,
    num_outputs, model_config, name, **custom_model_config) or corral's (the first four): a plain module's forward(obs)
    gives the action-distribution inputs and gets a separate value network (DQN puts its Q head on it); a
    corral.core.Model gives every output itself"""
    custom_model_config: dict[str, Any] = Field(default_factory=dict)
    """the custom model's own settings: in model_config, and as keyword arguments with RLlib's constructor arguments"""

    @model_validator(mode="before")
    @classmethod
    def _rllib_model_keys(cls, value: Any) -> Any:
        return rllib_model_keys(value, cls.model_fields) if isinstance(value, dict) else value

    @field_validator("fcnet_hiddens")
    @classmethod
    def _positive_sizes(cls, value: list[int]) -> list[int]:
        if any(size <= 0 or size > MAX_LAYER_SIZE for size in value):
            raise ValueError(f"every hidden layer size must be an integer from 1 to {MAX_LAYER_SIZE}")
        return value

    @field_validator("conv_filters")
    @classmethod
    def _filter_triples(cls, value: list[list[int]] | None) -> list[list[int]] | None:
        if value is not None and any(len(f) != 3 or min(f) <= 0 or max(f) > MAX_LAYER_SIZE for f in value):
            raise ValueError(f"each conv filter is [out_channels, kernel, stride] with integers from 1 to {MAX_LAYER_SIZE}")
        return value

    @field_validator("custom_model_config", mode="before")
    @classmethod
    def _plain_custom_model_config(cls, value: Any) -> Any:
        check_plain_data("model.custom_model_config", value)
        return value

    @field_validator("custom_model")
    @classmethod
    def _model_class(cls, value: Any) -> Any:
        if value is None or isinstance(value, (str, type)):
            return value
        raise ValueError("custom_model must be a torch.nn.Module subclass or its 'package.module:Class' path")

    def model_class(self) -> type | None:
        """The custom model's class, imported if it is given as a path (None: the catalog's model).

        Raises:
            ConfigError: the path does not import, or it is not a ``torch.nn.Module`` subclass.
        """
        if self.custom_model is None:
            return None
        from torch import nn

        cls = import_object(self.custom_model) if isinstance(self.custom_model, str) else self.custom_model
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise ConfigError(f"model.custom_model={self.custom_model!r} is not a torch.nn.Module subclass")
        return cls

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """The fields as a dict; a custom model class is written as its 'module:qualname' path (or by value, see to_dict)."""
        data = super().model_dump(**kwargs)
        if isinstance(data.get("custom_model"), type):
            data["custom_model"] = by_value.encode(data["custom_model"])
        return data


class AlgorithmConfig(RLlibConfigMethods, BaseModel):
    """The settings of one training run, shared by every algorithm.

    Build it with the builder methods, then ``build()`` the algorithm. Plugins
    subclass it; ``defaults={...}`` in the class statement changes inherited
    defaults for that algorithm.
    """

    model_config = ConfigDict(
        extra="forbid",
        validate_assignment=True,
        use_attribute_docstrings=True,
        arbitrary_types_allowed=True,
        protected_namespaces=(),
        allow_inf_nan=False,
    )

    # The algorithm this config builds; bound by Algorithm.__init_subclass__.
    algo_class: ClassVar[type[Algorithm] | None] = None
    _frozen: bool = PrivateAttr(default=False)
    _is_evaluation_copy: bool = PrivateAttr(default=False)
    _algo_class_override: type[Algorithm] | None = PrivateAttr(default=None)
    _search_space: dict[str, Any] = PrivateAttr(default_factory=dict)
    """options given a Tune search space: to_dict() carries it, and each trial validates its own value"""

    # --- environment -------------------------------------------------------
    env: Any = option(None, "environment")
    """a gymnasium id, a 'package.module:Class' path, a class, or a name given to corral.register_env"""
    env_config: dict[str, Any] = option({}, "environment")
    """keyword arguments for the environment's creator (an EnvContext with worker and vector indices)"""
    normalize_actions: bool = option(True, "environment")
    """for Box actions: the policy acts in [-1, 1] and actions are scaled to the env's bounds"""
    clip_actions: bool = option(False, "environment")
    """for Box actions without normalize_actions: clip actions to the env's bounds"""
    clip_rewards: bool | float | None = option(None, "environment")
    """clip rewards before learning: a number x clips to [-x, x], True takes their sign (-1, 0 or 1, as for Atari);
    None or False keeps them as they are"""
    action_mask_key: str | None = option("action_mask", "environment", min_length=1)
    """the key of a Dict observation's legal-action flags (Discrete actions): masked actions are never
    sampled or picked, and the model sees the rest of the Dict; None reads no mask"""
    env_task_fn: Any = option(None, "environment")
    """curriculum: fn(result, env, env_context) -> the next task of each sub-environment, set with env.set_task()
    after every iteration (a corral.TaskSettableEnv), or its 'module:qualname'; None sets no tasks"""
    observation_space: Any = option(None, "environment")
    """the env's observation space, for an env that declares none or to replace the one it declares (observations
    are checked against it); a gymnasium space or its JSON form; None: the env's own"""
    action_space: Any = option(None, "environment")
    """the env's action space, as observation_space (a multi-agent env's policies take theirs from PolicySpec)"""
    is_atari: bool | None = option(None, "environment")
    """DeepMind's Atari preprocessing (no-op starts, frame skip 4, 84x84 grayscale, 4 stacked frames, sign-clipped
    rewards unless clip_rewards says otherwise); None: for ale-py games (the atari extra), detected by their id"""
    auto_wrap_old_gym_envs: bool = option(True, "environment")
    """wrap an env written to the old gym API (the gym package's, or reset() without a seed and a four-value step)
    to gymnasium's; False refuses it"""
    disable_env_checking: bool = option(False, "environment")
    """skip gymnasium's env checker (the spaces, and the form of the first reset and step) and the check of each
    observation against the env's observation space (NaN and inf rewards are refused regardless)"""
    render_env: bool = option(False, "environment")
    """show sub-environment 0 of the first env runner that steps (remote runner 1, else the local one; evaluation
    runners alike) in a window at every step: a gymnasium id is made with render_mode='human', an env made without
    a render mode has its render() called; needs a display, and pygame for gymnasium's own envs (the render extra)"""
    record_env: bool | Annotated[str, Field(min_length=1)] = option(False, "environment")
    """record that sub-environment's episodes as MP4 files (gymnasium's RecordVideo, with moviepy: the render extra):
    training episodes 0, 1, 8, 27, ..., 1000 and every 1000th after, and all its evaluation episodes; True writes them
    into <experiment folder>/videos, a string names the folder (RLlib's 'monitor': true is True)"""
    record_env_format: Literal["mp4", "gif"] = option("mp4", "environment")
    """the file format of record_env's videos: 'mp4' (H.264, small) or 'gif' (plays anywhere, larger)"""

    # --- env runners -------------------------------------------------------
    num_env_runners: int = option(0, "env_runners", ge=0, le=65_536)
    """number of Ray actors that sample in parallel (needs the ray extra); 0 samples in the calling process without Ray"""
    num_envs_per_env_runner: int = option(8, "env_runners", ge=1, le=65_536)
    """sub-environments each runner steps as one vector, with one batched forward pass per step"""
    rollout_fragment_length: Annotated[int, Field(ge=1, le=2**31 - 1)] | Literal["auto"] = option("auto", "env_runners")
    """steps per sub-environment in one sample call; 'auto' divides train_batch_size evenly"""
    horizon: int | None = option(None, "env_runners", ge=1, le=2**31 - 1)
    """cut every episode after this many steps (a truncation, so bootstrapped unless no_done_at_end=False), as
    gymnasium's TimeLimit does; None: episodes end when the env ends them"""
    no_done_at_end: bool = option(True, "env_runners")
    """True: an episode cut short (truncated: a time limit, horizon) bootstraps its last step from the value of its
    final observation, as gymnasium's truncated flag means; False: it is learned from as if it had terminated, with no
    value after its last step (RLlib's default before gymnasium's truncated flag replaced this option)"""
    batch_mode: Literal["truncate_episodes", "complete_episodes"] = option("truncate_episodes", "env_runners")
    """'truncate_episodes': a sample call steps each sub-environment rollout_fragment_length times, cutting episodes
    (the cut is bootstrapped); 'complete_episodes': it steps on until each fragment holds whole episodes only"""
    vectorize_mode: Literal["auto", "native", "sync"] = option("auto", "env_runners")
    """'native': the env's own vectorised implementation (gymnasium make_vec); 'sync': copies in a loop; 'auto': native if any"""
    observation_filter: Literal["NoFilter", "MeanStdFilter"] = option("NoFilter", "env_runners")
    """normalise observations by running mean and std (saved in checkpoints)"""
    num_cpus_per_env_runner: float = option(1, "env_runners", ge=0, le=1024)
    """CPUs Ray reserves for each remote env runner"""
    num_gpus_per_env_runner: float = option(0, "env_runners", ge=0, le=1024)
    """GPUs Ray reserves for each remote env runner, whose policies act on them (for a large network); with 0 they act
    on the CPU, whatever num_gpus gives the learner"""
    custom_resources_per_env_runner: dict[str, float] = option({}, "env_runners")
    """other Ray resources each remote env runner needs, e.g. {'sim_license': 1}"""

    # --- training ----------------------------------------------------------
    gamma: float = option(0.99, "training", ge=0, le=1)
    """the discount factor"""
    lr: float = option(1e-3, "training", gt=0)
    """the learning rate (a list of [timestep, value], RLlib's way to schedule it, sets lr_schedule); a number given
    without lr_schedule replaces the schedule the config holds"""
    lr_schedule: list[tuple[int, float]] | None = option(None, "training")
    """piecewise-linear learning rate over env steps, [[timestep, lr], ...]; overrides lr"""
    train_batch_size: int = option(4000, "training", gt=0, le=2**31 - 1)
    """env steps collected for one training iteration's update"""
    grad_clip: float | None = option(None, "training", gt=0)
    """clip gradients to this value (as grad_clip_by says); None does not clip"""
    grad_clip_by: Literal["global_norm", "norm", "value"] = option("global_norm", "training")
    """'global_norm': scale all of a network's gradients by their joint norm; 'norm': each parameter tensor by
    its own; 'value': clamp each element to [-grad_clip, grad_clip]"""
    model: ModelConfig = option(ModelConfig(), "training")
    """the network: fcnet_hiddens, fcnet_activation, vf_share_layers, conv_filters, custom_model, ..."""
    optimizer: dict[str, Any] = option({"type": "adam", "eps": 1e-5}, "training")
    """the policy's torch optimizer: its 'type' (adam, adamw, rmsprop, sgd, adagrad, adamax, nadam, radam) and its
    arguments but lr (eps, betas, weight_decay, alpha, momentum, ...); a dict without 'type' keeps the other arguments"""

    # --- evaluation --------------------------------------------------------
    evaluation_interval: int | None = option(None, "evaluation", ge=1, le=2**31 - 1)
    """evaluate every this many training iterations; None never evaluates during train()"""
    evaluation_duration: Annotated[int, Field(ge=1, le=2**31 - 1)] | Literal["auto"] = option(10, "evaluation")
    """how long one evaluation runs, in evaluation_duration_unit; 'auto' (with evaluation_parallel_to_training):
    each evaluation runner evaluates whole episodes, one after another, for as long as the iteration trains"""
    evaluation_duration_unit: Literal["episodes", "timesteps"] = option("episodes", "evaluation")
    """the unit of evaluation_duration"""
    evaluation_sample_timeout_s: float = option(120.0, "evaluation", gt=0, le=2**31)
    """how long to wait for the evaluation_num_env_runners actors' episodes: a runner still evaluating after it is
    left out of the result (with a warning) and restarted"""
    evaluation_config: dict[str, Any] = option({"explore": False}, "evaluation")
    """config overrides for evaluation, e.g. {'explore': False, 'env_config': {...}}"""
    evaluation_num_envs: int | None = option(None, "evaluation", ge=1, le=65_536)
    """sub-environments for evaluation; None uses num_envs_per_env_runner"""
    evaluation_num_env_runners: int = option(0, "evaluation", ge=0, le=65_536)
    """Ray actors dedicated to evaluation, sharing evaluation_duration; 0 evaluates in this process"""
    evaluation_parallel_to_training: bool = option(False, "evaluation")
    """evaluate on the evaluation actors while the iteration trains (with the weights from its start)"""
    custom_evaluation_function: Any = option(None, "evaluation")
    """fn(algorithm, eval_workers) -> metrics dict, run instead of corral's evaluation (eval_workers is the
    evaluation EnvRunnerGroup), or its 'module:qualname'; None: evaluation_duration episodes or timesteps"""
    always_attach_evaluation_results: bool = option(False, "evaluation")
    """put the latest evaluation results into every iteration's result, also those that do not evaluate"""
    off_policy_estimation_methods: dict[str, Any] = option({}, "evaluation")
    """estimate the policy's value on recorded episodes at each evaluation, each method reported under
    evaluation/off_policy_estimator/<name>: {name: {'type': 'ImportanceSampling' | 'WeightedImportanceSampling' |
    'DirectMethod' | 'DoublyRobust', **options}}; the episodes are evaluation_config's 'input', else input_'s files"""

    # --- exploration -------------------------------------------------------
    explore: bool = option(True, "exploration")
    """sample exploratory actions while training (False: always the deterministic action)"""
    exploration_config: dict[str, Any] = option({"type": "StochasticSampling"}, "exploration")
    """the exploration plugin and its options: {'type': 'EpsilonGreedy', 'final_epsilon': 0.02, ...}"""

    # --- callbacks ---------------------------------------------------------
    callbacks_class: list[Any] = option([], "callbacks")
    """Callbacks subclasses (or 'module:Class' paths) whose hooks run during training"""

    # --- debugging ---------------------------------------------------------
    seed: int | None = option(None, "debugging", ge=0, le=MAX_SEED)
    """seed for torch, numpy and the environments; the same seed gives the same run on CPU"""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = option("WARNING", "debugging")
    """level of corral's logger"""
    on_nonfinite: Literal["raise", "skip"] = option("raise", "debugging")
    """an update with a NaN or inf loss, gradient or result: 'raise' a TrainingError (weights unchanged) or 'skip' it and go on"""
    logger_config: dict[str, Any] | None = option(None, "debugging")
    """where and how results are written: 'logdir' is the experiment folder (default a new one under storage_path);
    'type' a result logger class or its import path, made as type(config_dict, logdir) and given each result with
    on_result(result), in place of corral's files (Ray Tune's loggers fit); 'NoopLogger' writes no result files"""
    log_sys_usage: bool = option(True, "debugging")
    """report the machine's CPU and memory use in each result's 'perf' (cpu_util_percent, ram_util_percent)"""

    # --- reporting ---------------------------------------------------------
    keep_per_episode_custom_metrics: bool = option(False, "reporting")
    """report each custom metric as the list of its episodes' values, not as its mean, min and max"""
    metrics_num_episodes_for_smoothing: int = option(100, "reporting", ge=1, le=1_000_000)
    """episode metrics (reward, length) are means over this many most recent episodes"""
    min_time_s_per_iteration: float | None = option(None, "reporting", ge=0, le=86_400)
    """repeat training_step() until at least this many seconds passed in one train() call"""
    min_sample_timesteps_per_iteration: int = option(0, "reporting", ge=0, le=2**40)
    """repeat training_step() until at least this many env steps were sampled in one train() call"""
    min_train_timesteps_per_iteration: int = option(0, "reporting", ge=0, le=2**40)
    """repeat training_step() until at least this many env steps were trained on in one train() call"""
    storage_path: str | None = option(None, "reporting")
    """folder for experiment folders; None uses $CORRAL_RESULTS_DIR or ~/corral_results"""
    log_to_tensorboard: bool = option(True, "reporting")
    """write TensorBoard event files beside result.json and progress.csv"""

    # --- resources ---------------------------------------------------------
    num_gpus: float = option(0, "resources", ge=0, le=1024)
    """GPUs for the learner (the algorithm's process, whose policies the local env runners share); 0 trains on the
    CPU; the learner trains on one device, so a number above 1 leaves the others idle (said at WARNING)"""
    fake_gpus: bool = option(False, "resources")
    """RLlib's _fake_gpus: run a num_gpus / num_gpus_per_env_runner configuration on the CPU, Ray reserving no GPU
    (to test it where there is none)"""
    num_torch_threads: Annotated[int, Field(ge=1, le=1024)] | Literal["auto"] | None = option(1, "resources")
    """torch intra-op threads; small MLPs are fastest on 1; 'auto': the cores other processes leave free, re-read every
    iteration (in a Ray actor, the CPUs it reserved); None keeps torch's default (one per core, even on a busy machine)"""
    num_cpus_for_main_process: float = option(1, "resources", ge=0, le=1024)
    """CPUs a Tune trial reserves for the learner's process (RLlib's num_cpus_for_local_worker, num_cpus_for_driver)"""
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = option("PACK", "resources")
    """how a Tune trial's bundles (the learner's, one per remote env runner) are placed on the Ray cluster's nodes"""
    num_learner_threads: int | None = option(None, "resources", ge=1, le=1024)
    """policies that update at once, each in its own thread, in a multi-agent run; None: CPU cores / torch threads"""

    # --- fault tolerance ---------------------------------------------------
    recreate_failed_env_runners: bool = option(False, "fault_tolerance")
    """replace a remote env runner that died or failed, and go on with the same number"""
    ignore_env_runner_failures: bool = option(False, "fault_tolerance")
    """drop a remote env runner that died or failed, and go on with fewer"""
    num_consecutive_env_runner_failures_tolerance: int = option(100, "fault_tolerance", ge=0, le=2**31 - 1)
    """with recreate_failed_env_runners: how many times in a row one runner may fail (no call of it succeeding in
    between) before the run stops with an EnvRunnerError"""
    worker_health_probe_timeout_s: float = option(60.0, "fault_tolerance", gt=0, le=2**31)
    """how long a restarted remote env runner may take to answer its first ping before it counts as failed again"""
    restart_failed_sub_environments: bool = option(False, "fault_tolerance")
    """restart only a sub-environment whose step raised (its episode ends there); steps sub-environments in a loop"""

    # --- checkpointing -----------------------------------------------------
    checkpoint_frequency: int = option(0, "checkpointing", ge=0, le=2**31 - 1)
    """save a checkpoint into the experiment folder every this many iterations of train(); 0 never"""
    checkpoint_at_end: bool = option(False, "checkpointing")
    """save a checkpoint when a run driven by the CLI (or Tune) ends"""
    keep_checkpoints_num: int | None = option(None, "checkpointing", ge=1, le=2**31 - 1)
    """keep only this many of the checkpoints save() writes into the experiment folder: the newest, or with
    checkpoint_score_attribute the best (the latest is kept too); None keeps all"""
    checkpoint_score_attribute: str | None = option(None, "checkpointing", min_length=1)
    """the result key (nested keys joined by '/', RLlib's names too) that ranks checkpoints for keep_checkpoints_num;
    a checkpoint saved before any result with it ranks last; None ranks by age"""
    checkpoint_score_order: Literal["max", "min"] = option("max", "checkpointing")
    """whether a higher ('max') or a lower ('min') checkpoint_score_attribute is better"""
    checkpoint_trainable_policies_only: bool = option(False, "checkpointing")
    """save only the policies that learn (``policies_to_train``); the others are built afresh on restore"""
    export_native_model_files: bool = option(False, "checkpointing")
    """put each policy's TorchScript file (model.pt, as export_policy_model writes it) into every checkpoint"""

    # --- multi-agent -------------------------------------------------------
    policies: dict[str, Any] = option({}, "multi_agent")
    """the policies by id: a set of ids (spaces inferred from the agents mapped to each) or a dict of ids to
    corral.PolicySpec (or RLlib's 4-tuples); empty: one policy, 'default_policy'"""
    policy_mapping_fn: Any = option(None, "multi_agent")
    """fn(agent_id, episode, **kwargs) -> the id of the policy that acts for the agent, or its 'module:qualname';
    None: the only policy acts for every agent"""
    policies_to_train: Any = option(None, "multi_agent")
    """the ids of the policies that learn (a list or set), or fn(policy_id, batch) -> bool; None: every policy"""
    count_steps_by: Literal["env_steps", "agent_steps"] = option("env_steps", "multi_agent")
    """what train_batch_size and the step counters count: env steps, or agent steps (one per acting agent)"""
    policy_map_capacity: int = option(100, "multi_agent", ge=1, le=2**31 - 1)
    """how many policies each process keeps in memory; the least recently used others wait on disk (a fresh
    copy loads their full state when they are needed again, so training goes on exactly as if they stayed)"""
    observation_fn: Any = option(None, "multi_agent")
    """fn(agent_obs, worker, base_env, policies, episode) -> agent_obs, rewriting the agents' observations before
    their policies see them (a centralised critic's view), or its 'module:qualname'; None: unchanged"""

    # --- offline data ------------------------------------------------------
    input_: Any = option("sampler", "offline_data")
    """where training samples come from: 'sampler' (the env runners); a folder, glob pattern or file of recorded
    experiences, or a list of them; or a dict of these and 'sampler' to proportions that sum to 1 (in rows),
    e.g. {'sampler': 0.5, '/data/expert': 0.5}"""
    input_config: dict[str, Any] = option({}, "offline_data")
    """how input files are read: {'format': 'parquet' or 'json'} (default: by each file's suffix),
    {'columns': {'obs': 'observation', ...}} (corral's column names -> the files' own), and {'use_ray_data': True}
    (read Parquet through Ray Data, in parallel and streaming; the default when num_env_runners > 0)"""
    shuffle_buffer_size: int = option(0, "offline_data", ge=0, le=2**31 - 1)
    """input rows held back and drawn at random; 0 reads each file's rows in order"""
    actions_in_input_normalized: bool = option(False, "offline_data")
    """whether Box actions in the input are already in [-1, 1], as a run with normalize_actions=True records
    them; False: they are in the env's units, and are normalized when normalize_actions is on"""
    postprocess_inputs: bool = option(False, "offline_data")
    """run the policy's postprocessing (returns, advantages) over the input's episodes, as over sampled ones"""
    output: str | None = option(None, "offline_data")
    """write every sampled transition of the training env runners to files: 'logdir' (the experiment folder)
    or a folder; None writes nothing"""
    output_config: dict[str, Any] = option({}, "offline_data")
    """how output is written: {'format': 'parquet'} (the default; needs pyarrow) or {'format': 'json'} (JSON lines,
    one sample batch per line, as RLlib's JsonWriter)"""
    output_compress_columns: list[str] = option(["obs", "new_obs"], "offline_data")
    """columns written compressed: zstd in Parquet, zlib and base64 in JSON (RLlib's reader takes only the others)"""
    output_max_file_size: int = option(64 * 1024 * 1024, "offline_data", ge=1, le=2**40)
    """bytes after which an output file is closed and the next one begun"""

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

    def __init__(self, algo_class: type[Algorithm] | None = None, **values: Any) -> None:
        values = self._canonical_keys(values)
        searched = {name: values.pop(name) for name in list(values) if is_search_space(values[name])}
        for name, value in values.items():
            check_plain_data(name, value)
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise self._config_error(exc) from None
        self._algo_class_override = algo_class
        for name, value in searched.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in EXPERIMENTAL_FLAGS:  # RLlib's `config._enable_new_api_stack = True`
            note_flag(name, value)
            return
        if not name.startswith("_"):
            if self._frozen:
                raise ConfigError(
                    f"this {type(self).__name__} is frozen (an algorithm was built from it); change a copy instead: config.copy()"
                )
            if name not in type(self).model_fields:
                raise self._unknown_key(name)
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
    def environment(self, env: Any = None, **kwargs: Any) -> AlgorithmConfig:
        """Set the environment and its options (``env_config``, ``normalize_actions``, ...)."""
        if env is not None:
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

    def framework(self, framework: str | None = "torch", **tf_options: Any) -> AlgorithmConfig:
        """Accept RLlib's ``.framework(...)``: corral runs on torch.

        ``"tf"``, ``"tf2"`` and ``"tfe"`` run the same config on torch, with a
        warning; so do RLlib's TensorFlow-only options (``eager_tracing``, ...),
        which are ignored.

        Args:
            framework: ``"torch"`` (or None), or one of RLlib's TensorFlow frameworks.
            **tf_options: RLlib's TensorFlow-only options.

        Returns:
            This config.

        Raises:
            ConfigError: another framework, or an option that is not one of RLlib's for ``framework()``.
        """
        self._canonical_keys({"framework": framework, **tf_options})
        return self

    def debugging(self, **kwargs: Any) -> AlgorithmConfig:
        """Set ``seed``, ``log_level`` and what a NaN update does (``on_nonfinite``)."""
        return self._set_group("debugging", kwargs)

    def reporting(self, **kwargs: Any) -> AlgorithmConfig:
        """Set metric smoothing, iteration length and where results are written."""
        return self._set_group("reporting", kwargs)

    def resources(self, **kwargs: Any) -> AlgorithmConfig:
        """Set ``num_gpus``, ``_fake_gpus`` (``fake_gpus``), threads and how a Tune trial's resources are placed."""
        return self._set_group("resources", kwargs)

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
        data = {name: _to_jsonable(self._search_space.get(name, getattr(self, name))) for name in type(self).model_fields}
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
        for name, value in self._merged(self._canonical_keys(values)).items():
            setattr(self, name, value)
        return self

    def _merged(self, canonical: dict[str, Any]) -> dict[str, Any]:
        """Settings to assign, a partial nested group merged into its current value, as RLlib does.

        ``model`` (a dict), ``replay_buffer_config`` and the other dict options of
        :data:`MERGED_GROUPS` keep the keys they are not given. A
        ``replay_buffer_config``'s ``learning_starts`` (RLlib's older place for it)
        becomes the option of that name. A number given for a scheduled option
        (``lr``) without its schedule replaces the schedule: the user asked for a constant.
        """
        fields = type(self).model_fields
        replay = canonical.get("replay_buffer_config")
        if isinstance(replay, dict) and "learning_starts" in replay and "learning_starts" in fields:
            replay = dict(replay)
            canonical.setdefault("learning_starts", replay.pop("learning_starts"))
            canonical["replay_buffer_config"] = replay
        for name, schedule in SCHEDULED_BY.items():  # a constant given alone replaces a schedule (DQN's default one, say)
            if name in canonical and schedule not in canonical and schedule in fields and getattr(self, schedule) is not None:
                canonical[schedule] = None
        if isinstance(canonical.get("optimizer"), str):  # a type's name alone: that type with its current arguments
            canonical["optimizer"] = {"type": canonical["optimizer"]}
        for name in MERGED_GROUPS:
            given = canonical.get(name)
            if isinstance(given, dict) and name in fields and not is_search_space(given):
                current = getattr(self, name)
                if name == "optimizer" and str(given.get("type", current["type"])).lower() != current["type"]:
                    continue
                canonical[name] = {**(current.model_dump() if isinstance(current, BaseModel) else current), **given}
        return canonical

    def copy(self, copy_frozen: bool = False) -> AlgorithmConfig:  # type: ignore[override]
        """Return a deep copy; unfrozen unless ``copy_frozen``."""
        new = self.model_copy(deep=True)
        object.__setattr__(new, "__pydantic_private__", {**(new.__pydantic_private__ or {}), "_frozen": False})
        if copy_frozen and self._frozen:
            new.freeze()
        return new

    def freeze(self) -> AlgorithmConfig:
        """Make the config read-only; every later assignment raises ConfigError."""
        self._frozen = True
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
        if self._search_space:
            names = ", ".join(sorted(self._search_space))
            raise ConfigError(
                f"{names} hold a Tune search space, which a trial turns into a value; run the config through Tune "
                "(tune.Tuner(ALGO, param_space=config.to_dict())), or give a value to build it here"
            )
        if self.env is None:
            raise ConfigError(
                "no environment is set; call config.environment('CartPole-v1') "
                "(a gymnasium id, a 'module:Class' path, a class or a registered name)"
            )
        self.get_rollout_fragment_length()
        exploration_type = self.exploration_config.get("type")
        if not isinstance(exploration_type, str):
            raise ConfigError(
                "exploration_config needs a 'type' naming an exploration plugin, "
                "e.g. {'type': 'StochasticSampling'}; `corral list` shows the installed ones"
            )
        validate_exploration_config(self.exploration_config)
        if self.off_policy_estimation_methods:
            check_estimation_methods(self.off_policy_estimation_methods)
        self._validate_env_runners()
        try:
            overrides = self._canonical_keys(self.evaluation_config)
        except ConfigError as exc:
            raise ConfigError(f"evaluation_config: {exc}") from None
        for key in ("evaluation_config", "evaluation_interval"):
            if key in overrides:
                raise ConfigError(f"evaluation_config cannot set {key!r}: evaluation does not nest")
        self.model.model_class()
        from corral.core.contracts.multi_agent_config import check_multi_agent

        check_multi_agent(self)
        if self._is_evaluation_copy:
            return
        try:
            self.get_evaluation_config().validate()
        except ConfigError as exc:
            raise ConfigError(f"evaluation_config: {exc}") from None

    def _validate_env_runners(self) -> None:
        if self.vectorize_mode == "native" and self.restart_failed_sub_environments:
            raise ConfigError(
                "restart_failed_sub_environments needs sub-environments stepped one by one; "
                "set vectorize_mode='sync' or 'auto' (a natively vectorised env has none to restart)"
            )
        if self.vectorize_mode == "native" and (
            self.observation_space is not None or self.action_space is not None or self.horizon is not None
        ):
            raise ConfigError(
                "observation_space, action_space and horizon change each sub-environment, which a natively vectorised "
                "env does not have; set vectorize_mode='sync' or 'auto'"
            )
        if self.evaluation_parallel_to_training and self.evaluation_num_env_runners == 0:
            raise ConfigError(
                "evaluation_parallel_to_training needs evaluation actors to run on; set evaluation_num_env_runners >= 1"
            )
        if self.evaluation_duration == "auto" and not self.evaluation_parallel_to_training:
            raise ConfigError(
                "evaluation_duration='auto' evaluates for as long as an iteration trains, so it needs "
                "evaluation_parallel_to_training=True (and evaluation_num_env_runners >= 1); or give a number of episodes"
            )
        remote = {"num_env_runners": self.num_env_runners, "evaluation_num_env_runners": self.evaluation_num_env_runners}
        asked = {name: n for name, n in remote.items() if n > 0}
        if not asked:
            return
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            name, n = next(iter(asked.items()))
            raise ConfigError(
                f"{name}={n} runs on Ray actors, but Ray is not installed; "
                f"pip install 'corral[ray]', or set {name}=0 to run in this process"
            )
        if self.recreate_failed_env_runners and self.ignore_env_runner_failures:
            raise ConfigError(
                "recreate_failed_env_runners and ignore_env_runner_failures exclude each other: "
                "choose to replace a failed runner or to go on without it"
            )

    def get_rollout_fragment_length(self) -> int:
        """Steps per sub-environment per sample call, resolving ``'auto'``."""
        per_step = self.num_envs_per_env_runner * max(1, self.num_env_runners)
        if self.rollout_fragment_length == "auto":
            return max(1, -(-self.train_batch_size // per_step))
        if self.rollout_fragment_length <= 0:
            raise ConfigError(f"rollout_fragment_length must be a positive integer or 'auto', got {self.rollout_fragment_length}")
        return self.rollout_fragment_length

    def get_evaluation_config(self) -> AlgorithmConfig:
        """This config with ``evaluation_config`` applied, for the evaluation runner.

        The evaluation runner samples its env whatever ``input_`` says, and writes no ``output``.
        """
        evaluation = self.copy().update_from_dict(self.evaluation_config)
        evaluation.output = None
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
        out: dict[str, Any] = {}
        buffer_type: str | None = None
        values = by_value.restore(values, MAX_NESTING)  # what to_dict() wrote by value: its objects again
        for key, value in values.items():
            if not isinstance(key, str):
                kind = type(key).__name__
                raise ConfigError(f"the config key {short_repr(key)} ({kind}) is no option name; config keys are strings")
            if _answered(key, value):
                continue
            if key == "prioritized_replay" and "replay_buffer_config" in cls.model_fields:  # Ray 1.x's buffer switch
                if not isinstance(value, bool):
                    raise ConfigError(f"prioritized_replay takes True or False, not {short_repr(value)}")
                buffer_type = "PrioritizedReplayBuffer" if value else "ReplayBuffer"
                continue
            if key == "optimization" and isinstance(value, dict):
                for inner, inner_value in value.items():
                    name = OPTIMIZATION_KEYS.get(inner)
                    if name is None or name not in cls.model_fields:
                        raise cls._unknown_key(f"optimization.{inner}")
                    out[name] = inner_value
                continue
            name = LEGACY_KEYS.get(key, key)
            if name not in cls.model_fields:
                raise cls._unknown_key(key)
            schedule = SCHEDULED_BY.get(name)
            if schedule in cls.model_fields and isinstance(value, (list, tuple)):  # RLlib: lr=[[0, 1e-3], [1e6, 1e-5]]
                out[schedule] = value
                first = value[0] if value else None
                if isinstance(first, (list, tuple)) and len(first) == 2:
                    out[name] = first[1]
                continue
            out[name] = value
        if buffer_type is not None:  # a replay_buffer_config's own type wins
            replay = out.get("replay_buffer_config")
            out["replay_buffer_config"] = {"type": buffer_type, **(replay if isinstance(replay, dict) else {})}
        return out

    @classmethod
    def _unknown_key(cls, key: str) -> ConfigError:
        if key in ABSENT_KEYS:
            return ConfigError(f"{key!r} is an RLlib option that corral does not have: {ABSENT_KEYS[key]}")
        hint = did_you_mean(key, [*cls.model_fields, *(old for old, new in LEGACY_KEYS.items() if new in cls.model_fields)])
        return ConfigError(f"{cls.__name__} has no option {key!r}.{hint or ' `corral train --help-config` lists them.'}")

    def _set_group(self, group: str, values: dict[str, Any]) -> AlgorithmConfig:
        canonical = self._canonical_keys(values)
        for name in canonical:
            owner = self.field_group(name)
            if owner != group:
                raise ConfigError(f"{name!r} is set with .{owner}(), not .{group}()")
        for name, value in self._merged(canonical).items():
            setattr(self, name, value)
        return self

    @classmethod
    def _config_error(cls, exc: ValidationError) -> ConfigError:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"] if not isinstance(p, int))
            error = err.get("ctx", {}).get("error")
            if isinstance(error, ConfigError):  # a validator's own message names the option and the value
                lines.append(str(error))
            elif err["type"] == "extra_forbidden":
                parent = loc.rpartition(".")[0]
                key = str(err["loc"][-1])
                choices = list(ModelConfig.model_fields) if parent == "model" else list(cls.model_fields)
                lines.append(f"{parent or cls.__name__} has no key {key!r}.{did_you_mean(key, choices)}")
            else:
                lines.append(f"{loc}={err['input']!r} is invalid: {err['msg']}")
        return ConfigError("; ".join(dict.fromkeys(lines)))

    @field_validator("callbacks_class", mode="before")
    @classmethod
    def _resolve_callbacks(cls, value: Any) -> list[Any]:
        from corral.core.contracts.callbacks import Callbacks

        items = value if isinstance(value, (list, tuple)) else [value]
        resolved = []
        for item in items:
            obj = import_object(item) if isinstance(item, str) else item
            if not (isinstance(obj, type) and issubclass(obj, Callbacks)):
                raise ValueError(f"{item!r} is not a subclass of corral.Callbacks")
            resolved.append(obj)
        return resolved

    @field_validator("evaluation_config", mode="before")
    @classmethod
    def _evaluation_config_object(cls, value: Any) -> Any:
        return evaluation_overrides(value) if isinstance(value, AlgorithmConfig) else value

    @field_validator("policies", mode="before")
    @classmethod
    def _normalize_policies(cls, value: Any) -> dict[str, Any]:
        from corral.core.contracts.multi_agent_config import normalize_policies

        return normalize_policies(value)

    @field_validator("policy_mapping_fn", "observation_fn", "custom_evaluation_function", "env_task_fn", mode="before")
    @classmethod
    def _resolve_function(cls, value: Any, info: ValidationInfo) -> Any:
        from corral.core.contracts.multi_agent_config import resolve_function

        return resolve_function(value, str(info.field_name))

    @field_validator("policies_to_train", mode="before")
    @classmethod
    def _normalize_policies_to_train(cls, value: Any) -> Any:
        from corral.core.contracts.multi_agent_config import normalize_policies_to_train

        return normalize_policies_to_train(value)

    @field_validator("output_config", mode="after")
    @classmethod
    def _check_output_config(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - {"format"})
        if unknown:
            raise ValueError(f"output_config has no key {unknown[0]!r}; it takes 'format'")
        if value.get("format", "parquet") not in OUTPUT_FORMATS:
            raise ValueError(f"output_config format {value['format']!r} is not one of {', '.join(map(repr, OUTPUT_FORMATS))}")
        return value

    @field_validator("observation_space", "action_space", mode="before")
    @classmethod
    def _decode_space(cls, value: Any, info: ValidationInfo) -> Any:
        import gymnasium as gym

        from corral.core.common.space_codec import decode_space

        if value is None or isinstance(value, gym.Space) or is_search_space(value):
            return value
        if isinstance(value, dict):
            return decode_space(value, str(info.field_name))
        raise ValueError(
            f"{info.field_name} must be a gymnasium space, its JSON form (a dict) or None, not {type(value).__name__}"
        )

    @field_validator("logger_config", mode="before")
    @classmethod
    def _check_logger_config(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        logdir = value.get("logdir")
        if logdir is not None and not isinstance(logdir, (str, os.PathLike)):
            raise ValueError(f"logger_config logdir must be a folder's path, not {type(logdir).__name__}")
        value = {**value, **({"logdir": os.fspath(logdir)} if logdir is not None else {})}
        kind = value.get("type")
        if kind is None or kind in NOOP_LOGGERS:
            return value
        logger_class = import_object(kind) if isinstance(kind, str) else kind
        if not (isinstance(logger_class, type) and callable(getattr(logger_class, "on_result", None))):
            raise ValueError(
                f"logger_config type {kind!r} is not a result logger: a class with on_result(result), made as "
                "type(config, logdir) (Ray Tune's Logger), or 'NoopLogger'"
            )
        return {**value, "type": logger_class}

    @field_validator("optimizer", mode="before")
    @classmethod
    def _check_optimizer(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = {"type": value}
        if not isinstance(value, dict) or is_search_space(value):
            return value
        kind = str(value.get("type", "adam")).lower()
        if kind not in OPTIMIZERS:
            raise ValueError(f"optimizer type {value.get('type')!r} is not one of {', '.join(OPTIMIZERS)}")
        if "lr" in value:
            raise ValueError("the optimizer's learning rate is the lr option (training(lr=...)), not a key of optimizer")
        import torch.optim  # the optimizer's own arguments are the check

        accepted = set(inspect.signature(getattr(torch.optim, OPTIMIZERS[kind])).parameters) - {"params", "lr"}
        unknown = sorted(set(value) - accepted - {"type"})
        if unknown:
            takes = ", ".join(sorted(accepted))
            raise ValueError(f"torch.optim.{OPTIMIZERS[kind]} takes no argument {unknown[0]!r}; it takes {takes}")
        return {**value, "type": kind}

    @field_validator("log_level", mode="before")
    @classmethod
    def _normalize_log_level(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.upper()
            return "WARNING" if value == "WARN" else value  # RLlib's default is spelled "WARN"
        return value

    @field_validator("input_", mode="after")
    @classmethod
    def _check_input(cls, value: Any) -> Any:
        def is_path(item: Any) -> bool:
            return isinstance(item, (str, os.PathLike))

        if is_path(value) or (isinstance(value, (list, tuple)) and value and all(map(is_path, value))):
            return value if is_path(value) else [os.fspath(v) for v in value]
        if isinstance(value, dict) and value and all(map(is_path, value)):
            shares = list(value.values())
            if not all(isinstance(s, (int, float)) and not isinstance(s, bool) and s >= 0 for s in shares):
                raise ValueError("input_ proportions must be numbers >= 0, e.g. {'sampler': 0.5, '/data/expert': 0.5}")
            if abs(sum(shares) - 1.0) > 1e-6:
                raise ValueError(f"input_ proportions must sum to 1, but they sum to {sum(shares):g}")
            return {os.fspath(k): float(s) for k, s in value.items()}
        raise ValueError(
            "input_ must be 'sampler', a folder, glob pattern or file, a list of them, "
            "or a dict of them (and 'sampler') to proportions"
        )

    @field_validator("input_config", mode="after")
    @classmethod
    def _check_input_config(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - {"format", "columns", "use_ray_data"})
        if unknown:
            raise ValueError(f"input_config has no key {unknown[0]!r}; it takes 'format', 'columns' and 'use_ray_data'")
        if not isinstance(value.get("use_ray_data", False), bool):
            raise ValueError(f"input_config use_ray_data must be True or False, not {value['use_ray_data']!r}")
        if value.get("format", "parquet") not in OUTPUT_FORMATS:
            raise ValueError(f"input_config format {value['format']!r} is not one of {', '.join(map(repr, OUTPUT_FORMATS))}")
        columns = value.get("columns", {})
        if not isinstance(columns, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in columns.items()):
            raise ValueError("input_config columns must map corral's column names to the files', e.g. {'obs': 'observation'}")
        return value

    @field_validator("clip_rewards", mode="before")
    @classmethod
    def _check_clip_rewards(cls, value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and 0 < value < float("inf"):
            return float(value)
        raise ValueError("clip_rewards takes True (each reward's sign), a number x > 0 (clip to [-x, x]), or None or False")

    @field_validator("env", mode="before")
    @classmethod
    def _check_env(cls, value: Any) -> Any:
        if value is None or isinstance(value, str) or callable(value):
            return value
        raise ValueError("env must be a gymnasium id, a 'module:Class' path, a class or a creator function")

    @field_validator(*SCHEDULES, mode="after", check_fields=False)  # plugins' configs declare some of them
    @classmethod
    def _check_schedule(cls, value: list[tuple[int, float]] | None, info: ValidationInfo) -> list[tuple[int, float]] | None:
        if value is not None:
            steps = [t for t, _ in value]
            if not value or steps != sorted(steps) or steps[0] < 0:
                raise ValueError("a schedule is a non-empty list of [timestep, value] with increasing timesteps from >= 0")
            # A schedule interpolates between its values, so each one obeying the bounds of the
            # scheduled field means every value it can take does.
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


def _to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump()
    if is_instance_of_loaded(value, "corral.core.contracts.policy_spec", "PolicySpec"):
        return _to_jsonable(value.to_dict())  # its own config may hold classes too
    if is_instance_of_loaded(value, "gymnasium.spaces.space", "Space"):
        from corral.core.common.space_codec import encode_space

        return encode_space(value)
    if isinstance(value, type) or (callable(value) and hasattr(value, "__qualname__")):
        return by_value.encode(value)
    if isinstance(value, dict):
        return {str(k): _to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_jsonable(v) for v in value]
    return value


def _answered(key: str, value: Any) -> bool:
    """Answer an RLlib key that sets no corral option (framework, TensorFlow's, behaviour, experimental flags).

    Returns:
        Whether ``key`` was one of them (said at INFO or in a warning).

    Raises:
        ConfigError: a value corral does not take for it.
    """
    if key == "framework":
        _check_framework(value)
    elif key in EXPERIMENTAL_FLAGS:
        note_flag(key, value)
    elif key in TF_ONLY_KEYS:
        logger.warning("%s is a TensorFlow option; corral runs on torch and ignores it", key)
    elif key in BEHAVIOUR_KEYS:
        kept, why = BEHAVIOUR_KEYS[key]
        if not any(value is v for v in kept):
            raise ConfigError(f"{key}={short_repr(value)} is not what corral does: {why}; remove it or set {key}={kept[0]}")
        logger.info("%s=%r: corral always does this (%s)", key, value, why)
    else:
        return False
    return True


def _check_framework(value: Any) -> None:
    """Accept RLlib's ``framework`` values: torch silently, TensorFlow's with a warning (the config runs on torch).

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

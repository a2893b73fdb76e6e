"""What each of RLlib's spellings means in corral: the one place a reader looks it up.

Option names of older RLlib APIs that map onto a corral option
(:data:`LEGACY_KEYS`), RLlib options corral does not have and why
(:data:`ABSENT_KEYS`), those whose value corral's behaviour always has
(:data:`BEHAVIOUR_KEYS`), TensorFlow's (:data:`TF_ONLY_KEYS`), the
experimental and API-stack flags of every Ray 2.x (:data:`EXPERIMENTAL_FLAGS`),
the model keys for nets with memory, and Tune's logger names. What corral does
with them is :mod:`corral.core.contracts.rllib_compat`'s job; the result keys
RLlib reads under other names (``episode_reward_mean``,
``env_runners/episode_return_mean``) are :mod:`corral.core.results`'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NOOP_LOGGERS = ("NoopLogger", "ray.tune.logger.NoopLogger", "ray.tune.logger:NoopLogger", "ray.tune.logger.noop.NoopLogger")
"""``logger_config`` types that write no result files (Ray Tune's, by name, without importing Ray)"""

# Names from older RLlib APIs that map one-to-one onto a corral field.
LEGACY_KEYS = {
    "num_workers": "num_env_runners",
    "num_learner_workers": "num_learners",  # Ray 2.5-2.9 .resources(...); Ray 2.10 on .learners(num_learners=...)
    "num_cpus_per_learner_worker": "num_cpus_per_learner",
    "num_gpus_per_learner_worker": "num_gpus_per_learner",
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
    "num_steps_sampled_before_learning_starts": "learning_starts",
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

OPTIMIZATION_KEYS = {"actor_learning_rate": "actor_lr", "critic_learning_rate": "critic_lr", "entropy_learning_rate": "alpha_lr"}
"""RLlib's ``optimization`` (Ray 1.x) or ``optimization_config`` (2.x) group of SAC and its kin: each key maps to one
corral option"""

ABSENT_KEYS = {
    "sample_async": "IMPALA, APPO and A3C sample asynchronously on remote env runners; the others sample in step with learning",
    "simple_optimizer": "each policy has one torch optimizer; there is no multi-GPU tower optimizer to opt out of",
    "preprocessor_pref": "observations are flattened or kept as images by their space; wrap Atari envs in gymnasium's "
    "AtariPreprocessing",
    "compress_observations": "samples stay arrays in memory; output files compress columns by output_compress_columns",
    "synchronize_filters": "observation filters are always merged across env runners after each sample call",
}
"""RLlib options corral deliberately does not have, and why: naming one is an error that says so"""

BEHAVIOUR_KEYS: dict[str, tuple[tuple[bool | None, ...], str]] = {
    "soft_horizon": ((False,), "episodes end when the env (or horizon) ends them; none goes on after a reset"),
    "vtrace_drop_last_ts": ((False,), "V-trace uses every step of a sequence and bootstraps from the value after it"),
    # Ray 2.9-2.10's asynchronous evaluation
    "enable_async_evaluation": (
        (False,),
        "evaluation waits for the evaluation runners with the weights just trained; evaluation_parallel_to_training=True "
        "overlaps it with training",
    ),
    "custom_async_evaluation_function": (
        (None,),
        "evaluation is synchronous; a custom_evaluation_function(algorithm, eval_workers) takes the evaluation over",
    ),
}
"""RLlib options whose value corral's behaviour always has: accepted with such a value (said at INFO); any other
value is an error that says why"""

TF_FRAMEWORKS = ("tf", "tf2", "tfe")
"""RLlib's TensorFlow frameworks: a config that names one runs on torch, with a warning"""
TF_ONLY_KEYS = ("eager_tracing", "eager_max_retraces", "tf_session_args", "local_tf_session_args", "enable_tf1_exec_eagerly")
"""RLlib options that only TensorFlow reads: accepted and ignored, with a warning"""


_ONE_STACK = (
    "corral has one API stack, whichever value this has: policies compute with the catalog's models, a ModelV2 or an "
    "RLModule (config.rl_module(rl_module_spec=...)), and learners(num_learners=N) learns on Learner actors; a "
    "learner_class (a subclass of corral.core.Learner, RLlib's TorchLearner) replaces parts of the update"
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
        default: RLlib's value when a script sets none (what reading the attribute gives).
    """

    does: str
    corral_values: tuple[Any, ...] | None = None
    otherwise: str = ""
    refuse: bool = False
    kind: type = bool
    default: Any = False


EXPERIMENTAL_FLAGS: dict[str, Flag] = {
    # Ray 2.7-2.9: .experimental(_enable_new_api_stack=...); Ray 2.5-2.6: .rl_module(...) and .training(...)
    "_enable_new_api_stack": Flag(_ONE_STACK),
    "_enable_rl_module_api": Flag(_ONE_STACK),
    "_enable_learner_api": Flag(_ONE_STACK),
    # Ray 2.10 on: .api_stack(...)
    "enable_rl_module_and_learner": Flag(_ONE_STACK),
    "enable_env_runner_and_connector_v2": Flag(
        "corral has one API stack, whichever value this has: its env runners preprocess observations and actions in "
        "one place (RLlib's ConnectorV2 pipelines are not in corral yet)"
    ),
    # Ray 1.x-2.9
    "_disable_execution_plan_api": Flag(
        "corral's algorithms always run training_step(), which this asks for",
        (True,),
        "RLlib's execution-plan API is not in corral; its algorithms always run training_step() (the same algorithm)",
        default=True,
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
        default=True,
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
        default=None,
    ),
    "_torch_lr_scheduler_classes": Flag(
        "corral schedules the learning rate with lr_schedule",
        (None, [], {}),
        "torch LR scheduler classes are not available in corral; schedule the learning rate with lr_schedule "
        "([[timestep, lr], ...]) and remove this",
        refuse=True,
        kind=object,
        default=None,
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


RECURRENT_MODEL_SETTINGS = ("_time_major", "uses_new_env_runners")
"""RLlib's model keys for how its own samplers feed a model (the layout of recurrent inputs; Ray 2.10's new env runners):
corral's models lay out their inputs themselves, so they are ignored (at INFO)"""

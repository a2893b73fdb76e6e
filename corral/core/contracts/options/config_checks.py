"""The checks of a whole config, which no single option can make: run by ``AlgorithmConfig.validate()``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from corral.core.contracts.options.input_names import input_creator
from corral.core.contracts.plugin_classes import check_estimation_methods, validate_exploration_config
from corral.errors import ConfigError

if TYPE_CHECKING:  # the config module imports this one
    from corral.core.contracts.config import AlgorithmConfig

logger = logging.getLogger("corral")


def check_config(config: AlgorithmConfig) -> None:
    """What no single option can check: combinations, the env, the exploration, the evaluation overrides.

    Args:
        config: the config (``AlgorithmConfig.validate`` calls this; a plugin's validate adds its own checks).

    Raises:
        ConfigError: naming what is wrong and what would be right.
    """
    if config._search_space:
        names = ", ".join(sorted(config._search_space))
        raise ConfigError(
            f"{names} hold a Tune search space, which a trial turns into a value; run the config through Tune "
            "(tune.Tuner(ALGO, param_space=config.to_dict())), or give a value to build it here"
        )
    if config.env is None and input_creator(config.input_) is None:  # an input creator makes the runners' ExternalEnvs
        raise ConfigError(
            "no environment is set; call config.environment('CartPole-v1') "
            "(a gymnasium id, a 'module:Class' path, a class or a registered name)"
        )
    unknown = sorted(set(config.input_config) - {"format", "columns", "use_ray_data"})
    if unknown and config.input_ != "sampler" and input_creator(config.input_) is None:  # files are read with them
        raise ConfigError(
            f"input_config has no key {unknown[0]!r}; it takes 'format', 'columns' and 'use_ray_data' (other keys are "
            "for an input creator's reader, input_=lambda ioctx: ..., which reads them from ioctx.input_config)"
        )
    check_offline_options(config)
    config.get_rollout_fragment_length()
    check_batch_sizes(config)
    exploration_type = config.exploration_config.get("type")
    if not isinstance(exploration_type, str):
        raise ConfigError(
            "exploration_config needs a 'type' naming an exploration plugin, "
            "e.g. {'type': 'StochasticSampling'}; `corral list` shows the installed ones"
        )
    validate_exploration_config(config.exploration_config)
    if config.off_policy_estimation_methods:
        check_estimation_methods(config.off_policy_estimation_methods)
    check_env_runners(config)
    try:
        overrides = config._canonical_keys(config.evaluation_config)
    except ConfigError as exc:
        raise ConfigError(f"evaluation_config: {exc}") from None
    for key in ("evaluation_config", "evaluation_interval"):
        if key in overrides:
            raise ConfigError(f"evaluation_config cannot set {key!r}: evaluation does not nest")
    config.model.model_class()
    from corral.core.contracts.multi_agent_config import check_multi_agent

    check_multi_agent(config)
    if config._is_evaluation_copy:
        return
    try:
        evaluation = config.get_evaluation_config()
        if evaluation.env is None and input_creator(config.input_) is not None:  # served episodes, no env to evaluate in
            if config.evaluation_interval:
                raise ConfigError(
                    f"evaluation_interval={config.evaluation_interval} evaluates in an env, and this config has none "
                    "(its episodes are served: input_ is a function): give evaluation_config={'env': ...}, or set "
                    "evaluation_interval=None"
                )
            return
        evaluation.validate()
    except ConfigError as exc:
        raise ConfigError(f"evaluation_config: {exc}") from None


def check_batch_sizes(config: AlgorithmConfig) -> None:
    """Say (a warning) when ``train_batch_size`` was changed but ``train_batch_size_per_learner`` decides the batch.

    Args:
        config: the config.
    """
    if config.train_batch_size_per_learner is None or config._is_evaluation_copy:
        return
    default = type(config).model_fields["train_batch_size"].default
    if config.train_batch_size not in (default, config.total_train_batch_size):
        logger.warning(
            "train_batch_size=%d is not used: train_batch_size_per_learner=%d for each of max(1, num_learners=%d) "
            "Learners makes the train batch %d env steps (RLlib's new stack reads them so); set one of the two",
            config.train_batch_size,
            config.train_batch_size_per_learner,
            config.num_learners,
            config.total_train_batch_size,
        )


def check_env_runners(config: AlgorithmConfig) -> None:
    """The env runner and evaluation options that only make sense together, and Ray where they ask for actors.

    Args:
        config: the config.

    Raises:
        ConfigError: a combination that cannot run, or remote runners without Ray installed.
    """
    if config.vectorize_mode == "native" and config.restart_failed_sub_environments:
        raise ConfigError(
            "restart_failed_sub_environments needs sub-environments stepped one by one; "
            "set vectorize_mode='sync' or 'auto' (a natively vectorised env has none to restart)"
        )
    if config.vectorize_mode == "native" and (
        config.observation_space is not None or config.action_space is not None or config.horizon is not None
    ):
        raise ConfigError(
            "observation_space, action_space and horizon change each sub-environment, which a natively vectorised "
            "env does not have; set vectorize_mode='sync' or 'auto'"
        )
    if config.remote_worker_envs:
        changed = [name for name in ("observation_space", "action_space", "horizon") if getattr(config, name) is not None]
        changed += ["render_env"] * bool(config.render_env) + ["record_env"] * bool(config.record_env)
        changed += ["restart_failed_sub_environments"] * config.restart_failed_sub_environments
        changed += ["vectorize_mode='native'"] * (config.vectorize_mode == "native")
        if changed:
            raise ConfigError(
                f"remote_worker_envs=True steps each sub-environment as it is, in its own actor; {', '.join(changed)} "
                "needs the sub-environments inside the env runner: set it in the env itself, or remote_worker_envs=False"
            )
    if config.evaluation_parallel_to_training and config.evaluation_num_env_runners == 0:
        raise ConfigError(
            "evaluation_parallel_to_training needs evaluation actors to run on; set evaluation_num_env_runners >= 1"
        )
    if config.evaluation_duration == "auto" and not config.evaluation_parallel_to_training:
        raise ConfigError(
            "evaluation_duration='auto' evaluates for as long as an iteration trains, so it needs "
            "evaluation_parallel_to_training=True (and evaluation_num_env_runners >= 1); or give a number of episodes"
        )
    remote = {"num_env_runners": config.num_env_runners, "evaluation_num_env_runners": config.evaluation_num_env_runners}
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
    if config.recreate_failed_env_runners and config.ignore_env_runner_failures:
        raise ConfigError(
            "recreate_failed_env_runners and ignore_env_runner_failures exclude each other: "
            "choose to replace a failed runner or to go on without it"
        )


def check_offline_options(config: AlgorithmConfig) -> None:
    """Refuse offline options that this run's input or output cannot honour, naming what would.

    Args:
        config: the config.

    Raises:
        ConfigError: an option for Parquet output with JSON output, updates on input without input files,
            Ray Data's reading options with ``use_ray_data=False``, or two different shuffle buffers.
    """
    if config.output_config.get("format") == "json":
        for name in ("output_write_episodes", "output_max_rows_per_file"):
            if getattr(config, name):
                raise ConfigError(
                    f"{name} shapes Parquet files, but output_config asks for JSON lines (one sample batch per line); "
                    "write Parquet (output_config={'format': 'parquet'}) or leave it out"
                )
    reads_files = config.input_ != "sampler" and input_creator(config.input_) is None
    if config.dataset_num_iters_per_learner is not None and not reads_files and not config._is_evaluation_copy:
        raise ConfigError(
            "dataset_num_iters_per_learner counts updates on input files, but this run samples its env "
            f"(input_={config.input_!r}); name the files in offline_data(input_=...) or leave it out"
        )
    tuned = ray_data_reading_options(config)
    if tuned and config.input_config.get("use_ray_data") is False:
        name = "map_batches_kwargs" if "map_batches_kwargs" in tuned else "iter_batches_kwargs prefetch_batches"
        raise ConfigError(f"{name} tunes reading through Ray Data, but input_config sets use_ray_data=False; drop one of them")
    shuffle = config.iter_batches_kwargs.get("local_shuffle_buffer_size") or 0
    if shuffle and config.shuffle_buffer_size and shuffle != config.shuffle_buffer_size:
        raise ConfigError(
            f"iter_batches_kwargs local_shuffle_buffer_size={shuffle} and shuffle_buffer_size="
            f"{config.shuffle_buffer_size} name two sizes of one shuffle buffer; set one of them"
        )


def ray_data_reading_options(config: AlgorithmConfig) -> dict[str, Any]:
    """The Ray Data reading options a config sets; setting any reads the Parquet input through Ray Data.

    They are the read tasks' ``map_batches_kwargs`` and ``iter_batches_kwargs``' ``prefetch_batches``. Its
    ``local_shuffle_buffer_size`` is not one: it is RLlib's name for ``shuffle_buffer_size``, which reading in one
    process takes too.

    Args:
        config: the config.

    Returns:
        ``map_batches_kwargs`` and ``prefetch_batches`` where set, as Ray Data's reading takes them; empty: none.
    """
    options: dict[str, Any] = {}
    if config.map_batches_kwargs:
        options["map_batches_kwargs"] = dict(config.map_batches_kwargs)
    if config.iter_batches_kwargs.get("prefetch_batches") is not None:
        options["prefetch_batches"] = config.iter_batches_kwargs["prefetch_batches"]
    return options

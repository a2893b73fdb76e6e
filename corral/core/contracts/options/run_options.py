"""The options of ``debugging()``, ``reporting()``, ``resources()``, ``fault_tolerance()``, ``checkpointing()``,
``multi_agent()`` and ``offline_data()``: how a run is checked, reported, resourced, kept and fed."""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from corral.core.common.import_paths import import_object
from corral.core.contracts.options.declaring import (
    MAP_BATCHES_KEYS,
    MAX_SEED,
    OPTIONS_MODEL_CONFIG,
    OUTPUT_FORMATS,
    option,
)
from corral.core.contracts.rllib_names import NOOP_LOGGERS


class RunOptions(BaseModel):
    """A group of :class:`~corral.core.contracts.config.AlgorithmConfig`'s options (see the module docstring)."""

    model_config = OPTIONS_MODEL_CONFIG

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

    # --- learners ----------------------------------------------------------
    num_learners: int = option(0, "learners", ge=0, le=1024)
    """Learner actors (Ray) that update the policies data-parallel: each learns on its share of every train batch and
    their gradients are averaged (torch.distributed, gloo on CPUs, NCCL on GPUs), so their weights stay identical;
    0 learns in the main process. RLlib's num_learner_workers"""
    num_cpus_per_learner: float = option(1, "learners", ge=0, le=1024)
    """CPUs Ray reserves for each Learner actor (its torch threads with num_torch_threads='auto'). RLlib's
    num_cpus_per_learner_worker"""
    num_gpus_per_learner: float = option(0, "learners", ge=0, le=1)
    """GPUs Ray reserves for each Learner actor, which then learns on its GPU (0: on its CPUs); with _fake_gpus the
    actors learn on the CPU. RLlib's num_gpus_per_learner_worker"""
    local_gpu_idx: int = option(0, "learners", ge=0, le=1024)
    """which CUDA device the main process learns on with num_learners=0 and num_gpus > 0"""
    learner_class: Any = option(None, "learners")
    """a corral.core.Learner subclass (RLlib's TorchLearner, or an algorithm's, e.g. PPOTorchLearner), or its
    'module:qualname': its configure_optimizers_for_module, compute_loss_for_module, compute_gradients,
    postprocess_gradients and apply_gradients replace those parts of each policy's update; None: the algorithm's
    own (also settable in training(), as in Ray 2.10-2.30)"""
    learner_config_dict: dict[str, Any] = option({}, "learners")
    """settings of your own for a learner_class to read (self.config.learner_config_dict)"""

    # --- framework ---------------------------------------------------------
    torch_compile_learner: bool = option(False, "framework")
    """compile each policy's model's forward_train (what its losses call) with torch.compile, on first use"""
    torch_compile_learner_what_to_compile: Literal["forward_train"] = option("forward_train", "framework")
    """what torch_compile_learner compiles: the model's forward_train (RLlib's 'complete_update' compiles the whole
    update, which corral does not: its NaN guard and optimizer step stay eager)"""
    torch_compile_learner_dynamo_backend: str = option("inductor", "framework")
    """torch.compile's backend for torch_compile_learner (torch._dynamo.list_backends() names them)"""
    torch_compile_learner_dynamo_mode: str | None = option(None, "framework")
    """torch.compile's mode for torch_compile_learner ('default', 'reduce-overhead', 'max-autotune'); None: torch's"""
    torch_compile_worker: bool = option(False, "framework")
    """compile each policy's model's forward_exploration and forward_inference (what acting calls) with torch.compile"""
    torch_compile_worker_dynamo_backend: str = option("inductor", "framework")
    """torch.compile's backend for torch_compile_worker (RLlib's default, 'onnxrt', is not in recent torch)"""
    torch_compile_worker_dynamo_mode: str | None = option(None, "framework")
    """torch.compile's mode for torch_compile_worker; None: torch's"""

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
    restart_failed_learners: bool = option(True, "fault_tolerance")
    """start the Learner actors again when one dies and repeat the update from the algorithm's copy (the run learns
    what it would have); False stops the run with a LearnerError naming the Learner"""
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
    e.g. {'sampler': 0.5, '/data/expert': 0.5}; or RLlib's function of an IOContext that makes each env runner's input,
    a PolicyServerInput (an ExternalEnv) or None for a runner that samples nothing"""
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
    input_read_episodes: bool = option(False, "offline_data")
    """whether the input files hold whole episodes, one per row, as output_write_episodes=True writes them (RLlib's
    new stack); False: one row per step. A file of the other layout is refused before training starts"""
    map_batches_kwargs: dict[str, Any] = option({}, "offline_data")
    """Ray Data's map_batches resources for reading the input files: 'concurrency' (read tasks at once),
    'num_cpus', 'num_gpus', 'memory' (each task's). Setting it reads the Parquet files through Ray Data"""
    iter_batches_kwargs: dict[str, Any] = option({}, "offline_data")
    """how input blocks stream from Ray Data: 'prefetch_batches' (blocks fetched ahead) and
    'local_shuffle_buffer_size' (RLlib's name for shuffle_buffer_size, with or without Ray Data; None: no shuffle).
    Setting 'prefetch_batches' reads the Parquet files through Ray Data"""
    dataset_num_iters_per_learner: int | None = option(None, "offline_data", ge=1, le=2**31 - 1)
    """updates on input batches in each training iteration, when the algorithm learns from input files; None:
    as many as the min_*_per_iteration options ask (one, by default; RLlib's new stack makes one pass over the data)"""
    output: str | None = option(None, "offline_data")
    """write every sampled transition of the env runners to files: 'logdir' (the experiment folder) or a folder;
    None writes nothing. Evaluation runners write theirs too (files named evaluation-worker-<i>), as RLlib's;
    evaluation_config={'output': None} keeps them out"""
    output_config: dict[str, Any] = option({}, "offline_data")
    """how output is written: {'format': 'parquet'} (the default; needs pyarrow) or {'format': 'json'} (JSON lines,
    one sample batch per line, as RLlib's JsonWriter)"""
    output_compress_columns: list[str] = option(["obs", "new_obs"], "offline_data")
    """columns written compressed: zstd in Parquet, zlib and base64 in JSON (RLlib's reader takes only the others)"""
    output_max_file_size: int = option(64 * 1024 * 1024, "offline_data", ge=1, le=2**40)
    """bytes after which an output file is closed and the next one begun"""
    output_max_rows_per_file: int | None = option(None, "offline_data", ge=1, le=2**40)
    """rows (steps, or episodes with output_write_episodes) after which a Parquet file is closed and the next one
    begun; None: only output_max_file_size bounds a file"""
    output_write_episodes: bool = option(False, "offline_data")
    """write one Parquet row per episode (the part of it each sample call ends; whole episodes with
    batch_mode='complete_episodes'), each column a list over its steps; input_read_episodes=True reads them.
    False: one row per step. RLlib's new stack defaults to True; corral keeps the step rows that RLlib's old
    stack and other tools read unless asked"""

    @field_validator("learner_class", mode="before")
    @classmethod
    def _resolve_learner_class(cls, value: Any) -> Any:
        learner_class = import_object(value) if isinstance(value, str) else value
        if learner_class is not None and not isinstance(learner_class, type):
            raise ValueError(f"{value!r} is not a class; learner_class takes a subclass of corral.core.Learner")
        return learner_class

    @field_validator("policies", mode="before")
    @classmethod
    def _normalize_policies(cls, value: Any) -> dict[str, Any]:
        from corral.core.contracts.multi_agent_config import normalize_policies

        return normalize_policies(value)

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

    @field_validator("map_batches_kwargs", mode="after")
    @classmethod
    def _check_map_batches_kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - set(MAP_BATCHES_KEYS))
        if unknown:
            raise ValueError(
                f"map_batches_kwargs has no key {unknown[0]!r}; corral's read tasks take {', '.join(map(repr, MAP_BATCHES_KEYS))}"
            )
        return value

    @field_validator("iter_batches_kwargs", mode="after")
    @classmethod
    def _check_iter_batches_kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - {"prefetch_batches", "local_shuffle_buffer_size"})
        if unknown:
            raise ValueError(
                f"iter_batches_kwargs has no key {unknown[0]!r}; corral takes 'prefetch_batches' and "
                "'local_shuffle_buffer_size' (batch sizes follow train_batch_size)"
            )
        return value

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

        if callable(value):  # RLlib's reader factory, input_=lambda ioctx: PolicyServerInput(ioctx, address, port)
            return value
        if value == "dataset":  # what config_keys turns into the paths, when they come in the same call
            raise ValueError(
                "input_='dataset' reads the files input_config={'paths': [...]} names: give both in one offline_data() "
                "call, or name the files in input_ itself"
            )
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
            "a dict of them (and 'sampler') to proportions, or a function of an IOContext that makes each env runner's "
            "input (lambda ioctx: PolicyServerInput(ioctx, 'localhost', 9900))"
        )

    @field_validator("input_config", mode="after")
    @classmethod
    def _check_input_config(cls, value: dict[str, Any]) -> dict[str, Any]:
        # other keys are an input creator's own (it reads them from ioctx.input_config): check_config checks there is one
        if not isinstance(value.get("use_ray_data", False), bool):
            raise ValueError(f"input_config use_ray_data must be True or False, not {value['use_ray_data']!r}")
        if value.get("format", "parquet") not in OUTPUT_FORMATS:
            raise ValueError(f"input_config format {value['format']!r} is not one of {', '.join(map(repr, OUTPUT_FORMATS))}")
        columns = value.get("columns", {})
        if not isinstance(columns, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in columns.items()):
            raise ValueError("input_config columns must map corral's column names to the files', e.g. {'obs': 'observation'}")
        return value

"""The options of ``training()``, ``evaluation()``, ``exploration()`` and ``callbacks()``."""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from corral.core.common.import_paths import import_object
from corral.core.contracts.options.declaring import (
    OPTIMIZERS,
    OPTIONS_MODEL_CONFIG,
    is_search_space,
    option,
)
from corral.core.contracts.options.model_config import ModelConfig
from corral.core.contracts.rllib_compat import evaluation_overrides


class LearningOptions(BaseModel):
    """A group of :class:`~corral.core.contracts.config.AlgorithmConfig`'s options (see the module docstring)."""

    model_config = OPTIONS_MODEL_CONFIG

    # --- training ----------------------------------------------------------
    gamma: float = option(0.99, "training", ge=0, le=1)
    """the discount factor"""
    lr: float = option(1e-3, "training", gt=0)
    """the learning rate (a list of [timestep, value], RLlib's way to schedule it, sets lr_schedule); a number given
    without lr_schedule replaces the schedule the config holds"""
    lr_schedule: list[tuple[int, float]] | None = option(None, "training")
    """piecewise-linear learning rate over env steps, [[timestep, lr], ...]; overrides lr"""
    train_batch_size: int = option(4000, "training", gt=0, le=2**31 - 1)
    """env steps collected for one training iteration's update (not read when train_batch_size_per_learner is set)"""
    train_batch_size_per_learner: int | None = option(None, "training", gt=0, le=2**31 - 1)
    """RLlib's new-stack batch size: env steps per Learner in one update, so the whole train batch is this times
    max(1, num_learners) (total_train_batch_size) and PPO's minibatch_size counts one Learner's rows; None: the
    whole batch is train_batch_size"""
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
        from corral.core.contracts.config import AlgorithmConfig  # made of this group and others

        return evaluation_overrides(value) if isinstance(value, AlgorithmConfig) else value

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

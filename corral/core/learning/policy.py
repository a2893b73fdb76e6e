"""Policy: a torch model, its action distribution, exploration and optimizer.

An algorithm subclasses :class:`Policy` and writes ``learn_on_batch`` (and, if
it needs them, ``make_model``, ``extra_action_out`` and
``postprocess_trajectory``). Acting is batched: one forward pass for a whole
vector of observations, under ``torch.inference_mode()``.

This module holds what a policy is made of (its spaces, model, exploration,
filter and optimizer, built in ``__init__``) and what an algorithm overrides.
The rest comes from its parts in :mod:`corral.core.learning.policies`, a module
each, which a reader opens by concern:

- :mod:`~corral.core.learning.policies.acting`: ``preprocess()``, ``compute_actions()``, ``compute_single_action()``, values;
- :mod:`~corral.core.learning.policies.updates`: ``to_tensors()``, ``apply_gradients()``, ``scheduled()``, ``update_lr()``;
- :mod:`~corral.core.learning.policies.state`: weights, ``get_state()``/``set_state()``, ``from_checkpoint()``.

:mod:`~corral.core.learning.policies.part` types the attributes they share.
What builds a copy of a policy (:func:`build_policy`, :class:`PolicyBuild`), the
optimizers (:func:`adam`, :func:`build_optimizer`) and :class:`ActorCriticPolicy`
have modules there too; their names are importable from here as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral._lazy import lazy_exports
from corral.core.common.actions import ActionAdapter, zero_actions
from corral.core.common.sample_batch import SampleBatch
from corral.core.common.spaces import ObservationPreprocessor
from corral.core.contracts.config import SCHEDULES, AlgorithmConfig
from corral.core.contracts.rllib_compat import CallableBool
from corral.core.devices import policy_device
from corral.core.learning.exploration import Exploration, make_exploration
from corral.core.learning.filters import MeanStdFilter
from corral.core.learning.learners.learner_build import build_learner
from corral.core.learning.policies.acting import Acting
from corral.core.learning.policies.heuristic_policies import default_view_requirements
from corral.core.learning.policies.optimizer_set import Optimizer
from corral.core.learning.policies.optimizers import adam as adam, build_optimizer as build_optimizer
from corral.core.learning.policies.policy_build import (
    BUILDING_POLICY_ID,
    BUILDING_WORKER_INDEX,
    PolicyBuild as PolicyBuild,
    build_policy as build_policy,
)
from corral.core.learning.policies.state import (
    PolicyState,
    check_optimizer_state as check_optimizer_state,
    load_finite_weights as load_finite_weights,
)
from corral.core.learning.policies.updates import (
    Updates,
    joint_norm as joint_norm,
    standardize as standardize,
    to_floats as to_floats,
)
from corral.core.learning.recurrent.sequences import chop_into_sequences
from corral.core.learning.schedules import PiecewiseSchedule
from corral.core.memory import check_fits
from corral.core.networks.action_masking import ActionMaskedModel, MaskedObservationPreprocessor
from corral.core.networks.compiling import compile_model_calls
from corral.core.networks.custom_distribution import custom_distribution, custom_outputs
from corral.core.networks.default_models import Model, build_model, torch_dtype
from corral.core.networks.distributions import ActionDistribution, distribution_for
from corral.core.networks.model_v2 import is_model_v2
from corral.core.networks.recurrent import RecurrentModel, initial_state, is_recurrent
from corral.core.networks.rl_module import is_rl_module
from corral.core.seeding import numpy_generator, torch_generator
from corral.errors import ConfigError

if TYPE_CHECKING:  # the same names, for type checkers (at run time they resolve on first access: they import this module)
    from corral.core.learning.policies.actor_critic_policy import (
        POLICY_GRADIENT_COLUMNS as POLICY_GRADIENT_COLUMNS,
        ActorCriticPolicy as ActorCriticPolicy,
    )


class Policy(Acting, Updates, PolicyState):
    """What maps observations to actions, and learns from batches of experience.

    Args:
        observation_space: one agent's observation space.
        action_space: one agent's action space (as the env defines it).
        config: the algorithm's (frozen) config.
    """

    thread_safe_learning: ClassVar[bool] = False
    """True if :meth:`learn_on_batch` touches only this policy's own state and draws only from its own
    generators (:attr:`torch_rng`, :attr:`np_rng`); the algorithm may then update several such policies
    at once, each in its own thread, with the same results (see ``num_learner_threads``)"""
    data_parallel_learning: ClassVar[bool] = False
    """True if :meth:`learn_on_batch` may run on Learner actors (``learners(num_learners=N)``), each with the whole
    batch: it computes every loss on :meth:`share` of the rows (a mean over the steps it holds), and steps through
    :meth:`apply_gradients`, which averages the gradients across the Learners"""
    input_columns: ClassVar[tuple[str, ...]] = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.REWARDS,
        SampleBatch.NEXT_OBS,
        SampleBatch.TERMINATEDS,
        SampleBatch.TRUNCATEDS,
    )
    """the columns :meth:`learn_on_batch` needs of rows read from files (``offline_data(input_=...)``): every file
    is checked for them before training starts; the default is a whole transition"""
    action_distribution: ClassVar[type[ActionDistribution] | None] = None
    """the distribution the policy acts with, whatever the action space (DDPG's point mass); None: the space's"""
    custom_action_dists: ClassVar[bool] = True
    """whether ``model.custom_action_dist`` may replace the distribution the action space picks"""
    recurrent_models: ClassVar[bool] = False
    """whether :meth:`learn_on_batch` learns on batches of sequences (:meth:`train_forward`), so a recurrent
    model (``model.use_lstm``) may be used; a policy class that does not is refused such a model when built"""
    postprocessing_columns: ClassVar[tuple[str, ...]] = ()
    """the columns of :attr:`input_columns` that :meth:`postprocess_trajectory` computes (``advantages``,
    ``value_targets``): with ``postprocess_inputs`` a file needs a whole transition instead of them; without it
    a file must hold them itself, and one that does not is refused with the advice to turn postprocessing on"""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any], config: AlgorithmConfig) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.config = config
        self.policy_id = BUILDING_POLICY_ID.get()
        """the id the algorithm built this policy under (``default_policy`` when built alone)"""
        self.device = policy_device(config)
        """where the policy's networks and tensors live: the learner's device (``num_gpus``), or a remote env
        runner's own (``num_gpus_per_env_runner``); see :mod:`corral.core.devices`"""
        custom = config.model.model_class()
        rllib_model = custom is not None and (is_model_v2(custom) or is_rl_module(custom))  # they mask by themselves
        self.action_mask = MaskedObservationPreprocessor.detect(
            observation_space, action_space, config.action_mask_key, rllib_model
        )
        """the preprocessor of a masked observation space (a Dict holding ``config.action_mask_key``), else None"""
        self.preprocessor = self.action_mask or ObservationPreprocessor(observation_space)
        self.model_observation_space = observation_space if self.action_mask is None else self.action_mask.model_observation_space
        """what the model sees: the observation space, without the action mask when there is one"""
        self.action_adapter = ActionAdapter(action_space, config.normalize_actions, config.clip_actions)
        self.model_action_space = action_space if self.action_adapter.structured else self.action_adapter.policy_space
        """the action space the model and a custom distribution are told of: the space the policy acts in, or a
        Tuple or Dict action space itself (as RLlib gives its models; the actions are flat vectors all the same)"""
        self.dist_class, self.num_outputs = distribution_for(self.action_adapter.distribution_space)
        if self.action_distribution is not None:
            self.dist_class = self.action_distribution
            self.num_outputs = self.action_distribution.required_inputs(self.action_adapter.distribution_space)
        custom_dist = config.model.action_dist_class()
        if custom_dist is not None:
            self._check_custom_action_dist_allowed()
            self.num_outputs = custom_outputs(custom_dist, self.model_action_space, config.model.model_dump())
        self.model = self._build_model()
        if custom_dist is not None:
            self.dist_class = custom_distribution(custom_dist, self.model)
        self.is_recurrent = CallableBool(is_recurrent(self.model))
        """whether the model has memory: it then acts on each episode's state and learns on sequences (also called,
        as RLlib's ``policy.is_recurrent()``)"""
        self.exploration = self._create_exploration()
        self.view_requirements = default_view_requirements()
        """RLlib's declaration of the columns the policy reads: those corral's samplers provide; a subclass may add
        ``state_in_k`` views, and any other is refused once it is built (see :mod:`.policies.heuristic_policies`)"""
        filtered_shape = self.preprocessor.shape if self.action_mask is None else self.action_mask.model_input.shape
        self.observation_filter = MeanStdFilter(filtered_shape) if config.observation_filter == "MeanStdFilter" else None
        self.optimizer = self.make_optimizer()
        self._schedules = {
            name: PiecewiseSchedule(getattr(config, schedule))
            for schedule, name in SCHEDULES.items()
            if getattr(config, schedule, None)
        }
        self.global_timestep = 0
        self.gradient_sync = None
        """on a Learner of a group, what averages this policy's gradients with the other Learners' (see
        :mod:`corral.core.learning.learners.gradient_sync`); None learning alone"""
        self.learner = build_learner(self, BUILDING_POLICY_ID.get())
        """the ``learner_class``'s Learner, whose optimizers and loss this policy's update uses (see
        :mod:`corral.core.learning.learners.learner`); None without one"""
        self.seed_rngs(None)

    def seed_rngs(self, seed: int | None, *path: str | int) -> None:
        """Give this policy copy its own generators, derived from the algorithm's seed (see :mod:`corral.core.seeding`).

        ``torch_rng`` draws actions, exploration noise, minibatch orders and
        reparameterised samples; ``np_rng`` is free for an algorithm's numpy
        draws. Until this is called they start from fresh entropy.

        Args:
            seed: the algorithm's seed (None: fresh entropy).
            *path: names this copy, e.g. ``("policy", "default_policy", "sampling", 0)``.
        """
        self.torch_rng = torch_generator(seed, *path, "torch", device=self.device)
        self.np_rng = numpy_generator(seed, *path, "numpy")
        self.exploration.generator = self.torch_rng

    required_model_outputs: tuple[str, ...] = (SampleBatch.ACTION_DIST_INPUTS,)
    """the keys the model's forward must return, each with a row per observation; checked at build"""

    def _create_exploration(self) -> Exploration:
        """The exploration ``config.exploration_config`` names, for this policy's actions (RLlib's method name)."""
        return make_exploration(
            self.config.exploration_config,
            self.action_adapter.distribution_space,
            worker_index=BUILDING_WORKER_INDEX.get(),
            num_workers=self.config.num_env_runners,
        )

    def _build_model(self) -> Model:
        """``make_model()``, after checking it fits in memory; then checked on a probe batch.

        The model is first built on torch's meta device, which allocates
        nothing, to count its parameters; then for real.

        Raises:
            ConfigError: the model cannot fit in memory, or its outputs do not fit the action space.
        """
        try:
            with torch.device("meta"):
                counted = sum(p.numel() for p in self.make_model().parameters())
        except Exception:  # a custom model that cannot be built on the meta device: no estimate
            counted = 0
        # weights, gradients and two optimizer moments, four bytes each: a lower bound
        check_fits(
            f"the model for observations of shape {self.preprocessor.shape} ({counted:,} parameters)",
            counted * 16,
            "use smaller layers (model.fcnet_hiddens, model.conv_filters) or smaller observations",
        )
        model = self.make_model().to(self.device)
        if is_recurrent(model) or self.config.model.has_memory:
            self._check_recurrent_allowed()
        if self.config.model.has_memory and not is_recurrent(model):
            switch = "use_attention" if self.config.model.use_attention else "use_lstm"
            raise ConfigError(
                f"model.{switch}=True, but {type(self).__name__}.make_model built {type(model).__qualname__}, which has no "
                f"state; build the model with corral.core.build_model (it makes the memory), or remove {switch}"
            )
        self._check_model_outputs(model)
        compile_model_calls(model, self.config)
        checked = cast(Model, model)  # it has Model's forward methods, whether or not it subclasses Model
        return checked if self.action_mask is None else ActionMaskedModel(checked, self.action_mask)

    def _check_custom_action_dist_allowed(self) -> None:
        """Refuse a custom action distribution where this policy's loss needs its own.

        Raises:
            ConfigError: the policy class reads its outputs as something else (Q-values, a squashed Gaussian).
        """
        if not self.custom_action_dists:
            raise ConfigError(
                f"model.custom_action_dist: {type(self).__name__} reads its model's outputs with a distribution of its "
                "own (Q-values, a squashed Gaussian); PPO, A2C, IMPALA, MARWIL and BC take custom action distributions"
            )

    def _check_recurrent_allowed(self) -> None:
        """Refuse a recurrent model where this policy cannot learn with one.

        Raises:
            ConfigError: the policy class learns on rows only.
        """
        if not self.recurrent_models:
            raise ConfigError(
                f"{type(self).__name__} learns on single steps, so it cannot train a recurrent model (model.use_lstm, "
                "use_attention or a custom model with state); corral's PPO, A2C and IMPALA train them. Remove the memory, "
                "or use one of those"
            )

    def _check_model_outputs(self, model: nn.Module) -> None:
        """Run the model on two zero observations: each required output needs a row per observation."""
        model_input = self.preprocessor if self.action_mask is None else self.action_mask.model_view
        probe = torch.zeros((2, *model_input.shape), dtype=torch_dtype(model_input.dtype), device=self.device)
        what = f"the model {type(model).__qualname__}"
        if not all(
            callable(getattr(model, name, None)) for name in ("forward_inference", "forward_exploration", "forward_train")
        ):
            raise ConfigError(
                f"{what} lacks forward_inference/forward_exploration/forward_train; subclass corral.core.Model and write _forward"
            )
        try:
            with torch.no_grad():
                if is_recurrent(model):
                    recurrent = cast(RecurrentModel, model)
                    state = [part.expand(2, *part.shape) for part in initial_state(recurrent)]
                    prev = torch.from_numpy(zero_actions(self.action_adapter.policy_space, 2)).to(self.device)
                    out = recurrent.forward_inference(probe, state, None, prev, torch.zeros(2, device=self.device))
                else:
                    out = cast(Model, model).forward_inference(probe)  # its forward methods exist (checked above)
        except Exception as exc:  # a custom model may fail in any way
            raise ConfigError(
                f"{what} fails on a batch of observations of shape {tuple(probe.shape)}: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(out, dict):
            raise ConfigError(
                f"{what} returns a {type(out).__name__}; it must return a dict with {list(self.required_model_outputs)}"
            )
        expected = {SampleBatch.ACTION_DIST_INPUTS: (2, self.num_outputs)}
        for key in self.required_model_outputs:
            value = out.get(key)
            shape = expected.get(key)
            if not isinstance(value, torch.Tensor) or value.shape[0] != 2 or (shape is not None and tuple(value.shape) != shape):
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                want = shape or "one row per observation"
                raise ConfigError(f"{what} returns {key!r} of shape {got} for 2 observations; {type(self).__name__} needs {want}")

    # ------------------------------------------------------------------ #
    # what an algorithm may override
    # ------------------------------------------------------------------ #
    def make_model(self) -> nn.Module:
        """The network; by default the catalog's model for these spaces.

        It reads observations of :attr:`model_observation_space`; with an action
        mask, the policy wraps it in an :class:`ActionMaskedModel`.
        """
        return build_model(self.model_observation_space, self.model_action_space, self.num_outputs, self.config.model)

    def make_optimizer(self) -> Optimizer:
        """The optimizer over the model's parameters, as the ``optimizer`` option names it."""
        return build_optimizer(self.model.parameters(), self.config.optimizer, lr=self.config.lr)

    def extra_action_out(
        self, model_out: dict[str, torch.Tensor], dist: ActionDistribution, actions: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Per-step values to record beside the actions (log-probs, value estimates, ...).

        Called by :meth:`compute_actions` for every batch it acts on; the env
        runner stores each value as a column of the sample fragment.

        Args:
            model_out: the model's outputs for the batch, each with a row per observation.
            dist: the action distributions built from ``model_out[ACTION_DIST_INPUTS]``.
            actions: the actions chosen for the batch (``[B, ...]``), in the policy's action space.

        Returns:
            Columns by name, each with a row per observation; by default the actions'
            log-probabilities, the distribution inputs and, if the model returns them,
            its value estimates.
        """
        extras = {
            SampleBatch.ACTION_LOGP: dist.logp(actions),
            SampleBatch.ACTION_DIST_INPUTS: model_out[SampleBatch.ACTION_DIST_INPUTS],
        }
        if SampleBatch.VF_PREDS in model_out:
            extras[SampleBatch.VF_PREDS] = model_out[SampleBatch.VF_PREDS]
        return extras

    def postprocess_trajectory(self, fragment: SampleBatch, bootstrap_obs: np.ndarray) -> SampleBatch:
        """Turn a time-major ``[T, N]`` fragment into training rows.

        The default drops reset rows and flattens. Algorithms that estimate
        returns (GAE, n-step) override this and call :meth:`flatten_fragment`.

        Args:
            fragment: columns of shape ``[T, N, ...]`` plus a boolean ``valid``.
            bootstrap_obs: ``[N, ...]`` preprocessed observations after the last row.
        """
        return self.training_rows(fragment)

    def training_rows(self, fragment: SampleBatch) -> SampleBatch:
        """A postprocessed ``[T, N]`` fragment as what :meth:`learn_on_batch` reads.

        Its valid rows flattened (:meth:`flatten_fragment`); for a recurrent
        policy, sequences of at most ``model.max_seq_len`` steps (see
        :func:`~corral.core.learning.recurrent.sequences.chop_into_sequences`).
        """
        if self.is_recurrent:
            return chop_into_sequences(fragment, self.config.model.max_seq_len)
        return self.flatten_fragment(fragment)

    def input_rows(self, rows: SampleBatch, postprocessed: bool) -> SampleBatch:
        """Rows read from files, checked (and postprocessed with ``postprocess_inputs``), as this policy learns from them.

        The default takes them as they are; a policy whose sampled rows gain
        columns that a file's transitions imply (a replay-based one's discounts)
        adds them here.

        Args:
            rows: flat rows of one block of a file, in the policy's dtypes.
            postprocessed: whether :meth:`postprocess_trajectory` made them.

        Returns:
            The rows to learn from.
        """
        return rows

    @staticmethod
    def flatten_fragment(fragment: SampleBatch) -> SampleBatch:
        """Valid rows of a ``[T, N]`` fragment as a flat batch (the ``valid`` column dropped)."""
        mask = fragment[SampleBatch.VALID].reshape(-1)
        return SampleBatch({k: v.reshape(-1, *v.shape[2:])[mask] for k, v in fragment.items() if k != SampleBatch.VALID})

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """Update the model from a batch; return learner stats. Algorithms implement this."""
        raise NotImplementedError(f"{type(self).__name__} must implement learn_on_batch()")


# ActorCriticPolicy subclasses Policy, so its module imports this one: importing it from here is resolved on first
# access (checkpoints and plugins name it as corral.core.learning.policy:ActorCriticPolicy).
__getattr__ = lazy_exports(
    __name__,
    globals(),
    dict.fromkeys(("ActorCriticPolicy", "POLICY_GRADIENT_COLUMNS"), "corral.core.learning.policies.actor_critic_policy"),
)[0]

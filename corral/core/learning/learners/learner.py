"""RLlib's Learner API: where a loss or optimizers written for RLlib's new stack go (``learner_class``).

corral's algorithms compute their losses in their policies. A Learner class
names the parts of a policy's update that RLlib lets a user replace, and the
policy's update calls each at its place::

    class PPOWithWeightPenalty(PPOTorchLearner):
        def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
            loss = super().compute_loss_for_module(module_id=module_id, config=config, batch=batch, fwd_out=fwd_out)
            penalty = torch.stack([w.pow(2).mean() for w in self.get_parameters(self.module[module_id])]).mean()
            self.metrics.log_value((module_id, "weight_penalty"), penalty)
            return loss + config.learner_config_dict["penalty_coeff"] * penalty

    config.training(learner_class=PPOWithWeightPenalty, learner_config_dict={"penalty_coeff": 0.01})

- :meth:`Learner.configure_optimizers_for_module` (once, when the policy is
  built) registers the optimizers (:meth:`Learner.register_optimizer`): by
  default the policy's own. Several step together, each over its own
  parameters, with its own learning rate or schedule, and ``grad_clip``
  clips each on its own (an :class:`~corral.core.learning.policies.optimizer_set.OptimizerSet`).
- :meth:`Learner.compute_loss_for_module` (each gradient step): the
  algorithm's loss by default, from ``batch`` (the minibatch's columns as
  tensors, a row per step, sequences' padding dropped) and ``fwd_out`` (the
  model's ``forward_train`` outputs for it, ``action_dist_inputs`` and
  ``vf_preds``). Algorithms whose policy defines ``compute_loss`` take it:
  PPO, A2C, MARWIL and BC.
- :meth:`Learner.compute_gradients`, :meth:`Learner.postprocess_gradients`
  (``grad_clip``) and :meth:`Learner.apply_gradients`, in that order, each
  gradient step of every algorithm; on Learner actors the gradients are
  averaged between the first two.
- :meth:`Learner.after_gradient_based_update` after each update.
- :attr:`Learner.metrics` (``log_value``) and :meth:`Learner.register_metrics`:
  values that join the policy's learner stats for the update.

One Learner is built with each copy of a policy, so :attr:`Learner.module`
holds that policy's model under its id: corral updates each policy of a
multi-agent run on its own batch (in its own thread, or on the Learner actors),
where RLlib's Learner holds them all. ``learners(num_learners=N)`` gives each
Learner actor its own, as RLlib does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from corral.core.common.sample_batch import MultiAgentBatch, SampleBatch
from corral.core.learning.learners.learner_metrics import LearnerMetrics
from corral.core.learning.policies.optimizer_set import OneOptimizer, Optimizer, OptimizerSet
from corral.core.learning.schedules import PiecewiseSchedule
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.contracts.config import AlgorithmConfig
    from corral.core.learning.policy import Policy

DEFAULT_OPTIMIZER = "default_optimizer"
"""the name of the optimizer a Learner registers for a module unless told otherwise (RLlib's)"""

ParamDict = dict[torch.Tensor, torch.Tensor]
"""gradients by parameter (a torch Learner's parameter reference is the parameter itself)"""


class _Modules(Mapping[str, nn.Module]):
    """The Learner's policy's model under its id: RLlib's ``learner.module[module_id]``."""

    def __init__(self, module_id: str, policy: Policy) -> None:
        self._module_id = module_id
        self._policy = policy

    def __getitem__(self, module_id: str) -> nn.Module:
        if module_id != self._module_id:
            raise KeyError(
                f"{module_id!r}: this Learner updates policy {self._module_id!r} (corral builds one Learner per policy)"
            )
        return self._policy.model

    def __iter__(self) -> Iterator[str]:
        return iter((self._module_id,))

    def __len__(self) -> int:
        return 1


class Learner:
    """What owns a policy's optimizers and loss, as RLlib's Learner does; subclass it (or an algorithm's) to change them.

    corral builds it with the policy (``training(learner_class=...)`` or
    ``learners(learner_class=...)``); see the module docstring for what is
    called when.

    Args:
        config: the policy's config (the algorithm's, with the policy's own options on top).
        policy: the policy whose update this Learner takes part in.
        module_id: the policy's id.
    """

    framework = "torch"
    policy_classes: ClassVar[tuple[type, ...]] = ()
    """the policy classes an algorithm's Learner (``PPOTorchLearner``, ...) belongs to, so that it refuses another
    algorithm's; empty: any policy"""

    def __init__(self, *, config: AlgorithmConfig, policy: Policy, module_id: str) -> None:
        self.config = config
        self.module: Mapping[str, nn.Module] = _Modules(module_id, policy)
        """the policy's model by id (RLlib's MultiRLModule, holding this Learner's one policy)"""
        self.metrics = LearnerMetrics()
        """where :meth:`compute_loss_for_module` and the other hooks log values for the update's stats"""
        self._policy = policy
        self._module_id = module_id
        self._optimizers: dict[str, tuple[OneOptimizer, Any]] = {}  # name: (optimizer, lr or schedule or None)
        self._norms: list[torch.Tensor] | None = None
        self._terms: dict[str, torch.Tensor] = {}

    # ------------------------------------------------------------------ #
    # optimizers
    # ------------------------------------------------------------------ #
    def build(self) -> None:
        """Set the Learner up; corral calls it once, after building the policy. Call ``super().build()`` first."""
        self.configure_optimizers()

    def configure_optimizers(self) -> None:
        """Register every module's optimizers (:meth:`configure_optimizers_for_module`)."""
        for module_id in self.module:
            self.configure_optimizers_for_module(module_id, config=self.config)
        if not self._optimizers:
            raise ConfigError(
                f"{type(self).__name__}.configure_optimizers_for_module registered no optimizer for {self._module_id!r}; "
                "call self.register_optimizer(...) there"
            )
        optimizers = {name: optimizer for name, (optimizer, _) in self._optimizers.items()}
        if list(optimizers.values()) != [self._policy.optimizer]:
            self._policy.optimizer = OptimizerSet(optimizers)

    def configure_optimizers_for_module(self, module_id: str, config: AlgorithmConfig | None = None) -> None:
        """Register the optimizers of one module; by default the policy's own (the ``optimizer`` option's).

        Args:
            module_id: the policy's id.
            config: its config.
        """
        optimizer = self._policy.optimizer
        assert not isinstance(optimizer, OptimizerSet)  # a Learner is built once, with the policy's own optimizer
        self.register_optimizer(module_id=module_id, optimizer=optimizer, params=_params_of(optimizer))

    def register_optimizer(
        self,
        *,
        module_id: str | None = None,
        optimizer_name: str = DEFAULT_OPTIMIZER,
        optimizer: OneOptimizer,
        params: list[torch.Tensor],
        lr_or_lr_schedule: float | list[list[float]] | list[tuple[int, float]] | None = None,
    ) -> None:
        """Register an optimizer of a module over ``params``; call it from :meth:`configure_optimizers_for_module`.

        Args:
            module_id: the module (the policy's id; None: this Learner's one).
            optimizer_name: its name, unique for the module.
            optimizer: the torch optimizer, built over ``params``.
            params: the parameters it updates.
            lr_or_lr_schedule: its learning rate, or a schedule ``[[timestep, lr], ...]``; None: the config's
                ``lr`` (and ``lr_schedule``) at each update, where the algorithm's update sets it.

        Raises:
            ConfigError: another module's id, a name taken, or ``params`` that are not the optimizer's.
        """
        module_id = self._module_id if module_id is None else module_id
        if module_id != self._module_id:
            raise ConfigError(f"register_optimizer(module_id={module_id!r}): this Learner updates {self._module_id!r}")
        if optimizer_name in self._optimizers:
            raise ConfigError(f"an optimizer named {optimizer_name!r} is already registered for {module_id!r}")
        if {id(p) for p in params} != {id(p) for p in _params_of(optimizer)}:
            raise ConfigError(
                f"register_optimizer({optimizer_name!r}): params must be the parameters the optimizer was built over"
            )
        schedule: Any = None
        if isinstance(lr_or_lr_schedule, (list, tuple)):
            schedule = PiecewiseSchedule([(int(t), float(v)) for t, v in lr_or_lr_schedule])
        elif lr_or_lr_schedule is not None:
            schedule = float(lr_or_lr_schedule)
        self._optimizers[optimizer_name] = (optimizer, schedule)
        if schedule is not None:  # otherwise the rate stays the optimizer's until the policy's update sets its lr
            self._set_lr(optimizer, schedule, default_lr=0.0)

    def get_optimizer(self, module_id: str | None = None, optimizer_name: str = DEFAULT_OPTIMIZER) -> OneOptimizer:
        """A registered optimizer.

        Args:
            module_id: the module (this Learner's one).
            optimizer_name: the name it was registered under.

        Raises:
            KeyError: none has that name.
        """
        if optimizer_name not in self._optimizers:
            raise KeyError(f"no optimizer {optimizer_name!r}; registered: {sorted(self._optimizers)}")
        return self._optimizers[optimizer_name][0]

    def get_optimizers_for_module(self, module_id: str | None = None) -> list[tuple[str, OneOptimizer]]:
        """The module's registered optimizers as ``(name, optimizer)`` pairs."""
        return [(name, optimizer) for name, (optimizer, _) in self._optimizers.items()]

    def get_parameters(self, module: nn.Module) -> list[torch.Tensor]:
        """A module's parameters, as a list."""
        return list(module.parameters())

    def get_param_ref(self, param: torch.Tensor) -> torch.Tensor:
        """What keys a parameter's gradient in a :data:`ParamDict`: the parameter itself."""
        return param

    def update_learning_rates(self, default_lr: float) -> None:
        """Set each optimizer's learning rate for the policy's current timestep (corral calls it each update).

        Args:
            default_lr: the config's ``lr`` now, for optimizers registered without their own.
        """
        for optimizer, schedule in self._optimizers.values():
            self._set_lr(optimizer, schedule, default_lr)

    def _set_lr(self, optimizer: OneOptimizer, schedule: Any, default_lr: float) -> None:
        if schedule is None:
            lr = default_lr
        else:
            lr = schedule(self._policy.schedule_timestep) if isinstance(schedule, PiecewiseSchedule) else schedule
        for group in optimizer.param_groups:
            group["lr"] = lr

    # ------------------------------------------------------------------ #
    # the loss and the gradient step
    # ------------------------------------------------------------------ #
    def compute_loss_for_module(
        self, *, module_id: str, config: AlgorithmConfig, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """The module's loss on a minibatch: by default its algorithm's (the policy's ``compute_loss``).

        Args:
            module_id: the policy's id.
            config: its config.
            batch: the minibatch's columns as tensors, a row per step.
            fwd_out: the model's ``forward_train`` outputs for them, a row per step.

        Returns:
            The scalar loss to minimise.
        """
        total, terms = self._policy.compute_loss(batch, fwd_out)
        self._terms = terms
        return total

    def compute_losses(
        self, *, fwd_out: dict[str, dict[str, torch.Tensor]], batch: dict[str, dict[str, torch.Tensor]]
    ) -> dict[str, torch.Tensor]:
        """Each module's loss (:meth:`compute_loss_for_module`), by module id.

        Args:
            fwd_out: each module's forward outputs by module id.
            batch: each module's minibatch by module id.

        Returns:
            The losses by module id.
        """
        return {
            module_id: self.compute_loss_for_module(
                module_id=module_id, config=self.config, batch=batch[module_id], fwd_out=fwd_out[module_id]
            )
            for module_id in fwd_out
        }

    def compute_gradients(self, loss_per_module: dict[str, torch.Tensor], **kwargs: Any) -> ParamDict:
        """Zero the optimizers' gradients and backpropagate the sum of the losses.

        Args:
            loss_per_module: each module's loss.
            **kwargs: taken for RLlib's signature; nothing reads them.

        Returns:
            Each parameter's gradient (parameters the losses do not reach have none).
        """
        self._policy.optimizer.zero_grad(set_to_none=True)
        total = torch.stack(list(loss_per_module.values())).sum()
        total.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        return self.gradients()

    def postprocess_gradients(self, gradients_dict: ParamDict) -> ParamDict:
        """Each module's gradients through :meth:`postprocess_gradients_for_module`.

        Args:
            gradients_dict: the gradients by parameter.

        Returns:
            The gradients to apply.
        """
        return self.postprocess_gradients_for_module(
            module_id=self._module_id, config=self.config, module_gradients_dict=gradients_dict
        )

    def postprocess_gradients_for_module(
        self, *, module_id: str, config: AlgorithmConfig | None = None, module_gradients_dict: ParamDict
    ) -> ParamDict:
        """Clip the module's gradients as ``grad_clip`` and ``grad_clip_by`` say, each optimizer's on its own.

        Args:
            module_id: the policy's id.
            config: its config.
            module_gradients_dict: its gradients by parameter.

        Returns:
            The clipped gradients.
        """
        self._set_gradients(module_gradients_dict)
        self._norms = self._policy.clip_gradients()
        return self.gradients()

    def apply_gradients(self, gradients_dict: ParamDict) -> None:
        """Step every optimizer with these gradients (through the policy's NaN guard: a non-finite step is undone).

        Args:
            gradients_dict: the gradients by parameter.
        """
        self._set_gradients(gradients_dict)
        self._policy.update_guard.step()

    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        """Called after each update of the policy; does nothing unless a subclass has it do something.

        Args:
            timesteps: ``{"num_env_steps_sampled_lifetime": ...}``, the policy's timestep.
        """

    def register_metrics(self, module_id: str, metrics: dict[str, Any]) -> None:
        """Report values in the update's stats (Ray 2.5-2.30's way; :attr:`metrics` is the newer one).

        Args:
            module_id: the policy's id.
            metrics: values by name.
        """
        for name, value in metrics.items():
            self.metrics.log_value((module_id, name), value, reduce=None)

    # ------------------------------------------------------------------ #
    # updates
    # ------------------------------------------------------------------ #
    def update_from_batch(self, batch: SampleBatch | MultiAgentBatch, **kwargs: Any) -> dict[str, dict[str, Any]]:
        """One update of the policy on a train batch, as its algorithm makes it.

        Args:
            batch: the policy's rows, or a multi-agent batch holding them.
            **kwargs: RLlib's ``minibatch_size``, ``num_epochs`` (``num_iters``) and ``shuffle_batch_per_epoch``:
                the config's values decide, and one that differs is refused; ``timesteps`` is taken and not needed
                (the policy counts its own).

        Returns:
            The update's stats under the policy's id.

        Raises:
            ConfigError: a keyword names a value the config does not hold.
            TypeError: a keyword RLlib's method does not take.
        """
        check_update_options(self.config, kwargs)
        if isinstance(batch, MultiAgentBatch):
            batch = batch.policy_batches[self._module_id]
        return {self._module_id: self._policy.learn_and_report(batch)}

    # ------------------------------------------------------------------ #
    # what the policy's update calls
    # ------------------------------------------------------------------ #
    def minibatch_loss(
        self, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`compute_loss_for_module` for the policy, and the algorithm's terms if it computed them.

        Args:
            batch: the minibatch's columns, a row per step.
            fwd_out: the model's training outputs for them.
        """
        self._terms = {}
        total = self.compute_loss_for_module(module_id=self._module_id, config=self.config, batch=batch, fwd_out=fwd_out)
        return total, self._terms

    def gradient_step(self, loss: torch.Tensor, weight: float) -> list[torch.Tensor]:
        """Backpropagate, average across Learner actors, postprocess: the gradients are then the parameters' own.

        Args:
            loss: the loss.
            weight: this copy's weight in its Learner group's average (0: its share was empty: nothing to backpropagate).

        Returns:
            Each param group's gradient norm before clipping.
        """
        policy = self._policy
        if weight:  # the gradients compute_gradients returns are all the parameters have
            self._set_gradients(self.compute_gradients({self._module_id: loss}))
        else:
            policy.optimizer.zero_grad(set_to_none=True)
        policy.average_gradients(weight)
        self._norms = None
        self._set_gradients(self.postprocess_gradients(self.gradients()))
        if self._norms is None:  # a postprocessing of its own: measure what the NaN guard checks
            self._norms = policy.clip_gradients(measure_only=True)
        return self._norms

    def _params(self) -> list[torch.Tensor]:
        return _params_of(self._policy.optimizer)

    def gradients(self) -> ParamDict:
        """The policy's parameters' gradients now, by parameter."""
        return {p: p.grad for p in self._params() if p.grad is not None}

    def _set_gradients(self, gradients: ParamDict) -> None:
        for p in self._params():
            grad = gradients.get(p)
            if grad is not p.grad:
                p.grad = grad


_UPDATE_OPTIONS = {
    "minibatch_size": "minibatch_size",
    "num_epochs": "num_epochs",
    "num_iters": "num_epochs",
    "shuffle_batch_per_epoch": None,
    "timesteps": None,
}
"""RLlib's keywords of ``update_from_batch`` and the option that decides each in corral (None: what corral always does)"""


def check_update_options(config: AlgorithmConfig, options: dict[str, Any]) -> None:
    """Refuse RLlib's ``update_from_batch`` keywords that ask for other values than ``config`` holds.

    Args:
        config: the policy's config, which decides the update.
        options: the keywords given.

    Raises:
        ConfigError: a keyword names a value the config does not hold.
        TypeError: a keyword RLlib's method does not take.
    """
    for key, value in options.items():
        if key not in _UPDATE_OPTIONS:
            raise TypeError(f"update_from_batch() got an unexpected keyword argument {key!r}")
        option = _UPDATE_OPTIONS[key]
        held = getattr(config, option, None) if option else True
        if key != "timesteps" and value is not None and value != held:
            raise ConfigError(
                f"update_from_batch({key}={value!r}): corral's update takes it from the config, which holds {held!r}; "
                f"set it there (config.training({option or key}=...))"
            )


TorchLearner = Learner
"""RLlib's torch Learner: corral's Learner computes with torch"""


def _params_of(optimizer: Optimizer) -> list[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]

"""A policy's updates: what ``learn_on_batch`` calls to turn a batch and a loss into a guarded optimizer step.

Columns as tensors on the policy's device, backpropagation with gradient
clipping and the NaN/inf guard (:mod:`corral.core.learning.nonfinite`), the
options' schedules at the policy's timestep, and the helpers of a loss and
its learner stats.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from corral.core.common.sample_batch import STATE_IN_PREFIX, SampleBatch, state_columns
from corral.core.learning.nonfinite import UpdateGuard
from corral.core.learning.policies.acting import overriding
from corral.core.learning.policies.heuristic_policies import overrides_rllib_loss
from corral.core.learning.policies.part import PolicyPart
from corral.core.learning.recurrent.sequences import is_step_column
from corral.core.networks.model_v2 import TorchModelV2
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.networks.recurrent import RecurrentModel

Gradients = list[np.ndarray | None]
"""A policy's gradients as :meth:`Updates.compute_gradients` gives them: an array per parameter of its optimizer, in the
optimizer's order (None where the loss does not reach the parameter)."""

_SEQUENCE_INPUTS = (SampleBatch.SEQ_LENS, SampleBatch.PREV_ACTIONS, SampleBatch.PREV_REWARDS)
"""what a batch of sequences brings to a recurrent model beside the columns a loss asks for (and ``state_in_k``)"""


class Updates(PolicyPart):
    """What an algorithm's ``learn_on_batch`` calls; part of :class:`~corral.core.learning.policy.Policy`."""

    def to_tensors(self, batch: SampleBatch, keys: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
        """Columns as tensors on the policy's device (no copy on CPU unless read-only, as Ray's are).

        Args:
            batch: the columns to convert.
            keys: the columns wanted; None (or an empty list) means every column.

        Returns:
            Tensors by column name; on the CPU they share memory with ``batch``'s arrays
            where those are C-contiguous and writable. A batch of sequences (a recurrent
            policy's) brings its ``seq_lens``, ``state_in_k`` and previous actions and
            rewards along with the columns asked for: :meth:`train_forward` reads them.
        """
        if keys and SampleBatch.SEQ_LENS in batch:
            keys = [*keys, *(k for k in batch if k not in keys and (k in _SEQUENCE_INPUTS or k.startswith(STATE_IN_PREFIX)))]
        tensors = {k: torch.from_numpy(np.require(batch[k], requirements=["C", "W"])).to(self.device) for k in (keys or batch)}
        self.__dict__["_loss_inputs"] = tensors  # what a model's custom_loss() is given
        return tensors

    def train_forward(self, t: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The model's training outputs for a batch of tensors, and the batch's columns with a row per output row.

        A feed-forward policy's batch is its rows: ``model.forward_train(obs)`` and
        ``t`` itself. A recurrent policy's is sequences (see
        :mod:`corral.core.learning.recurrent.sequences`): the model runs over them from each
        one's starting state, and both the outputs and the step columns come back
        as the real steps alone, padding dropped. So a loss written for rows (means
        over the batch) is the same for sequences.

        Args:
            t: the batch's columns as tensors (:meth:`to_tensors`).

        Returns:
            ``(outputs, columns)``: the model's outputs by key, and the step columns of ``t``,
            each with one row per step.
        """
        if SampleBatch.SEQ_LENS not in t:
            if self.gradient_sync is not None:  # what this Learner's share weighs in the group's average
                self.__dict__["_loss_rows"] = t[SampleBatch.OBS].shape[0]
            return self.model.forward_train(t[SampleBatch.OBS]), t
        seq_lens = t[SampleBatch.SEQ_LENS]
        obs = t[SampleBatch.OBS]
        sequences, steps = obs.shape[:2]
        state = [t[key] for key in state_columns(t, STATE_IN_PREFIX)]
        model = cast("RecurrentModel", self.model)
        out = model.forward_train(obs, state, seq_lens, t.get(SampleBatch.PREV_ACTIONS), t.get(SampleBatch.PREV_REWARDS))
        real = cast(torch.Tensor, self.step_mask(t)).reshape(-1)
        rows = sequences * steps
        outputs = {k: v[real] for k, v in out.items() if v.shape[:1] == (rows,)}  # the final state_out_k are per sequence
        columns = {k: v.reshape(rows, *v.shape[2:])[real] for k, v in t.items() if is_step_column(k)}
        if self.gradient_sync is not None:
            self.__dict__["_loss_rows"] = int(real.sum())
        return outputs, columns

    @staticmethod
    def step_mask(t: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """``[S, L]`` True at the real steps of a batch of sequences (not its padding); None for a batch of rows."""
        seq_lens = t.get(SampleBatch.SEQ_LENS)
        if seq_lens is None:
            return None
        steps = t[SampleBatch.OBS].shape[1]
        return torch.arange(steps, device=seq_lens.device) < seq_lens.unsqueeze(1)

    def apply_gradients(
        self, loss: torch.Tensor | Gradients, terms: dict[str, torch.Tensor] | None = None, rows: float | None = None
    ) -> list[torch.Tensor]:
        """Backpropagate ``loss``, clip if ``grad_clip``, and step ``self.optimizer`` unless something is not finite.

        Given gradients instead of a loss (what :meth:`compute_gradients` returned
        elsewhere: RLlib's ``apply_gradients(gradients)``), step the optimizer with
        them as they are, at this policy's learning rate, through the same guard.

        A ModelV2 that overrides ``custom_loss()`` turns ``loss`` into the loss
        backpropagated first. A NaN or inf loss or gradient norm, or weights that the step would make
        non-finite, stop the update before it reaches the weights (see
        :mod:`corral.core.learning.nonfinite`): a :class:`~corral.errors.TrainingError`,
        or a skipped update with ``debugging(on_nonfinite="skip")``. On a Learner of a
        group (:attr:`gradient_sync`), the gradients are first averaged with the other
        Learners', weighted by the steps each loss is the mean over.

        Args:
            loss: the total loss; or gradients, an array per parameter in the optimizer's order (:data:`Gradients`).
            terms: its terms by name, so an error can say which one was not finite.
            rows: the steps ``loss`` is the mean over, for a Learner's weight in the group's average (0: its share
                was empty); None: the steps :meth:`train_forward` last gave (1 if it was not called).

        Returns:
            Each param group's gradient norm before clipping (see :meth:`clip_gradients`).

        Raises:
            TrainingError: something was not finite and ``on_nonfinite`` is ``"raise"``.
            ValueError: gradients of another count or shape than the optimizer's parameters.
            ConfigError: a second step inside :meth:`compute_gradients`.
        """
        if not isinstance(loss, torch.Tensor):
            return self._apply_computed_gradients(loss)
        captured: list[Gradients] | None = self.__dict__.get("_captured_gradients")
        if captured:
            raise ConfigError(
                f"{type(self).__name__} takes more than one gradient step per batch, so it has no one gradient to give "
                "compute_gradients(); an algorithm whose env runners compute gradients needs a policy with one step "
                "per batch (A2C's, PG's)"
            )
        if isinstance(self.model, TorchModelV2) and type(self.model).custom_loss is not TorchModelV2.custom_loss:
            loss = self._custom_loss(loss)
        weight = 1.0
        if self.gradient_sync is not None:
            weight = self.__dict__.pop("_loss_rows", 1) if rows is None else rows
        learner = self.learner
        if learner is None:
            self.optimizer.zero_grad(set_to_none=True)
            if weight:
                loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
            self.average_gradients(weight)
            norms = self.clip_gradients()
        else:  # the Learner's compute_gradients, postprocess_gradients and apply_gradients, which a subclass may replace
            norms = learner.gradient_step(loss, weight)
        if not weight:  # an empty share: the mean over none of its rows is no loss of this update
            loss, terms = torch.zeros((), device=self.device), None
        if self.update_guard.check_gradients(loss, norms, terms):
            if captured is not None:  # compute_gradients: the gradients are the result, the weights stay
                grads = [None if p.grad is None else p.grad.detach().to("cpu", copy=True).numpy() for p in self._params()]
                captured.append(grads)
            elif learner is None:
                self.update_guard.step()
            else:
                learner.apply_gradients(learner.gradients())
        return norms

    def compute_gradients(self, batch: SampleBatch) -> tuple[Gradients, dict[str, Any]]:
        """The gradients of the update :meth:`learn_on_batch` makes on ``batch``, without making it (RLlib's name).

        An env runner computes them on its own samples for the learner to
        apply (A3C): computed as the update computes them, clipped by
        ``grad_clip``, checked by the NaN guard; the weights and the
        optimizer's state stay as they are.

        Args:
            batch: the postprocessed samples.

        Returns:
            ``(gradients, stats)``: the gradients for :meth:`apply_gradients` (empty if the NaN
            guard skipped the update), and the update's stats.

        Raises:
            ConfigError: the policy takes more than one gradient step per batch (PPO's epochs).
        """
        captured: list[Gradients] = []
        with overriding(self, "_captured_gradients", captured):
            stats = self.learn_and_report(batch)
        return (captured[0] if captured else []), stats

    def _apply_computed_gradients(self, gradients: Gradients) -> list[torch.Tensor]:
        """Step the optimizer with gradients :meth:`compute_gradients` gave (none: a skipped update, nothing to do)."""
        params = self._params()
        if not gradients:
            return []
        if len(gradients) != len(params):
            raise ValueError(f"{len(gradients)} gradients for a policy whose optimizer has {len(params)} parameters")
        self.update_lr()
        for param, grad in zip(params, gradients, strict=True):
            if grad is not None and tuple(grad.shape) != tuple(param.shape):
                raise ValueError(f"a gradient of shape {tuple(grad.shape)} for a parameter of shape {tuple(param.shape)}")
            param.grad = None if grad is None else torch.tensor(grad, device=self.device)  # a copy: Ray gives read-only arrays
        norms = self.clip_gradients(measure_only=True)
        if self.update_guard.check_gradients(torch.zeros((), device=self.device), norms, None):
            if self.learner is None:
                self.update_guard.step()
            else:
                self.learner.apply_gradients(self.learner.gradients())
        return norms

    def _params(self) -> list[torch.Tensor]:
        """The optimizer's parameters, in its order (the order of :data:`Gradients`)."""
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def average_gradients(self, weight: float) -> None:
        """On a Learner actor of a group, average the gradients with the other Learners'; alone, do nothing.

        Args:
            weight: the steps this copy's loss is the mean over (its weight in the average).
        """
        if self.gradient_sync is not None:
            self.gradient_sync.average_gradients(self._params(), weight)

    def _custom_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """The model's ``custom_loss()`` of the algorithm's loss (a list of one, as RLlib passes it) and the batch."""
        custom = cast(TorchModelV2, self.model).custom_loss([loss], self.__dict__.get("_loss_inputs", {}))
        if isinstance(custom, (list, tuple)) and len(custom) == 1:  # one loss per optimizer; the policy has one
            custom = custom[0]
        if not isinstance(custom, torch.Tensor) or custom.dim() != 0:
            raise ConfigError(
                f"{type(self.model).__qualname__}.custom_loss() returned {type(custom).__name__}; it must return a list "
                "of one scalar tensor (the policy has one optimizer: add the model's terms to the loss it was given)"
            )
        return custom

    def compute_loss(
        self, batch: dict[str, torch.Tensor], fwd_out: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The algorithm's loss on a minibatch, from the model's outputs for it, where its update is written that way.

        A policy that defines it computes each gradient step's loss through
        :meth:`minibatch_loss`, so a ``learner_class`` may replace it
        (``compute_loss_for_module``); a policy that does not (its update needs
        target networks or sequences) keeps its loss in ``learn_on_batch``.

        Args:
            batch: the minibatch's columns as tensors, a row per step (:meth:`train_forward`'s).
            fwd_out: the model's training outputs for them.

        Returns:
            The total loss, and its terms by name.

        Raises:
            NotImplementedError: the policy's update does not compute its loss here.
        """
        raise NotImplementedError(f"{type(self).__name__} computes its loss in learn_on_batch")

    def minibatch_loss(self, t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss of a minibatch of tensors: the model's training outputs for it, then :meth:`compute_loss`, or with a
        ``learner_class``, the Learner's ``compute_loss_for_module``.

        Args:
            t: the minibatch's columns as tensors (this Learner actor's share of them).

        Returns:
            The total loss, and the terms :meth:`compute_loss` gave (none if a Learner's loss did not ask for them).
            Where the policy's class overrides RLlib's ``loss(model, dist_class, train_batch)`` (see
            :func:`~corral.core.learning.policies.heuristic_policies.update_loss`), that gives the total loss, from
            the minibatch's columns as a :class:`SampleBatch` of tensors (columns postprocessing added included).
        """
        if overrides_rllib_loss(self):  # a subclass's RLlib loss(model, dist_class, train_batch) replaces the update's
            total = cast(Any, self).loss(self.model, self.rllib_dist_class, SampleBatch(t))
            return total, {"total_loss": total}
        out, rows = self.train_forward(t)
        if self.learner is None:
            return self.compute_loss(rows, out)
        return self.learner.minibatch_loss(rows, out)

    @property
    def rllib_dist_class(self) -> type:
        """The action distribution as RLlib's losses build it: ``dist_class(inputs, model)``."""
        built = self.__dict__.get("_rllib_dist_class")
        if built is None:
            base: Any = self.dist_class
            built = type(base.__name__, (base,), {"__init__": lambda dist, inputs, model=None: base.__init__(dist, inputs)})
            self.__dict__["_rllib_dist_class"] = built
        return built

    def learn_and_report(self, batch: SampleBatch) -> dict[str, Any]:
        """:meth:`learn_on_batch` and everything the update's stats hold beside what it returns.

        That is the model's own ``metrics()`` (a ModelV2's, under ``model``), what
        a Learner logged, and the updates the NaN guard skipped; the Learner's
        ``after_gradient_based_update`` runs after the update.

        Args:
            batch: the train batch.

        Returns:
            The update's stats.
        """
        stats = dict(self.learn_on_batch(batch))
        metrics: dict[str, Any] = self.model.metrics() if isinstance(self.model, TorchModelV2) else {}
        stats["model"] = {str(k): float(v.detach()) if isinstance(v, torch.Tensor) else float(v) for k, v in metrics.items()}
        if self.learner is not None:
            self.learner.after_gradient_based_update(timesteps={"num_env_steps_sampled_lifetime": self.schedule_timestep})
            stats.update(self.learner.metrics.reduce())
        if self.update_guard.skipped:
            stats["num_nonfinite_updates_skipped"] = self.update_guard.skipped
        return stats

    def clip_gradients(self, measure_only: bool = False) -> list[torch.Tensor]:
        """Clip gradients to ``grad_clip`` as ``grad_clip_by`` says; returns each param group's global norm before.

        ``"global_norm"`` (the default) scales a param group's gradients together,
        ``"norm"`` each parameter's tensor on its own, ``"value"`` clamps every
        element to [-grad_clip, grad_clip], as RLlib's options do. One optimizer
        may hold several networks as param groups (SAC's critics, actor and
        temperature); each is clipped on its own, as if it had its own optimizer.
        The norms are measured even without ``grad_clip``: the update guard needs
        them to be finite.

        Args:
            measure_only: measure the norms, and leave the gradients as they are.
        """
        norms = []
        clip, clip_by = None if measure_only else self.config.grad_clip, self.config.grad_clip_by
        for group in self.optimizer.param_groups:
            grads = [p.grad for p in group["params"] if p.grad is not None]
            if not grads:
                norms.append(torch.zeros((), device=self.device))
                continue
            # what nn.utils.clip_grad_norm_ does, with its foreach kernels also on the CPU (half the time there)
            each = torch._foreach_norm(grads)
            norm = torch.linalg.vector_norm(torch.stack(each))
            if clip is not None and clip_by == "global_norm":
                torch._foreach_mul_(grads, torch.clamp(clip / (norm + 1e-6), max=1.0))
            elif clip is not None and clip_by == "norm":
                torch._foreach_mul_(grads, [torch.clamp(clip / (n + 1e-6), max=1.0) for n in each])
            elif clip is not None:
                torch._foreach_clamp_min_(grads, -clip)
                torch._foreach_clamp_max_(grads, clip)
            norms.append(norm)
        return norms

    def share(self, t: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The rows of a batch (or minibatch) of tensors this process computes a loss on: all of them, or on a Learner
        of a group, its share (see :mod:`corral.core.learning.learners.gradient_sync`).

        Args:
            t: columns with a row per step, sequence or block.

        Returns:
            ``t`` itself, or its columns cut to this Learner's rows.
        """
        return t if self.gradient_sync is None else self.gradient_sync.share(t)

    def group_rows(self, rows: int) -> int:
        """The rows a loop over this batch's minibatches covers: ``rows``, or on a member of a group whose members learn on
        batches of their own (DD-PPO), the largest of theirs, so that every member makes as many gradient steps.

        Args:
            rows: the rows of the batch being learned on.

        Returns:
            The rows to loop over (minibatches past ``rows`` are empty).
        """
        return rows if self.gradient_sync is None else self.gradient_sync.group_rows(rows)

    def random_rows(self, draw: Callable[[int], torch.Tensor], rows: int, repeats: int = 1) -> torch.Tensor:
        """A random draw with a row per row of the batch (``repeats`` rows each) that a loss computes on.

        On a Learner of a group, the draw is made for the whole batch and cut to
        this Learner's share: its generator then moves as one process's does,
        and the group draws what one process would.

        Args:
            draw: makes the draw for a number of rows, from :attr:`torch_rng`.
            rows: the rows of the batch (or share) being computed on.
            repeats: rows of the draw per row of the batch, each row's consecutive.

        Returns:
            ``rows * repeats`` rows of the draw.
        """
        if self.gradient_sync is None:
            return draw(rows * repeats)
        return self.gradient_sync.share_of_draw(draw, repeats)

    def batch_mean(self, values: torch.Tensor) -> torch.Tensor:
        """The mean of one value per row over the whole batch: on a Learner of a group, over every Learner's share.

        Args:
            values: a value per row of the batch (or of this Learner's share).

        Returns:
            A scalar tensor.
        """
        return values.mean() if self.gradient_sync is None else self.gradient_sync.mean(values)

    @property
    def update_guard(self) -> UpdateGuard:
        """The NaN/inf guard of ``self.optimizer``'s steps (made on first use, so subclasses may replace the optimizer)."""
        guard = self.__dict__.get("_update_guard")
        if guard is None or guard.optimizer is not self.optimizer:
            guard = self.__dict__["_update_guard"] = UpdateGuard(self.optimizer, self.config.on_nonfinite)
        return guard

    def scheduled(self, name: str) -> float:
        """An option's value at the policy's current timestep: its schedule's (``lr_schedule``, ...) if it has one.

        Args:
            name: the option, e.g. ``"lr"`` or ``"entropy_coeff"``.

        Returns:
            The value to use now.
        """
        schedule = self._schedules.get(name)
        return schedule(self.schedule_timestep) if schedule is not None else float(getattr(self.config, name))

    @property
    def schedule_timestep(self) -> int:
        """The timestep the update's schedules read: :attr:`global_timestep`, or the one :meth:`timestep_pinned` holds."""
        pinned = self.__dict__.get("_pinned_timestep")
        return self.global_timestep if pinned is None else pinned

    def timestep_pinned(self, timestep: int) -> contextlib.AbstractContextManager[None]:
        """Schedules read ``timestep`` inside the ``with`` block, whatever :attr:`global_timestep` does meanwhile.

        A learner thread's update runs while the env runner samples on and
        advances the timestep; pinned to the timestep its batch was handed
        over at, the update's learning rate does not depend on how far
        sampling got (and a seed gives the same run).

        Args:
            timestep: the timestep to read.

        Returns:
            The context manager.
        """
        return overriding(self, "_pinned_timestep", timestep)

    def update_lr(self) -> float:
        """Apply the learning-rate schedule for the current timestep; returns the rate in use."""
        lr = self.scheduled("lr")
        if self.learner is not None:  # its optimizers may have rates or schedules of their own
            self.learner.update_learning_rates(lr)
            return lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr


def standardize(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``x`` shifted and scaled to mean 0 and standard deviation 1 over the batch (advantage normalisation).

    Args:
        x: the values.
        mask: where ``x`` holds real values (a batch of sequences' :meth:`Updates.step_mask`); None: everywhere.

    Returns:
        ``x`` standardized by the mean and standard deviation of its real values.
    """
    real = x if mask is None else x[mask]
    return (x - real.mean()) / (real.std() + 1e-8)


def to_floats(tensors: dict[str, torch.Tensor]) -> dict[str, float]:
    """Scalar tensors to floats with one device sync, for learner stats."""
    return dict(zip(tensors, torch.stack([t.detach() for t in tensors.values()]).tolist(), strict=True))


def joint_norm(norms: list[torch.Tensor]) -> torch.Tensor:
    """One gradient norm for the stats of a step that :meth:`Updates.apply_gradients` measured per param group.

    Args:
        norms: each param group's norm (several where a Learner registered several optimizers).

    Returns:
        The one norm, or the norm of all of them together.
    """
    return norms[0] if len(norms) == 1 else torch.linalg.vector_norm(torch.stack(norms))

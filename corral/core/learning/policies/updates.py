"""A policy's updates: what ``learn_on_batch`` calls to turn a batch and a loss into a guarded optimizer step.

Columns as tensors on the policy's device, backpropagation with gradient
clipping and the NaN/inf guard (:mod:`corral.core.learning.nonfinite`), the
options' schedules at the policy's timestep, and the helpers of a loss and
its learner stats.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from corral.core.common.sample_batch import SampleBatch
from corral.core.learning.nonfinite import UpdateGuard
from corral.core.learning.policies.part import PolicyPart


class Updates(PolicyPart):
    """What an algorithm's ``learn_on_batch`` calls; part of :class:`~corral.core.learning.policy.Policy`."""

    def to_tensors(self, batch: SampleBatch, keys: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
        """Columns as tensors on the policy's device (no copy on CPU unless read-only, as Ray's are).

        Args:
            batch: the columns to convert.
            keys: the columns wanted; None (or an empty list) means every column.

        Returns:
            Tensors by column name; on the CPU they share memory with ``batch``'s arrays
            where those are C-contiguous and writable.
        """
        return {k: torch.from_numpy(np.require(batch[k], requirements=["C", "W"])).to(self.device) for k in (keys or batch)}

    def apply_gradients(self, loss: torch.Tensor, terms: dict[str, torch.Tensor] | None = None) -> list[torch.Tensor]:
        """Backpropagate ``loss``, clip if ``grad_clip``, and step ``self.optimizer`` unless something is not finite.

        A NaN or inf loss or gradient norm, or weights that the step would make
        non-finite, stop the update before it reaches the weights (see
        :mod:`corral.core.learning.nonfinite`): a :class:`~corral.errors.TrainingError`,
        or a skipped update with ``debugging(on_nonfinite="skip")``.

        Args:
            loss: the total loss.
            terms: its terms by name, so an error can say which one was not finite.

        Returns:
            Each param group's gradient norm before clipping (see :meth:`clip_gradients`).

        Raises:
            TrainingError: something was not finite and ``on_nonfinite`` is ``"raise"``.
        """
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
        norms = self.clip_gradients()
        if self.update_guard.check_gradients(loss, norms, terms):
            self.update_guard.step()
        return norms

    def clip_gradients(self) -> list[torch.Tensor]:
        """Clip gradients to ``grad_clip`` as ``grad_clip_by`` says; returns each param group's global norm before.

        ``"global_norm"`` (the default) scales a param group's gradients together,
        ``"norm"`` each parameter's tensor on its own, ``"value"`` clamps every
        element to [-grad_clip, grad_clip], as RLlib's options do. One optimizer
        may hold several networks as param groups (SAC's critics, actor and
        temperature); each is clipped on its own, as if it had its own optimizer.
        The norms are measured even without ``grad_clip``: the update guard needs
        them to be finite.
        """
        norms = []
        clip, clip_by = self.config.grad_clip, self.config.grad_clip_by
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
        return schedule(self.global_timestep) if schedule is not None else float(getattr(self.config, name))

    def update_lr(self) -> float:
        """Apply the learning-rate schedule for the current timestep; returns the rate in use."""
        lr = self.scheduled("lr")
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr


def standardize(x: torch.Tensor) -> torch.Tensor:
    """``x`` shifted and scaled to mean 0 and standard deviation 1 over the batch (advantage normalisation)."""
    return (x - x.mean()) / (x.std() + 1e-8)


def to_floats(tensors: dict[str, torch.Tensor]) -> dict[str, float]:
    """Scalar tensors to floats with one device sync, for learner stats."""
    return dict(zip(tensors, torch.stack([t.detach() for t in tensors.values()]).tolist(), strict=True))

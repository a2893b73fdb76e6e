"""Guarding updates against NaN and inf: a non-finite loss, gradient or result never reaches the weights.

A learning rate of 1e308, a reward of inf, or a term that divides by zero
turns the weights to NaN in one step, and from then on training goes on
producing numbers that mean nothing. :class:`UpdateGuard` wraps every
optimizer step :meth:`~corral.core.learning.policy.Policy.apply_gradients` makes:

- before the step, the loss and every param group's gradient norm must be finite;
- the weights are copied before the step, and must still be finite after it
  (a finite gradient times a huge learning rate can overflow); if not, the
  copy is put back. This is checked lazily, for free, by the next update's
  loss (non-finite weights make it non-finite), and once per training step
  by :meth:`UpdateGuard.verify_weights`.

A failed check raises :class:`~corral.errors.TrainingError` naming the
loss term or the param group (``debugging(on_nonfinite="raise")``, the
default), or skips the update and counts it (``on_nonfinite="skip"``). The
algorithm adds the policy id and the iteration to the error. On the normal
path the guard costs one host sync and one copy of the weights per update, and
one pass over the weights per training step.
"""

from __future__ import annotations

import logging

import torch

from corral.core.learning.policies.optimizer_set import Optimizer
from corral.errors import TrainingError

logger = logging.getLogger("corral")


class UpdateGuard:
    """Checks one optimizer's updates for NaN and inf.

    Args:
        optimizer: the optimizer whose steps are guarded; its param groups may
            carry a ``"name"`` (SAC's ``"critics"``, ``"actor"``, ``"alpha"``) used in messages.
        mode: ``"raise"`` (a :class:`TrainingError`) or ``"skip"`` (the update is dropped and counted).
    """

    def __init__(self, optimizer: Optimizer, mode: str) -> None:
        self.optimizer = optimizer
        self.mode = mode
        self.skipped = 0
        """updates dropped so far (``mode="skip"``)"""
        self._params = [p for group in optimizer.param_groups for p in group["params"]]
        self._saved: list[torch.Tensor] | None = None
        self._stepped = False

    def check_gradients(self, loss: torch.Tensor, norms: list[torch.Tensor], terms: dict[str, torch.Tensor] | None) -> bool:
        """Whether the loss and the gradient norms are finite; if not, handle it (raise or count a skip).

        A non-finite loss may come from weights the previous step made
        non-finite; those are then put back to what they were before it.

        Args:
            loss: the total loss, already backpropagated.
            norms: each param group's gradient norm.
            terms: the loss's terms by name, to say which one is not finite.

        Raises:
            TrainingError: something is not finite and the mode is ``"raise"``.
        """
        if bool(torch.isfinite(torch.stack([loss.detach().reshape(()), *(n.reshape(()) for n in norms)])).all()):
            return True
        if not self._weights_finite():
            self._put_back()
            self._fail("the previous update made the weights non-finite (is the learning rate too large?)", "weights")
            return False
        if not bool(torch.isfinite(loss.detach())):
            bad = [name for name, value in (terms or {}).items() if not bool(torch.isfinite(value.detach()).all())]
            what = f"the loss term {bad[0]!r} is {_kind(terms[bad[0]])}" if bad and terms else f"the loss is {_kind(loss)}"
            term = bad[0] if bad else "total_loss"
        else:
            index = next(i for i, n in enumerate(norms) if not bool(torch.isfinite(n)))
            term = f"gradient of {self._group_name(index)}"
            what = f"the {term} is {_kind(norms[index])}"
        self._fail(what, term)
        return False

    def step(self) -> None:
        """Step the optimizer, keeping a copy of the weights from before it.

        Whether the step left the weights finite is checked lazily: by the next
        update's loss (computed from them anyway), and by :meth:`verify_weights`
        once the algorithm's training step is done.

        Raises:
            TrainingError: the step overflowed and the mode is ``"raise"``.
        """
        with torch.no_grad():
            if self._saved is None:
                self._saved = [p.detach().clone() for p in self._params]
            else:
                torch._foreach_copy_(self._saved, self._params)
        self._stepped = True
        try:
            self.optimizer.step()
        except RuntimeError as exc:
            if "overflow" not in str(exc):
                raise
            self._put_back()  # the step may have updated some parameters before it failed
            self._fail(f"the optimizer step overflowed ({exc}; is the learning rate too large?)", "weights")

    def verify_weights(self) -> None:
        """After a round of updates: if the last step made the weights non-finite, put them back and handle it.

        Raises:
            TrainingError: the weights were not finite and the mode is ``"raise"``.
        """
        if not self._stepped:
            return
        self._stepped = False
        if not self._weights_finite():
            self._put_back()
            self._fail("the update made the weights non-finite (is the learning rate too large?)", "weights")

    def _weights_finite(self) -> bool:
        with torch.no_grad():
            return bool(torch.isfinite(torch.stack(torch._foreach_norm(self._params))).all())

    def _put_back(self) -> None:
        if self._saved is not None:
            with torch.no_grad():
                torch._foreach_copy_(self._params, self._saved)

    def _fail(self, what: str, term: str) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        if self.mode == "raise":
            raise TrainingError(f"{what}; the update was not applied", term=term)
        self.skipped += 1
        if self.skipped in (1, 10, 100) or self.skipped % 1000 == 0:
            logger.warning("%s; skipped this update (%d so far, debugging(on_nonfinite='skip'))", what, self.skipped)

    def _group_name(self, index: int) -> str:
        groups = self.optimizer.param_groups
        name = groups[index].get("name")
        if name:
            return f"param group {name!r}"
        return "the model" if len(groups) == 1 else f"param group {index}"


def saturate(value: float, dtype: torch.dtype = torch.float32) -> float:
    """``value`` limited to the range of ``dtype``: a config number a tensor can be clamped with.

    ``torch.clamp(x, max=1e308)`` on a float32 tensor raises an overflow
    error, although every float32 value is below 1e308; the largest float32
    is the same bound for every value the tensor can hold.

    Args:
        value: a bound from the config (may be infinite or beyond the dtype's range).
        dtype: the floating-point dtype of the tensor to be clamped.

    Returns:
        ``value`` clipped to ``[finfo(dtype).min, finfo(dtype).max]``; NaN comes back as NaN.
    """
    info = torch.finfo(dtype)
    return min(max(value, float(info.min)), float(info.max))


def _kind(value: torch.Tensor) -> str:
    return "NaN" if bool(torch.isnan(value.detach()).any()) else "inf"

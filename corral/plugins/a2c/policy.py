"""A2C's update: one gradient step on policy gradient, value and entropy terms per batch, or per microbatches' gradients."""

from __future__ import annotations

from typing import Any

from corral.core import ActorCriticPolicy, SampleBatch
from corral.core.learning.learners.learner_group import mean_stats
from corral.plugins.a2c.config import A2CConfig


class A2CPolicy(ActorCriticPolicy):
    """Actor-critic policy with one synchronous update per train batch."""

    config: A2CConfig
    thread_safe_learning = True
    data_parallel_learning = True
    recurrent_models = True

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, Any]:
        """One gradient step on the whole batch; with ``microbatch_size``, on its microbatches' gradients.

        Each microbatch's gradient is computed and clipped on its own
        (:meth:`compute_gradients`, as RLlib's A2C does); their mean, each
        weighted by its steps, is applied once. A recurrent policy's batch is
        sequences: a microbatch holds ``microbatch_size // max_seq_len`` of them
        (at least one).
        """
        size = self.config.microbatch_size
        if size is not None and self.is_recurrent:
            size = max(1, size // self.config.model.max_seq_len)
        if size is None or batch.count <= size:
            return super().learn_on_batch(batch)
        total = _steps(batch)
        summed: list[Any] | None = None
        reports = []
        for part in batch.minibatches(size):
            gradients, stats = self.compute_gradients(part)  # its count is at most size: one step of the base update
            reports.append(stats)
            if not gradients:  # the NaN guard skipped it (debugging(on_nonfinite="skip"))
                continue
            weight = _steps(part) / total
            weighted = [None if g is None else g * weight for g in gradients]
            summed = weighted if summed is None else [_add(a, b) for a, b in zip(summed, weighted, strict=True)]
        if summed is not None:
            self.apply_gradients(summed)
        return {**mean_stats(reports), "num_microbatches": len(reports)}


def _steps(batch: SampleBatch) -> int:
    """The steps a batch holds: its rows, or the real steps of its sequences."""
    seq_lens = batch.get(SampleBatch.SEQ_LENS)
    return batch.count if seq_lens is None else int(seq_lens.sum())


def _add(a: Any, b: Any) -> Any:
    """The sum of two parameters' gradients, either of which may be None (no gradient)."""
    return b if a is None else a if b is None else a + b

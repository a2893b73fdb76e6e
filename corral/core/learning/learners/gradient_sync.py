"""How data-parallel Learners average their gradients, and which rows of a batch are each one's share.

Each Learner of a :class:`~corral.core.learning.learners.learner_group.LearnerGroup`
holds an identical copy of a policy and the whole train batch; where the
policy computes a loss (on a minibatch, or the batch), it takes only its
share of the rows (:meth:`GradientSync.share`). Its
:meth:`~corral.core.learning.policies.updates.Updates.apply_gradients` hands
the gradients to the :class:`GradientSync` the Learner gave it, which
all-reduces them through ``torch.distributed``: each Learner's gradient is
weighted by the steps its loss averaged over, so the average is the gradient of
the mean loss over all of them, what one process learning on the whole
minibatch computes. Clipping and the optimizer step come after, on identical
gradients, so the copies stay identical. Whatever else the update computes
from the whole batch (shuffling with the policy's generator, advantage
normalisation, statistics) every Learner computes alike.

Every Learner must make the collective call of every gradient step, in the
same order: as each holds the whole batch, each takes as many steps. What a
loss draws at random it draws for the whole batch and keeps its share of
(:meth:`GradientSync.share_of_draw`), so every Learner's generator moves as one
process's would, and a statistic a loss needs of the whole batch (MARWIL's mean
squared advantage) is averaged over the group (:meth:`GradientSync.mean`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch
import torch.distributed as dist


class GradientSync:
    """One Learner's part in a ``torch.distributed`` group (the default one).

    A group whose members each learn on their own batch (DD-PPO's env
    runners) passes ``shares_batch=False``: :meth:`share` then keeps every row,
    and the group's gradient is the mean over all members' rows alike.

    Args:
        rank: this Learner's place in the group, from 0.
        world_size: how many Learners the group has.
        device: where this Learner's tensors live (gloo reduces CPU tensors, NCCL CUDA ones).
        shares_batch: whether every member holds the same batch and learns on its share of it (Learner actors), or
            each learns on a batch of its own.
    """

    def __init__(self, rank: int, world_size: int, device: torch.device, shares_batch: bool = True) -> None:
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.shares_batch = shares_batch
        self._span = (0, 0, 0)  # the last share's first row, the row after it, and the rows it was cut from

    def share(self, columns: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """This Learner's consecutive rows of a batch's columns (which may be none, when there are fewer rows than Learners).

        Args:
            columns: every column with the same number of rows.

        Returns:
            The same columns, each cut to this Learner's rows (views).
        """
        rows = len(next(iter(columns.values())))
        if not self.shares_batch:  # a batch of its own: all of it
            self._span = (0, rows, rows)
            return dict(columns)
        start, stop = rows * self.rank // self.world_size, rows * (self.rank + 1) // self.world_size
        self._span = (start, stop, rows)
        return {key: value[start:stop] for key, value in columns.items()}

    def group_rows(self, rows: int) -> int:
        """The rows a loop over a batch's minibatches must cover for every member to make as many gradient steps.

        Members sharing a batch hold the same rows; members with batches of their
        own may hold different numbers of rows, and take the largest (one
        all-reduce): a member past its last row adds an empty minibatch, a zero
        gradient of weight 0.

        Args:
            rows: the rows of this member's batch.

        Returns:
            The rows every member loops over.
        """
        if self.shares_batch:
            return rows
        most = torch.tensor([float(rows)], device=self.device)
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
        return int(most.item())

    def share_of_draw(self, draw: Callable[[int], torch.Tensor], repeats: int = 1) -> torch.Tensor:
        """This Learner's rows of a random draw made for the whole of the batch last shared.

        Args:
            draw: makes the draw for a number of rows (from the policy's generator, which every Learner holds alike).
            repeats: rows of the draw per row of the batch, each row's consecutive (``repeat_interleave``).

        Returns:
            The draw's rows that belong to this Learner's share.
        """
        start, stop, rows = self._span
        return draw(rows * repeats)[start * repeats : stop * repeats]

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """The mean of ``values`` (this Learner's rows) over the rows of every Learner: one all-reduce.

        Args:
            values: this Learner's values, one per row (none for an empty share).

        Returns:
            A scalar tensor, the same on every Learner.
        """
        total = torch.stack([values.detach().sum(), torch.tensor(float(values.numel()), device=values.device)])
        total = total.to(self.device)
        dist.all_reduce(total)
        return (total[0] / total[1].clamp(min=1)).to(values.device)

    def average_gradients(self, parameters: Iterable[torch.Tensor], weight: float) -> None:
        """Replace each parameter's gradient by the Learners' average, each weighted by ``weight`` (its loss's steps).

        One all-reduce of every gradient and the weight together. A parameter
        without a gradient here counts as a zero gradient, so every Learner
        reduces tensors of the same size.

        Args:
            parameters: the parameters the optimizer steps, in the same order on every Learner.
            weight: the number of steps (rows) this Learner's loss was the mean over; 0 for an empty share (its
                gradients are then not read).
        """
        params = list(parameters)
        grads = [p.grad.reshape(-1) if p.grad is not None and weight else torch.zeros(p.numel(), device=p.device) for p in params]
        flat = torch.cat([*grads, torch.ones(1, device=self.device)]).to(self.device) * float(weight)
        dist.all_reduce(flat)
        total = flat[-1]
        averaged = flat[:-1] / total if float(total) > 0 else flat[:-1]
        start = 0
        for p in params:
            part = averaged[start : start + p.numel()].view_as(p).to(p.device)
            start += p.numel()
            if p.grad is None:
                p.grad = part.clone()
            else:
                p.grad.copy_(part)

"""One network, many weight vectors: row ``i`` of a batch goes through weights ``i`` (ES's side-by-side episodes).

ES and ARS play each perturbation of the weights in its own episode. Playing
several episodes side by side (one per sub-environment) pays torch's per-call
cost once a step for all of them, but only if one forward pass can use a
different weight vector per row. :class:`SlotModel` is a copy of the policy's
model whose ``nn.Linear`` layers hold one set of weights per row (a batched
matrix product), so the copy runs the model's own ``forward`` code unchanged.
Models with any other kind of parameter (convolutions, LSTMs, a free
log-std vector) have no such copy; ES then acts row by row.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn


class SlotLinear(nn.Module):
    """A linear layer with one weight matrix and bias per batch row: ``out[i] = x[i] @ weight[i].T + bias[i]``.

    Args:
        linear: the layer whose shapes it takes.
        slots: how many rows (weight sets) it holds.
    """

    def __init__(self, linear: nn.Linear, slots: int) -> None:
        super().__init__()
        self.weight: torch.Tensor
        self.bias: torch.Tensor | None
        self.register_buffer("weight", torch.zeros(slots, linear.out_features, linear.in_features))
        self.register_buffer("bias", None if linear.bias is None else torch.zeros(slots, linear.out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[slots, in]`` inputs to ``[slots, out]`` outputs, each row through its own weights."""
        out = torch.bmm(x.unsqueeze(1), self.weight.transpose(1, 2)).squeeze(1)
        return out if self.bias is None else out + self.bias


class SlotModel:
    """A copy of a model that acts on a batch with one weight vector per row.

    Build it with :meth:`of`; :meth:`load` sets the rows' weights, in the
    layout of ``ESPolicy.get_flat_weights`` (the model's parameter order).

    Args:
        module: the copy, its linear layers replaced by :class:`SlotLinear`.
        layout: ``(layer name, weight or bias, number of values)`` in the parameter order.
        slots: the rows it acts on at once.
    """

    def __init__(self, module: nn.Module, layout: list[tuple[str, str, int]], slots: int) -> None:
        self.module = module
        self._layout = layout
        self._size = sum(size for _, _, size in layout)
        self.slots = slots

    @classmethod
    def of(cls, model: nn.Module, slots: int) -> SlotModel | None:
        """The slot copy of ``model``, or None where a parameter is not a linear layer's weight or bias.

        Args:
            model: the policy's model (left as it is).
            slots: rows per batch.

        Returns:
            The copy, or None.
        """
        modules = dict(model.named_modules())
        layout = []
        for name, param in model.named_parameters():
            owner, _, kind = name.rpartition(".")
            if not isinstance(modules.get(owner), nn.Linear):
                return None
            layout.append((owner, kind, param.numel()))
        module = copy.deepcopy(model)
        for owner in dict.fromkeys(owner for owner, _, _ in layout):
            parent, _, child = owner.rpartition(".")
            linear = module.get_submodule(owner)
            assert isinstance(linear, nn.Linear)
            setattr(module.get_submodule(parent), child, SlotLinear(linear, slots))
        return cls(module, layout, slots)

    def load(self, weights: np.ndarray) -> None:
        """Set each row's weights.

        Args:
            weights: ``[slots, number of weights]``, a flat weight vector per row.

        Raises:
            ValueError: the shape is not that.
        """
        if weights.shape != (self.slots, self._size):
            raise ValueError(f"weights of shape {weights.shape} for {self.slots} slots of {self._size} weights")
        flat = torch.as_tensor(weights)
        start = 0
        with torch.no_grad():
            for owner, kind, size in self._layout:
                target = getattr(self.module.get_submodule(owner), kind)
                target.copy_(flat[:, start : start + size].view_as(target))
                start += size

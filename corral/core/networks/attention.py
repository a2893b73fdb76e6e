"""RLlib's ``use_attention``: a gated transformer-XL (GTrXL, Parisotto et al., 2019) as a policy's memory.

Each step's features go through a linear layer to ``attention_dim``, then
through ``attention_num_transformer_units`` units. A unit attends from each
step to the steps before it: its own memory of past steps (the state) and
the earlier steps of the same sequence, with relative positional encodings
(Transformer-XL's, Dai et al., 2019); then a position-wise MLP. Layer norms
come before the attention and the MLP, and GRU-type gates replace the residual
sums, biased (``attention_init_gru_gate_bias``) to start close to passing
their input through: what makes the transformer trainable by RL.

The state is one ``[attention_memory_inference, attention_dim]`` tensor per
unit: the unit's inputs at the latest steps, zeros at an episode's start.
When acting, a step attends to all of it. In training, each step of a
sequence attends to the ``attention_memory_training`` steps before it (from
the state and the sequence) and itself: with both memories equal, as by
default, training computes exactly what acting computed, so PPO's and
V-trace's likelihood ratios start at one. (RLlib lets later steps of a
training sequence see further back than acting did.)
"""

from __future__ import annotations

import math

import torch
from torch import nn

from corral.core.contracts.options.model_config import ModelConfig
from corral.core.networks.default_models import init_linear
from corral.core.networks.recurrent import MemoryModel


class GRUGate(nn.Module):
    """A gate in place of a residual sum: ``(1 - z) * x + z * h``, ``z`` and ``h`` computed from ``x`` and ``y`` as in a GRU.

    Args:
        dim: the width of ``x`` and ``y``.
        bias: the update gate's initial bias; at 2 a new gate passes about 88% of ``x`` through.
    """

    def __init__(self, dim: int, bias: float) -> None:
        super().__init__()
        self.from_update = nn.Linear(dim, 3 * dim, bias=False)
        self.from_stream = nn.Linear(dim, 2 * dim, bias=False)
        self.from_reset_stream = nn.Linear(dim, dim, bias=False)
        self.gate_bias = nn.Parameter(torch.full((dim,), float(bias)))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The gated combination of the stream and a sublayer's output.

        Args:
            x: the stream (the sublayer's input), ``[..., dim]``.
            y: the sublayer's output, the same shape.

        Returns:
            ``(1 - z) * x + z * h``.
        """
        reset_y, update_y, candidate_y = self.from_update(y).chunk(3, dim=-1)
        reset_x, update_x = self.from_stream(x).chunk(2, dim=-1)
        reset = torch.sigmoid(reset_y + reset_x)
        update = torch.sigmoid(update_y + update_x - self.gate_bias)
        candidate = torch.tanh(candidate_y + self.from_reset_stream(reset * x))
        return torch.lerp(x, candidate, update)


def sinusoid_table(length: int, dim: int, like: torch.Tensor) -> torch.Tensor:
    """Transformer-XL's encodings of the distances ``0 .. length - 1``: ``[length, dim]`` sines and cosines.

    Args:
        length: how many distances.
        dim: the encoding's width.
        like: a tensor whose device and dtype the table takes.

    Returns:
        The table, a row per distance.
    """
    distance = torch.arange(length, device=like.device, dtype=like.dtype)
    half = (dim + 1) // 2
    frequencies = torch.exp(torch.arange(half, device=like.device, dtype=like.dtype) * (-math.log(10_000.0) * 2 / dim))
    angles = distance[:, None] * frequencies[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)[:, :dim]


class RelativeMultiHeadAttention(nn.Module):
    """Multi-head attention from each step to its past (a memory and the earlier steps), by relative position.

    A score is content (the query and a learned bias against the key) plus
    position (the query and another learned bias against the encoding of the
    key's distance back), Transformer-XL's form. Each step attends to itself
    and the ``M`` steps before it (``M`` the memory's length), whether it is
    given alone or in a sequence: training on a sequence computes what acting
    step by step computed.

    Args:
        dim: the width of the inputs and outputs.
        heads: how many heads.
        head_dim: the width of each head's queries, keys and values.
    """

    def __init__(self, dim: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.query = nn.Linear(dim, heads * head_dim, bias=False)
        self.key_value = nn.Linear(dim, 2 * heads * head_dim, bias=False)
        self.position = nn.Linear(dim, heads * head_dim, bias=False)
        self.content_bias = nn.Parameter(torch.zeros(heads, head_dim))
        self.position_bias = nn.Parameter(torch.zeros(heads, head_dim))
        self.out = nn.Linear(heads * head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """``[S, T, dim]``: each step's attention over itself and the ``M`` steps before it.

        Args:
            x: ``[S, T, dim]`` the sequences' steps.
            memory: ``[S, M, dim]`` the steps before each sequence, oldest first.
        """
        sequences, steps, _ = x.shape
        past = memory.shape[1]
        keys_count = past + steps
        heads, head_dim = self.heads, self.head_dim
        query = self.query(x).view(sequences, steps, heads, head_dim)
        key, value = self.key_value(torch.cat([memory, x], dim=1)).view(sequences, keys_count, 2, heads, head_dim).unbind(2)
        encodings = self.position(sinusoid_table(keys_count, x.shape[-1], x)).view(keys_count, heads, head_dim)
        content = torch.einsum("sthd,skhd->shtk", query + self.content_bias, key)
        by_distance = torch.einsum("sthd,nhd->shtn", query + self.position_bias, encodings)
        # step t sits at past + t among the keys: key k is (past + t - k) steps back; a step sees the future of none
        # and, as when acting one step at a time, no more than `past` steps back
        distance = past + torch.arange(steps, device=x.device)[:, None] - torch.arange(keys_count, device=x.device)[None, :]
        position = by_distance.gather(-1, distance.clamp(0, keys_count - 1).expand(sequences, heads, steps, keys_count))
        scores = (content + position) / math.sqrt(head_dim)
        hidden = (distance < 0) | (distance > past)
        weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
        attended = torch.einsum("shtk,skhd->sthd", weights, value).reshape(sequences, steps, heads * head_dim)
        out: torch.Tensor = self.out(attended)
        return out


class TransformerUnit(nn.Module):
    """One GTrXL unit: layer norm, relative attention and a gate; layer norm, position-wise MLP and a gate.

    Args:
        dim: the width of the stream.
        heads: attention heads.
        head_dim: each head's width.
        mlp_dim: the position-wise MLP's hidden width.
        gate_bias: the gates' initial bias.
    """

    def __init__(self, dim: int, heads: int, head_dim: int, mlp_dim: int, gate_bias: float) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(dim)
        self.attention = RelativeMultiHeadAttention(dim, heads, head_dim)
        self.attention_gate = GRUGate(dim, gate_bias)
        self.mlp_norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.ReLU(), nn.Linear(mlp_dim, dim), nn.ReLU())
        self.mlp_gate = GRUGate(dim, gate_bias)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """The unit's outputs for a batch of sequences.

        Args:
            x: ``[S, T, dim]`` the unit's inputs.
            memory: ``[S, M, dim]`` its inputs at the steps before each sequence.

        Returns:
            ``[S, T, dim]``.
        """
        attended = torch.relu(self.attention(self.attention_norm(x), self.attention_norm(memory)))
        x = self.attention_gate(x, attended)
        out: torch.Tensor = self.mlp_gate(x, self.mlp(self.mlp_norm(x)))
        return out


class AttentionModel(MemoryModel):
    """RLlib's ``use_attention`` wrapper: a GTrXL over the encoder's features as the memory (see :class:`MemoryModel`).

    ``attention_dim`` wide, ``attention_num_transformer_units`` units; the
    previous action and reward are read with ``attention_use_n_prev_actions``
    and ``attention_use_n_prev_rewards``.
    """

    @staticmethod
    def memory_options(config: ModelConfig) -> tuple[int, bool, bool]:
        """``attention_dim`` outputs; ``attention_use_n_prev_actions`` and ``attention_use_n_prev_rewards`` (0 or 1)."""
        return config.attention_dim, config.attention_use_n_prev_actions > 0, config.attention_use_n_prev_rewards > 0

    def _build_memory(self, config: ModelConfig) -> None:
        dim = self.dim = config.attention_dim
        self.memory_inference = config.attention_memory_inference
        self.memory_training = config.attention_memory_training
        self.input_layer = init_linear(nn.Linear(self.input_width, dim), 1.0)
        self.units = nn.ModuleList(
            TransformerUnit(
                dim,
                config.attention_num_heads,
                config.attention_head_dim,
                config.attention_position_wise_mlp_dim,
                config.attention_init_gru_gate_bias,
            )
            for _ in range(config.attention_num_transformer_units)
        )

    def get_initial_state(self) -> list[torch.Tensor]:
        """A zero ``[attention_memory_inference, attention_dim]`` memory per unit."""
        weight = next(self.pi_head.parameters())
        return [weight.new_zeros(self.memory_inference, self.dim) for _ in self.units]

    def _memory(
        self, x: torch.Tensor, state: list[torch.Tensor], seq_lens: torch.Tensor | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        h = self.input_layer(x)
        state_out = []
        for unit, memory in zip(self.units, state, strict=True):
            state_out.append(self._remembered(memory, h, seq_lens))
            attended = memory if seq_lens is None else memory[:, memory.shape[1] - self.memory_training :]
            h = unit(h, attended)
        return h, state_out

    def _remembered(self, memory: torch.Tensor, inputs: torch.Tensor, seq_lens: torch.Tensor | None) -> torch.Tensor:
        """A unit's memory after the sequences: its latest ``attention_memory_inference`` inputs up to each one's last step."""
        window = memory.shape[1]
        joined = torch.cat([memory, inputs], dim=1)
        if seq_lens is None:
            return joined[:, -window:]
        # a sequence of n real steps ends at position window + n - 1; its memory is the window before that, inclusive
        start = seq_lens.long().to(joined.device)[:, None] + torch.arange(window, device=joined.device)[None, :]
        return joined.gather(1, start[..., None].expand(-1, -1, joined.shape[-1]))

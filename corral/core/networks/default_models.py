"""The model catalog: networks built from a ModelConfig for an observation space.

A model writes one ``_forward(obs) -> dict`` (keys ``action_dist_inputs`` and,
for actor-critic models, ``vf_preds``); ``forward_inference``,
``forward_exploration`` and ``forward_train`` default to it, and an algorithm
may override any of them. Vector observations get an MLP, images (H, W, C) a
CNN; ``custom_model`` plugs in any ``torch.nn.Module`` (see
:mod:`corral.core.networks.custom_model`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from numpy.typing import DTypeLike
from torch import nn

from corral.core.common.sample_batch import SampleBatch
from corral.core.common.spaces import ObservationPreprocessor, is_image_space
from corral.core.contracts.config import ModelConfig
from corral.errors import ConfigError

_SIGMOID_TANH_MIN_ELEMENTS = 4096
"""from this size on, :class:`Tanh` goes through sigmoid (measured crossover on CPU: about 3,000 elements)"""


_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)  # torch 2.3 and later have it


class Tanh(nn.Module):
    """tanh, computed on large CPU inputs as ``2 * sigmoid(2x) - 1``: the same function, about 3x faster.

    torch's CPU tanh kernel is not vectorised (about 2.4 ns per float32 element,
    the same with AVX-512 as without), while its sigmoid is (about 0.3 ns). On a
    512 x 64 minibatch that is 77 us against 20 us a layer, a tenth of a PPO
    update. The identity is exact; in float32 the two differ by at most 2e-7.
    Small inputs (acting on a few rows) and other devices keep ``torch.tanh``,
    whose fixed cost is lower, and so does a graph being compiled or exported
    (``torch.export``), which would otherwise keep the branch for the example's
    size alone.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``tanh(x)`` elementwise."""
        if x.device.type != "cpu" or _is_compiling() or x.numel() < _SIGMOID_TANH_MIN_ELEMENTS:
            return torch.tanh(x)
        y: torch.Tensor = _SigmoidTanh.apply(x)  # type: ignore[no-untyped-call]  # torch leaves Function.apply unannotated
        return y


class _SigmoidTanh(torch.autograd.Function):
    """``2 * sigmoid(2x) - 1`` in three kernels, differentiated as tanh (``grad * (1 - y^2)``) in one.

    Left to autograd, the same formula records four operations and runs four
    backward kernels; this is a quarter faster per layer (forward and backward).
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(x * 2).mul_(2).sub_(1)  # in place: the sigmoid's output is not kept for its own backward
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        grad_x: torch.Tensor = torch.ops.aten.tanh_backward(grad, y)
        return grad_x


ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": Tanh,
    "relu": nn.ReLU,
    "swish": nn.SiLU,
    "elu": nn.ELU,
    "linear": nn.Identity,
}


class Model(nn.Module):
    """Base of corral's networks: write ``_forward``; the three entry points default to it."""

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def forward_inference(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        """Outputs for acting without exploration (evaluation, serving); ``obs`` may also be RLlib's batch dict
        (``{"obs": ...}``), as an RLModule takes it (``algo.get_module().forward_inference(batch)``): then, as
        RLlib's torch modules do, without autograd (its outputs convert ``.numpy()`` directly)."""
        return self._acting_pass(obs)

    def forward_exploration(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        """Outputs for acting while collecting training samples (``obs`` as :meth:`forward_inference` takes it)."""
        return self._acting_pass(obs)

    def _acting_pass(self, obs: Any) -> dict[str, torch.Tensor]:
        if isinstance(obs, Mapping):  # RLlib's call
            with torch.no_grad():
                return self._forward(_observations(obs))
        return self._forward(obs)

    def forward_train(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        """Outputs for the loss (``obs`` as :meth:`forward_inference` takes it)."""
        return self._forward(_observations(obs))

    def forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        """The same outputs as :meth:`forward_train` (``nn.Module`` calls this)."""
        return self._forward(obs)

    def get_state(self, inference_only: bool = False) -> dict[str, np.ndarray]:
        """The weights as numpy arrays (copies) by state-dict key: RLlib's ``RLModule.get_state()``.

        Args:
            inference_only: RLlib's switch for the part that acts; a corral model acts and learns with all of it.
        """
        return {key: value.detach().cpu().numpy().copy() for key, value in self.state_dict().items()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Load weights as :meth:`get_state` gives them (numpy arrays or tensors): RLlib's ``RLModule.set_state()``."""
        self.load_state_dict({key: torch.as_tensor(np.array(value)) for key, value in state.items()})


def _observations(obs: Any) -> torch.Tensor:
    """The observations of a model's input: the tensor itself, or RLlib's batch dict's ``obs``."""
    observations: torch.Tensor = obs[SampleBatch.OBS] if isinstance(obs, Mapping) else obs
    return observations


def mlp(
    sizes: list[int], activation: str, out_size: int | None = None, out_gain: float = 1.0, layernorm: bool = False
) -> nn.Sequential:
    """A fully connected stack: ``sizes[0]`` inputs, hidden layers ``sizes[1:]``, optional linear output.

    Orthogonal initialisation (gain sqrt(2) for hidden layers, ``out_gain`` for
    the output), which speeds up policy-gradient learning noticeably.

    Args:
        sizes: the input width, then each hidden layer's width; ``[n]`` alone gives no
            hidden layer (an empty stack without ``out_size``: the identity).
        activation: a key of :data:`ACTIVATIONS` (``"tanh"``, ``"relu"``, ...), applied
            after every hidden layer but not after the output layer.
        out_size: the width of a final linear layer; None ends with the last hidden layer.
        out_gain: the orthogonal-initialisation gain of the output layer (corral's policy
            heads use 0.01, so their initial outputs are close to zero).
        layernorm: a LayerNorm after each hidden layer, before its activation (RLlib's new stack).

    Returns:
        The layers as one ``nn.Sequential`` taking ``[B, sizes[0]]``.
    """
    layers: list[nn.Module] = []
    for n_in, n_out in itertools.pairwise(sizes):
        layers.append(init_linear(nn.Linear(n_in, n_out), np.sqrt(2)))
        if layernorm:
            layers.append(nn.LayerNorm(n_out))
        layers.append(ACTIVATIONS[activation]())
    if out_size is not None:
        layers.append(init_linear(nn.Linear(sizes[-1], out_size), out_gain))
    return nn.Sequential(*layers)


def init_linear(layer: nn.Linear, gain: float) -> nn.Linear:
    """``layer`` with orthogonal weights of ``gain`` and zero biases (corral's initialisation of every linear layer).

    Args:
        layer: the layer, initialised in place.
        gain: the orthogonal initialisation's gain (sqrt(2) for hidden layers, 0.01 for policy heads).

    Returns:
        ``layer``.
    """
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class ConvEncoder(nn.Module):
    """A CNN for (H, W, C) images; uint8 pixels are scaled to [0, 1]."""

    def __init__(self, shape: tuple[int, ...], filters: list[list[int]] | None, activation: str) -> None:
        super().__init__()
        height, width, channels = shape
        if filters is None:
            # The DQN-paper network for large frames, a lighter one for small grids.
            filters = [[32, 8, 4], [64, 4, 2], [64, 3, 1]] if min(height, width) >= 64 else [[16, 3, 1], [32, 3, 1]]
        layers: list[nn.Module] = []
        in_ch = channels
        for out_ch, kernel, stride in filters:
            layers += [nn.Conv2d(in_ch, out_ch, kernel, stride), ACTIVATIONS[activation]()]
            in_ch = out_ch
        layers.append(nn.Flatten())
        self.net = nn.Sequential(*layers)
        with torch.no_grad():
            probe = torch.zeros(1, channels, height, width)
            try:
                self.out_size = int(self.net(probe).shape[1])
            except RuntimeError as exc:
                raise ConfigError(f"conv_filters {filters} do not fit images of shape {shape}: {exc}") from None

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Features of a batch of channels-last images (uint8 images are scaled to [0, 1])."""
        x = obs.permute(0, 3, 1, 2).float()
        if obs.dtype == torch.uint8:
            x = x / 255.0
        features: torch.Tensor = self.net(x)
        return features


def torch_dtype(dtype: DTypeLike) -> torch.dtype:
    """The torch dtype of a numpy dtype (a preprocessor's), for tensors a model reads.

    Args:
        dtype: a numpy dtype or anything numpy reads as one.

    Returns:
        The matching torch dtype.
    """
    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


_SMALLEST_DEFAULT_CNN_GRID = 5
"""the smallest height and width the default small-grid filters (two 3x3 convolutions) fit"""


class _FlatFloat(nn.Module):
    """``[B, ...]`` to ``[B, n]`` float32: a small board's cells (often int8) as an MLP's input."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.reshape(obs.shape[0], -1).float()


def build_encoder(obs_space: gym.Space[Any], config: ModelConfig) -> tuple[nn.Module, int]:
    """The network body for an observation space: a CNN + MLP for images, an MLP otherwise.

    Args:
        obs_space: one observation's space; an ``(H, W, C)`` Box gets the CNN, any other
            supported space is flattened (see :class:`ObservationPreprocessor`).
        config: the model config: ``fcnet_hiddens`` and ``fcnet_activation`` for the MLP,
            ``conv_filters`` and ``conv_activation`` for the CNN.

    Returns:
        ``(module, number_of_output_features)``. An image smaller than 5x5 without
        ``conv_filters`` gets the MLP over its flattened cells: the default small-grid
        filters (two 3x3 layers) need at least 5x5.
    """
    hiddens, activation = config.fcnet_hiddens, config.fcnet_activation
    post = config.post_fcnet_hiddens
    if is_image_space(obs_space) and config.conv_filters is None and min(obs_space.shape[:2]) < _SMALLEST_DEFAULT_CNN_GRID:
        # a board smaller than the default filters fit (tic-tac-toe's 3x3): an MLP over its cells
        n_in = int(np.prod(obs_space.shape))
        body: nn.Module = nn.Sequential(_FlatFloat(), fully_connected(n_in, config))
    elif is_image_space(obs_space):
        conv = ConvEncoder(tuple(obs_space.shape), config.conv_filters, config.conv_activation)
        n_in = conv.out_size
        hidden = hiddens[-1] if hiddens else n_in
        fc = mlp([n_in, *hiddens], activation, layernorm=config.fcnet_use_layernorm)
        body = nn.Sequential(conv, fc, mlp([hidden, *post], config.post_fcnet_activation))
    else:
        n_in = ObservationPreprocessor(obs_space).shape[0]
        body = fully_connected(n_in, config)
    return body, ([n_in, *hiddens, *post])[-1]


def fully_connected(inputs: int, config: ModelConfig) -> nn.Sequential:
    """RLlib's fully connected stack: ``fcnet_hiddens`` then ``post_fcnet_hiddens``.

    As in RLlib, the post layers take ``fcnet_activation``, or
    ``post_fcnet_activation`` where there are no ``fcnet_hiddens``.

    Args:
        inputs: the input width.
        config: the model config.

    Returns:
        The layers (the identity without any).
    """
    activation = config.fcnet_activation if config.fcnet_hiddens else config.post_fcnet_activation
    return mlp([inputs, *config.fcnet_hiddens, *config.post_fcnet_hiddens], activation, layernorm=config.fcnet_use_layernorm)


class ActorCriticModel(Model):
    """Policy head and value head over an MLP (or CNN + MLP) encoder.

    With ``vf_share_layers`` both heads read one encoder; otherwise the value
    function has its own copy. Each head has its own ``head_fcnet_hiddens``
    layers. With ``free_log_std`` (Box actions) the log standard deviation is a
    learned vector, not a network output; ``log_std_clip_param`` clamps it. With
    ``value_function=False`` there is no value head at all (behaviour cloning
    needs none, and it would double the work of a separate encoder).
    """

    def __init__(
        self,
        obs_space: gym.Space[Any],
        num_outputs: int,
        config: ModelConfig,
        gaussian: bool = False,
        value_function: bool = True,
    ) -> None:
        super().__init__()
        self.free_log_std = gaussian and config.free_log_std
        head_outputs = num_outputs // 2 if self.free_log_std else num_outputs
        self.encoder, features = build_encoder(obs_space, config)
        self.pi_head = head(features, head_outputs, 0.01, *head_layers(config))
        self.vf_encoder = None if config.vf_share_layers or not value_function else build_encoder(obs_space, config)[0]
        self.vf_head = head(features, 1, 1.0, *head_layers(config)) if value_function else None
        self.log_std = nn.Parameter(torch.zeros(head_outputs)) if self.free_log_std else None
        self.log_std_clip = config.log_std_clip_param if gaussian else None

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.encoder(obs)
        dist_inputs = gaussian_inputs(self.pi_head(features), self.log_std, self.log_std_clip)
        if self.vf_head is None:
            return {SampleBatch.ACTION_DIST_INPUTS: dist_inputs}
        vf_features = features if self.vf_encoder is None else self.vf_encoder(obs)
        return {SampleBatch.ACTION_DIST_INPUTS: dist_inputs, SampleBatch.VF_PREDS: self.vf_head(vf_features).squeeze(-1)}


class QModel(Model):
    """Q-values of every discrete action, optionally with a dueling head (Wang et al., 2016).

    The Q-values are the ``action_dist_inputs``: a Categorical over them makes
    the greedy action its deterministic sample, so every exploration
    (EpsilonGreedy, SoftQ, ...) works on them unchanged.
    """

    def __init__(
        self,
        obs_space: gym.Space[Any],
        num_actions: int,
        config: ModelConfig,
        dueling: bool = False,
        hiddens: Sequence[int] = (),
        body: tuple[nn.Module, int] | None = None,
    ) -> None:
        super().__init__()
        # the network under the Q head: the catalog's for the observations, or a custom model's (module, width)
        self.encoder, features = body or build_encoder(obs_space, config)
        # RLlib's: a custom model under no Q head layers gives the Q-values itself (its parametric-actions example
        # masks them in the model); the catalog's encoder gives features, which a linear layer turns into Q-values
        custom_q_values = body is not None and not hiddens
        self.advantage_head: nn.Module = nn.Identity() if custom_q_values else head(features, num_actions, 1.0, hiddens)
        self.value_head = head(features, 1, 1.0, hiddens) if dueling else None

    def _forward(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.encoder(obs)
        q = self.advantage_head(features)
        if self.value_head is not None:
            q = self.value_head(features) + q - q.mean(dim=-1, keepdim=True)
        return {SampleBatch.ACTION_DIST_INPUTS: q}


def head(
    features: int, outputs: int, gain: float, hiddens: Sequence[int] = (), activation: str = "relu", layernorm: bool = False
) -> nn.Module:
    """One head: its own hidden layers over the network's features, then a linear output.

    Args:
        features: the width of the network's features.
        outputs: the head's outputs.
        gain: the orthogonal-initialisation gain of the output layer.
        hiddens: the head's hidden layers (``head_fcnet_hiddens``; a Q head's ``hiddens``).
        activation: their activation.
        layernorm: a LayerNorm after each hidden layer, before its activation.

    Returns:
        The linear output layer alone without hidden layers, else the stack.
    """
    if not hiddens:
        return init_linear(nn.Linear(features, outputs), gain)
    return mlp([features, *hiddens], activation, out_size=outputs, out_gain=gain, layernorm=layernorm)


def head_layers(config: ModelConfig) -> tuple[list[int], str, bool]:
    """A model config's head layers as :func:`head` takes them: ``head_fcnet_hiddens``, their activation and LayerNorm."""
    return config.head_fcnet_hiddens, config.head_fcnet_activation, config.head_fcnet_use_layernorm


def gaussian_inputs(dist_inputs: torch.Tensor, log_std: torch.Tensor | None, clip: float | None) -> torch.Tensor:
    """A policy head's outputs as the action distribution's inputs: ``[mean, log_std]``, the log_std clamped.

    Args:
        dist_inputs: the head's outputs: the means alone with a learned ``log_std``, else both halves.
        log_std: the learned, state-independent log standard deviation (``free_log_std``), or None.
        clip: clamp the log standard deviation to ``[-clip, clip]`` (``log_std_clip_param``); None: no clamp.

    Returns:
        ``dist_inputs`` itself where there is neither a learned log_std nor a clamp.
    """
    if log_std is not None:
        dist_inputs = torch.cat([dist_inputs, log_std.expand_as(dist_inputs)], dim=-1)
    if clip is None:
        return dist_inputs
    mean, log_stds = torch.chunk(dist_inputs, 2, dim=-1)
    return torch.cat([mean, log_stds.clamp(-clip, clip)], dim=-1)


def build_model(
    obs_space: gym.Space[Any], action_space: gym.Space[Any], num_outputs: int, config: ModelConfig, value_function: bool = True
) -> nn.Module:
    """The catalog: a custom model if configured, a memory with ``use_lstm``/``use_attention``, else an ActorCriticModel.

    Args:
        obs_space: one observation's space.
        action_space: the space the policy acts in; a Box makes the catalog's model
            Gaussian (with ``free_log_std``, a learned log standard deviation).
        num_outputs: the width of ``action_dist_inputs`` the action distribution needs.
        config: the model config; a custom model gets it as a dict (see
            :func:`~corral.core.networks.custom_model.construct`).
        value_function: whether the policy needs value estimates (``vf_preds``); behaviour cloning does not.

    Returns:
        The model, on torch's default device (the policy moves it to its own).

    Raises:
        ConfigError: the custom model's path does not import or is not a ``torch.nn.Module``,
            its constructor raised, a memory is asked of a model that gives every output itself,
            or the catalog's ``conv_filters`` do not fit the images.
    """
    cls = config.model_class()
    if config.use_lstm or config.use_attention:
        from corral.core.networks.recurrent import memory_model  # it builds on this module

        return memory_model(cls, obs_space, action_space, num_outputs, config, value_function)
    if cls is not None:
        from corral.core.networks.custom_model import build_custom_model  # it builds on this module

        return build_custom_model(cls, obs_space, action_space, num_outputs, config, value_function)
    box = isinstance(action_space, gym.spaces.Box)
    return ActorCriticModel(obs_space, num_outputs, config, gaussian=box, value_function=value_function)

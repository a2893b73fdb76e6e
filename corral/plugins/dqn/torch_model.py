"""RLlib's ``DQNTorchModel``: the ModelV2 base class of RLlib's custom DQN models, for scripts that derive from it.

RLlib's DQN model builds its Q head inside the model, from keywords its
policy passes. corral's DQN policy builds the head after any custom model's
outputs, from the config (``hiddens``, ``dueling``), as RLlib's does from
the same settings: a subclass writes ``forward`` (its outputs are what the
head reads; with ``hiddens=[]`` and no dueling, they are the Q-values), and
``value_function`` where another algorithm uses the model (RLlib's
parametric-actions example trains it with PPO).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from corral.core.networks.model_v2 import TorchModelV2
from corral.errors import ConfigError


class DQNTorchModel(TorchModelV2):
    """A TorchModelV2 that takes RLlib's Q-head keywords, for custom DQN models written against RLlib.

    Args:
        obs_space: the preprocessed observations' space.
        action_space: the space the policy acts in.
        num_outputs: the width of what ``forward`` returns.
        model_config: the ``model`` config as a dict.
        name: the model's name.
        q_hiddens: RLlib's Q-head layers; corral's DQN takes them from the config's ``hiddens``.
        dueling: RLlib's dueling switch; corral's DQN takes it from the config's ``dueling``.
        dueling_activation: the activation of RLlib's dueling layers.
        num_atoms: 1; a distributional Q head (more atoms) is not in corral.
        use_noisy: False; noisy layers are not in corral.
        v_min: the distributional head's lowest value (unused with one atom).
        v_max: the distributional head's highest value (unused with one atom).
        sigma0: the noisy layers' initial noise (unused without them).
        add_layer_norm: RLlib's layer norm for parameter-space noise (unused without it).

    Raises:
        ConfigError: ``num_atoms`` above 1 or ``use_noisy``, which corral's DQN does not have.
    """

    def __init__(
        self,
        obs_space: gym.Space[Any],
        action_space: gym.Space[Any],
        num_outputs: int,
        model_config: dict[str, Any],
        name: str,
        *,
        q_hiddens: Sequence[int] = (256,),
        dueling: bool = False,
        dueling_activation: str = "relu",
        num_atoms: int = 1,
        use_noisy: bool = False,
        v_min: float = -10.0,
        v_max: float = 10.0,
        sigma0: float = 0.5,
        add_layer_norm: bool = False,
    ) -> None:
        if num_atoms != 1 or use_noisy:
            raise ConfigError(
                f"{type(self).__name__}: a distributional (num_atoms={num_atoms}) or noisy (use_noisy={use_noisy}) Q head "
                "is not in corral's DQN; leave num_atoms=1 and use_noisy=False"
            )
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.q_hiddens, self.dueling, self.dueling_activation = list(q_hiddens), dueling, dueling_activation
        self.num_atoms, self.v_min, self.v_max, self.sigma0, self.add_layer_norm = num_atoms, v_min, v_max, sigma0, add_layer_norm

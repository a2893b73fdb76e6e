"""RLlib's env-to-module connector pieces (``ray.rllib.connectors``), as what corral's env runners do in their place.

RLlib's new stack turns the env's data into a module's batch with a pipeline
of pieces (``config.env_runners(env_to_module_connector=lambda env: [...])``).
corral's env runners have no pipeline: they do the default pieces' work
themselves (gather each step's observations and states per policy, batch them,
make tensors), and a setting does what some others do. So a pipeline of such
pieces is accepted, each saying what does its work (at INFO, when the env
runner is built); a piece corral does not do, or one of the script's own
(a ``ConnectorV2`` subclass), is refused then, naming what to use instead.
"""

from __future__ import annotations

from typing import Any

from corral.errors import ConfigError


class ConnectorV2:
    """RLlib's base of a connector piece; a subclass of the script's own is not run by corral (see the module docstring).

    Args:
        input_observation_space: RLlib's spaces the piece reads (kept, unused).
        input_action_space: as ``input_observation_space``.
        **kwargs: the piece's own options (kept as ``options``).
    """

    def __init__(self, input_observation_space: Any = None, input_action_space: Any = None, **kwargs: Any) -> None:
        self.input_observation_space = input_observation_space
        self.input_action_space = input_action_space
        self.options = kwargs

    def corral_does(self, config: Any) -> str:
        """What does this piece's work in corral, for ``config``; a piece corral does not run refuses.

        Args:
            config: the algorithm's config.

        Raises:
            ConfigError: corral does not do this piece's work (the message says what to use instead).
        """
        raise ConfigError(
            f"env_to_module_connector gives {type(self).__name__}, a connector piece corral does not run: its env runners "
            "have no pipeline. Change the env's observations with a gymnasium wrapper, and what a model reads in the "
            "model (a custom model or RLModule)"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Refused: corral does not call connector pieces.

        Raises:
            ConfigError: always.
        """
        raise ConfigError(f"corral does not run connector pieces ({type(self).__name__}); see corral.rllib.support.connectors")


class _DoneByTheRunner(ConnectorV2):
    """A default piece of RLlib's pipeline, whose work corral's env runners always do."""

    def corral_does(self, config: Any) -> str:
        """Said at INFO: the env runner does it."""
        return "corral's env runners gather, batch and convert each step's data per policy themselves"


class AddObservationsFromEpisodesToBatch(_DoneByTheRunner):
    """RLlib's piece putting each episode's last observation into the batch."""


class AddStatesFromEpisodesToBatch(_DoneByTheRunner):
    """RLlib's piece putting a stateful module's states into the batch."""


class AgentToModuleMapping(_DoneByTheRunner):
    """RLlib's piece sorting a multi-agent batch by module."""


class BatchIndividualItems(_DoneByTheRunner):
    """RLlib's piece stacking the items into a batch."""


class NumpyToTensor(_DoneByTheRunner):
    """RLlib's piece turning the batch into tensors."""


class WriteObservationsToEpisodes(_DoneByTheRunner):
    """RLlib's piece writing changed observations back into the episodes."""


class FlattenObservations(ConnectorV2):
    """RLlib's piece flattening Dict and Tuple observations (Discrete ones one-hot) for the module.

    corral's own models read observations flattened so already; a custom model
    or RLModule gets the env's observations, so the piece is refused with one.
    """

    def corral_does(self, config: Any) -> str:
        """Said at INFO for corral's own models.

        Raises:
            ConfigError: a custom model is configured (it reads the env's observations as they are).
        """
        if config.model.model_class() is not None:
            raise ConfigError(
                "env_to_module_connector's FlattenObservations: a custom model (or RLModule) reads the env's observations "
                "as they are in corral; flatten them in the model, or with gymnasium's FlattenObservation wrapper"
            )
        return "corral's own models read Dict, Tuple and Discrete observations flattened (one-hot) already"


class MeanStdFilter(ConnectorV2):
    """RLlib's piece filtering observations by their running mean and standard deviation: corral's ``observation_filter``."""

    def corral_does(self, config: Any) -> str:
        """Said at INFO when ``observation_filter="MeanStdFilter"`` is set.

        Raises:
            ConfigError: it is not set.
        """
        if config.observation_filter != "MeanStdFilter":
            raise ConfigError(
                "env_to_module_connector's MeanStdFilter is corral's env_runners(observation_filter='MeanStdFilter'); set that"
            )
        return "observation_filter='MeanStdFilter' filters the observations"


class EnvToModulePipeline(list):  # of connector pieces
    """RLlib's pipeline: its pieces, each checked as :func:`connector_pieces` finds them.

    Args:
        connectors: the pieces.
        **kwargs: RLlib's spaces (unused).
    """

    def __init__(self, connectors: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(connectors or [])

"""RLlib's env-to-module connector pieces: a pipeline of pieces whose work corral does is accepted, any other refused."""

from __future__ import annotations

import importlib

import pytest
from torch import nn

from corral import ConfigError
from corral.plugins.ppo import PPOConfig
from corral.rllib.connectors.connector_v2 import ConnectorV2
from corral.rllib.connectors.env_to_module import (
    AddObservationsFromEpisodesToBatch,
    EnvToModulePipeline,
    FlattenObservations,
    WriteObservationsToEpisodes,
)
from corral.rllib.connectors.env_to_module.mean_std_filter import MeanStdFilter
from corral.testing.example_envs import NestedSpaceRepeatAfterMeEnv
from tests.conftest import SMALL_PPO


def nested() -> PPOConfig:
    return PPOConfig().environment(NestedSpaceRepeatAfterMeEnv).training(**SMALL_PPO).env_runners(num_env_runners=0)


def test_a_pipeline_of_pieces_corral_does_builds_and_trains_saying_what_does_each(make_algo, caplog) -> None:
    seen = []

    def pipeline(env):
        seen.append(env)
        return [AddObservationsFromEpisodesToBatch(), FlattenObservations(multi_agent=False), WriteObservationsToEpisodes()]

    with caplog.at_level("INFO", logger="corral"):
        algo = make_algo(nested().env_runners(env_to_module_connector=pipeline).debugging(log_level="INFO"))
    assert seen and seen[0] is not None  # RLlib's builder gets the runner's env
    assert "env_to_module_connector's FlattenObservations: corral's own models read Dict, Tuple and Discrete" in caplog.text
    assert algo.train()["timesteps_total"] > 0
    filtered = nested().env_runners(env_to_module_connector=lambda env: EnvToModulePipeline([MeanStdFilter()]))
    make_algo(filtered.env_runners(observation_filter="MeanStdFilter"))  # the filter's setting does the piece's work


class MyPiece(ConnectorV2):
    """A piece of the script's own."""


class Flat(nn.Module):
    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        super().__init__()
        self.out = nn.LazyLinear(num_outputs)

    def forward(self, obs):
        return self.out(obs)


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        (
            lambda env: MyPiece(),
            r"MyPiece, a connector piece corral does not run.*gymnasium wrapper",
        ),
        (lambda env: [object()], r"gives object, which is no connector piece of RLlib's"),
        (
            "FlattenObservations",
            r"env_to_module_connector is fn\(env\) -> connector pieces, not str",
        ),
        (
            lambda env: MeanStdFilter(),
            r"MeanStdFilter is corral's .*observation_filter='MeanStdFilter'",
        ),
    ],
)
def test_a_piece_corral_does_not_do_is_refused_when_the_runner_is_built(make_algo, pipeline, message) -> None:
    with pytest.raises(ConfigError, match=message):
        make_algo(nested().env_runners(env_to_module_connector=pipeline))


def test_flattening_for_a_custom_model_is_refused_and_frame_stacking_names_the_gymnasium_wrapper(make_algo) -> None:
    config = (
        nested().training(model={"custom_model": Flat}).env_runners(env_to_module_connector=lambda env: FlattenObservations())
    )
    with pytest.raises(ConfigError, match=r"a custom model \(or RLModule\) reads the env's observations as they are"):
        make_algo(config)
    module = importlib.import_module("corral.rllib.connectors.env_to_module.frame_stacking")
    with pytest.raises(ImportError, match=r"FrameStackObservation"):
        module.FrameStackingEnvToModule  # noqa: B018  # the lookup is the check

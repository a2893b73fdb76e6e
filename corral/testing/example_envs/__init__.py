"""corral's versions of the example envs RLlib's example scripts import from ``ray.rllib.examples.env`` (Ray 2.9).

Each class has the name, constructor arguments (config keys and defaults),
spaces, rewards and episode ends of RLlib's, on gymnasium's API; randomness
comes from the env's ``np_random``, so ``reset(seed=...)`` fixes an episode.
The multi-agent ones follow corral's
:class:`~corral.core.environments.multi_agent_env.MultiAgentEnv` protocol.
Where a class departs from RLlib's, its docstring says how.

By kind:

- :mod:`.memory`: StatelessCartPole, RepeatAfterMeEnv, RepeatInitialObsEnv, LookAndPush, OneHot;
- :mod:`.spaces`: NestedSpaceRepeatAfterMeEnv, ParametricActionsCartPole(NoEmbeddings), CorrelatedActionsEnv;
- :mod:`.random_envs`: RandomEnv and its variants, RandomMultiAgentEnv;
- :mod:`.mock`: MockEnv, MockEnv2, MockEnv3;
- :mod:`.games`: SimpleCorridor, WindyMazeEnv, HierarchicalWindyMazeEnv, TwoStepGame, RockPaperScissors;
- :mod:`.multi_agent`: BasicMultiAgent, EarlyDoneMultiAgent, FlexAgentsMultiAgent, GuessTheNumberGame,
  and MultiAgentCartPole / MultiAgentPendulum / MultiAgentMountainCar / MultiAgentStatelessCartPole;
- :mod:`.utils`: the joint-action counting mixins of the matrix games.
"""

from __future__ import annotations

from corral.testing.example_envs.games import (
    ENV_STATE,
    HierarchicalWindyMazeEnv,
    RockPaperScissors,
    SimpleCorridor,
    TwoStepGame,
    WindyMazeEnv,
)
from corral.testing.example_envs.memory import LookAndPush, OneHot, RepeatAfterMeEnv, RepeatInitialObsEnv, StatelessCartPole
from corral.testing.example_envs.mock import MockEnv, MockEnv2, MockEnv3
from corral.testing.example_envs.multi_agent import (
    BasicMultiAgent,
    EarlyDoneMultiAgent,
    FlexAgentsMultiAgent,
    GuessTheNumberGame,
    MultiAgentCartPole,
    MultiAgentMountainCar,
    MultiAgentNestedSpaceRepeatAfterMeEnv,
    MultiAgentPendulum,
    MultiAgentStatelessCartPole,
)
from corral.testing.example_envs.random_envs import (
    RandomEnv,
    RandomLargeObsSpaceEnv,
    RandomLargeObsSpaceEnvContActions,
    RandomMultiAgentEnv,
)
from corral.testing.example_envs.spaces import (
    CorrelatedActionsEnv,
    NestedSpaceRepeatAfterMeEnv,
    ParametricActionsCartPole,
    ParametricActionsCartPoleNoEmbeddings,
)
from corral.testing.example_envs.utils import (
    InfoAccumulationInterface,
    NPlayersNDiscreteActionsInfoMixin,
    TwoPlayersTwoActionsInfoMixin,
)

__all__ = [
    "ENV_STATE",
    "BasicMultiAgent",
    "CorrelatedActionsEnv",
    "EarlyDoneMultiAgent",
    "FlexAgentsMultiAgent",
    "GuessTheNumberGame",
    "HierarchicalWindyMazeEnv",
    "InfoAccumulationInterface",
    "LookAndPush",
    "MockEnv",
    "MockEnv2",
    "MockEnv3",
    "MultiAgentCartPole",
    "MultiAgentMountainCar",
    "MultiAgentNestedSpaceRepeatAfterMeEnv",
    "MultiAgentPendulum",
    "MultiAgentStatelessCartPole",
    "NPlayersNDiscreteActionsInfoMixin",
    "NestedSpaceRepeatAfterMeEnv",
    "OneHot",
    "ParametricActionsCartPole",
    "ParametricActionsCartPoleNoEmbeddings",
    "RandomEnv",
    "RandomLargeObsSpaceEnv",
    "RandomLargeObsSpaceEnvContActions",
    "RandomMultiAgentEnv",
    "RepeatAfterMeEnv",
    "RepeatInitialObsEnv",
    "RockPaperScissors",
    "SimpleCorridor",
    "StatelessCartPole",
    "TwoPlayersTwoActionsInfoMixin",
    "TwoStepGame",
    "WindyMazeEnv",
]

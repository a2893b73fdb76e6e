"""The migration table's part for RLlib's new API stack: RLModules, learners, connectors, episodes, env runners.

Entries as :mod:`corral.rllib.table` describes them; that module merges these into its ``MODULES``.
"""

from __future__ import annotations

_NETS = "corral.core.networks"
_SUPPORT = "corral.rllib.support"
_OPTIONS = "corral.core.contracts.options"
_CONNECTOR_PIECES = (  # RLlib's default env-to-module pieces, whose work corral's env runners do
    "AddObservationsFromEpisodesToBatch",
    "AddStatesFromEpisodesToBatch",
    "AgentToModuleMapping",
    "BatchIndividualItems",
    "NumpyToTensor",
    "WriteObservationsToEpisodes",
)

NEW_STACK_MODULES: dict[str, dict[str, str]] = {
    "core": {
        **{
            name: f"{_SUPPORT}.checkpoints:{name}"
            for name in ("COMPONENT_LEARNER_GROUP", "COMPONENT_LEARNER", "COMPONENT_RL_MODULE")
        },
        "DEFAULT_MODULE_ID": "corral.core.common.sample_batch:DEFAULT_POLICY_ID",
        "DEFAULT_POLICY_ID": "corral.core.common.sample_batch:DEFAULT_POLICY_ID",
        "ALL_MODULES": f"{_SUPPORT}.metric_names:ALL_MODULES",
        **{
            name: "!corral's algorithm.restore_from_path() restores the whole algorithm (no component) or its models "
            "alone (component=COMPONENT_RL_MODULE)"
            for name in ("COMPONENT_ENV_RUNNER", "COMPONENT_EVAL_ENV_RUNNER", "COMPONENT_OPTIMIZER", "COMPONENT_METRICS_LOGGER")
        },
    },
    "core.models.catalog": {"Catalog": f"{_SUPPORT}.catalogs:Catalog"},
    "core.models.base": {name: f"{_SUPPORT}.catalogs:{name}" for name in ("ENCODER_OUT", "ACTOR", "CRITIC")},
    "algorithms.ppo.ppo_catalog": {"PPOCatalog": f"{_SUPPORT}.catalogs:PPOCatalog"},
    "core.rl_module": {"RLModule": f"{_NETS}.rl_module:RLModule"},
    "core.rl_module.rl_module": {
        "RLModule": f"{_NETS}.rl_module:RLModule",
        "RLModuleConfig": f"{_NETS}.rl_module:RLModuleConfig",
        "RLModuleSpec": "corral.core.contracts.policy_spec:RLModuleSpec",
        "SingleAgentRLModuleSpec": "corral.core.contracts.policy_spec:SingleAgentRLModuleSpec",
    },
    "core.rl_module.torch": {"TorchRLModule": f"{_NETS}.rl_module:TorchRLModule"},
    "core.rl_module.torch.torch_rl_module": {"TorchRLModule": f"{_NETS}.rl_module:TorchRLModule"},
    "algorithms.ppo.torch.ppo_torch_rl_module": {"PPOTorchRLModule": "corral.plugins.ppo.rl_module:PPOTorchRLModule"},
    "algorithms.ppo.tf.ppo_tf_rl_module": {"PPOTfRLModule": "tf=corral.plugins.ppo.rl_module:PPOTorchRLModule"},
    "core.rl_module.marl_module": {
        "MultiAgentRLModuleSpec": "corral.core.contracts.policy_spec:MultiAgentRLModuleSpec",
        "MultiAgentRLModule": "!corral builds one RLModule per policy from a MultiAgentRLModuleSpec; "
        "there is no container class to subclass",
    },
    "core.rl_module.multi_rl_module": {"MultiRLModuleSpec": "corral.core.contracts.policy_spec:MultiRLModuleSpec"},
    "core.rl_module.default_model_config": {"DefaultModelConfig": f"{_OPTIONS}.default_model_config:DefaultModelConfig"},
    "core.columns": {"Columns": "corral.core.common.sample_batch:Columns"},
    "core.learner": {"Learner": "corral.core.learning.learners.learner:Learner"},
    "core.learner.learner": {"Learner": "corral.core.learning.learners.learner:Learner"},
    "core.learner.learner_group": {"LearnerGroup": "corral.core.learning.learners.learner_group:LearnerGroup"},
    "core.learner.torch.torch_learner": {"TorchLearner": "corral.core.learning.learners.learner:TorchLearner"},
    "connectors.connector_v2": {"ConnectorV2": f"{_SUPPORT}.connectors:ConnectorV2"},
    "connectors.env_to_module": {
        **{name: f"{_SUPPORT}.connectors:{name}" for name in (*_CONNECTOR_PIECES, "FlattenObservations", "EnvToModulePipeline")},
        "PrevActionsPrevRewardsConnector": "!corral's memory models read the previous action and reward themselves: "
        "model={'use_lstm': True, 'lstm_use_prev_action': True, 'lstm_use_prev_reward': True}",
    },
    "connectors.common": {
        name: f"{_SUPPORT}.connectors:{name}" for name in _CONNECTOR_PIECES if name != "WriteObservationsToEpisodes"
    },
    "connectors.env_to_module.mean_std_filter": {"MeanStdFilter": f"{_SUPPORT}.connectors:MeanStdFilter"},
    "connectors.env_to_module.flatten_observations": {"FlattenObservations": f"{_SUPPORT}.connectors:FlattenObservations"},
    "connectors.env_to_module.frame_stacking": {
        "FrameStackingEnvToModule": "!corral runs no connector pieces; stack frames with gymnasium's FrameStackObservation"
    },
    "env.single_agent_env_runner": {"SingleAgentEnvRunner": "corral.core.sampling.env_runner:EnvRunner"},
    "env.single_agent_episode": {"SingleAgentEpisode": f"{_SUPPORT}.single_agent_episode:SingleAgentEpisode"},
    "env.utils.infinite_lookback_buffer": {"InfiniteLookbackBuffer": f"{_SUPPORT}.single_agent_episode:InfiniteLookbackBuffer"},
    "env.multi_agent_env_runner": {"MultiAgentEnvRunner": "corral.core.sampling.multi_agent_env_runner:MultiAgentEnvRunner"},
}
"""RLlib's new-stack module paths (below ``ray.rllib``) and what each name is in corral"""

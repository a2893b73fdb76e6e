"""The migration table: each of RLlib's module paths and names, and what it is in corral.

A script moves from RLlib by one prefix: ``ray.rllib`` becomes ``corral.rllib``.
:mod:`corral.rllib.namespace` makes every module path below (relative to
``ray.rllib``) importable and resolves its names through this table; the table
is also the migration's documentation (:mod:`corral.rllib.table_docs` renders
it into ``docs/rllib.md``). An entry is one of:

- ``"module:Name"``: the same object in corral;
- ``"algo:X"`` / ``"config:X"`` / ``"policy:X"``: the algorithm registered as
  ``X`` (any installed plugin), its config class or its policy class;
- ``"tf=<one of those>"``: a TensorFlow name, answered with corral's torch
  counterpart and a one-line warning (corral runs on torch);
- ``"!reason"``: corral does not have it; importing it raises an ``ImportError``
  that says what to use instead.
"""

from __future__ import annotations

from corral.rllib.table_new_stack import NEW_STACK_MODULES

_NETS = "corral.core.networks"
_ENVS = "corral.core.environments"
_SUPPORT = "corral.rllib.support"
_OPTIONS = "corral.core.contracts.options"
_EXAMPLE_ENVS = "corral.testing.example_envs"
_BASE_ENV = f"{_SUPPORT}.base_env:BaseEnv"
_VECTOR_ENV = f"{_SUPPORT}.vector_env:VectorEnv"
_ENV_RUNNER = "corral.core.sampling.base_env_runner:BaseEnvRunner"  # what callbacks get as `worker`, with its methods
_NO_OPEN_SPIEL = "corral has no OpenSpiel adapter; wrap the game as a MultiAgentEnv"
_VIEW_REQUIREMENT = "corral.core.learning.policies.heuristic_policies:ViewRequirement"
_REPLAY_NAMES = ("MultiAgentReplayBuffer", "StorageUnit", "ReplayBuffer")
_OWN_REPLAY = (
    "!corral's algorithms keep their replay buffers themselves (replay_buffer_config={'type': ...}); a training_step of "
    "your own stores and draws rows with corral.rllib.utils.replay_buffers.MultiAgentReplayBuffer"
)
_TORCH_ONLY = "corral runs on torch only; use the torch name (the same model or policy written with torch)"

# RLlib's algorithm folders: (registered name, RLlib's class-name stem, TensorFlow policy names).
ALGORITHMS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "a2c": ("A2C", "A2C", ("A2CTF1Policy", "A2CTF2Policy")),
    "a3c": ("A3C", "A3C", ("A3CTF1Policy", "A3CTF2Policy")),
    "apex_dqn": ("APEX", "ApexDQN", ()),
    "appo": ("APPO", "APPO", ("APPOTF1Policy", "APPOTF2Policy")),
    "ars": ("ARS", "ARS", ("ARSTFPolicy",)),
    "bc": ("BC", "BC", ("BCTF1Policy", "BCTF2Policy")),
    "cql": ("CQL", "CQL", ("CQLTFPolicy",)),
    "ddpg": ("DDPG", "DDPG", ("DDPGTF1Policy", "DDPGTF2Policy")),
    "ddppo": ("DDPPO", "DDPPO", ()),
    "dqn": ("DQN", "DQN", ("DQNTFPolicy",)),
    "es": ("ES", "ES", ("ESTFPolicy",)),
    "impala": ("IMPALA", "Impala", ("ImpalaTF1Policy", "ImpalaTF2Policy")),
    "marwil": ("MARWIL", "MARWIL", ("MARWILTF1Policy", "MARWILTF2Policy")),
    "pg": ("PG", "PG", ("PGTF1Policy", "PGTF2Policy")),
    "ppo": ("PPO", "PPO", ("PPOTF1Policy", "PPOTF2Policy")),
    "r2d2": ("R2D2", "R2D2", ("R2D2TFPolicy",)),
    "sac": ("SAC", "SAC", ("SACTFPolicy",)),
    "simple_q": ("SimpleQ", "SimpleQ", ("SimpleQTF1Policy", "SimpleQTF2Policy")),
    "td3": ("TD3", "TD3", ()),
}

MISSING_MODULES: dict[str, str] = {
    **dict.fromkeys(
        [f"algorithms.{name}" for name in ("alpha_star", "alpha_zero", "apex_ddpg", "bandit", "crr", "dreamer", "dreamerv3")]
        + [f"algorithms.{name}" for name in ("dt", "leela_chess_zero", "maddpg", "maml", "mbmpo", "qmix", "slateq")],
        "corral has no such algorithm; `corral list` shows the installed ones, and an algorithm is a plugin anyone can add "
        "(CONTRIBUTING.md, 'Writing an algorithm plugin')",
    ),
    "algorithms.random_agent": "use corral.rllib.examples.policy.random_policy.RandomPolicy in a PolicySpec",
    "env.wrappers.unity3d_env": "corral has no Unity ML-Agents adapter; wrap the Unity env as a MultiAgentEnv",
    "env.wrappers.open_spiel": _NO_OPEN_SPIEL,
    "env.wrappers.recsim": "corral has no RecSim adapter; RecSim is unmaintained",
    "env.wrappers.dm_control_wrapper": "use the dm_control env through shimmy's gymnasium wrapper",
    "env.wrappers.kaggle_wrapper": "corral has no Kaggle environments adapter",
    "models.tf": _TORCH_ONLY,
    "policy.tf_policy": _TORCH_ONLY,
    "policy.eager_tf_policy": _TORCH_ONLY,
    "policy.dynamic_tf_policy": _TORCH_ONLY,
}


def _example_envs(*names: str) -> dict[str, str]:
    return {name: f"{_EXAMPLE_ENVS}:{name}" for name in names}


def algorithm_modules() -> dict[str, dict[str, str]]:
    """The modules of RLlib's algorithm folders (``algorithms.ppo``, ``.ppo``, ``.ppo_torch_policy``, ...) and their names."""
    modules: dict[str, dict[str, str]] = {}
    for folder, (registered, stem, tf_policies) in ALGORITHMS.items():
        classes = {stem: f"algo:{registered}", f"{stem}Config": f"config:{registered}"}
        if stem != registered:  # Ray 2.10+ spells IMPALA in capitals
            classes |= {registered: f"algo:{registered}", f"{registered}Config": f"config:{registered}"}
        torch_policy = {f"{stem}TorchPolicy": f"policy:{registered}"}
        tf = {name: f"tf=policy:{registered}" for name in tf_policies}
        modules[f"algorithms.{folder}"] = classes | torch_policy | tf
        modules[f"algorithms.{folder}.{folder}"] = dict(classes)
        modules[f"algorithms.{folder}.{folder}_torch_policy"] = torch_policy
        if tf:
            modules[f"algorithms.{folder}.{folder}_tf_policy"] = tf
    return modules


MODULES: dict[str, dict[str, str]] = {
    "": {
        "BaseEnv": _BASE_ENV,
        "ExternalEnv": f"{_ENVS}.external_env:ExternalEnv",
        "MultiAgentEnv": f"{_ENVS}.multi_agent_env:MultiAgentEnv",
        "VectorEnv": _VECTOR_ENV,
        "Policy": "corral.core.learning.policy:Policy",
        "TorchPolicy": "corral.core.learning.policy:Policy",
        "TFPolicy": "tf=corral.core.learning.policy:Policy",
        "SampleBatch": "corral.core.common.sample_batch:SampleBatch",
        "RolloutWorker": _ENV_RUNNER,
    },
    **algorithm_modules(),
    **NEW_STACK_MODULES,
    "algorithms.dqn.dqn_torch_model": {"DQNTorchModel": "corral.plugins.dqn.torch_model:DQNTorchModel"},
    "algorithms.dqn.distributional_q_tf_model": {"DistributionalQTFModel": "tf=corral.plugins.dqn.torch_model:DQNTorchModel"},
    "algorithms": {
        "Algorithm": "corral.core.training.algorithm:Algorithm",
        "AlgorithmConfig": "corral.core.contracts.config:AlgorithmConfig",
    },
    "algorithms.algorithm": {"Algorithm": "corral.core.training.algorithm:Algorithm"},
    "algorithms.algorithm_config": {
        "AlgorithmConfig": "corral.core.contracts.config:AlgorithmConfig",
        "NotProvided": f"{_SUPPORT}.annotations:NotProvided",
    },
    "algorithms.callbacks": {
        "DefaultCallbacks": "corral.core.contracts.callbacks:DefaultCallbacks",
        "MultiCallbacks": "corral.core.contracts.callbacks:MultiCallbacks",
    },
    "algorithms.registry": {"get_algorithm_class": "corral.registry:get_algorithm"},
    # environments
    "env": {
        "BaseEnv": _BASE_ENV,
        "VectorEnv": _VECTOR_ENV,
        "EnvContext": f"{_ENVS}.env_creators:EnvContext",
        "ExternalEnv": f"{_ENVS}.external_env:ExternalEnv",
        "ExternalMultiAgentEnv": f"{_ENVS}.external_multi_agent_env:ExternalMultiAgentEnv",
        "MultiAgentEnv": f"{_ENVS}.multi_agent_env:MultiAgentEnv",
        "PettingZooEnv": "corral.integrations.pettingzoo:PettingZooEnv",
        "ParallelPettingZooEnv": "corral.integrations.pettingzoo:ParallelPettingZooEnv",
        "PolicyClient": "corral.integrations.serving.policy_client:PolicyClient",
        "PolicyServerInput": "corral.integrations.serving.policy_server_input:PolicyServerInput",
    },
    "env.apis.task_settable_env": {
        "TaskSettableEnv": f"{_ENVS}.task_settable_env:TaskSettableEnv",
        "TaskType": f"{_SUPPORT}.typing:TaskType",
    },
    "env.base_env": {
        "BaseEnv": _BASE_ENV,
        "ASYNC_RESET_RETURN": f"{_SUPPORT}.base_env:ASYNC_RESET_RETURN",
        "convert_to_base_env": f"{_SUPPORT}.base_env:convert_to_base_env",
        "with_dummy_agent_id": f"{_SUPPORT}.base_env:with_dummy_agent_id",
    },
    "env.vector_env": {"VectorEnv": _VECTOR_ENV, "VectorEnvWrapper": f"{_SUPPORT}.base_env:VectorEnvWrapper"},
    "env.env_context": {"EnvContext": f"{_ENVS}.env_creators:EnvContext"},
    "env.external_env": {"ExternalEnv": f"{_ENVS}.external_env:ExternalEnv"},
    "env.external_multi_agent_env": {"ExternalMultiAgentEnv": f"{_ENVS}.external_multi_agent_env:ExternalMultiAgentEnv"},
    "env.multi_agent_env": {
        "MultiAgentEnv": f"{_ENVS}.multi_agent_env:MultiAgentEnv",
        "make_multi_agent": f"{_ENVS}.multi_agent_env:make_multi_agent",
        "MultiAgentEnvWrapper": f"{_SUPPORT}.base_env:MultiAgentEnvWrapper",
        "ENV_STATE": f"{_SUPPORT}.typing:ENV_STATE",
    },
    "env.policy_client": {"PolicyClient": "corral.integrations.serving.policy_client:PolicyClient"},
    "env.policy_server_input": {"PolicyServerInput": "corral.integrations.serving.policy_server_input:PolicyServerInput"},
    "env.wrappers.pettingzoo_env": {
        "PettingZooEnv": "corral.integrations.pettingzoo:PettingZooEnv",
        "ParallelPettingZooEnv": "corral.integrations.pettingzoo:ParallelPettingZooEnv",
    },
    "env.utils": {
        "try_import_pyspiel": f"!{_NO_OPEN_SPIEL}",
        "try_import_open_spiel": f"!{_NO_OPEN_SPIEL}",
    },
    # evaluation, execution and offline data
    "evaluation": {
        "Episode": "corral.core.sampling.env_runner:Episode",
        "RolloutWorker": _ENV_RUNNER,
    },
    "evaluation.rollout_worker": {"RolloutWorker": _ENV_RUNNER},
    "evaluation.episode": {"Episode": "corral.core.sampling.env_runner:Episode"},
    "evaluation.metrics": {
        "collect_episodes": f"{_SUPPORT}.episodes:collect_episodes",
        "summarize_episodes": f"{_SUPPORT}.episodes:summarize_episodes",
    },
    "evaluation.postprocessing": {
        "Postprocessing": f"{_SUPPORT}.postprocessing:Postprocessing",
        "compute_advantages": f"{_SUPPORT}.postprocessing:compute_advantages",
        "discount_cumsum": f"{_SUPPORT}.postprocessing:discount_cumsum",
    },
    "evaluation.sample_batch_builder": {"SampleBatchBuilder": f"{_SUPPORT}.sample_batch_builder:SampleBatchBuilder"},
    "execution.rollout_ops": {
        "synchronous_parallel_sample": "corral.core.training.training_step_helpers:synchronous_parallel_sample"
    },
    "execution.train_ops": {
        "train_one_step": "corral.core.training.training_step_helpers:train_one_step",
        "multi_gpu_train_one_step": "corral.core.training.training_step_helpers:multi_gpu_train_one_step",
    },
    "offline": {
        "IOContext": "corral.core.sampling.external.io_context:IOContext",
        "JsonReader": f"{_SUPPORT}.offline_io:JsonReader",
        "JsonWriter": f"{_SUPPORT}.offline_io:JsonWriter",
        "InputReader": f"{_SUPPORT}.offline_io:InputReader",
        "ShuffledInput": f"{_SUPPORT}.offline_io:ShuffledInput",
    },
    "offline.shuffled_input": {"ShuffledInput": f"{_SUPPORT}.offline_io:ShuffledInput"},
    "offline.input_reader": {"InputReader": f"{_SUPPORT}.offline_io:InputReader"},
    "offline.json_writer": {"JsonWriter": f"{_SUPPORT}.offline_io:JsonWriter"},
    "offline.json_reader": {"JsonReader": f"{_SUPPORT}.offline_io:JsonReader"},
    "offline.io_context": {"IOContext": "corral.core.sampling.external.io_context:IOContext"},
    # models
    "models": {
        "ModelCatalog": f"{_NETS}.catalog:ModelCatalog",
        "ModelV2": f"{_NETS}.model_v2:TorchModelV2",
        "ActionDistribution": f"{_NETS}.custom_distribution:TorchDistributionWrapper",
    },
    "models.catalog": {"ModelCatalog": f"{_NETS}.catalog:ModelCatalog", "MODEL_DEFAULTS": f"{_SUPPORT}.typing:MODEL_DEFAULTS"},
    "models.modelv2": {
        "ModelV2": f"{_NETS}.model_v2:TorchModelV2",
        "restore_original_dimensions": f"{_NETS}.model_v2:restore_original_dimensions",
    },
    "models.preprocessors": {
        name: f"corral.core.common.preprocessors:{name}"
        for name in ("get_preprocessor", "NoPreprocessor", "RepeatedValuesPreprocessor")
    },
    "models.repeated_values": {"RepeatedValues": "corral.core.common.repeated:RepeatedValues"},
    "models.torch.torch_modelv2": {"TorchModelV2": f"{_NETS}.model_v2:TorchModelV2"},
    "models.torch.fcnet": {"FullyConnectedNetwork": f"{_NETS}.catalog:FullyConnectedNetwork"},
    "models.torch.recurrent_net": {"RecurrentNetwork": f"{_NETS}.model_v2:RecurrentNetwork"},
    "models.torch.misc": {
        "SlimFC": f"{_NETS}.torch_layers:SlimFC",
        "normc_initializer": f"{_NETS}.torch_layers:normc_initializer",
    },
    "models.torch.torch_action_dist": {
        "TorchDistributionWrapper": f"{_NETS}.custom_distribution:TorchDistributionWrapper",
        "TorchCategorical": f"{_NETS}.custom_distribution:TorchCategorical",
        "TorchDiagGaussian": f"{_NETS}.custom_distribution:TorchDiagGaussian",
    },
    "models.tf.tf_modelv2": {"TFModelV2": f"tf={_NETS}.model_v2:TorchModelV2"},
    "models.tf.fcnet": {"FullyConnectedNetwork": f"tf={_NETS}.catalog:FullyConnectedNetwork"},
    "models.tf.recurrent_net": {"RecurrentNetwork": f"tf={_NETS}.model_v2:RecurrentNetwork"},
    "models.tf.misc": {"normc_initializer": f"tf={_NETS}.torch_layers:normc_initializer"},
    "models.tf.tf_action_dist": {
        "ActionDistribution": f"tf={_NETS}.custom_distribution:TorchDistributionWrapper",
        "Categorical": f"tf={_NETS}.custom_distribution:TorchCategorical",
        "DiagGaussian": f"tf={_NETS}.custom_distribution:TorchDiagGaussian",
    },
    # policies and batches
    "policy": {"Policy": "corral.core.learning.policy:Policy", "TorchPolicy": "corral.core.learning.policy:Policy"},
    "policy.policy": {
        "Policy": "corral.core.learning.policy:Policy",
        "PolicySpec": "corral.core.contracts.policy_spec:PolicySpec",
        "ViewRequirement": _VIEW_REQUIREMENT,
    },
    "policy.view_requirement": {
        "ViewRequirement": _VIEW_REQUIREMENT,
    },
    "policy.sample_batch": {
        "SampleBatch": "corral.core.common.sample_batch:SampleBatch",
        "MultiAgentBatch": "corral.core.common.sample_batch:MultiAgentBatch",
        "DEFAULT_POLICY_ID": "corral.core.common.sample_batch:DEFAULT_POLICY_ID",
        "concat_samples": f"{_SUPPORT}.batches:concat_samples",
        "convert_ma_batch_to_sample_batch": f"{_SUPPORT}.batches:convert_ma_batch_to_sample_batch",
    },
    "policy.torch_policy": {"TorchPolicy": "corral.core.learning.policy:Policy"},
    # utilities
    "utils": {
        "override": f"{_SUPPORT}.annotations:override",
        "try_import_torch": f"{_SUPPORT}.framework:try_import_torch",
        "try_import_tf": f"{_SUPPORT}.framework:try_import_tf",
    },
    "utils.annotations": {
        name: f"{_SUPPORT}.annotations:{name}"
        for name in (
            "override",
            "PublicAPI",
            "DeveloperAPI",
            "ExperimentalAPI",
            "OldAPIStack",
            "OverrideToImplementCustomLogic",
            "OverrideToImplementCustomLogic_CallToSuperRecommended",
            "is_overridden",
        )
    },
    "utils.deprecation": {
        name: f"{_SUPPORT}.annotations:{name}" for name in ("Deprecated", "deprecation_warning", "DEPRECATED_VALUE")
    },
    "utils.framework": {
        name: f"{_SUPPORT}.framework:{name}" for name in ("try_import_torch", "try_import_tf", "try_import_tfp", "try_import_jax")
    },
    "utils.test_utils": {
        name: f"{_SUPPORT}.test_utils:{name}"
        for name in ("check", "check_learning_achieved", "add_rllib_example_script_args", "run_rllib_example_script_experiment")
    },
    "utils.error": {"EnvError": "corral.errors:EnvError"},
    "utils.checkpoints": {
        "convert_to_msgpack_checkpoint": f"{_SUPPORT}.checkpoints:convert_to_msgpack_checkpoint",
        "convert_to_msgpack_policy_checkpoint": "!corral keeps a policy in its algorithm's checkpoint, which holds no pickle "
        "of it; convert the algorithm's checkpoint (convert_to_msgpack_checkpoint) and read the policy with "
        "Policy.from_checkpoint(path, policy_id)",
    },
    "utils.metrics": {
        name: f"{_SUPPORT}.metric_names:{name}"
        for name in (
            "NUM_ENV_STEPS_SAMPLED",
            "NUM_AGENT_STEPS_SAMPLED",
            "NUM_ENV_STEPS_TRAINED",
            "NUM_AGENT_STEPS_TRAINED",
            "NUM_TARGET_UPDATES",
            "LAST_TARGET_UPDATE_TS",
            "ENV_RUNNER_RESULTS",
            "EVALUATION_RESULTS",
            "EPISODE_RETURN_MEAN",
            "EPISODE_RETURN_MAX",
            "EPISODE_RETURN_MIN",
            "EPISODE_LEN_MEAN",
            "NUM_EPISODES",
            "NUM_ENV_STEPS_SAMPLED_LIFETIME",
        )
    },
    "utils.metrics.learner_info": {
        name: f"{_SUPPORT}.metric_names:{name}" for name in ("LEARNER_INFO", "LEARNER_STATS_KEY", "ALL_MODULES")
    },
    "utils.numpy": {name: f"{_SUPPORT}.numeric:{name}" for name in ("convert_to_numpy", "softmax", "one_hot", "LARGE_INTEGER")},
    "utils.torch_utils": {
        name: f"{_SUPPORT}.numeric:{name}"
        for name in ("FLOAT_MIN", "FLOAT_MAX", "convert_to_torch_tensor", "explained_variance", "sequence_mask")
    }
    | {"one_hot": f"{_SUPPORT}.numeric:torch_one_hot"},
    "utils.tf_utils": {  # the torch helpers of the same names; make_tf_callable says, when called, that it is TF
        "explained_variance": f"tf={_SUPPORT}.numeric:explained_variance",
        "make_tf_callable": f"{_SUPPORT}.framework:make_tf_callable",
    },
    "utils.replay_buffers": {name: f"{_SUPPORT}.replay_buffers:{name}" for name in _REPLAY_NAMES}
    | {name: _OWN_REPLAY for name in ("PrioritizedReplayBuffer", "MultiAgentPrioritizedReplayBuffer")},
    "utils.replay_buffers.replay_buffer": {name: f"{_SUPPORT}.replay_buffers:{name}" for name in ("StorageUnit", "ReplayBuffer")},
    "utils.replay_buffers.utils": {"validate_buffer_config": f"{_SUPPORT}.replay_buffers:validate_buffer_config"},
    "utils.replay_buffers.multi_agent_replay_buffer": {
        "MultiAgentReplayBuffer": f"{_SUPPORT}.replay_buffers:MultiAgentReplayBuffer"
    },
    "utils.sgd": {"standardized": f"{_SUPPORT}.numeric:standardized"},
    "utils.spaces.repeated": {"Repeated": "corral.core.common.repeated:Repeated"},
    "utils.spaces.space_utils": {
        name: f"{_SUPPORT}.spaces:{name}" for name in ("flatten_space", "get_base_struct_from_space", "batch", "unbatch")
    },
    "utils.typing": {
        name: f"{_SUPPORT}.typing:{name}"
        for name in (
            "AgentID",
            "AlgorithmConfigDict",
            "EnvConfigDict",
            "EnvType",
            "ModelConfigDict",
            "ModelWeights",
            "MultiAgentDict",
            "PartialAlgorithmConfigDict",
            "PolicyID",
            "ResultDict",
            "SampleBatchType",
            "TensorStructType",
            "TensorType",
            "TaskType",
        )
    },
    # the example scripts' own envs and policies (RLlib's examples folder)
    "examples.env.stateless_cartpole": _example_envs("StatelessCartPole"),
    "examples.env.repeat_after_me_env": _example_envs("RepeatAfterMeEnv"),
    "examples.env.repeat_initial_obs_env": _example_envs("RepeatInitialObsEnv"),
    "examples.env.look_and_push": _example_envs("LookAndPush", "OneHot"),
    "examples.env.nested_space_repeat_after_me_env": _example_envs("NestedSpaceRepeatAfterMeEnv"),
    "examples.env.parametric_actions_cartpole": _example_envs(
        "ParametricActionsCartPole", "ParametricActionsCartPoleNoEmbeddings"
    ),
    "examples.env.correlated_actions_env": _example_envs("CorrelatedActionsEnv"),
    "examples.env.random_env": _example_envs(
        "RandomEnv", "RandomMultiAgentEnv", "RandomLargeObsSpaceEnv", "RandomLargeObsSpaceEnvContActions"
    ),
    "examples.env.mock_env": _example_envs("MockEnv", "MockEnv2", "MockEnv3"),
    "examples.env.simple_corridor": _example_envs("SimpleCorridor"),
    "examples.env.windy_maze_env": _example_envs("WindyMazeEnv", "HierarchicalWindyMazeEnv"),
    "examples.env.two_step_game": _example_envs("TwoStepGame")
    | {"TwoStepGameWithGroupedAgents": "!corral's MultiAgentEnv has no agent groups (with_agent_groups); use TwoStepGame"},
    "examples.env.rock_paper_scissors": _example_envs("RockPaperScissors"),
    "examples.env.multi_agent": _example_envs(
        "BasicMultiAgent",
        "EarlyDoneMultiAgent",
        "FlexAgentsMultiAgent",
        "GuessTheNumberGame",
        "MultiAgentCartPole",
        "MultiAgentMountainCar",
        "MultiAgentPendulum",
        "MultiAgentNestedSpaceRepeatAfterMeEnv",
        "MultiAgentStatelessCartPole",
    ),
    "examples.env.utils.interfaces": _example_envs("InfoAccumulationInterface"),
    "examples.env.utils.mixins": _example_envs("TwoPlayersTwoActionsInfoMixin", "NPlayersNDiscreteActionsInfoMixin"),
    "examples.policy.random_policy": {"RandomPolicy": "corral.core.learning.random_policy:RandomPolicy"},
}


# Ray 2.10 on moved the example envs to examples/envs/classes/, under the same module names
MODULES.update(
    {f"examples.envs.classes.{path.removeprefix('examples.env.')}": names for path, names in list(MODULES.items())
     if path.startswith("examples.env.")}
)  # fmt: skip


def _packages() -> frozenset[str]:
    paths = set(MODULES)
    for path in MODULES:
        parts = path.split(".")
        paths.update(".".join(parts[:i]) for i in range(1, len(parts)))
    paths.discard("")
    return frozenset(paths)


PACKAGES = _packages()
"""The module paths :mod:`corral.rllib.namespace` generates: the table's, and every folder above them"""


def children(path: str) -> list[str]:
    """The generated module paths one level below ``path``.

    Args:
        path: a module path below ``ray.rllib`` (``""`` for the top).

    Returns:
        Their full paths, sorted.
    """
    depth = path.count(".") + 1 if path else 0
    prefix = f"{path}." if path else ""
    return sorted(p for p in PACKAGES if p.startswith(prefix) and p.count(".") == depth)


def missing_module(path: str) -> str | None:
    """Why corral has no counterpart of ``ray.rllib.<path>``, if the table says (for it or a folder above it).

    Args:
        path: a module path below ``ray.rllib``.

    Returns:
        The reason and what to use instead, or None where the table says nothing.
    """
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        reason = MISSING_MODULES.get(".".join(parts[:i]))
        if reason is not None:
            return reason
    return None

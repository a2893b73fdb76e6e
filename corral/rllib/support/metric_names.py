"""RLlib's names of result and counter keys that scripts read from results.

corral's results use the same counter keys (``num_env_steps_sampled``), so
the names are plain strings.
"""

from __future__ import annotations

from corral.core.results import LEARNER_STATS_KEY as LEARNER_STATS_KEY

NUM_ENV_STEPS_SAMPLED = "num_env_steps_sampled"
NUM_AGENT_STEPS_SAMPLED = "num_agent_steps_sampled"
NUM_ENV_STEPS_TRAINED = "num_env_steps_trained"
NUM_AGENT_STEPS_TRAINED = "num_agent_steps_trained"
NUM_TARGET_UPDATES = "num_target_updates"
"""the counter RLlib's own training steps (and scripts that write one) keep of target-network updates"""
LAST_TARGET_UPDATE_TS = "last_target_update_ts"
"""the counter of the steps trained at the last target-network update, beside ``NUM_TARGET_UPDATES``"""
LEARNER_INFO = "learner"
"""The key under ``result["info"]`` of the learners' statistics, one dict per policy"""
ALL_MODULES = "__all_modules__"
"""The new API stack's key of statistics over all modules"""

# The result keys of Ray 2.10 on, which corral's results hold too (see corral.core.results.with_rllib_groups)
ENV_RUNNER_RESULTS = "env_runners"
"""the group of a result holding its episode stats"""
EVALUATION_RESULTS = "evaluation"
"""the group of a result holding the evaluation's (its episode stats under ``env_runners`` again)"""
EPISODE_RETURN_MEAN = "episode_return_mean"
EPISODE_RETURN_MAX = "episode_return_max"
EPISODE_RETURN_MIN = "episode_return_min"
EPISODE_LEN_MEAN = "episode_len_mean"
NUM_EPISODES = "num_episodes"
NUM_ENV_STEPS_SAMPLED_LIFETIME = "num_env_steps_sampled_lifetime"

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

"""RLlib's names of result and counter keys that scripts read from results.

corral's results use the same counter keys (``num_env_steps_sampled``), so
the names are plain strings.
"""

from __future__ import annotations

NUM_ENV_STEPS_SAMPLED = "num_env_steps_sampled"
NUM_AGENT_STEPS_SAMPLED = "num_agent_steps_sampled"
NUM_ENV_STEPS_TRAINED = "num_env_steps_trained"
NUM_AGENT_STEPS_TRAINED = "num_agent_steps_trained"
LEARNER_INFO = "learner"
"""The key under ``result["info"]`` of the learners' statistics, one dict per policy"""
LEARNER_STATS_KEY = "learner_stats"
"""The key of one policy's training statistics inside ``result["info"]["learner"][policy_id]``"""
ALL_MODULES = "__all_modules__"
"""The new API stack's key of statistics over all modules"""

"""RLlib's ``no_done_at_end``: False learns from a truncated episode as if it had terminated; True (the default) bootstraps it.

Episodes are cut after 5 steps (gymnasium's TimeLimit, a truncation); CartPole rarely
ends that soon by itself. A truncated step's targets then hold no value after
it with False (GAE's value target is the reward alone, an n-step discount is
0, V-trace reads the step as terminated), and one with True.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import corral
from corral.core.common.sample_batch import DEFAULT_POLICY_ID, SampleBatch

GAE = ["A2C", "MARWIL", "PPO"]
NSTEP = ["DQN", "SAC", "SimpleQ"]


def sampled(name: str, no_done_at_end: bool | None, multi_agent: bool = False) -> dict[str, SampleBatch]:
    """One postprocessed sample call of the local env runner, by policy id."""
    if multi_agent:
        env, env_config = corral.make_multi_agent("CartPole-v1"), {"num_agents": 2, "max_episode_steps": 5}
    else:
        env, env_config = "CartPole-v1", {"max_episode_steps": 5}
    config = corral.get_config(name).environment(env, env_config=env_config).debugging(seed=0)
    config.env_runners(num_envs_per_env_runner=2, rollout_fragment_length=40)
    if multi_agent:
        config.multi_agent(policies={"a", "b"}, policy_mapping_fn=lambda agent_id, *args, **kwargs: "ab"[agent_id])
    if no_done_at_end is not None:
        config.env_runners(no_done_at_end=no_done_at_end)
    algo = config.build()
    try:
        return dict(algo.workers.local_worker().sample().policy_batches)
    finally:
        algo.stop()


def truncated_rows(batch: SampleBatch) -> np.ndarray:
    cut = batch[SampleBatch.TRUNCATEDS]
    assert cut.sum() >= 4, "the test needs truncated episodes"
    return cut


@pytest.mark.parametrize("name", GAE)
def test_a_truncated_step_has_no_value_after_it_with_false_and_one_with_true(name) -> None:
    for multi_agent in (False, True):
        for pid, batch in sampled(name, no_done_at_end=False, multi_agent=multi_agent).items():
            cut = truncated_rows(batch)
            # GAE at the episode's last step: r - V(s), so the value target r - V(s) + V(s) is the reward alone
            np.testing.assert_allclose(batch[SampleBatch.VALUE_TARGETS][cut], batch[SampleBatch.REWARDS][cut], rtol=1e-6)
            assert batch[SampleBatch.TERMINATEDS][cut].all() and cut.sum() < len(cut), pid
        for batch in sampled(name, no_done_at_end=True, multi_agent=multi_agent).values():
            cut = truncated_rows(batch)  # r + gamma V(final observation)
            assert not np.isclose(batch[SampleBatch.VALUE_TARGETS][cut], batch[SampleBatch.REWARDS][cut]).any()


@pytest.mark.parametrize("name", NSTEP)
def test_a_truncated_transition_is_not_discounted_into_a_bootstrap_with_false(name) -> None:
    (false,) = sampled(name, no_done_at_end=False).values()
    cut = truncated_rows(false)
    assert (false[SampleBatch.DISCOUNTS][cut] == 0.0).all() and (false[SampleBatch.DISCOUNTS][~cut] > 0).any()
    (true,) = sampled(name, no_done_at_end=True).values()
    cut = truncated_rows(true) & ~true[SampleBatch.TERMINATEDS]
    assert (true[SampleBatch.DISCOUNTS][cut] > 0).all()


def test_vtrace_reads_a_truncated_step_as_terminated_with_false() -> None:
    def ends(no_done_at_end: bool) -> tuple[np.ndarray, np.ndarray]:
        batch = sampled("IMPALA", no_done_at_end)[DEFAULT_POLICY_ID]
        valid = batch[SampleBatch.VALID]
        return batch[SampleBatch.TERMINATEDS][valid], batch[SampleBatch.TRUNCATEDS][valid]

    terminated, truncated = ends(False)
    assert truncated.sum() >= 4 and terminated[truncated].all()
    terminated, truncated = ends(True)
    assert truncated.sum() >= 4 and not terminated[truncated].any()


def test_true_is_the_default_and_the_option_round_trips() -> None:
    config: Any = corral.get_config("PPO")
    assert config.no_done_at_end is True
    changed = corral.get_config("PPO").update_from_dict({"no_done_at_end": False})
    assert corral.get_config("PPO").update_from_dict(changed.to_dict()).no_done_at_end is False
    default = sampled("PPO", no_done_at_end=None)[DEFAULT_POLICY_ID]
    bootstrapped = sampled("PPO", no_done_at_end=True)[DEFAULT_POLICY_ID]
    assert all(np.array_equal(default[k], bootstrapped[k]) for k in default)

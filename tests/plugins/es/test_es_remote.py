"""ES and ARS on remote env runners (Ray on two CPUs): one noise table in the object store, rounds on every runner."""

from __future__ import annotations

import numpy as np
import pytest

from corral.plugins.es import ARSConfig, ESConfig

SMALL = {"num_env_runners": 2, "noise_size": 200_000, "model": {"fcnet_hiddens": [8]}, "seed": 0}


pytestmark = pytest.mark.usefixtures("ray_on_two_cpus")


def _noise_as_the_runner_reads_it(runner_handle_and_dim):
    """In a runner: the table it resolves, as (writeable, owns its memory, a checksum of a slice)."""
    from corral.plugins.es.noise import resolve

    handle, dim = runner_handle_and_dim
    table = resolve(handle)
    return bool(table.flags.writeable), bool(table.flags.owndata), float(table[:dim].sum())


def test_the_noise_table_is_made_once_into_the_object_store_and_every_runner_maps_it(make_algo) -> None:
    algo = make_algo(ESConfig().environment("CartPole-v1").update_from_dict({**SMALL, "episodes_per_batch": 8}))
    handle = algo._noise_handle
    assert type(handle).__name__ == "ObjectRef"  # made by one Ray task, straight into the store
    assert not algo.noise.flags.writeable  # and this process maps it too, without a copy of its own
    dim = algo.get_policy().num_params
    seen = algo.env_runner_group.foreach_env_runner(
        lambda runner: _noise_as_the_runner_reads_it((handle, dim)), local_env_runner=False
    )
    assert seen == [(False, False, float(algo.noise[:dim].sum()))] * 2  # read-only views of the node's one copy
    algo.train()
    assert algo._noise_handle is handle  # not made again


@pytest.mark.parametrize("config", [ESConfig, ARSConfig], ids=["ES", "ARS"])
def test_every_runner_plays_its_share_and_the_learner_s_filter_gathers_every_step(make_algo, config) -> None:
    overrides = {"episodes_per_batch": 8, "train_batch_size": 40} if config is ESConfig else {"num_rollouts": 8}
    algo = make_algo(config().environment("CartPole-v1").update_from_dict({**SMALL, **overrides}))
    before = algo.get_policy().get_flat_weights()
    result = algo.train()
    info = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert result["num_healthy_env_runners"] == 2 and info["episodes_this_iter"] >= 8
    # every step of every episode (perturbed or not) went through a runner's filter, and back into the learner's
    filter_count = algo.get_policy().observation_filter.count
    assert filter_count >= result["num_env_steps_sampled"] > 0
    assert not np.array_equal(algo.get_policy().get_flat_weights(), before)
    counts = algo.env_runner_group.foreach_env_runner(
        lambda runner: runner.policies["default_policy"].observation_filter.count, local_env_runner=False
    )
    assert all(0 < count <= filter_count for count in counts)

"""Box actions with more than one dimension: the policy acts in a flat vector, the env gets its own shape."""

from __future__ import annotations

import numpy as np
import pytest

from corral.plugins.ppo import PPOConfig
from corral.plugins.sac import SACConfig
from tests.toy_envs import MatrixActionEnv

SMALL = {
    "PPO": lambda: PPOConfig().training(train_batch_size=64, minibatch_size=32, num_epochs=1),
    "SAC": lambda: SACConfig().update_from_dict(
        {"train_batch_size": 32, "learning_starts": 16, "min_sample_timesteps_per_iteration": 64}
    ),
}


@pytest.mark.parametrize(
    ("algorithm", "normalize", "clip"),
    [("PPO", True, False), ("PPO", False, True), ("PPO", False, False), ("SAC", True, False)],  # SAC needs normalize
)
def test_a_matrix_shaped_box_action_trains_and_acts(tmp_path, algorithm: str, normalize: bool, clip: bool) -> None:
    config = (
        SMALL[algorithm]()
        .environment(MatrixActionEnv, normalize_actions=normalize, clip_actions=clip)
        .env_runners(num_envs_per_env_runner=2)
        .debugging(seed=0)
        .reporting(storage_path=str(tmp_path), log_to_tensorboard=False)
    )
    algo = config.build()
    assert algo.get_policy().action_adapter.policy_space.shape == (6,)
    result = algo.train()  # the env asserts that every action it gets has shape (2, 3)
    assert result["info"]["learner"]["default_policy"], "it sampled and learned"
    actions = [algo.compute_single_action(np.zeros(3, np.float32), explore=explore) for explore in (True, False)]
    assert all(action.shape == (2, 3) for action in actions)
    if normalize or clip:
        assert all(np.all(np.abs(action) <= 2.0) for action in actions), "inside the env's bounds"
    algo.stop()

"""Every tuned example reaches the reward its ``stop`` block promises, within its budget.

The files are read the way ``corral train -f`` reads them; the run is seeded
and bounded by the file's ``timesteps_total``. A multi-agent example on
N-agent CartPole promises its total to be shared: every policy's
``policy_reward_mean`` must reach 1/N of it (450 each for two agents).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import corral
from corral.cli import _experiments_from_file
from corral.core.contracts.results import result_value

EXAMPLES = sorted((Path(corral.__file__).parent / "tuned_examples").glob("*.yaml"))
REPOSITORY = Path(__file__).parent.parent


def test_tuned_examples_are_packaged() -> None:
    names = {p.name for p in EXAMPLES}
    assert {
        "ppo_cartpole.yaml",
        "ppo_pendulum.yaml",
        "a2c_cartpole.yaml",
        "dqn_cartpole.yaml",
        "sac_pendulum.yaml",
        "sac_discrete_cartpole.yaml",
        "bc_cartpole.yaml",
        "marwil_cartpole.yaml",
        "cql_pendulum.yaml",
    } <= names


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_tuned_example_reaches_its_promise(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPOSITORY)  # offline examples name their data relative to the repository root
    (experiment,) = _experiments_from_file(str(path))
    budget = experiment["stop"]["timesteps_total"]
    # offline examples promise an evaluation return (their training rows come from files, not episodes)
    (key,) = set(experiment["stop"]) - {"timesteps_total"}
    promise = experiment["stop"][key]
    config = corral.get_config(experiment["run"]).environment(experiment["env"])
    config.update_from_dict({**experiment["config"], "seed": 0})
    # a multi-agent example promises its share of the total to every policy (450 each of 900 on 2-agent CartPole)
    per_policy = promise / config.env_config["num_agents"] if "num_agents" in config.env_config else None
    algo = config.build()
    best = float("-inf")
    kept: dict[str, float] = {}
    while algo.counters["num_env_steps_sampled"] < budget:
        result = algo.train()
        best = max(best, result_value(result, key))
        kept = result["policy_reward_mean"]
        if result_value(result, key) >= promise and (per_policy is None or min(kept.values()) >= per_policy):
            break
    algo.stop()
    assert result_value(result, key) >= promise, f"{path.name}: best {key} {best:.1f} < {promise} within {budget} env steps"
    if per_policy is not None:
        assert set(kept) == set(algo.policies) and min(kept.values()) >= per_policy, (
            f"{path.name}: policy_reward_mean {kept} after {result['timesteps_total']} env steps; each must reach {per_policy}"
        )
    # the last iteration may start just under the budget: allow one iteration's samples past it
    assert result["timesteps_total"] <= budget + max(config.train_batch_size, config.min_sample_timesteps_per_iteration)

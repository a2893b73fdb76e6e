"""What writing experiences costs sampling: env steps per second with ``offline_data(output=...)`` off and on.

PPO's env runner on CartPole-v1 (16 sub-environments, 4,096 env steps per
sample call) and on 2-agent CartPole (a policy per agent), sampling only, in
one process: the best of several sample calls for each setting, so a busy
moment of the machine does not count against one of them. Output goes to a
temporary folder, as Parquet (the default) and as JSON lines, with the default
compressed columns (``obs``, ``new_obs``).

    python benchmarks/output_overhead.py

Writes benchmarks/results/output_overhead.json.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CALLS = 15


def config(multi_agent: bool, output: str | None, output_format: str) -> Any:
    """PPO with 16 envs and a 4,096-step train batch, writing ``output`` (None: nothing)."""
    import corral

    if multi_agent:
        from corral.core.contracts.multi_agent_config import policy_per_agent

        base = (
            corral.get_config("PPO")
            .environment(corral.make_multi_agent("CartPole-v1"), env_config={"num_agents": 2})
            .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=policy_per_agent)
        )
    else:
        base = corral.get_config("PPO").environment("CartPole-v1")
    return (
        base.env_runners(num_envs_per_env_runner=16)
        .training(train_batch_size=4096)
        .offline_data(output=output, output_config={"format": output_format})
        .reporting(log_to_tensorboard=False)
        .debugging(seed=0)
    )


def steps_per_second(multi_agent: bool, output: str | None, output_format: str = "parquet") -> float:
    """The best env steps per second of :data:`CALLS` sample calls."""
    algo = config(multi_agent, output, output_format).build()
    runner = algo.env_runner_group.local_env_runner
    runner.sample()
    best = 0.0
    for _ in range(CALLS):
        start = time.perf_counter()
        batch = runner.sample()
        best = max(best, batch.env_steps / (time.perf_counter() - start))
    algo.stop()
    return best


def main() -> None:
    """Each setting in turn; prints the table and writes the JSON."""
    results: dict[str, Any] = {"load_average_at_start": os.getloadavg()[0]}
    rows = ["| env | output | env steps/s | vs no output |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("CORRAL_RESULTS_DIR", str(Path(folder) / "results"))
        for multi_agent in (False, True):
            name = "2-agent CartPole" if multi_agent else "CartPole-v1"
            base = steps_per_second(multi_agent, None)
            results[name] = {"none": base}
            rows.append(f"| {name} | none | {base:,.0f} | |")
            for output_format in ("parquet", "json"):
                rate = steps_per_second(multi_agent, str(Path(folder) / f"{name}-{output_format}"), output_format)
                results[name][output_format] = rate
                rows.append(f"| {name} | {output_format} | {rate:,.0f} | {rate / base - 1:+.1%} |")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "output_overhead.json").write_text(json.dumps(results, indent=1))
    print("\n".join(rows))


if __name__ == "__main__":
    main()

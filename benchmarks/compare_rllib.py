"""corral against RLlib: env steps per second with 0, 1 and 2 remote env runners, in one run, as ratios.

Each (library, algorithm, runner count) runs in its own fresh Python process
with its own Ray instance. After building the algorithm and warming up, it
measures for a fixed wall-clock window:

- training throughput: env steps sampled per second over whole ``train()``
  iterations, learning and weight broadcasts included;
- sampling throughput (PPO): env steps per second of the sample path alone,
  with the weights sent to the runners before each batch, as training does.

Both libraries get the same settings (CartPole-v1, envs per runner, batch
sizes, epochs, learning rate, a 64x64 tanh MLP); everything else is each
library's default. RLlib runs its default (new) API stack.

    pip install -e ".[bench]"
    python benchmarks/compare_rllib.py throughput
    python benchmarks/compare_rllib.py scaling      # measurements behind benchmarks/scaling.md
    python benchmarks/compare_rllib.py learner_thread   # IMPALA and APPO with and without corral's learner thread

Writes benchmarks/results/rllib_throughput.json, rllib_scaling.json and learner_thread.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RAY_CPUS = 4
"""logical CPUs given to Ray in every run (the machine has 2 physical): enough for RLlib's driver reservation plus 2 runners"""

PPO = {"envs_per_runner": 8, "train_batch_size": 4096, "minibatch_size": 512, "num_epochs": 10, "lr": 2e-3}
IMPALA = {"envs_per_runner": 5, "rollout_fragment_length": 50, "train_batch_size": 500, "lr": 1e-3}
APPO = {**IMPALA, "lr": 2e-3}
"""APPO samples as IMPALA does; its learning rate is corral's default (RLlib's own default takes longer to learn)"""
CASES = [(name, runners) for name in ("PPO", "IMPALA", "APPO") for runners in (0, 1, 2)]


# --------------------------------------------------------------------------- #
# one measurement, in a child process
# --------------------------------------------------------------------------- #
def timed(step: Any, seconds: float) -> float:
    """Call ``step()`` (which returns env steps) until ``seconds`` pass; env steps per second."""
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += step()
    return steps / (time.perf_counter() - start)


def corral_algo(algo_name: str, runners: int, hiddens: tuple[int, ...] = (64, 64), **overrides: Any) -> Any:
    """A corral PPO, IMPALA or APPO with the benchmark's settings, ``runners`` remote env runners and ``overrides``."""
    from corral import get_config

    settings = {"PPO": PPO, "IMPALA": IMPALA, "APPO": APPO}[algo_name]
    config = get_config(algo_name).environment("CartPole-v1").update_from_dict(
        {k: v for k, v in settings.items() if k != "envs_per_runner"}
        | {"num_env_runners": runners, "num_envs_per_env_runner": settings["envs_per_runner"], "seed": 0,
           "model": {"fcnet_hiddens": list(hiddens), "fcnet_activation": "tanh"}, "log_to_tensorboard": False}
        | overrides
    )  # fmt: skip
    return config.build()


def run_corral(algo_name: str, runners: int, seconds: float, **overrides: Any) -> dict[str, float]:
    """Train (and for PPO, sample) corral for ``seconds`` each; env steps per second."""
    if runners:
        import ray

        ray.init(num_cpus=RAY_CPUS, include_dashboard=False, configure_logging=False)
    algo = corral_algo(algo_name, runners, **overrides)
    for _ in range(2):
        algo.train()

    def train() -> int:
        before = algo.counters["num_env_steps_sampled"]
        algo.train()
        return algo.counters["num_env_steps_sampled"] - before

    out = {"training": timed(train, seconds)}
    if algo_name == "PPO":
        out["sampling"] = timed(lambda: algo.sample(PPO["train_batch_size"]).env_steps, seconds / 2)
    algo.stop()
    return out


def rllib_config(algo_name: str, runners: int) -> Any:
    """RLlib's config with the same settings as :func:`corral_algo`."""
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    if algo_name == "PPO":
        from ray.rllib.algorithms.ppo import PPOConfig

        s = PPO
        config = PPOConfig().training(
            train_batch_size_per_learner=s["train_batch_size"], minibatch_size=s["minibatch_size"],
            num_epochs=s["num_epochs"], lr=s["lr"],
        )  # fmt: skip
        fragment = "auto"
    else:
        from ray.rllib.algorithms.appo import APPOConfig
        from ray.rllib.algorithms.impala import IMPALAConfig

        s = IMPALA if algo_name == "IMPALA" else APPO
        config = (IMPALAConfig() if algo_name == "IMPALA" else APPOConfig()).training(
            train_batch_size_per_learner=s["train_batch_size"], lr=s["lr"]
        )
        fragment = s["rollout_fragment_length"]
    return (
        config.environment("CartPole-v1")
        .env_runners(num_env_runners=runners, num_envs_per_env_runner=s["envs_per_runner"], rollout_fragment_length=fragment)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="tanh"))
        .debugging(seed=0)
    )


def run_rllib(algo_name: str, runners: int, seconds: float) -> dict[str, float]:
    """Train (and for PPO, sample) RLlib for ``seconds`` each; env steps per second."""
    import ray
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

    ray.init(num_cpus=RAY_CPUS, include_dashboard=False, configure_logging=False)
    algo = rllib_config(algo_name, runners).build_algo()

    def sampled() -> int:
        return int(algo.metrics.peek(("env_runners", "num_env_steps_sampled_lifetime"), default=0))

    for _ in range(2):
        algo.train()

    def train() -> int:
        before = sampled()
        algo.train()
        return sampled() - before

    out = {"training": timed(train, seconds)}
    if algo_name == "PPO":
        group = algo.env_runner_group

        def sample() -> int:
            group.sync_weights(from_worker_or_learner_group=algo.learner_group, inference_only=True)
            episodes = synchronous_parallel_sample(worker_set=group, max_env_steps=PPO["train_batch_size"], concat=False,
                                                   _uses_new_env_runners=True)  # fmt: skip
            return sum(len(e) for batch in episodes for e in (batch if isinstance(batch, list) else [batch]))

        out["sampling"] = timed(sample, seconds / 2)
    algo.stop()
    return out


def child(library: str, algo_name: str, runners: int, seconds: float, overrides: dict[str, Any]) -> None:
    """Run one measurement in a fresh process with its own Ray instance; its JSON result."""
    os.environ.setdefault("CORRAL_RESULTS_DIR", "/tmp/corral_bench_results")
    if library == "corral":
        result = run_corral(algo_name, runners, seconds, **overrides)
    else:
        result = run_rllib(algo_name, runners, seconds)
    print("RESULT " + json.dumps(result), flush=True)


def measure(library: str, algo_name: str, runners: int, seconds: float, **overrides: Any) -> dict[str, float]:
    """One case in a fresh process (its own Ray instance); the parsed ``RESULT`` line."""
    args = [__file__, "_child", library, algo_name, str(runners), str(seconds), json.dumps(overrides)]
    return run_in_fresh_process(args, timeout=1800)


def run_in_fresh_process(args: list[str], timeout: int) -> dict[str, Any]:
    """``python *args`` in a new process; the JSON of its last ``RESULT`` line, or ``{"error": ...}``."""
    # RLlib writes a log folder under ~/ray_results whatever it is told: a throwaway HOME keeps the user's clean
    with tempfile.TemporaryDirectory(prefix="corral-bench-home-") as home:
        proc = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, "HOME": home}
        )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    return json.loads(lines[-1][len("RESULT ") :])


# --------------------------------------------------------------------------- #
# throughput table
# --------------------------------------------------------------------------- #
def throughput(seconds: float, repeats: int, only: str | None = None) -> None:
    """Every library, algorithm (or ``only`` one) and runner count, ``repeats`` times; writes the JSON, prints the table."""
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    for algo_name, runners in CASES:
        if only is not None and algo_name != only:
            continue
        for library in ("corral", "rllib"):
            key = f"{library} {algo_name} {runners}"
            for _ in range(repeats):
                outcome = measure(library, algo_name, runners, seconds)
                print(key, outcome, flush=True)
                results.setdefault(key, {}).setdefault("runs", []).append(outcome)
    (HERE / "results").mkdir(exist_ok=True)
    name = "rllib_throughput.json" if only is None else f"rllib_throughput_{only.lower()}.json"
    (HERE / "results" / name).write_text(json.dumps(results, indent=1))
    print(throughput_table(results))


def throughput_table(results: dict[str, Any]) -> str:
    """The markdown table of medians and ratios in benchmarks/README.md."""

    def median(key: str, metric: str) -> float | None:
        values = [run[metric] for run in results.get(key, {}).get("runs", []) if metric in run]
        return statistics.median(values) if values else None

    rows = [
        "| algorithm | remote runners | measure | corral steps/s | RLlib steps/s | corral / RLlib |",
        "|---|---|---|---|---|---|",
    ]
    for algo_name, runners in CASES:
        if f"corral {algo_name} {runners}" not in results:  # a run of --only another algorithm
            continue
        for metric in ("training", "sampling") if algo_name == "PPO" else ("training",):
            ours, theirs = median(f"corral {algo_name} {runners}", metric), median(f"rllib {algo_name} {runners}", metric)
            ratio = f"**{ours / theirs:.1f}x**" if ours and theirs else "n/a"
            fmt = lambda v: f"{v:,.0f}" if v else "failed"  # noqa: E731
            rows.append(f"| {algo_name} | {runners} | {metric} | {fmt(ours)} | {fmt(theirs)} | {ratio} |")
    return "\n".join(rows)


# --------------------------------------------------------------------------- #
# the learner thread: IMPALA and APPO with it, without it, and RLlib's
# --------------------------------------------------------------------------- #
LEARNER_THREAD_CASES = [(name, runners, hiddens) for name in ("IMPALA", "APPO") for runners in (0, 2) for hiddens in (64, 512)]
"""each algorithm in one process and on 2 remote runners, with the benchmark's 64x64 model and a 512x512 one
(whose update takes a larger share of a step)"""


def learner_thread(seconds: float, repeats: int) -> None:
    """Training env steps/s of corral with ``learner_thread`` on and off, and RLlib's (64x64 only); interleaved repeats."""
    results: dict[str, list[dict[str, float]]] = {}
    for _ in range(repeats):
        for algo_name, runners, hiddens in LEARNER_THREAD_CASES:
            model = {"fcnet_hiddens": [hiddens, hiddens], "fcnet_activation": "tanh"}
            for thread in (True, False):
                key = f"corral {algo_name} {runners} {hiddens} thread={thread}"
                outcome = measure("corral", algo_name, runners, seconds, learner_thread=thread, model=model)
                print(key, outcome, flush=True)
                results.setdefault(key, []).append(outcome)
            if hiddens == 64:
                key = f"rllib {algo_name} {runners} 64"
                outcome = measure("rllib", algo_name, runners, seconds)
                print(key, outcome, flush=True)
                results.setdefault(key, []).append(outcome)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "learner_thread.json").write_text(json.dumps(results, indent=1))
    print(learner_thread_table(results))


def learner_thread_table(results: dict[str, list[dict[str, float]]]) -> str:
    """The markdown table in benchmarks/README.md: medians, the thread's gain, and corral with it against RLlib."""

    def median(key: str) -> float | None:
        values = [run["training"] for run in results.get(key, []) if "training" in run]
        return statistics.median(values) if values else None

    rows = [
        "| algorithm | remote runners | model | with thread | without | with / without | RLlib | with / RLlib |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for algo_name, runners, hiddens in LEARNER_THREAD_CASES:
        on = median(f"corral {algo_name} {runners} {hiddens} thread=True")
        off = median(f"corral {algo_name} {runners} {hiddens} thread=False")
        rllib = median(f"rllib {algo_name} {runners} {hiddens}")
        fmt = lambda v: f"{v:,.0f}" if v else "-"  # noqa: E731
        gain = f"{on / off:.2f}x" if on and off else "n/a"
        versus = f"**{on / rllib:.1f}x**" if on and rllib else "-"
        rows.append(
            f"| {algo_name} | {runners} | {hiddens}x{hiddens} | {fmt(on)} | {fmt(off)} | {gain} | {fmt(rllib)} | {versus} |"
        )
    return "\n".join(rows)


# --------------------------------------------------------------------------- #
# the measurements behind the scaling analysis (benchmarks/scaling.md)
# --------------------------------------------------------------------------- #
def scaling() -> None:
    """What limits throughput as runners are added: broadcast, learner, object-store traffic, driver loop."""
    import numpy as np
    import ray

    os.environ.setdefault("CORRAL_RESULTS_DIR", "/tmp/corral_bench_results")
    from corral.core import AsyncSampler
    from corral.core.sampling.remote_env_runner import RemoteSample

    ray.init(num_cpus=RAY_CPUS, include_dashboard=False, configure_logging=False)
    echo = ray.remote(num_cpus=0)(_Echo)
    out: dict[str, Any] = {}

    # 1. Weight broadcast: bytes and put time for the models measured, and for a large one.
    for name, algo_name, hiddens in (
        ("ppo_64x64", "PPO", (64, 64)),
        ("impala_64x64", "IMPALA", (64, 64)),
        ("mlp_1024x1024x3", "PPO", (1024,) * 3),
    ):
        algo = corral_algo(algo_name, 0, hiddens)
        state = algo.get_policy().get_sampling_state()
        size = len(pickle.dumps(state))
        put_s = min(_seconds(lambda state=state: ray.put(state)) for _ in range(20))
        out[f"broadcast_{name}"] = {"bytes": size, "put_ms": put_s * 1e3}
        algo.stop()

    # 2. Learner throughput: env steps per second one learner can consume.
    ppo = corral_algo("PPO", 0)
    batch = ppo.sample(PPO["train_batch_size"])
    learn_s = statistics.median(_seconds(lambda: ppo.learn_on_batch(batch)) for _ in range(5))
    out["learner_ppo"] = {
        "env_steps_per_update": batch.env_steps,
        "update_s": learn_s,
        "env_steps_per_s": batch.env_steps / learn_s,
    }
    sample_s = statistics.median(_seconds(lambda: ppo.sample(PPO["train_batch_size"])) for _ in range(5))
    out["sampler_ppo_one_process"] = {"env_steps_per_s": batch.env_steps / sample_s}
    ppo.stop()
    impala = corral_algo("IMPALA", 0)
    ibatch = impala.sample(IMPALA["train_batch_size"])
    learn_s = statistics.median(_seconds(lambda: impala.learn_on_batch(ibatch)) for _ in range(20))
    out["learner_impala"] = {
        "env_steps_per_update": ibatch.env_steps,
        "update_s": learn_s,
        "env_steps_per_s": ibatch.env_steps / learn_s,
    }

    # 3. Object-store traffic: bytes per env step of what a runner sends back.
    call = impala.env_runner_group.local_env_runner.sample()
    out["traffic_impala_sample_call"] = {"bytes": len(pickle.dumps(call)), "env_steps": call.env_steps,
                                         "bytes_per_env_step": len(pickle.dumps(call)) / call.env_steps}  # fmt: skip
    out["traffic_ppo_train_batch"] = {"bytes_per_env_step": len(pickle.dumps(batch)) / batch.env_steps}

    # 4. The driver's loop: how many finished sample calls per second it can take in (launch, wait, get),
    # with actors that answer at once with a real batch, so only the driver's side is measured.
    for actors_n in (2, 16, 64):
        actors = [echo.remote(call) for _ in range(actors_n)]
        ray.get([a.sample.remote(None) for a in actors])
        calls, start = 0, time.perf_counter()
        in_flight = {a.sample.remote(None): a for a in actors for _ in range(2)}
        while time.perf_counter() - start < 5:
            done, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in done:
                ray.get(ref)
                actor = in_flight.pop(ref)
                in_flight[actor.sample.remote(None)] = actor
                calls += 1
        rate = calls / (time.perf_counter() - start)
        out[f"driver_calls_per_s_{actors_n}_actors"] = {"calls_per_s": rate, "env_steps_per_s": rate * call.env_steps}
        for actor in actors:
            ray.kill(actor)

    # 4a. The whole learner loop (collect, learn, broadcast every update) fed by instant runners:
    # the most env steps per second one IMPALA learner process can take in, whatever the runner count.
    for actors_n in (2, 16, 64):
        group = _InstantRunners(
            [echo.remote(RemoteSample(call, [], {})) for _ in range(actors_n)], impala.env_runner_group.local_env_runner
        )
        ray.get([actor.sample.remote(None) for actor in group.actors])  # started, so process start-up is not measured
        sampler = AsyncSampler(group, 2, 16)
        policy = impala.get_policy()
        sampler.publish_weights(policy.get_sampling_state(), 0)
        version = 0

        def update(sampler: AsyncSampler = sampler, policy: Any = policy) -> int:
            nonlocal version
            batch, _ = sampler.next_batch(IMPALA["train_batch_size"])
            impala.learn_on_batch(batch)
            version += 1
            sampler.publish_weights(policy.get_sampling_state(), version)
            return batch.env_steps

        timed(update, 1)
        out[f"impala_learner_loop_{actors_n}_instant_runners"] = {"env_steps_per_s": timed(update, 5)}
        for actor in group.actors:
            ray.kill(actor)
    impala.stop()

    # 4b. What one pass of the driver loop costs as the number of calls in flight grows (2 per runner):
    # ray.wait over every call, as the asynchronous sampler does once per collected batch.
    for refs_n in (4, 32, 128, 512):
        refs = [ray.put(call) for _ in range(refs_n)]
        wait_all = lambda refs=refs: ray.wait(refs, num_returns=len(refs), timeout=0)  # noqa: E731 (one name for a timed call)
        wait_s = statistics.median(_seconds(wait_all) for _ in range(50))
        out[f"driver_wait_ms_{refs_n}_calls"] = wait_s * 1e3

    # 5. Broadcast to many readers: one put, N actors each read it once.
    state = np.zeros(1 << 20, dtype=np.float32)  # 4 MiB of weights
    readers = [echo.remote(None) for _ in range(16)]
    ray.get([r.sample.remote(None) for r in readers])
    ref = ray.put(state)
    out["broadcast_4MiB_to_16_actors_one_put_s"] = _seconds(lambda: ray.get([r.sample.remote(ref) for r in readers]))
    out["broadcast_4MiB_to_16_actors_16_puts_s"] = _seconds(lambda: ray.get([r.sample.remote(ray.put(state)) for r in readers]))

    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "rllib_scaling.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


class _Echo:
    """An actor body that answers every sample call at once with the same payload."""

    def __init__(self, payload: Any) -> None:
        self.payload = payload

    def sample(self, _weights: Any) -> Any:
        return self.payload


class _InstantRunners:
    """Stands in for an EnvRunnerGroup whose remote runners are the given actors (for the learner-loop measurement)."""

    def __init__(self, actors: list[Any], local_env_runner: Any) -> None:
        self.actors = actors
        self.local_env_runner = local_env_runner

    def healthy_remote_ids(self) -> list[int]:
        return list(range(1, len(self.actors) + 1))

    def remote_env_runner(self, index: int) -> Any:
        return self.actors[index - 1]

    def replace_failed(self) -> None:
        pass

    def accept(self, result: Any) -> Any:
        return result.batch


def _seconds(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    """The command line: ``throughput`` or ``scaling``, or a child run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("throughput", help="the corral/RLlib table")
    t.add_argument("--seconds", type=float, default=20.0, help="measurement window per case")
    t.add_argument("--repeats", type=int, default=1)
    t.add_argument("--only", choices=sorted({name for name, _ in CASES}), help="one algorithm (its own results file)")
    sub.add_parser("scaling", help="the measurements behind benchmarks/scaling.md")
    lt = sub.add_parser("learner_thread", help="IMPALA and APPO with and without the learner thread, and RLlib's")
    lt.add_argument("--seconds", type=float, default=20.0, help="measurement window per case")
    lt.add_argument("--repeats", type=int, default=2)
    c = sub.add_parser("_child")
    c.add_argument("library")
    c.add_argument("algo")
    c.add_argument("runners", type=int)
    c.add_argument("seconds", type=float)
    c.add_argument("overrides", nargs="?", default="{}", help="corral options as JSON")
    args = parser.parse_args()
    if args.command == "throughput":
        throughput(args.seconds, args.repeats, args.only)
    elif args.command == "scaling":
        scaling()
    elif args.command == "learner_thread":
        learner_thread(args.seconds, args.repeats)
    else:
        child(args.library, args.algo, args.runners, args.seconds, json.loads(args.overrides))


if __name__ == "__main__":
    main()

"""RLlib's own example scripts, run on corral with one change: ``ray.rllib`` becomes ``corral.rllib``.

RLlib's code is never committed here: :func:`fetch_examples` downloads Ray's
published wheel (``pip download ray==2.9.0 --no-deps``), extracts
``ray/rllib/examples/`` and rewrites ``ray.rllib`` to ``corral.rllib`` and
nothing else. :data:`SCRIPTS` lists the scripts that need nothing corral
cannot have, each with its own flags; :data:`CANNOT_RUN` names the others with
the reason. A script that fails only on the versions installed here (a Ray,
NumPy or PettingZoo call that newer releases dropped, where corral allows the
older ones) stays listed, failing. Run the whole list (half an hour to an hour) with::

    python -m tests.rllib_examples.harness [--only NAME ...] [--cache DIR] [--show]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

RAY_VERSION = "2.9.0"
OVERLAY = Path(__file__).parent / "overlay"
FAST = ["--stop-iters", "2", "--framework", "torch"]


@dataclass(frozen=True)
class Script:
    """One example script and how this list runs it."""

    path: str
    """its path under ``rllib/examples/``"""
    flags: list[str] = field(default_factory=lambda: list(FAST))
    """the script's own command-line flags"""
    ci: bool = False
    """run in CI (the rest runs with ``-m rllib_full`` or this module's command)"""


SCRIPTS = [
    Script("custom_env.py", ci=True),
    Script("cartpole_lstm.py", ci=True),
    Script("custom_metrics_and_callbacks.py", ["--stop-iters", "2"]),
    Script("custom_eval.py"),
    Script("curriculum_learning.py"),
    Script("custom_rnn_model.py"),
    Script("attention_net.py"),
    Script("autoregressive_action_dist.py"),
    Script("centralized_critic.py"),
    Script("centralized_critic_2.py"),
    Script("complex_struct_space.py", ["--framework", "torch"]),
    Script("custom_input_api.py"),
    Script("custom_model_loss_and_metrics.py"),
    Script("custom_train_fn.py", ["--framework", "torch"]),
    Script("custom_experiment.py", ["--train-iterations", "2"]),
    Script("deterministic_training.py"),
    Script("env_rendering_and_recording.py"),
    Script("fractional_gpus.py", ["--stop-iters", "2", "--framework", "torch", "--num-gpus", "0"]),
    Script("hierarchical_training.py"),
    Script("lstm_auto_wrapping.py", []),
    Script("multi_agent_cartpole.py"),
    Script("multi_agent_custom_policy.py"),
    Script("multi_agent_different_spaces_for_agents.py"),
    Script("multi_agent_independent_learning.py", ["--num-gpus", "0", "--as-test"]),
    Script("multi_agent_two_trainers.py"),
    Script("nested_action_spaces.py"),
    Script("offline_rl.py", ["--stop-iters", "2"]),
    Script("parallel_evaluation_and_training.py"),
    Script("parametric_actions_cartpole.py"),
    Script("remote_base_env_with_custom_api.py"),
    Script("remote_envs_with_inference_done_on_main_node.py"),
    Script("replay_buffer_api.py"),
    Script("restore_1_of_n_agents_from_checkpoint.py"),
    # --as-test: its learned policy must beat the heuristics by 1,000 within 100k steps, with and without an LSTM
    Script("rock_paper_scissors_multiagent.py", ["--as-test"], ci=True),
    Script("saving_experiences.py", []),
    Script("two_step_game.py"),
    Script("two_trainer_workflow.py", ["--torch", "--stop-iters", "2"]),
    # its manual loop after training ends only if RandomEnv's episode terminates within the 10 steps it then sets
    # (61% of runs; after them it truncates, which the loop ignores): otherwise it loops on, with RLlib too
    Script("action_masking.py"),
    Script("compute_adapted_gae_on_postprocess_trajectory.py", []),
]

CANNOT_RUN = {
    "attention_net_supervised.py": "TensorFlow only (trains a Keras model directly)",
    "custom_keras_model.py": "TensorFlow only (Keras models)",
    "custom_model_api.py": "calls tf1.enable_eager_execution() on every path: it needs TensorFlow installed even with "
    "--framework torch, with RLlib too",
    "parametric_actions_cartpole_embeddings_learnt_by_model.py": "TensorFlow only (--framework takes tf or tf2; a Keras "
    "embedding model)",
    "custom_recurrent_rnn_tokenizer.py": "TensorFlow tokenizer model in its default path",
    "self_play_league_based_with_open_spiel.py": "OpenSpiel",
    "self_play_with_open_spiel.py": "OpenSpiel",
    "unity3d_env_local.py": "Unity ML-Agents",
    "vizdoom_with_attention_net.py": "VizDoom",
    "sb2rllib_rllib_example.py": "trains 1M steps with no flag to shorten it",
    "multi_agent_parameter_sharing.py": "trains APEX_DDPG for 60,000 episodes on the GPU it asks for (num_gpus: 1), "
    "with no flag to change either",
    "custom_logger.py": "passes one Logger class where Ray 2.9's LegacyLoggerCallback takes a list, which fails with "
    "RLlib too (and Ray 2.10 on has no ray.tune.logger.Logger)",
    "sb2rllib_sb_example.py": "Stable-Baselines3 itself, no RLlib",
    "checkpoint_by_custom_criteria.py": "imports nothing from ray.rllib (it finds PPO through Tune's registry), so the "
    "rewrite leaves it running RLlib itself",
}


def fetch_examples(cache: Path, version: str = RAY_VERSION) -> Path:
    """RLlib's examples folder from Ray's wheel, rewritten to ``corral.rllib``, extracted under ``cache`` (once).

    Args:
        cache: a folder for the wheel and the extracted scripts.
        version: the Ray release whose wheel to take (the list is made for :data:`RAY_VERSION`).

    Returns:
        The folder holding ``examples/``.
    """
    cache.mkdir(parents=True, exist_ok=True)
    root = cache / f"rllib-{version}"
    if root.exists():
        if not (root / "tests" / "data").exists():  # extracted before the harness wrote test data
            write_test_data(root)
        return root
    wheels = sorted(cache.glob(f"ray-{version}-*.whl"))
    if not wheels:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                f"ray=={version}",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "-d",
                str(cache),
            ],
            check=True,
        )
        wheels = sorted(cache.glob(f"ray-{version}-*.whl"))
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=".extract-"))
    with zipfile.ZipFile(wheels[0]) as wheel:
        for name in wheel.namelist():
            if name.startswith("ray/rllib/examples/") and not name.endswith("/"):
                target = staging / name.removeprefix("ray/rllib/")
                target.parent.mkdir(parents=True, exist_ok=True)
                data = wheel.read(name)
                if name.endswith(".py"):
                    data = re.sub(rb"\bray\.rllib\b", b"corral.rllib", data)
                target.write_bytes(data)
    write_test_data(staging)
    staging.rename(root)  # whole or absent: a second run never sees half a tree
    return root


TEST_DATA = {"cartpole": "CartPole-v1", "pendulum": "Pendulum-v1"}
"""the folders of RLlib's ``tests/data`` that example scripts read a ``small.json`` from, and the env of each"""


def write_test_data(root: Path, steps: int = 2000) -> None:
    """``tests/data/<env>/small.json`` beside ``examples/``, in RLlib's JSON format, written by corral.

    RLlib's source tree has recorded experiences there that scripts read
    (``custom_model_loss_and_metrics.py``); its wheel does not. A seeded random
    policy's steps stand in, written by ``corral.rllib.offline.JsonWriter``.

    Args:
        root: the folder holding ``examples/``.
        steps: env steps per file.
    """
    import gymnasium as gym

    from corral.rllib.support.offline_io import JsonWriter
    from corral.rllib.support.sample_batch_builder import SampleBatchBuilder

    for folder, env_id in TEST_DATA.items():
        env = gym.make(env_id)
        env.action_space.seed(0)
        builder = SampleBatchBuilder()
        obs, _ = env.reset(seed=0)
        episode, t = 0, 0
        for _ in range(steps):
            action = env.action_space.sample()
            new_obs, reward, terminated, truncated, _ = env.step(action)
            builder.add_values(
                obs=obs, new_obs=new_obs, actions=action, rewards=reward, terminateds=terminated,
                truncateds=truncated, eps_id=episode, t=t, action_prob=1.0, action_logp=0.0,
            )  # fmt: skip
            obs, t = new_obs, t + 1
            if terminated or truncated:
                obs, _ = env.reset()
                episode, t = episode + 1, 0
        staging = root / "tests" / "data" / folder / ".written"
        JsonWriter(staging).write(builder.build_and_reset())
        (written,) = staging.glob("*.json")
        written.rename(staging.parent / "small.json")
        shutil.rmtree(staging)
        env.close()


def run_script(root: Path, script: Script, workdir: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run one script in a fresh process, its HOME, results and Ray's files in ``workdir``.

    Args:
        root: what :func:`fetch_examples` returned.
        script: the script and its flags.
        workdir: an empty folder for everything the run writes.
        timeout: seconds before the run is stopped.

    Returns:
        The finished process (output captured).
    """
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "HOME": str(home),
        "CORRAL_RESULTS_DIR": str(workdir / "corral_results"),
        "CORRAL_RLLIB_EXAMPLES_ROOT": str(root),
        "PYTHONPATH": os.pathsep.join([str(OVERLAY), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "RAY_ADDRESS": "local",
        "RAY_DEDUP_LOGS": "0",
        # RLlib's examples assume a workstation: several ask for 3 to 5 CPUs (a driver and 2 to 4 runners), which
        # a 2-core CI machine would leave pending forever. Ray is told of 8; the processes share the cores.
        "RAY_OVERRIDE_RESOURCES": '{"CPU": 8}',
        # Ray 2.9's scripts call ray.train.report() inside Tune functions, which Ray Train's second version
        # (the default from Ray 2.5x) refuses; this is Ray's own switch back to the first.
        "RAY_TRAIN_V2_ENABLED": "0",
    }
    command = [sys.executable, str(root / "examples" / script.path), *script.flags]
    return subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=env, timeout=timeout, check=False)


def failure(proc: subprocess.CompletedProcess[str]) -> str | None:
    """Why a finished run counts as failed, or None: a non-zero exit, or Tune trials that errored.

    Args:
        proc: the finished run.
    """
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if re.match(r"^\w*(Error|Exception)\b", line)]
        return (errors or lines or [f"exit {proc.returncode}"])[-1][:400]
    if re.search(r"Trial status:.*\bERROR\b|Number of errored trials: [1-9]|TuneError", proc.stdout + proc.stderr):
        return "a Tune trial errored"
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the listed scripts (or ``--only`` some) and print one line per script; exit 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="script file names to run")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "corral-rllib-examples")
    parser.add_argument("--timeout", type=float, default=900, help="seconds each script may run")
    parser.add_argument("--show", action="store_true", help="print the end of a failed script's output")
    parser.add_argument(
        "--ray-version", default=RAY_VERSION, help="another release's examples: the listed scripts it still has, as they are"
    )
    args = parser.parse_args(argv)
    root = fetch_examples(args.cache, args.ray_version)
    chosen = [s for s in SCRIPTS if (not args.only or s.path in args.only) and (root / "examples" / s.path).exists()]
    absent = [s.path for s in SCRIPTS if not (root / "examples" / s.path).exists()]
    if absent:
        print(f"Ray {args.ray_version} has no {', '.join(absent)}", flush=True)
    failed = 0
    for script in chosen:
        workdir = Path(tempfile.mkdtemp(prefix="rllib-example-"))
        start = time.monotonic()
        output = ""
        try:
            proc = run_script(root, script, workdir, args.timeout)
            reason, output = failure(proc), proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            reason = "timed out"
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        failed += reason is not None
        print(f"{'FAIL' if reason else 'ok  '} {script.path:60} {time.monotonic() - start:6.0f}s  {reason or ''}", flush=True)
        if reason and args.show:
            print(output[-6000:], flush=True)
    print(f"{len(chosen) - failed} of {len(chosen)} ran to exit 0 with no errored trial")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The ``corral`` command: ``train``, ``evaluate`` (alias ``rollout``), ``list`` and ``new-plugin``.

A :class:`~corral.errors.CorralError` (or malformed JSON/YAML) is the
user's mistake: it is printed as one line and the exit status is 2. Anything
else is a bug and keeps its traceback. ``corral list`` imports neither torch
nor any plugin (unless ``--check``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from corral.cli_progress import learner_lines, learns_from_data_only, progress_line, result_json, show_log_messages
from corral.cli_stop import (
    BUDGET_KEYS,
    DEFAULT_BUDGET_STEPS,
    check_stop_leaves,
    checked_stop,
    default_stop,
    goal_key,
    stop_reason,
)
from corral.core.results import finite_number, result_value
from corral.errors import CheckpointError, ConfigError, CorralError, did_you_mean


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``corral`` console script; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(_normalise(list(sys.argv[1:] if argv is None else argv)))
    try:
        return int(args.handler(args) or 0)
    except CorralError as exc:
        print(f"corral: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("corral: interrupted", file=sys.stderr)
        return 130


def _normalise(argv: list[str]) -> list[str]:
    """Accept ``rollout`` for ``evaluate`` and ``train file X`` for ``train -f X``, as the seeds' docs do."""
    if argv[:1] == ["rollout"]:
        argv[0] = "evaluate"
    if argv[:2] == ["train", "file"]:
        argv[1] = "-f"
    return argv


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="corral", description="Train and evaluate reinforcement-learning agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train an algorithm on an environment")
    train.add_argument("--algo", "--run", dest="algo", help="registered algorithm name, e.g. PPO (`corral list`)")
    train.add_argument("--env", help="gymnasium id, 'package.module:Class', or a registered env name")
    train.add_argument("-f", "--file", help="a YAML file of experiments: name: {env, run, stop, config}")
    train.add_argument(
        "--stop",
        type=_json_object("--stop"),
        default=None,
        help="stop when any result key reaches its value, e.g. '{\"episode_reward_mean\": 475}' (default: the env's "
        f"reward_threshold in gymnasium's registry, and at most {DEFAULT_BUDGET_STEPS:,} env steps)",
    )
    train.add_argument("--config", type=_json_object("--config"), default=None, help="config overrides as JSON")
    train.add_argument("--checkpoint-freq", type=int, default=None, help="save a checkpoint every N iterations")
    train.add_argument(
        "--keep-checkpoints-num", type=int, default=None, metavar="N", help="keep only N checkpoints (the newest, or the best)"
    )
    train.add_argument(
        "--checkpoint-score-attr",
        metavar="KEY",
        help="the result key that ranks checkpoints for --keep-checkpoints-num; 'min-KEY' keeps the lowest",
    )
    train.add_argument(
        "--fail-below",
        nargs="?",
        type=float,
        const=math.nan,
        metavar="REWARD",
        help="exit with status 3 if the best episode_reward_mean stayed below REWARD (default: the --stop reward)",
    )
    train.add_argument(
        "--resume",
        "--restore",
        metavar="CHECKPOINT",
        help="continue a run from a checkpoint of it (or from an experiment folder's latest), in its experiment folder "
        "(its --stop unless given)",
    )
    train.add_argument(
        "--trust-code",
        action="store_true",
        help="with --resume: import what the checkpoint names even if it is not registered (only for checkpoints you trust)",
    )
    at_end = train.add_mutually_exclusive_group()
    at_end.add_argument(
        "--checkpoint-at-end", action="store_true", default=None, help="save a checkpoint when training ends (the default)"
    )
    at_end.add_argument(
        "--no-checkpoint", dest="checkpoint_at_end", action="store_false", default=None, help="save no checkpoint at the end"
    )
    train.add_argument("--storage-path", help="folder for experiment folders (default $CORRAL_RESULTS_DIR or ~/corral_results)")
    train.add_argument("--seed", type=int, help="random seed")
    framework = train.add_mutually_exclusive_group()
    framework.add_argument(
        "--framework", choices=("torch", "tf", "tf2", "tfe"), help="RLlib's flag: corral runs on torch ('tf*' with a warning)"
    )
    framework.add_argument("--torch", dest="framework", action="store_const", const="torch", help="RLlib's flag: torch")
    train.add_argument(
        "--trace",
        dest="eager_tracing",
        action="store_const",
        const=True,
        help="RLlib's flag for TensorFlow's eager tracing: accepted and ignored, with a warning (corral runs on torch)",
    )
    train.add_argument(
        "--plot", action="store_true", help="write progress.png (the reward against env steps) into the experiment folder"
    )
    train.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="-v: a line per iteration with each policy's learner stats, and corral's INFO messages; "
        "-vv: each whole result as JSON, and DEBUG messages",
    )
    train.add_argument("--help-config", action="store_true", help="list the algorithm's config options and exit")
    train.set_defaults(handler=_train)

    evaluate = sub.add_parser("evaluate", help="run a checkpoint's policy without exploration (alias: rollout)")
    evaluate.add_argument("checkpoint", help="a checkpoint folder, or an experiment folder (its latest checkpoint)")
    evaluate.add_argument(
        "--algo", "--run", dest="algo", help="the checkpoint's algorithm (RLlib's flag): checked, the checkpoint names it"
    )
    evaluate.add_argument("--env", help="another environment with the same spaces")
    duration = evaluate.add_mutually_exclusive_group()
    duration.add_argument("--episodes", type=int, default=None, help="episodes to run (default 10)")
    duration.add_argument("--steps", type=int, default=None, help="env steps to run")
    evaluate.add_argument(
        "--render", action="store_true", help="show the episodes in a window (the render_env option; the render extra)"
    )
    evaluate.add_argument(
        "--video", metavar="DIR", help="record each episode as an MP4 file in DIR (the record_env option; the render extra)"
    )
    evaluate.add_argument("--video-format", choices=("mp4", "gif"), default="mp4", help="--video's file format")
    evaluate.add_argument("--explore", action="store_true", help="sample actions instead of taking the greedy one")
    evaluate.add_argument(
        "--out", help="write the episodes into this folder as offline data (the output option's files), for input_= to read"
    )
    evaluate.add_argument(
        "--trust-code",
        action="store_true",
        help="import what the checkpoint names even if it is not registered (env classes, callbacks, "
        "models): only for checkpoints you trust",
    )
    evaluate.set_defaults(handler=_evaluate)

    export = sub.add_parser("export", help="write a checkpoint's policy as torch.export and TorchScript files (no corral needed)")
    export.add_argument("checkpoint", help="a checkpoint folder, or an experiment folder (its latest checkpoint)")
    export.add_argument("--out", required=True, help="the folder to write model.pt2, model.pt and model.json into")
    export.add_argument("--policy-id", default="default_policy", help="the policy to export (default: default_policy)")
    export.add_argument("--onnx", type=int, metavar="OPSET", help="also write model.onnx with this ONNX opset (e.g. 17)")
    export.add_argument("--env", help="the environment, if the checkpoint's cannot be made by name")
    export.add_argument("--trust-code", action="store_true", help="as for evaluate: only for checkpoints you trust")
    export.set_defaults(handler=_export)

    plot = sub.add_parser("plot", help="draw learning curves of one or several runs into a picture")
    plot.add_argument("runs", nargs="+", metavar="RUN_DIR", help="experiment folders, or folders of them (~/corral_results)")
    plot.add_argument("--x", choices=("env_steps", "time", "iteration"), default="env_steps", help="the x axis")
    plot.add_argument("--y", default="episode_reward_mean", help="the result key to draw (nested keys joined by '/')")
    plot.add_argument(
        "--out", help="the picture: .png, .svg or .pdf (default RUN_DIR/progress.png for one run, else learning_curves.png)"
    )
    plot.set_defaults(handler=_plot)

    listing = sub.add_parser("list", help="installed algorithms, explorations, off-policy estimators and hook plugins")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.add_argument(
        "--examples", action="store_true", help="the tuned examples shipped with corral, with the reward and budget of each"
    )
    listing.add_argument(
        "--check", action="store_true", help="import every plugin to find broken and incompatible ones (slower: imports torch)"
    )
    listing.set_defaults(handler=_list)

    scaffold = sub.add_parser("new-plugin", help="write a new algorithm plugin distribution, ready to install and test")
    scaffold.add_argument("name", help="the algorithm's name and class name, e.g. MyPG")
    scaffold.add_argument("--dir", default=".", help="where to create the corral-<name> folder (default: here)")
    scaffold.set_defaults(handler=_new_plugin)
    return parser


def _json_object(flag: str) -> Any:
    def parse(text: str) -> dict[str, Any]:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"{flag} is not valid JSON ({exc.msg} at column {exc.colno}): {text}") from None
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"{flag} must be a JSON object like '{{\"key\": value}}', got {text}")
        return value

    return parse


# ---------------------------------------------------------------------- #
# train
# ---------------------------------------------------------------------- #
def _train(args: argparse.Namespace) -> int:
    if args.help_config:
        return _help_config(args.algo or "PPO")
    if args.plot:
        from corral.plot import check_matplotlib

        check_matplotlib()  # before any training
    show_log_messages(args.verbose)
    if args.resume:
        return _resume(args)
    experiments = _experiments_from_file(args.file) if args.file else [_experiment_from_flags(args)]
    for exp in experiments:
        _override_from_flags(exp, args)
    # Validate every experiment fully before any of them starts.
    prepared = [_prepare(exp, args.fail_below) for exp in experiments]
    status = 0
    for exp, config in prepared:
        status = max(status, _run_experiment(exp, config.build(), args))
        if status == INTERRUPTED:  # Ctrl-C stops the whole file
            break
    return status


INTERRUPTED, FAILED_BELOW = 130, 3
"""exit statuses of corral train: interrupted by Ctrl-C (as a shell reports SIGINT), and --fail-below missed"""

RUN_FILE = "corral_run.json"
"""what corral train keeps in the experiment folder for --resume: the experiment's name and stop criteria"""


def _resume(args: argparse.Namespace) -> int:
    """``corral train --resume CHECKPOINT``: restore it and train on in its experiment folder."""
    from corral.core.persistence.checkpoints import read_meta

    if args.file or args.algo or args.env:
        raise ConfigError("--resume continues the checkpoint's own run (its algorithm and env): drop -f, --algo and --env")
    args.resume = _checkpoint_of(args.resume)
    meta = read_meta(args.resume)  # a wrong path fails here, before torch is imported
    folder = Path(args.resume).expanduser().resolve().parent
    saved = _read_run_file(folder)
    exp = {"name": saved.get("name", folder.name), "run": meta["algorithm"], "env": None, "stop": saved.get("stop", {})}
    exp["config"] = {}
    _override_from_flags(exp, args)
    from corral.core.contracts.algorithm import Algorithm

    overrides = {**exp["config"], "logger_config": {"logdir": str(folder)}}  # results go on in the same folder
    algo = Algorithm.from_checkpoint(args.resume, config_overrides=overrides, trust_code=args.trust_code)
    _set_stop(exp, algo.config, args.fail_below)
    print(f"resuming {exp['name']} at iteration {algo.iteration} in {folder}")
    return _run_experiment(exp, algo, args)


def _read_run_file(folder: Path) -> dict[str, Any]:
    try:
        saved = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # a checkpoint saved outside corral train: the run's stop criteria come from --stop
    return saved if isinstance(saved, dict) and isinstance(saved.get("stop", {}), dict) else {}


def _experiment_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    if not args.algo or not args.env:
        raise ConfigError("corral train needs --algo and --env (or -f FILE.yaml); e.g. corral train --algo PPO --env CartPole-v1")
    return {"name": f"{args.algo}_{args.env}", "run": args.algo, "env": args.env, "stop": {}, "config": {}}


EXPERIMENT_OPTIONS = {
    "checkpoint_freq": "checkpoint_frequency",
    "checkpoint_at_end": "checkpoint_at_end",
    "keep_checkpoints_num": "keep_checkpoints_num",
    "checkpoint_score_attr": "checkpoint_score_attribute",
    "storage_path": "storage_path",
    "local_dir": "storage_path",
}
"""keys of an RLlib experiment (beside its config) and the corral option each sets"""

CHECKPOINT_CONFIG_OPTIONS = {
    "checkpoint_frequency": "checkpoint_frequency",
    "checkpoint_at_end": "checkpoint_at_end",
    "num_to_keep": "keep_checkpoints_num",
    "checkpoint_score_attribute": "checkpoint_score_attribute",
    "checkpoint_score_order": "checkpoint_score_order",
}
"""keys of a newer RLlib experiment's checkpoint_config and the corral option each sets"""


TUNED_EXAMPLES = Path(__file__).with_name("tuned_examples")
"""the tuned examples shipped in the package: ``corral train -f ppo_cartpole`` runs one by its name"""


def _experiments_from_file(path: str) -> list[dict[str, Any]]:
    import yaml

    file = Path(path)
    if not file.is_file():
        shipped = TUNED_EXAMPLES / f"{path.removesuffix('.yaml')}.yaml"
        if "/" in path or not shipped.is_file():
            names = sorted(p.stem for p in TUNED_EXAMPLES.glob("*.yaml"))
            raise ConfigError(
                f"experiment file {path!r} does not exist, and no tuned example has that name.{did_you_mean(path, names)} "
                "corral list --examples lists them"
            )
        file = shipped
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{path} must map experiment names to {{env, run, stop, config}}")
    experiments = []
    for name, spec in data.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{path}: experiment {name!r} must be a mapping with keys env, run, stop, config")
        unknown = set(spec) - {"env", "run", "stop", "config", "checkpoint_config", *EXPERIMENT_OPTIONS}
        if unknown:
            key = sorted(unknown)[0]
            raise ConfigError(
                f"{path}: experiment {name!r} has unknown key {key!r}.{did_you_mean(key, ['env', 'run', 'stop', 'config'])}"
            )
        if "run" not in spec:
            raise ConfigError(f"{path}: experiment {name!r} needs 'run: <algorithm name>'")
        config = dict(spec.get("config") or {})
        for key in ("input", "input_"):  # a tuned example's data ships beside it
            if key in config:
                from corral.core.persistence.experience_input import input_beside

                config[key] = input_beside(config[key], file.absolute().parent)
        checkpointing = spec.get("checkpoint_config") or {}
        if not isinstance(checkpointing, dict) or set(checkpointing) - set(CHECKPOINT_CONFIG_OPTIONS):
            raise ConfigError(
                f"{path}: experiment {name!r}: checkpoint_config takes {', '.join(CHECKPOINT_CONFIG_OPTIONS)}, "
                f"got {checkpointing!r:.200}"
            )
        config.update({EXPERIMENT_OPTIONS[key]: value for key, value in spec.items() if key in EXPERIMENT_OPTIONS})
        config.update({CHECKPOINT_CONFIG_OPTIONS[key]: value for key, value in checkpointing.items()})
        experiments.append(
            {
                "name": name,
                "run": spec["run"],
                "env": spec.get("env") or config.pop("env", None),
                "stop": dict(spec.get("stop") or {}),
                "config": config,
            }
        )
    return experiments


def _override_from_flags(exp: dict[str, Any], args: argparse.Namespace) -> None:
    if args.file and args.algo:
        exp["run"] = args.algo
    if args.file and args.env:
        exp["env"] = args.env
    if args.stop is not None:
        exp["stop"] = args.stop
    given_env = (args.config or {}).get("env")
    if given_env is not None and exp["env"] is not None and given_env != exp["env"]:
        raise ConfigError(f"--config sets env {given_env!r} and the run's env is {exp['env']!r}: name the env once")
    config = exp["config"]
    config.update(args.config or {})
    for flag, key in (
        ("checkpoint_freq", "checkpoint_frequency"),
        ("checkpoint_at_end", "checkpoint_at_end"),
        ("keep_checkpoints_num", "keep_checkpoints_num"),
        ("checkpoint_score_attr", "checkpoint_score_attribute"),
        ("storage_path", "storage_path"),
        ("seed", "seed"),
        ("framework", "framework"),
        ("eager_tracing", "eager_tracing"),
    ):
        value = getattr(args, flag)
        if value is not None:
            config[key] = value
    _split_score_order(config)
    config.setdefault("checkpoint_at_end", True)  # a run from the command line ends with a checkpoint to evaluate
    if args.verbose >= 2:
        config.setdefault("log_level", "DEBUG")
    elif args.verbose == 1:
        config.setdefault("log_level", "INFO")


def _split_score_order(config: dict[str, Any]) -> None:
    """RLlib's ``checkpoint_score_attr: min-KEY`` is ``checkpoint_score_attribute=KEY`` in ``"min"`` order."""
    attribute = config.get("checkpoint_score_attribute")
    if isinstance(attribute, str) and attribute.startswith("min-"):
        config["checkpoint_score_attribute"], config["checkpoint_score_order"] = attribute[4:], "min"


def _prepare(exp: dict[str, Any], fail_below: float | None) -> tuple[dict[str, Any], Any]:
    from corral import registry

    algo_class = registry.get_algorithm(str(exp["run"]))
    config = algo_class.get_default_config()
    config.update_from_dict(exp["config"])
    if exp["env"] is not None:
        config.environment(exp["env"])
    config.validate()
    _set_stop(exp, config, fail_below)
    return exp, config


def _set_stop(exp: dict[str, Any], config: Any, fail_below: float | None) -> None:
    """Check the run's stop criteria; a run given none gets the default, and ``stop_note`` the line that says which."""
    from corral.core.environments.envs import resolve_creator

    gymnasium_id, _ = resolve_creator(config.env)  # an unknown env fails here, before anything is built
    if not exp["stop"]:
        exp["stop"], exp["stop_note"] = default_stop(gymnasium_id)
    exp["stop"] = checked_stop(exp["stop"], config, fail_below)


class _Interrupts:
    """Ctrl-C while training: the first lets the iteration finish and then stops; a second abandons it.

    Only in the main thread (where Python delivers signals); elsewhere Ctrl-C is a KeyboardInterrupt at once.
    """

    def __init__(self, console: Any) -> None:
        self.requested = False
        self._console = console
        self._previous: Any = None

    def __enter__(self) -> _Interrupts:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self._console.print("[yellow]Ctrl-C: finishing this iteration, then saving (Ctrl-C again to abandon it)[/yellow]")

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def _run_experiment(exp: dict[str, Any], algo: Any, args: argparse.Namespace) -> int:
    """Train ``algo`` until a stop criterion, Ctrl-C or an error; say why it stopped. Returns the exit status."""
    from rich.console import Console

    # soft_wrap: never break a long path or the evaluate command across lines (it must stay copyable)
    console = Console(stderr=False, highlight=False, soft_wrap=True)
    stop = exp["stop"]
    _write_run_file(algo.logdir, exp)
    if exp.get("stop_note"):
        console.print(exp["stop_note"], markup=False)
    goal = goal_key(stop)
    try:
        reason, best, abandoned = _train_until(algo, stop, goal, console, args.verbose)
    except BaseException:
        algo.stop()
        raise
    last_checkpoint = (None if abandoned else _save_at_end(algo)) or _latest_checkpoint(algo.logdir)
    algo.stop()
    interrupted = reason.startswith("interrupted")
    where = f"at iteration {algo.iteration}, {algo.counters['num_env_steps_sampled']:,} env steps"
    if reason.startswith(f"{goal} "):  # the goal was reached
        console.print(f"stopped: {reason} {where}", markup=False)
    else:
        best_text = f"{best:.1f}" if best is not None else "none yet"
        console.print(f"stopped: {reason} {where}; best {goal} {best_text}", markup=False)
    console.print(f"results: {algo.logdir}", markup=False)
    if last_checkpoint:
        console.print(f"last checkpoint: {last_checkpoint}", markup=False)
        console.print(f"evaluate it with: corral evaluate {last_checkpoint} --episodes 10", markup=False)
        if interrupted:
            console.print(f"resume with: corral train --resume {last_checkpoint}", markup=False)
    elif not algo.config.checkpoint_at_end:
        console.print("no checkpoint was saved (checkpoint_at_end is off); drop --no-checkpoint to keep one")
    if args.plot and algo.iteration and (algo.logdir / "progress.csv").is_file():
        from corral.plot import plot_runs

        plot_runs([algo.logdir], algo.logdir / "progress.png")
        console.print(f"learning curve: {algo.logdir / 'progress.png'}", markup=False)
    return INTERRUPTED if interrupted else _fail_below(args.fail_below, stop, goal, best, console)


def _train_until(algo: Any, stop: dict[str, Any], goal: str, console: Any, verbose: int) -> tuple[str, float | None, bool]:
    """Train until a stop key is reached or Ctrl-C. Returns why it stopped, the best ``goal`` value, and whether
    the last iteration was abandoned (a second Ctrl-C)."""
    best: float | None = None
    result: dict[str, Any] = {}
    checked: set[str] = set()
    status = console.status("starting") if console.is_terminal and verbose == 0 else None
    offline = learns_from_data_only(algo.config)
    try:
        with _Interrupts(console) as interrupts:
            if status:
                status.start()
            while True:
                result = algo.train()
                check_stop_leaves(result, stop, checked)
                value = finite_number(result_value(result, goal))
                if value is not None:
                    best = value if best is None else max(best, value)
                line = progress_line(result, offline)
                if status:
                    status.update(line)
                elif verbose >= 2:
                    console.print_json(result_json(result))
                else:
                    console.print("\n".join([line, *(learner_lines(result) if verbose else [])]), markup=False)
                reason = stop_reason(result, stop)
                if reason is not None:
                    return reason, best, False
                if interrupts.requested:
                    return "interrupted (Ctrl-C)", best, False
    except KeyboardInterrupt:  # a second Ctrl-C: the iteration is abandoned, and nothing of it saved
        return "interrupted (Ctrl-C twice: the last iteration abandoned)", best, True
    finally:
        if status:
            status.stop()
            if result:
                console.print(progress_line(result, offline), markup=False)


def _save_at_end(algo: Any) -> str | None:
    """The checkpoint_at_end, unless the last iteration already saved one (checkpoint_frequency)."""
    if not algo.config.checkpoint_at_end or not algo.iteration:
        return None
    from corral.core.persistence.checkpoints import experiment_checkpoint

    existing = experiment_checkpoint(algo.logdir, algo.iteration)
    return str(existing) if existing.is_dir() else algo.save()


def _latest_checkpoint(logdir: Path) -> str | None:
    from corral.core.persistence.checkpoints import experiment_checkpoints

    found = experiment_checkpoints(logdir)
    return str(found[-1]) if found else None


def _write_run_file(logdir: Path, exp: dict[str, Any]) -> None:
    """Keep the run's name and stop criteria beside its checkpoints (written whole or not at all)."""
    temporary = logdir / f".{RUN_FILE}.tmp"
    temporary.write_text(json.dumps({"name": exp["name"], "stop": exp["stop"]}, indent=2) + "\n", encoding="utf-8")
    temporary.replace(logdir / RUN_FILE)


def _fail_below(fail_below: float | None, stop: dict[str, Any], goal: str, best: float | None, console: Any) -> int:
    if fail_below is None:
        return 0
    threshold = stop[goal] if math.isnan(fail_below) else fail_below
    if best is not None and best >= threshold:
        return 0
    shown = f"{best:.1f}" if best is not None else "never reported"
    console.print(f"failed: best {goal} {shown} is below {threshold:g} (--fail-below): exit status 3", markup=False)
    return FAILED_BELOW


def _help_config(algo: str) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from corral import registry

    config_class = type(registry.get_config(algo))
    table = Table(title=f"{algo} config options", show_lines=False)
    for column in ("option", "builder", "default", "meaning"):
        table.add_column(column)
    for name, field in config_class.model_fields.items():
        default = field.get_default(call_default_factory=True)
        shown = json.dumps(default.model_dump() if hasattr(default, "model_dump") else default, default=str)
        table.add_row(name, f".{config_class.field_group(name)}()", escape(shown), escape(field.description or ""))
    Console(width=None if sys.stdout.isatty() else 240).print(table)  # piped: one line per option
    return 0


def _checkpoint_of(path: str) -> str:
    """A checkpoint folder as given, or the latest checkpoint of an experiment folder (said in a line of its own).

    Raises:
        CheckpointError: ``path`` is an experiment folder that holds no checkpoint.
    """
    from corral.core.persistence.checkpoints import META_FILE, experiment_checkpoints

    folder = Path(path).expanduser()
    if not folder.is_dir() or (folder / META_FILE).exists():
        return path  # a checkpoint, or what read_meta explains is none
    found = experiment_checkpoints(folder)
    if found:
        print(f"{path} is an experiment folder: using its latest checkpoint, {found[-1]}")
        return str(found[-1])
    if (folder / "params.json").is_file():
        raise CheckpointError(
            f"{str(folder)!r} is an experiment folder without a checkpoint_* folder in it; "
            "train with --checkpoint-at-end or --checkpoint-freq N to save one"
        )
    return path


# ---------------------------------------------------------------------- #
# evaluate
# ---------------------------------------------------------------------- #
RECORD_CHUNK = 200
"""env steps per sample call while ``evaluate --out`` records (each call's steps are written together)"""


def _evaluate(args: argparse.Namespace) -> int:
    from corral.core.persistence.checkpoints import read_meta

    for name, value in (("--episodes", args.episodes), ("--steps", args.steps)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}")
    args.checkpoint = _checkpoint_of(args.checkpoint)
    meta = read_meta(args.checkpoint)  # a wrong path fails here, before torch is imported
    if args.algo is not None and str(args.algo).lower() != str(meta["algorithm"]).lower():
        raise ConfigError(
            f"--run {args.algo} does not match the checkpoint, which holds a {meta['algorithm']}; "
            f"drop --run (the checkpoint names its algorithm) or pass --run {meta['algorithm']}"
        )
    from corral.core.contracts.algorithm import Algorithm

    if args.video and args.out:
        raise ConfigError("--video records evaluation episodes and --out writes sampled ones: run evaluate once for each")
    unit = "timesteps" if args.steps else "episodes"
    duration = args.steps or args.episodes or 10
    eval_overrides: dict[str, Any] = {
        "explore": bool(args.explore),
        "render_env": args.render,
        "record_env": args.video or False,
        "record_env_format": args.video_format,
    }
    shown = args.render or args.video
    overrides = {
        "evaluation_duration": duration,
        "evaluation_duration_unit": unit,
        "evaluation_config": eval_overrides,
        "evaluation_num_envs": 1 if shown else None,  # the one sub-environment shown runs every episode
        "num_envs_per_env_runner": 1,
        "log_to_tensorboard": False,
    }
    if args.out:  # the sampler writes what it steps; it acts as evaluation would
        overrides.update(eval_overrides, output=args.out, num_env_runners=0)
    algo = Algorithm.from_checkpoint(args.checkpoint, env=args.env, config_overrides=overrides, trust_code=args.trust_code)
    try:
        metrics = _record(algo, duration, unit) if args.out else algo.evaluate()
    finally:
        algo.stop()  # closes the output files, each complete
    print(
        f"{metrics['episodes_this_iter']} episodes: reward mean {metrics['episode_reward_mean']:.2f} "
        f"(min {metrics['episode_reward_min']:.2f}, max {metrics['episode_reward_max']:.2f}), "
        f"length mean {metrics['episode_len_mean']:.1f}"
    )
    if args.out:
        print(f"Wrote them to {args.out} (offline data: offline_data(input_={args.out!r}) reads it)")
    if args.video:
        print(f"Recorded them in {args.video} (evaluation-episode-N.{args.video_format})")
    return 0


def _record(algo: Any, duration: int, unit: str) -> dict[str, Any]:
    """Step the checkpoint's policy until ``duration`` episodes end (or timesteps pass), writing every step.

    The last episode, if it is still running then, is written as far as it got.
    """
    from corral.core.sampling.metrics import summarize_episodes

    runner = algo.env_runner_group.local_env_runner
    episodes: list[Any] = []
    steps = 0
    while len(episodes) < duration if unit == "episodes" else steps < duration:
        chunk = RECORD_CHUNK if unit == "episodes" else min(RECORD_CHUNK, duration - steps)
        steps += runner.sample(num_steps=chunk).env_steps
        episodes += runner.get_metrics()
    finished = episodes[:duration] if unit == "episodes" else episodes
    return {**summarize_episodes(finished), "episodes_this_iter": len(finished)}


# ---------------------------------------------------------------------- #
# export
# ---------------------------------------------------------------------- #
def _export(args: argparse.Namespace) -> int:
    from corral.core.persistence.checkpoints import read_meta

    args.checkpoint = _checkpoint_of(args.checkpoint)
    read_meta(args.checkpoint)  # a wrong path fails here, before torch is imported
    from corral.core.contracts.algorithm import Algorithm
    from corral.core.persistence.policy_export import check_onnx_opset

    if args.onnx is not None:
        check_onnx_opset(args.onnx)  # before the checkpoint is loaded
    overrides = {"num_envs_per_env_runner": 1, "log_to_tensorboard": False}
    algo = Algorithm.from_checkpoint(args.checkpoint, env=args.env, config_overrides=overrides, trust_code=args.trust_code)
    try:
        path = algo.export_policy_model(args.out, args.policy_id, onnx=args.onnx)
    finally:
        algo.stop()
    exported = ["model.pt2"] if (path.parent / "model.pt2").is_file() else []  # unless torch.export could not capture it
    written = [path.name, *exported, *(["model.onnx"] if args.onnx is not None else []), "model.json"]
    print(
        f"Wrote {', '.join(written)} into {path.parent} (model.pt2: torch.export.load(file).module(); "
        "model.pt: TorchScript, torch.jit.load; model.json says what goes in and comes out)"
    )
    return 0


# ---------------------------------------------------------------------- #
# plot
# ---------------------------------------------------------------------- #
def _plot(args: argparse.Namespace) -> int:
    from corral.plot import find_runs, plot_runs

    runs = find_runs(args.runs)
    out = args.out or (runs[0] / "progress.png" if len(runs) == 1 else Path("learning_curves.png"))
    curves = plot_runs(runs, out, x=args.x, y=args.y)
    print(f"Wrote {out}: {args.y} against {args.x} for {len(curves)} run{'s' if len(curves) != 1 else ''}")
    return 0


# ---------------------------------------------------------------------- #
# list
# ---------------------------------------------------------------------- #
def _list(args: argparse.Namespace) -> int:
    if args.examples:
        return _list_examples(args.json)
    from corral import registry

    sections = {
        "algorithms": registry.list_algorithms(args.check),
        "explorations": registry.list_explorations(args.check),
        "off-policy estimators": registry.list_estimators(args.check),
        "hook plugins": registry.list_hook_plugins(args.check),
    }
    if args.json:
        print(json.dumps({k.replace(" ", "_"): [asdict(p) for p in v] for k, v in sections.items()}, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    # Piped output (grep, a file) gets room for whole names and entry points instead of rich's 80-column cut.
    console = Console(width=None if sys.stdout.isatty() else 240)
    for title, plugins in sections.items():
        table = Table(title=title, title_justify="left")
        for column in ("name", "provider", "version", "entry point", "status"):
            table.add_column(column)
        for p in plugins:
            status = p.status if not p.error else f"{p.status}: {p.error.splitlines()[0]}"
            style = {"broken": "red", "incompatible": "red", "conflict": "yellow", "shadowed": "yellow", "blocked": "dim"}.get(
                p.status, ""
            )
            table.add_row(p.name, p.dist or "", p.version or "", p.value, f"[{style}]{status}[/{style}]" if style else status)
        if not plugins:
            table.add_row("(none)", "", "", "", "")
        console.print(table)
    return 0


def _list_examples(as_json: bool) -> int:
    """Each shipped tuned example's experiments: the name to run it by, algorithm, env, and its stop block."""
    rows = []
    for file in sorted(TUNED_EXAMPLES.glob("*.yaml")):
        for exp in _experiments_from_file(str(file)):
            stop = exp["stop"]
            reward = {key: value for key, value in stop.items() if key not in BUDGET_KEYS}
            budget = {key: value for key, value in stop.items() if key in BUDGET_KEYS}
            rows.append({"name": file.stem, "algorithm": exp["run"], "env": exp["env"], "reward": reward, "budget": budget})
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="tuned examples (corral train -f NAME)", title_justify="left")
    for column in ("name", "algorithm", "env", "reaches", "within"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["name"],
            row["algorithm"],
            str(row["env"]),
            ", ".join(f"{key} {value:g}" for key, value in row["reward"].items()),
            ", ".join(f"{key} {value:,}" for key, value in row["budget"].items()),
        )
    Console(width=None if sys.stdout.isatty() else 240).print(table)
    return 0


# ---------------------------------------------------------------------- #
# new-plugin
# ---------------------------------------------------------------------- #
def _new_plugin(args: argparse.Namespace) -> int:
    from corral.scaffold import new_plugin

    path = new_plugin(args.name, args.dir)
    print(
        f'Wrote {path}. Next:\n  pip install -e "{path}[test]"\n  python -m pytest {path}\n'
        f"  corral train --algo {args.name} --env CartPole-v1"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

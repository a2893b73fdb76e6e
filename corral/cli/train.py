"""``corral train``: run experiments until their stop criteria, Ctrl-C or an error, saying why each stopped.

``--resume`` goes on from a checkpoint in its experiment folder.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral.cli.experiments import checkpoint_of, experiment_from_flags, experiments_from_file, override_from_flags
from corral.cli.progress import learner_lines, learns_from_data_only, progress_line, result_json, show_log_messages
from corral.cli.stop import DEFAULT_BUDGET_STEPS, check_stop_leaves, checked_stop, default_stop, goal_key, stop_reason
from corral.core.results import finite_number, result_value
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.cli.serve import Serving


def add_parser(sub: Any) -> None:
    """The ``train`` command's flags."""
    train = sub.add_parser("train", help="train an algorithm on an environment")
    add_run_flags(train, env_help="gymnasium id, 'package.module:Class', or a registered env name")
    train.set_defaults(handler=_train, serving=None)


def add_run_flags(train: argparse.ArgumentParser, env_help: str) -> None:
    """The flags of a training run, which ``corral train`` and ``corral serve`` share.

    Args:
        train: the command's parser.
        env_help: what ``--env`` means for the command.
    """
    train.add_argument("--algo", "--run", dest="algo", help="registered algorithm name, e.g. PPO (`corral list`)")
    train.add_argument("--env", help=env_help)
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


def _train(args: argparse.Namespace) -> int:
    if args.help_config:
        return _help_config(args.algo or "PPO")
    if args.plot:
        from corral.plot import check_matplotlib

        check_matplotlib()  # before any training
    show_log_messages(args.verbose)
    if args.resume:
        return _resume(args)
    experiments = experiments_from_file(args.file) if args.file else [experiment_from_flags(args)]
    for exp in experiments:
        override_from_flags(exp, args)
    # Validate every experiment fully before any of them starts.
    prepared = [_prepare(exp, args.fail_below, args.serving) for exp in experiments]
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
    args.resume = checkpoint_of(args.resume)
    meta = read_meta(args.resume)  # a wrong path fails here, before torch is imported
    folder = Path(args.resume).expanduser().resolve().parent
    saved = _read_run_file(folder)
    exp = {"name": saved.get("name", folder.name), "run": meta["algorithm"], "env": None, "stop": saved.get("stop", {})}
    exp["config"] = {}
    override_from_flags(exp, args)
    from corral.core.training.algorithm import Algorithm

    overrides = {**exp["config"], "logger_config": {"logdir": str(folder)}}  # results go on in the same folder
    if args.serving is not None:
        overrides.update(args.serving.overrides())
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


def _prepare(exp: dict[str, Any], fail_below: float | None, serving: Serving | None) -> tuple[dict[str, Any], Any]:
    from corral import registry

    algo_class = registry.get_algorithm(str(exp["run"]))
    config = algo_class.get_default_config()
    config.update_from_dict(exp["config"])
    if exp["env"] is not None:
        config.environment(exp["env"])
    config.validate()
    _set_stop(exp, config, fail_below)
    return exp, config if serving is None else serving.configure(config)


def _set_stop(exp: dict[str, Any], config: Any, fail_below: float | None) -> None:
    """Check the run's stop criteria; a run given none gets the default, and ``stop_note`` the line that says which."""
    from corral.core.environments.envs import resolve_creator

    env = config.env if config.env is not None else config.evaluation_config.get("env")  # a served run's: its spaces'
    gymnasium_id, _ = resolve_creator(env)  # an unknown env fails here, before anything is built
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
    if args.serving is not None:
        console.print(args.serving.announce(algo), markup=False)
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

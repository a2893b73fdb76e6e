"""What ``corral train`` runs: experiments from a YAML file (RLlib's layout) or from flags.

Also the checkpoint an experiment folder stands for (``evaluate``, ``export``, ``--resume``).

Kept free of heavy imports (``corral list --examples`` reads the tuned examples).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from corral.errors import CheckpointError, ConfigError, did_you_mean


def experiment_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The one experiment ``--algo`` and ``--env`` name, before the other flags are applied.

    Args:
        args: the parsed ``train`` flags.

    Returns:
        ``{name, run, env, stop, config}`` with an empty stop and config.

    Raises:
        ConfigError: ``--algo`` or ``--env`` is missing.
    """
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


TUNED_EXAMPLES = Path(__file__).parent.parent / "tuned_examples"
"""the tuned examples shipped in the package: ``corral train -f ppo_cartpole`` runs one by its name"""


def experiments_from_file(path: str) -> list[dict[str, Any]]:
    """The experiments of a YAML file (RLlib's ``name: {env, run, stop, config}``), or of a tuned example by its name.

    Args:
        path: a YAML file, or the name of a tuned example shipped with corral (``ppo_cartpole``).

    Returns:
        One ``{name, run, env, stop, config}`` per experiment, RLlib's experiment keys
        (``checkpoint_freq``, ``checkpoint_config``, ...) turned into config options, and
        offline input paths resolved beside the file.

    Raises:
        ConfigError: no such file or example, invalid YAML, or an experiment with an unknown key.
    """
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
                from corral.integrations.offline.experience_input import input_beside

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


def override_from_flags(exp: dict[str, Any], args: argparse.Namespace) -> None:
    """Apply the command line to an experiment in place: its flags win over the file's values.

    Args:
        exp: an experiment from :func:`experiments_from_file` or :func:`experiment_from_flags`.
        args: the parsed ``train`` flags.

    Raises:
        ConfigError: ``--config`` names another env than the run's.
    """
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


def checkpoint_of(path: str) -> str:
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

"""``corral export``: a checkpoint's policy as files that run without corral (torch.export, TorchScript, ONNX)."""

from __future__ import annotations

import argparse
from typing import Any

from corral.cli.experiments import checkpoint_of


def add_parser(sub: Any) -> None:
    """The ``export`` command's flags."""
    export = sub.add_parser("export", help="write a checkpoint's policy as torch.export and TorchScript files (no corral needed)")
    export.add_argument("checkpoint", help="a checkpoint folder, or an experiment folder (its latest checkpoint)")
    export.add_argument("--out", required=True, help="the folder to write model.pt2, model.pt and model.json into")
    export.add_argument("--policy-id", default="default_policy", help="the policy to export (default: default_policy)")
    export.add_argument("--onnx", type=int, metavar="OPSET", help="also write model.onnx with this ONNX opset (e.g. 17)")
    export.add_argument("--env", help="the environment, if the checkpoint's cannot be made by name")
    export.add_argument("--trust-code", action="store_true", help="as for evaluate: only for checkpoints you trust")
    export.set_defaults(handler=_export)


def _export(args: argparse.Namespace) -> int:
    from corral.core.persistence.checkpoints import read_meta

    args.checkpoint = checkpoint_of(args.checkpoint)
    read_meta(args.checkpoint)  # a wrong path fails here, before torch is imported
    from corral.core.persistence.policy_export import check_onnx_opset
    from corral.core.training.algorithm import Algorithm

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

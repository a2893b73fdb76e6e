"""FusedAdam: torch.optim.Adam(fused=True)'s steps and state layout, without importing torch._dynamo."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch

from corral.core import FusedAdam, adam


def _nets() -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    other = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    other.load_state_dict(net.state_dict())
    return net, other


def _groups(net: torch.nn.Module) -> list[dict]:
    first, second = net[0], net[2]
    return [{"params": list(first.parameters()), "name": "first"}, {"params": list(second.parameters()), "lr": 0.05}]


def _step(net: torch.nn.Module, optimizer, seed: int, skip_bias: bool = False) -> None:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 3, generator=generator)
    optimizer.zero_grad(set_to_none=True)
    net(x).pow(2).mean().backward()
    if skip_bias:
        net[2].bias.grad = None  # a parameter without a gradient is left alone, as torch.optim leaves it
    optimizer.step()


@pytest.mark.parametrize(
    "options",
    [{}, {"amsgrad": True}, {"maximize": True}, {"weight_decay": 0.1, "betas": (0.8, 0.99), "eps": 1e-5}],
)
def test_steps_are_torch_fused_adams_to_the_bit(options) -> None:
    ours_net, torch_net = _nets()
    ours = FusedAdam(_groups(ours_net), lr=0.01, **options)
    theirs = torch.optim.Adam(_groups(torch_net), lr=0.01, fused=True, **options)
    for seed in range(6):
        _step(ours_net, ours, seed, skip_bias=seed == 2)
        _step(torch_net, theirs, seed, skip_bias=seed == 2)
    for mine, reference in zip(ours_net.parameters(), torch_net.parameters(), strict=True):
        assert torch.equal(mine, reference)
    steps = [int(state["step"]) for state in ours.state.values()]
    assert sorted(steps) == sorted(int(state["step"]) for state in theirs.state.values())
    assert min(steps) == 5 and max(steps) == 6  # the second layer's bias missed the step without a gradient


def _moments_equal(a: dict, b: dict) -> None:
    assert a["state"].keys() == b["state"].keys()
    for index, state in a["state"].items():
        for key, value in state.items():
            assert torch.equal(value, b["state"][index][key]), (index, key)


@pytest.mark.parametrize("direction", ["torch to corral", "corral to torch"])
def test_state_dicts_move_between_torch_adam_and_fused_adam(direction) -> None:
    source_net, target_net = _nets()
    make_source = torch.optim.Adam if direction == "torch to corral" else FusedAdam
    make_target = FusedAdam if direction == "torch to corral" else torch.optim.Adam
    source = make_source(_groups(source_net), lr=0.01)
    for seed in range(3):
        _step(source_net, source, seed)
    target_net.load_state_dict(source_net.state_dict())
    target = make_target(_groups(target_net), lr=0.5)
    target.load_state_dict(copy.deepcopy(source.state_dict()))  # as from a file: torch.optim keeps a given tensor
    assert [group["lr"] for group in target.param_groups] == [0.01, 0.05]  # the saved options, as torch restores them
    assert target.param_groups[0]["name"] == "first"
    _moments_equal(source.state_dict(), target.state_dict())
    for seed in range(3, 5):
        _step(source_net, source, seed)
        _step(target_net, target, seed)
    for a, b in zip(source_net.parameters(), target_net.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_state_dict_of_other_groups_is_refused_before_anything_changes() -> None:
    net, _ = _nets()
    optimizer = FusedAdam(_groups(net), lr=0.01)
    _step(net, optimizer, 0)
    before = {k: v.clone() for k, v in optimizer.state_dict()["state"][0].items()}
    one_group = FusedAdam(net.parameters(), lr=0.01).state_dict()
    with pytest.raises(ValueError, match="the saved optimizer state has 1 param groups; this optimizer has 2"):
        optimizer.load_state_dict(one_group)
    saved = optimizer.state_dict()
    saved["param_groups"][1]["params"] = saved["param_groups"][1]["params"][:1]
    with pytest.raises(ValueError, match=r"param groups hold \[2, 1\] parameters; this optimizer's \[2, 2\]"):
        optimizer.load_state_dict(saved)
    assert all(torch.equal(before[k], v) for k, v in optimizer.state_dict()["state"][0].items())


def test_bad_parameters_are_refused_naming_the_fix() -> None:
    net, _ = _nets()
    with pytest.raises(ValueError, match="empty parameter list; give it the model's parameters"):
        FusedAdam([], lr=0.01)
    with pytest.raises(ValueError, match="in more than one param group"):
        FusedAdam([{"params": list(net.parameters())}, {"params": [net[0].weight]}], lr=0.01)
    with pytest.raises(ValueError, match="optimises leaf tensors; got Tensor"):
        FusedAdam([net[0].weight * 2], lr=0.01)


def test_zero_grad_zeroes_or_drops_the_gradients() -> None:
    net, _ = _nets()
    optimizer = FusedAdam(net.parameters(), lr=0.01)
    net(torch.ones(2, 3)).sum().backward()
    optimizer.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in net.parameters())
    optimizer.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_adam_builds_torch_s_class_for_options_only_it_has() -> None:
    net, _ = _nets()
    assert type(adam(net.parameters(), lr=0.01, eps=1e-5)) is FusedAdam
    fallback = adam(net.parameters(), lr=0.01, foreach=True)
    assert type(fallback) is torch.optim.Adam and fallback.defaults["foreach"] is True


def test_building_and_training_default_ppo_does_not_import_torch_dynamo(tmp_path) -> None:
    # torch.optim's first use imports torch._dynamo (0.85 s, 70 MB); corral's default optimizer must not
    script = (
        "import sys, corral\n"
        "algo = corral.get_config('PPO').environment('CartPole-v1').training(train_batch_size=256, minibatch_size=64)"
        ".debugging(seed=0).build()\n"
        "algo.train()\n"
        "print(sorted(m for m in sys.modules if m.startswith('torch._dynamo')))\n"
    )
    env = {"CORRAL_RESULTS_DIR": str(tmp_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_adam_takes_groups_of_generators_or_single_tensors() -> None:
    net, _ = _nets()
    groups = [{"params": net[0].parameters(), "name": "first"}, {"params": net[2].weight}, {"params": [net[2].bias]}]
    optimizer = adam(groups, lr=0.01)
    assert [len(group["params"]) for group in optimizer.param_groups] == [2, 1, 1]
    _step(net, optimizer, 0)
    assert len(optimizer.state) == 4

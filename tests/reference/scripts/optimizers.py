"""The optimizers of `optim` as Transformers' Trainer builds them (Trainer.get_optimizer_cls_and_kwargs
and create_optimizer's two parameter groups), stepped 20 times with gradients that are a fixed
function of the step and the parameter: what tests/lib/optim/optimizers_test.cpp holds lib/optim's
optimizers to.

Three parameters from torch.manual_seed(0), shapes [7, 5], [5], [3, 4, 2]; the first and third in
the group with weight_decay 0.1, the second in the one without. Before step k (1..20) parameter i
gets the gradient

    g = p.float() * 0.3 + cos(arange(numel).reshape(shape) * 0.37 + (1.3 * k + i)) * 0.5

(computed in float32, then cast to the parameter's dtype).

usage: optimizers.py OUT_DIR
    OUT_DIR/<case>.safetensors for each case of CASES: "p<i>.<k>", parameter i after k steps
    (k = 0: the start), with the case's optim, optim_args, learning_rate and dtype in its metadata
    (the C++ test builds its optimizer from those, through TrainingArguments).
"""
import json
import os
import sys
import tempfile

import torch
from safetensors.torch import save_file
from transformers import Trainer, TrainingArguments

SHAPES = [(7, 5), (5,), (3, 4, 2)]
STEPS = 20

# name -> (optim, optim_args, learning_rate, dtype, extra keyword arguments of the optimizer)
CASES = {
    "adamw_torch_fused": ("adamw_torch_fused", "", 1e-2, "float32", {}),
    "adamw_torch": ("adamw_torch", "", 1e-2, "float32", {}),
    # weight_decay in optim_args: Transformers passes it, and each group's own weight_decay
    # overrides it.
    "sgd_nesterov": ("sgd", "momentum=0.9,nesterov=True,weight_decay=0.5", 5e-2, "float32", {}),
    "sgd_dampening": ("sgd", "momentum=0.8,dampening=0.3", 5e-2, "float32", {}),
    "sgd_plain": ("sgd", "", 5e-2, "float32", {}),
    "adagrad_lr_decay": ("adagrad", "lr_decay=0.05,eps=1e-6", 1e-1, "float32", {}),
    # Not reachable through optim_args: LibTorch's Adagrad against PyTorch's on the accumulator's
    # start.
    "adagrad_initial_accumulator": ("adagrad", "", 1e-1, "float32",
                                    {"initial_accumulator_value": 0.1}),
    "rmsprop_centered_momentum": ("rmsprop", "centered=True,momentum=0.5,alpha=0.9,eps=1e-6", 1e-2,
                                  "float32", {}),
    "rmsprop_plain": ("rmsprop", "", 1e-2, "float32", {}),
    "adafactor": ("adafactor", "", 1e-2, "float32", {}),
    "adafactor_bf16": ("adafactor", "", 1e-2, "bfloat16", {}),
}


def gradient(p, k, i):
    idx = torch.arange(p.numel(), dtype=torch.float32).reshape(p.shape)
    g = p.detach().float() * 0.3 + torch.cos(idx * 0.37 + (1.3 * k + i)) * 0.5
    return g.to(p.dtype)


def run(out_dir, name, case):
    optim, optim_args, lr, dtype, extra = case
    torch.manual_seed(0)
    params = [torch.randn(shape).to(getattr(torch, dtype)).requires_grad_() for shape in SHAPES]
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, optim=optim, optim_args=optim_args or None,
                                 learning_rate=lr, weight_decay=0.1, report_to=[])
    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args)
    kwargs = dict(kwargs, **extra)
    groups = [{"params": [params[0], params[2]], "weight_decay": 0.1},
              {"params": [params[1]], "weight_decay": 0.0}]
    optimizer = cls(groups, **kwargs)
    tensors = {f"p{i}.0": p.detach().clone() for i, p in enumerate(params)}
    for k in range(1, STEPS + 1):
        for i, p in enumerate(params):
            p.grad = gradient(p, k, i)
        optimizer.step()
        for i, p in enumerate(params):
            tensors[f"p{i}.{k}"] = p.detach().clone()
    metadata = {"optim": optim, "optim_args": optim_args, "learning_rate": repr(lr),
                "dtype": dtype, "extra": json.dumps(extra), "class": cls.__name__}
    save_file(tensors, os.path.join(out_dir, name + ".safetensors"), metadata=metadata)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name, case in CASES.items():
        run(out_dir, name, case)


if __name__ == "__main__":
    main()

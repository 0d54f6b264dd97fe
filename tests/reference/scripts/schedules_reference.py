"""Transformers' learning-rate schedules (get_scheduler, as Trainer.create_scheduler calls it) and
torch's ReduceLROnPlateau, run on a dummy SGD optimizer: what tests/lib/optim/schedules_test.cpp
holds lib/optim's schedules to.

usage: schedules_reference.py OUT.json
    {"schedules": [{type, kwargs, warmup, total, lr, lrs}], lrs[s] the rate after s scheduler
     steps (s = 0: as made), for s in 0..total + 2;
     "plateaus": [{kwargs, lr, groups, metrics, lrs, states}], lrs[k] the groups' rates and
     states[k] ReduceLROnPlateau's best, num_bad_epochs, cooldown_counter, last_epoch after
     step(metrics[k]);
     "errors": [{type, kwargs, warmup, total, lr, error}]: the cases Transformers refuses (when
     made or at a step up to total), with its exception}
"""
import json
import math
import sys
import warnings

import torch
from transformers import get_scheduler

warnings.simplefilter("ignore")

# (type, kwargs, warmup, total, lr): several kwargs per type, warmup 0 and > 0, totals that the
# warmup and the cycles do not divide.
SCHEDULES = []
for warmup, total in [(0, 37), (7, 53)]:
    SCHEDULES += [
        ("linear", {}, warmup, total, 5e-5),
        ("cosine", {}, warmup, total, 5e-5),
        ("cosine", {"num_cycles": 1.5}, warmup, total, 1e-3),
        ("cosine", {"num_cycles": 0.3}, warmup, total, 0.1),
        ("cosine_with_restarts", {}, warmup, total, 5e-5),
        ("cosine_with_restarts", {"num_cycles": 3}, warmup, total, 1e-3),
        ("cosine_with_restarts", {"num_cycles": 2.5}, warmup, total, 1e-3),
        ("polynomial", {}, warmup, total, 5e-5),
        ("polynomial", {"power": 2.0, "lr_end": 1e-5}, warmup, total, 1e-3),
        ("polynomial", {"power": 0.5, "lr_end": 0.0}, warmup, total, 0.1),
        ("constant", {}, warmup, total, 5e-5),
        ("constant", {"num_cycles": 3}, warmup, total, 5e-5),
        ("constant_with_warmup", {}, warmup, total, 5e-5),
        ("inverse_sqrt", {}, warmup, total, 5e-5),
        ("inverse_sqrt", {"timescale": 13}, warmup, total, 1e-3),
        ("inverse_sqrt", {"timescale": 2.5}, warmup, total, 1e-3),
        ("inverse_sqrt", {"timescale": None}, warmup, total, 1e-3),
        ("cosine_with_min_lr", {"min_lr": 1e-6}, warmup, total, 5e-5),
        ("cosine_with_min_lr", {"min_lr_rate": 0.1, "num_cycles": 1.0}, warmup, total, 1e-3),
        ("cosine_with_min_lr", {"min_lr_rate": 0.05, "min_lr": None}, warmup, total, 1e-3),
        ("cosine_warmup_with_min_lr", {"min_lr": 1e-6}, warmup, total, 5e-5),
        ("cosine_warmup_with_min_lr", {"min_lr_rate": 0.1, "warmup_lr_rate": 0.2}, warmup, total, 1e-3),
        ("cosine_warmup_with_min_lr", {"min_lr_rate": 0.3, "num_cycles": 0.75}, warmup, total, 1e-3),
        ("warmup_stable_decay", {"num_decay_steps": 10}, warmup, total, 5e-5),
        ("warmup_stable_decay", {"num_decay_steps": 9, "warmup_type": "cosine", "decay_type": "linear",
                                 "min_lr_ratio": 0.1}, warmup, total, 1e-3),
        ("warmup_stable_decay", {"num_decay_steps": 11, "num_stable_steps": 5, "warmup_type": "1-sqrt",
                                 "decay_type": "1-sqrt", "min_lr_ratio": 0.05}, warmup, total, 1e-3),
        ("warmup_stable_decay", {"num_decay_steps": 8, "decay_type": "cosine", "num_cycles": 0.7,
                                 "min_lr_ratio": 0.2}, warmup, total, 1e-3),
    ]
SCHEDULES.append(("linear", {}, 10, 1, 1e-3))  # warmup past the end
SCHEDULES.append(("polynomial", {"power": 3.0}, 4, 9, 2e-3))

# ReduceLROnPlateau: (kwargs, lr, groups, metrics).
WAVY = [1.0, 0.9, 0.95, 0.95, 0.89, 0.9, 0.91, 0.92, 0.93, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6,
        0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.7]
PLATEAUS = [
    ({}, 1e-3, 1, WAVY + [0.6] * 15),
    ({"patience": 2}, 1e-3, 2, WAVY),
    ({"patience": 1, "cooldown": 2, "factor": 0.5}, 0.1, 1, WAVY),
    ({"patience": 0, "min_lr": [1e-4, 3e-4], "factor": 0.3}, 1e-3, 2, WAVY),
    ({"patience": 1, "min_lr": 2e-4, "eps": 1e-4}, 1e-3, 1, WAVY),
    ({"mode": "max", "patience": 2, "threshold": 0.05}, 1e-3, 1, [0.1, 0.2, 0.205, 0.21, 0.3, 0.2, 0.1, 0.3]),
    ({"mode": "max", "threshold_mode": "abs", "threshold": 0.01, "patience": 1}, 1e-3, 1,
     [0.1, 0.105, 0.2, 0.2, 0.2, 0.25, 0.2]),
    ({"threshold_mode": "abs", "threshold": 0.05, "patience": 1}, 1e-3, 1, WAVY),
    ({"patience": 1}, 1e-3, 1, [1.0, float("nan"), float("nan"), 0.5, 0.6, 0.7]),
]

# What Transformers (or torch under it) refuses, when made or at a step.
ERRORS = [
    ("polynomial", {"lr_end": 1e-3}, 0, 10, 1e-3),
    ("polynomial", {"power": -1.0}, 0, 10, 1e-3),
    ("polynomial", {}, 10, 10, 1e-3),
    ("inverse_sqrt", {"timescale": 0}, 0, 10, 1e-3),
    ("cosine_with_min_lr", {}, 0, 10, 1e-3),
    ("cosine_with_min_lr", {"min_lr": 1e-5, "min_lr_rate": 0.1}, 0, 10, 1e-3),
    ("cosine_warmup_with_min_lr", {"num_cycles": 1}, 0, 10, 1e-3),
    ("cosine_with_min_lr", {"min_lr": 1e-5}, 0, 10, 0.0),
    ("warmup_stable_decay", {}, 0, 10, 1e-3),
    ("warmup_stable_decay", {"num_decay_steps": 3, "warmup_type": "exp"}, 0, 10, 1e-3),
    ("warmup_stable_decay", {"num_decay_steps": 3, "decay_type": "step"}, 0, 10, 1e-3),
    ("linear", {"num_cycles": 2}, 0, 10, 1e-3),
    ("cosine", {"power": 2}, 0, 10, 1e-3),
    ("cosine", {"num_warmup_steps": 2}, 0, 10, 1e-3),
    ("polynomial", {"min_lr": 0.1}, 0, 10, 1e-3),
    ("inverse_sqrt", {"num_cycles": 1}, 0, 10, 1e-3),
    ("reduce_lr_on_plateau", {"factor": 1.0}, 0, 10, 1e-3),
    ("reduce_lr_on_plateau", {"mode": "maximum"}, 0, 10, 1e-3),
    ("reduce_lr_on_plateau", {"threshold_mode": "relative"}, 0, 10, 1e-3),
    ("reduce_lr_on_plateau", {"num_cycles": 1}, 0, 10, 1e-3),
]


def optimizer(lr, groups=1):
    return torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)]} for _ in range(groups)], lr=lr)


def finite(x):
    return None if isinstance(x, float) and math.isinf(x) else x


def main():
    out = {"schedules": [], "plateaus": [], "errors": []}
    for kind, kwargs, warmup, total, lr in SCHEDULES:
        opt = optimizer(lr)
        sched = get_scheduler(kind, opt, num_warmup_steps=warmup, num_training_steps=total,
                              scheduler_specific_kwargs=dict(kwargs))
        lrs = [sched.get_last_lr()[0]]
        for _ in range(total + 2):
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr()[0])
        out["schedules"].append({"type": kind, "kwargs": kwargs, "warmup": warmup, "total": total,
                                 "lr": lr, "lrs": lrs})
    for kwargs, lr, groups, metrics in PLATEAUS:
        opt = optimizer(lr, groups)
        sched = get_scheduler("reduce_lr_on_plateau", opt, scheduler_specific_kwargs=dict(kwargs))
        lrs, states = [], []
        for m in metrics:
            sched.step(m)
            lrs.append([g["lr"] for g in opt.param_groups])
            states.append([finite(sched.best), sched.num_bad_epochs, sched.cooldown_counter,
                           sched.last_epoch])
        out["plateaus"].append({"kwargs": kwargs, "lr": lr, "groups": groups,
                                "metrics": [None if math.isnan(m) else m for m in metrics],
                                "lrs": lrs, "states": states})
    for kind, kwargs, warmup, total, lr in ERRORS:
        try:
            opt = optimizer(lr)
            sched = get_scheduler(kind, opt, num_warmup_steps=warmup, num_training_steps=total,
                                  scheduler_specific_kwargs=dict(kwargs))
            for _ in range(total):
                opt.step()
                sched.step()
            error = None
        except Exception as e:  # noqa: BLE001 - the case records whatever Transformers raises
            error = f"{type(e).__name__}: {e}"
        out["errors"].append({"type": kind, "kwargs": kwargs, "warmup": warmup, "total": total,
                              "lr": lr, "error": error})
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

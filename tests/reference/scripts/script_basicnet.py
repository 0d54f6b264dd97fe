"""Writes a model defined in Python as TorchScript, torch.jit.script(model).save(OUT): how a user
brings their own model to `trainer train` (model_name_or_path). The weights are PyTorch's own
initialisation after torch.manual_seed(SEED).

  basic_net  the tutorial's BasicNet (tutorial.py beside this file), verbatim
  mlp        a small MLP for tabular data (FEATURES inputs, CLASSES logits), deterministic
  mlp_bn     the same with batch norm and dropout: nested names (body.0.weight), buffers
             (body.1.running_mean) and a training mode that matters
  own_loss   the MLP taking forward(x, labels=None) and returning {"logits", "loss"} (label-smoothed
             cross-entropy) when given labels, as Transformers' models do

usage: script_basicnet.py OUT.pt [--model basic_net|mlp|mlp_bn|own_loss] [--seed N]
                          [--features F] [--classes C]
"""
import argparse
from typing import Dict, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from tutorial import BasicNet


class Mlp(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc1 = nn.Linear(features, 16)
        self.fc2 = nn.Linear(16, classes)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


class OwnLoss(Mlp):
    def forward(self, x, labels: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        logits = self.fc2(torch.tanh(self.fc1(x)))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits, labels, label_smoothing=0.1)
        return out


class MlpBn(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                  nn.Dropout(0.1))
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.body(x))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--model", choices=["basic_net", "mlp", "mlp_bn", "own_loss"],
                        default="basic_net")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--features", type=int, default=4)
    parser.add_argument("--classes", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    if args.model == "basic_net":
        model = BasicNet()
    else:
        kind = {"mlp": Mlp, "mlp_bn": MlpBn, "own_loss": OwnLoss}[args.model]
        model = kind(args.features, args.classes)
    torch.jit.script(model).save(args.out)


if __name__ == "__main__":
    main()

"""Writes a model defined in Python as TorchScript, torch.jit.script(model).save(OUT): how a user
brings their own model to `trainer train` (model_name_or_path). The weights are PyTorch's own
initialisation after torch.manual_seed(SEED).

  basic_net  the tutorial's BasicNet (tutorial.py beside this file), verbatim
  mlp_bn     a small MLP with batch norm and dropout for tabular data (FEATURES inputs, CLASSES
             logits): nested names (body.0.weight), buffers (body.1.running_mean) and a training
             mode that matters

usage: script_basicnet.py OUT.pt [--model basic_net|mlp_bn] [--seed N] [--features F]
                          [--classes C]
"""
import argparse

import torch
import torch.nn as nn

from tutorial import BasicNet


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
    parser.add_argument("--model", choices=["basic_net", "mlp_bn"], default="basic_net")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--features", type=int, default=4)
    parser.add_argument("--classes", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    model = BasicNet() if args.model == "basic_net" else MlpBn(args.features, args.classes)
    torch.jit.script(model).save(args.out)


if __name__ == "__main__":
    main()

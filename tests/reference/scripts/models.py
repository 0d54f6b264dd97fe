"""PyTorch's equivalents of trainer's mlp and resnet models, with the same parameter names.

Loads a model.safetensors written by trainer into the equivalent module (strict: every name and
shape must match), runs it in eval mode on the input stored in INPUTS.safetensors ("x"), and
prints the largest absolute difference from the outputs trainer computed ("y") as JSON.

usage: models.py mlp|resnet MODEL.safetensors INPUTS.safetensors CONFIG_JSON
"""
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features, activation="relu", dropout=0.0):
        super().__init__()
        sizes = [in_features] + list(hidden_sizes) + [out_features]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.activation = {"relu": F.relu, "gelu": F.gelu, "tanh": torch.tanh}[activation]
        self.dropout = dropout

    def forward(self, x):
        x = x.flatten(1)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.dropout(self.activation(x), self.dropout, self.training)
        return x


class BasicBlock(nn.Module):
    """torchvision's BasicBlock."""

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    """torchvision's ResNet layout at CIFAR scale: a 3x3 stem, no max-pool."""

    def __init__(self, in_channels, num_classes, width=16, stages=3, blocks_per_stage=2):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        channels = width
        for s in range(stages):
            out = width << s
            blocks = [BasicBlock(channels if b == 0 else out, out, 2 if b == 0 and s > 0 else 1)
                      for b in range(blocks_per_stage)]
            setattr(self, f"layer{s + 1}", nn.Sequential(*blocks))
            channels = out
        self.stages = stages
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for s in range(self.stages):
            x = getattr(self, f"layer{s + 1}")(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    kind, weights, inputs, config = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    data = load_file(inputs)
    x, y = data["x"], data["y"]
    if kind == "mlp":
        model = Mlp(x[0].numel(), config["hidden_sizes"], y.shape[1], config["activation"])
    else:
        model = ResNet(x.shape[1], y.shape[1], config["width"], config["stages"],
                       config["blocks_per_stage"])
    model.load_state_dict(load_file(weights), strict=True)
    model.eval()
    with torch.no_grad():
        out = model(x)
    print(json.dumps({"max_abs_diff": (out - y).abs().max().item(),
                      "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()

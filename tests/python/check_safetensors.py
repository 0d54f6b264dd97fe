"""Loads trainer's model.safetensors into the tutorial's BasicNet with PyTorch and safetensors,
evaluates it on the first N Fashion-MNIST test images, and prints the loss and accuracy as JSON,
so the C++ test can compare them with what `trainer evaluate` reported.

usage: check_safetensors.py MODEL.safetensors DATASET_DIR N
"""
import gzip
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file


class BasicNet(nn.Module):  # the tutorial's model, verbatim
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)
        self.act = F.relu

    def forward(self, x):
        x = self.act(self.conv1(x))
        x = self.act(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.act(self.fc1(x))
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def read_idx(path):
    with gzip.open(path) as f:
        data = f.read()
    ndims = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    return torch.frombuffer(bytearray(data[4 + 4 * ndims:]), dtype=torch.uint8).reshape(dims)


def main():
    weights, directory, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model = BasicNet()
    model.load_state_dict(load_file(weights), strict=True)
    model.eval()
    images = read_idx(f"{directory}/t10k-images-idx3-ubyte.gz")[:n]
    labels = read_idx(f"{directory}/t10k-labels-idx1-ubyte.gz")[:n].long()
    x = ((images.float() / 255.0 - 0.1307) / 0.3081).unsqueeze(1)
    with torch.no_grad():
        out = model(x)
    print(json.dumps({"loss": F.nll_loss(out, labels).item(),
                      "accuracy": out.argmax(1).eq(labels).float().mean().item()}))


if __name__ == "__main__":
    main()

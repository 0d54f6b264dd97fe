"""Loads trainer's model.safetensors into the tutorial's BasicNet with PyTorch and safetensors,
evaluates it on the first N Fashion-MNIST test images, and prints the loss and accuracy as JSON,
so the C++ test can compare them with what `trainer evaluate` reported.

usage: check_safetensors.py MODEL.safetensors DATASET_DIR N
"""
import json
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from tutorial import BasicNet, read_idx


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

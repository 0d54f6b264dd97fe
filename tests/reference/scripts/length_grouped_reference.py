"""Transformers' LengthGroupedSampler as the reference of trainer's: reads a JSON request
{"cases": [{"lengths": [...], "batch_size": B, "seed": S}, ...]} and prints the index order each
case gives, a JSON list of lists, with a generator seeded S (torch.Generator().manual_seed(S))."""
import json
import sys

import torch
from transformers.trainer_pt_utils import LengthGroupedSampler


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    out = []
    for case in request["cases"]:
        generator = torch.Generator().manual_seed(case["seed"])
        sampler = LengthGroupedSampler(case["batch_size"], lengths=case["lengths"], generator=generator)
        out.append([int(i) for i in sampler])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

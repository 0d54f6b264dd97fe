"""Transformers' LengthGroupedSampler as the reference of trainer's: the index order it gives,
with a generator seeded S (torch.Generator().manual_seed(S)), for lengths of n = 1, 7, 64, 333 and
2000 examples at batch sizes 1, 4 and 8: length (i * 7919 + n) % 9 + 1 for example i (many ties,
for the stable sort), a unique longest (50) at n // 2 at batch 4, seed n + batch.

usage: length_grouped_reference.py OUT
Writes OUT/cases.json: [{"lengths", "batch_size", "seed", "indices"}, ...].
"""
import json
import os
import sys

import torch
from transformers.trainer_pt_utils import LengthGroupedSampler


def main(out):
    cases = []
    for n in (1, 7, 64, 333, 2000):
        for batch in (1, 4, 8):
            lengths = [(i * 7919 + n) % 9 + 1 for i in range(n)]
            if batch == 4:
                lengths[n // 2] = 50
            generator = torch.Generator().manual_seed(n + batch)
            sampler = LengthGroupedSampler(batch, lengths=lengths, generator=generator)
            cases.append({"lengths": lengths, "batch_size": batch, "seed": n + batch,
                          "indices": [int(i) for i in sampler]})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])

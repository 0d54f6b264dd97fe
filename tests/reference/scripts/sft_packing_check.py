"""Checks that Transformers keeps TRL's padding-free packed rows apart on the CPU: a packed batch
(SFTTrainer's collator flattens the micro-batch into one row with position_ids restarting at 0 at
each sequence, and no attention_mask) must give each sequence the per-token losses it gets alone.
Transformers finds the sequences from position_ids (masking_utils.find_packed_sequence_indices),
only when no attention_mask and no cache are passed (TRL's compute_loss sets use_cache=False).
Three controls show what happens otherwise: the same row without position_ids, with
position_ids beside an all-ones attention_mask, and with the model's default use_cache=True.

usage: sft_packing_check.py FIXTURES (sft_fixtures.py's folder); prints one line per
attn_implementation x variant: the largest difference of a token's loss from the sequence alone.
"""
import json
import os
import sys

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer


def token_losses(model, input_ids, labels, use_cache=False, **kwargs):
    with torch.no_grad():
        logits = model(input_ids=input_ids, use_cache=use_cache, **kwargs).logits[0, :-1]
    labels = labels[0, 1:]
    nll = torch.nn.functional.cross_entropy(logits, labels.clamp(min=0), reduction="none")
    return nll.masked_fill(labels == -100, 0)


def main():
    fixtures = sys.argv[1]
    model_dir = os.path.join(fixtures, "qwen3")
    with open(os.path.join(fixtures, "data", "conversations.jsonl"), encoding="utf-8") as f:
        rows = Dataset.from_list([json.loads(line) for line in f])
    args = SFTConfig(output_dir="/tmp/sft_packing_check", use_cpu=True, bf16=False, report_to="none",
                     assistant_only_loss=True, packing=True, max_length=256, per_device_train_batch_size=4,
                     model_init_kwargs={"dtype": torch.float32})
    trainer = SFTTrainer(model=model_dir, processing_class=AutoTokenizer.from_pretrained(model_dir), args=args,
                         train_dataset=rows)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])
    ids, labels, pos = batch["input_ids"], batch["labels"], batch["position_ids"]
    starts = (pos[0] == 0).nonzero().flatten().tolist() + [ids.size(1)]
    print(f"packed micro-batch: 4 rows, {len(starts) - 1} sequences, {ids.size(1)} tokens; "
          f"collator keys {sorted(batch)}")
    for attn in ("sdpa", "eager"):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn)
        alone = torch.cat([token_losses(model, ids[:, a:b], labels[:, a:b]) for a, b in zip(starts, starts[1:])])
        # alone[] lacks the (label -100) position across each boundary: compare position by position.
        keep = torch.ones(ids.size(1) - 1, dtype=torch.bool)
        keep[[b - 1 for b in starts[1:-1]]] = False
        extra = {k: v for k, v in batch.items() if k not in ("input_ids", "labels")}
        variants = {
            "as TRL passes it (position_ids, cu_seq_lens, no attention_mask)": extra,
            "position_ids only": {"position_ids": pos},
            "control: no position_ids": {},
            "control: position_ids + all-ones attention_mask": {"position_ids": pos,
                                                                 "attention_mask": torch.ones_like(ids)},
            "control: position_ids, use_cache=True (the default)": {"position_ids": pos, "use_cache": True},
        }
        for name, kwargs in variants.items():
            packed = token_losses(model, ids, labels, **kwargs)[keep]
            print(f"{attn:5} {name:65} max |loss - alone| = {(packed - alone).abs().max().item():.3g}")


if __name__ == "__main__":
    main()

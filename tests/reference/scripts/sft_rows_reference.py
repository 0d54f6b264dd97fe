"""The rows TRL's SFTTrainer prepares (issue 39), for the exact checks of trl/sft_data.cpp: each
case an SFTTrainer built on a fixture of sft_fixtures.py and a data file, its train_dataset
written out; and TRL's pack_dataset over 2500 made-up rows (three batches of map()).

usage: sft_rows_reference.py FIXTURES OUT
Writes OUT/inputs/*.jsonl (data made here: tools, chat_template_kwargs, from/value), OUT/cases.json
(a list: name, model (a folder under FIXTURES), data (FIXTURES/data/... or inputs/...), options (the
SFTConfig fields set), examples, rows: [{input_ids, labels[, seq_lengths]}]) and OUT/pack.json
(rows, seq_length, and for bfd, bfd_split and wrapped the packed rows).
"""
import json
import os
import random
import sys
import tempfile
import warnings

import datasets
from transformers import AutoTokenizer
from trl import SFTConfig, SFTTrainer, pack_dataset

warnings.filterwarnings("ignore")
datasets.disable_progress_bars()
datasets.disable_caching()

TOOLS = [{"type": "function", "function": {"name": "fortune", "description": "Draw a fortune",
                                           "parameters": {"type": "object", "properties": {
                                               "topic": {"type": "string"}}, "required": ["topic"]}}}]


def make_inputs(fixtures, out):
    """Data the fixtures lack: tools (a list in some rows, a JSON text in others), template
    variables, tool calls in some messages only, and ShareGPT's from/value."""
    os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
    with open(os.path.join(fixtures, "data", "conversations.jsonl"), encoding="utf-8") as f:
        conversations = [json.loads(line)["messages"] for line in f]
    rows = []
    for i, messages in enumerate(conversations[:12]):
        row = {"messages": messages}
        if i % 3 == 1:
            row["tools"] = TOOLS if i % 2 else json.dumps(TOOLS)
        if i % 4 == 2:
            call = {"type": "function", "function": {"name": "fortune", "arguments": {"topic": "luck", "n": i}}}
            row["messages"] = messages[:-1] + [{"role": "assistant", "content": "", "tool_calls": [call]},
                                               {"role": "tool", "content": messages[-1]["content"]}]
        row["chat_template_kwargs"] = {"enable_thinking": i % 2 == 0}
        rows.append(row)
    write(os.path.join(out, "inputs", "tools.jsonl"), rows)
    rename = {"role": "from", "content": "value"}
    write(os.path.join(out, "inputs", "from_value.jsonl"),
          [{"conversations": [{rename[k]: v for k, v in m.items()} for m in messages]}
           for messages in conversations[:10]])


def write(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


CASES = [
    ("conversational_assistant_only", "qwen3", "conversations.jsonl", {"assistant_only_loss": True}),
    ("conversational", "qwen3", "conversations.jsonl", {}),
    ("prompt_completion", "llama", "prompt_completion.jsonl", {}),
    ("prompt_completion_all_tokens", "llama", "prompt_completion.jsonl", {"completion_only_loss": False}),
    ("prompt_completion_16", "llama", "prompt_completion.jsonl", {"max_length": 16}),
    ("prompt_completion_conversational", "qwen3", "prompt_completion_conv.jsonl", {}),
    ("prompt_completion_conversational_assistant_only", "qwen3", "prompt_completion_conv.jsonl",
     {"assistant_only_loss": True}),
    ("text", "llama", "text.jsonl", {}),
    ("text_keep_end_16", "llama", "text.jsonl", {"max_length": 16, "truncation_mode": "keep_end"}),
    ("conversational_64", "qwen3", "conversations.jsonl", {"max_length": 64, "assistant_only_loss": True}),
    ("conversational_bfd_64", "qwen3", "conversations.jsonl", {"max_length": 64, "packing": True}),
    ("conversational_bfd_split_64", "qwen3", "conversations.jsonl",
     {"max_length": 64, "packing": True, "packing_strategy": "bfd_split", "assistant_only_loss": True}),
    ("conversational_wrapped_64", "qwen3", "conversations.jsonl",
     {"max_length": 64, "packing": True, "packing_strategy": "wrapped"}),
    ("text_bfd_32", "llama", "text.jsonl", {"max_length": 32, "packing": True}),
    ("tools", "qwen3", "inputs/tools.jsonl", {"assistant_only_loss": True}),
    ("from_value", "qwen3", "inputs/from_value.jsonl", {}),
]


def prepare(fixtures, out, model, data, options):
    path = os.path.join(out, data) if data.startswith("inputs/") else os.path.join(fixtures, "data", data)
    dataset = datasets.load_dataset("json", data_files=path, split="train")
    folder = os.path.join(fixtures, model)
    with tempfile.TemporaryDirectory() as tmp:
        args = SFTConfig(output_dir=tmp, report_to="none", bf16=False, use_cpu=True, **options)
        trainer = SFTTrainer(model=folder, args=args, train_dataset=dataset,
                             processing_class=AutoTokenizer.from_pretrained(folder))
        prepared = trainer.train_dataset
    rows = []
    for row in prepared:
        kept = {"input_ids": row["input_ids"], "labels": row["labels"]}
        if "seq_lengths" in row:
            kept["seq_lengths"] = row["seq_lengths"]
        rows.append(kept)
    return {"examples": len(dataset), "rows": rows}


def pack_reference():
    rng = random.Random(39)
    rows, next_id = {"input_ids": [], "labels": []}, 1
    for i in range(2500):
        n = rng.choice([0, rng.randint(1, 8), rng.randint(1, 64), rng.randint(60, 150)])
        ids = list(range(next_id, next_id + n))
        next_id += n
        rows["input_ids"].append(ids)
        rows["labels"].append([t if (t + i) % 3 else -100 for t in ids])
    out = {"seq_length": 64, "rows": rows}
    dataset = datasets.Dataset.from_dict(rows)
    for strategy in ("bfd", "bfd_split", "wrapped"):
        packed = pack_dataset(dataset, 64, strategy)
        out[strategy] = packed.to_dict()
    return out


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    make_inputs(fixtures, out)
    cases = []
    for name, model, data, options in CASES:
        case = {"name": name, "model": model, "data": data, "options": options}
        case.update(prepare(fixtures, out, model, data, options))
        cases.append(case)
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f)
    with open(os.path.join(out, "pack.json"), "w", encoding="utf-8") as f:
        json.dump(pack_reference(), f)


if __name__ == "__main__":
    main()

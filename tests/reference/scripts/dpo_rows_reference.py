"""The rows TRL's DPOTrainer prepares, for the exact checks of trl/dpo_data.cpp: each case a
DPOTrainer built on a fixture of sft_fixtures.py and a preference data file made here from the
fixtures' prompt-completion data, its train_dataset written out.

usage: dpo_rows_reference.py FIXTURES OUT
Writes OUT/inputs/*.jsonl (the preference data: explicit and implicit prompts, plain and
conversational, with tools and template variables, identical pairs, extract_prompt's edge cases)
and OUT/cases.json (a list: name, model (a folder under FIXTURES), data (inputs/...), options (the
DPOConfig fields set), examples, rows: [{prompt_ids, chosen_ids, rejected_ids}]).
"""
import json
import os
import sys
import tempfile
import warnings

import datasets
from transformers import AutoTokenizer
from trl import DPOConfig, DPOTrainer

warnings.filterwarnings("ignore")
datasets.disable_progress_bars()
datasets.disable_caching()

TOOLS = [{"type": "function", "function": {"name": "fortune", "description": "Draw a fortune",
                                           "parameters": {"type": "object", "properties": {
                                               "topic": {"type": "string"}}, "required": ["topic"]}}}]


def read(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def write(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def make_inputs(fixtures, out):
    """Preference pairs: the completion of a row chosen, the next row's rejected."""
    os.makedirs(os.path.join(out, "inputs"), exist_ok=True)
    plain = read(os.path.join(fixtures, "data", "prompt_completion.jsonl"))[:24]
    rows = []
    for i, row in enumerate(plain):
        rejected = plain[(i + 1) % len(plain)]["completion"]
        chosen = row["completion"]
        if i == 3:
            rejected = chosen  # identical: kept
        if i == 5:
            chosen += "<|end_of_text|>"  # ends with the EOS already
        rows.append({"prompt": row["prompt"], "chosen": chosen, "rejected": rejected})
    write(os.path.join(out, "inputs", "plain.jsonl"), rows)
    implicit = [{"chosen": r["prompt"] + r["chosen"], "rejected": r["prompt"] + r["rejected"]} for r in rows]
    # extract_prompt's edges: no common start, the chosen ending with a space (idx -1); one a
    # prefix of the other; a difference inside a multi-byte character's neighbourhood.
    implicit += [{"chosen": "Yes ", "rejected": "No"},
                 {"chosen": "Same start", "rejected": "Same start and more"},
                 {"chosen": "A na\u00efve fortune.", "rejected": "A na\u00edve fortune."},
                 {"chosen": "Caf\u00e9 au lait", "rejected": "Caf\u00e9 noir"},
                 {"chosen": "Different", "rejected": "Unlike"}]
    write(os.path.join(out, "inputs", "plain_implicit.jsonl"), implicit)

    conv = read(os.path.join(fixtures, "data", "prompt_completion_conv.jsonl"))
    rows = []
    for i, row in enumerate(conv):
        out_row = {"prompt": row["prompt"], "chosen": row["completion"],
                   "rejected": conv[(i + 1) % len(conv)]["completion"]}
        if i == 2:
            out_row["rejected"] = out_row["chosen"]
        if i % 3 == 1:
            out_row["tools"] = TOOLS if i % 2 else json.dumps(TOOLS)
        out_row["chat_template_kwargs"] = {"enable_thinking": i % 2 == 0}
        rows.append(out_row)
    write(os.path.join(out, "inputs", "conversational.jsonl"), rows)
    implicit = [{"chosen": r["prompt"] + r["chosen"], "rejected": r["prompt"] + r["rejected"]} for r in rows]
    # Two exchanges: the prompt holds the first answer too.
    implicit.append({"chosen": conv[0]["prompt"] + conv[0]["completion"] + [{"role": "user", "content": "And?"},
                                                                            {"role": "assistant", "content": "More."}],
                     "rejected": conv[0]["prompt"] + conv[0]["completion"] + [{"role": "user", "content": "And?"},
                                                                              {"role": "assistant", "content": "Less."}]})
    write(os.path.join(out, "inputs", "conversational_implicit.jsonl"), implicit)


CASES = [
    ("plain", "llama", "plain.jsonl", {}),
    ("plain_qwen3", "qwen3", "plain.jsonl", {}),
    ("plain_16", "llama", "plain.jsonl", {"max_length": 16}),
    ("plain_keep_end_16", "llama", "plain.jsonl", {"max_length": 16, "truncation_mode": "keep_end"}),
    ("plain_implicit", "llama", "plain_implicit.jsonl", {}),
    ("conversational", "qwen3", "conversational.jsonl", {}),
    ("conversational_llama", "llama", "conversational.jsonl", {}),
    ("conversational_40", "qwen3", "conversational.jsonl", {"max_length": 40}),
    ("conversational_implicit", "qwen3", "conversational_implicit.jsonl", {}),
    ("conversational_no_max_length", "qwen3", "conversational.jsonl", {"max_length": None}),
]


def prepare(fixtures, out, model, data, options):
    path = os.path.join(out, "inputs", data)
    dataset = datasets.load_dataset("json", data_files=path, split="train")
    folder = os.path.join(fixtures, model)
    with tempfile.TemporaryDirectory() as tmp:
        args = DPOConfig(output_dir=tmp, report_to="none", bf16=False, use_cpu=True, **options)
        trainer = DPOTrainer(model=folder, args=args, train_dataset=dataset,
                             processing_class=AutoTokenizer.from_pretrained(folder))
        prepared = trainer.train_dataset
    rows = [{"prompt_ids": r["prompt_ids"], "chosen_ids": r["chosen_ids"], "rejected_ids": r["rejected_ids"]}
            for r in prepared]
    return {"examples": len(dataset), "rows": rows}


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    make_inputs(fixtures, out)
    cases = []
    for name, model, data, options in CASES:
        case = {"name": name, "model": model, "data": "inputs/" + data, "options": options}
        case.update(prepare(fixtures, out, model, data, options))
        cases.append(case)
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main()

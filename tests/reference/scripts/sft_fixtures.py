"""Builds the fixtures of `trainer sft`'s checks (issue 39): tiny Qwen3 and Llama models with chat
tokenizers (the fortunes BPE of hf_fixtures.py, TRL 1.16's chat templates) and small SFT data sets
of every TRL format, made deterministically from the fortunes Debian ships.

usage: sft_fixtures.py OUT [FORTUNES_DIR]
Writes, then OUT/done last (a test that finds `done` reuses the folder):
  OUT/qwen3/        Qwen3 (2 layers, width 64, 4 heads, 2 KV heads, head_dim 32, untied), its
                    tokenizer: the BPE without BOS plus <|im_start|> <|im_end|> <|endoftext|>
                    (special) and <think> </think>; eos <|im_end|>, pad <|endoftext|>;
                    TRL's qwen3_training.jinja (with {% generation %} blocks)
  OUT/qwen3_plain/  the same with TRL's qwen3.jinja (no generation blocks): with
                    assistant_only_loss, TRL 1.16 recognizes it (exact text) and trains with
                    qwen3_training.jinja instead, as with OUT/qwen3
  OUT/qwen3_custom/ the same with qwen3.jinja behind a comment line: a template without generation
                    blocks that TRL does not know, which assistant_only_loss refuses (ValueError
                    "The chat template is not training-compatible ...")
  OUT/llama/        Llama (2 layers, width 64, 4 heads, 2 KV heads, untied), the BPE in Llama-3's
                    layout (BOS <|begin_of_text|> by its post-processor, eos <|end_of_text|>) plus
                    <|start_header_id|> <|end_header_id|> <|eot_id|> (special: llama3.jinja's),
                    no pad; TRL's llama3.jinja
  OUT/data/         conversations.jsonl (48 rows of 1 to 3 exchanges, a third with a system
                    turn: 54 to 142 tokens under qwen3's template, 11 over 128),
                    conversations_eval.jsonl (8), prompt_completion.jsonl (48 plain strings, the
                    completion starting with a space), prompt_completion_conv.jsonl (16), text.jsonl
                    (32), prompt_completion_eval.jsonl (8), text_eval.jsonl (8);
                    and the preference data sets of `trainer dpo`'s checks (make_pref_data; fortunes
                    from the 3000th on, none of the SFT sets'): pref_plain.jsonl (24 rows of plain
                    prompt/chosen/rejected strings, the completions starting with a space),
                    pref_conv.jsonl (24: a prompt of a user turn, some after a system turn, some
                    after a whole exchange; chosen and rejected one assistant message each),
                    pref_implicit.jsonl (24: chosen and rejected whole conversations that differ
                    only in the last assistant message), pref_eval.jsonl (8, as pref_conv: two full batches of 4 on 2 processes)
"""
import json
import os
import sys

import torch
import trl
from tokenizers import AddedToken, Tokenizer, processors
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_fixtures import fortune_files, train_tokenizer  # noqa: E402

TEMPLATES = os.path.join(os.path.dirname(trl.__file__), "chat_templates")
SYSTEM = ["You are a fortune cookie.", "Answer with a fortune.", "You are a terse oracle."]


def template(name):
    with open(os.path.join(TEMPLATES, name), encoding="utf-8") as f:
        return f.read()


def chat_tokenizer(bpe, llama3, chat_template):
    """The trained BPE (a copy) as a chat tokenizer: Qwen3's tokens and no BOS, or Llama-3's header
    tokens beside its BOS template."""
    backend = Tokenizer.from_str(bpe.backend_tokenizer.to_str())
    if llama3:
        tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|begin_of_text|>",
                                      eos_token="<|end_of_text|>")
        specials = ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
        tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in specials], special_tokens=True)
    else:
        # Qwen's post-processor: offsets only, no BOS.
        backend.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
        tok = PreTrainedTokenizerFast(tokenizer_object=backend)
        specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
        tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in specials], special_tokens=True)
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ("<think>", "</think>")])
        tok.eos_token, tok.pad_token = "<|im_end|>", "<|endoftext|>"
    tok.chat_template = chat_template
    return tok


def perturb(model):
    """Norm weights (and biases) are constants at init: perturbed so that they matter."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def tiny_qwen3(tok):
    torch.manual_seed(4)
    config = Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32, attention_bias=True,
                         max_position_embeddings=256, tie_word_embeddings=False, bos_token_id=None,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    return perturb(Qwen3ForCausalLM(config))


def tiny_llama(tok):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         tie_word_embeddings=False)
    return perturb(LlamaForCausalLM(config))


def short_fortunes(folder, lo=12, hi=110):
    """The fortunes of lo..hi characters (printable text, newlines and tabs), in file order."""
    out = []
    for path in fortune_files(folder):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue
        for fortune in text.split("\n%\n"):
            fortune = fortune.strip("%\n").strip()
            if lo <= len(fortune) <= hi and all(c.isprintable() or c in "\n\t" for c in fortune):
                out.append(fortune)
    return out


def make_data(fortunes, tok):
    """The data sets, each row its own fortunes (drawn in turn from `fortunes`, skipping those over
    a row's length limit: the more exchanges, the shorter); conversations of 20 to 150 tokens
    under `tok`'s template (an exchange is dropped while longer)."""
    it = iter(fortunes)

    def take(limit=110):
        return next(f for f in it if len(f) <= limit)

    def conversation(i):
        messages = [{"role": "system", "content": SYSTEM[i % 3]}] if i % 3 == 0 else []
        exchanges = 1 + i % 3
        for _ in range(exchanges):
            messages += [{"role": "user", "content": take(80 // exchanges)},
                         {"role": "assistant", "content": take(80 // exchanges)}]
        while len(tok.apply_chat_template(messages, return_dict=True)["input_ids"]) > 150 and len(messages) > 3:
            messages = messages[:-2]
        return {"messages": messages}

    data = {"conversations": [conversation(i) for i in range(48)]}
    data["conversations_eval"] = [conversation(i) for i in range(8)]
    data["prompt_completion"] = [{"prompt": take(), "completion": " " + take()} for _ in range(48)]
    data["prompt_completion_conv"] = [
        {"prompt": ([{"role": "system", "content": SYSTEM[i % 3]}] if i % 4 == 0 else [])
         + [{"role": "user", "content": take()}], "completion": [{"role": "assistant", "content": take()}]}
        for i in range(16)]
    data["text"] = [{"text": take() + "\n" + take()} for _ in range(32)]
    data["prompt_completion_eval"] = [{"prompt": take(), "completion": " " + take()} for _ in range(8)]
    data["text_eval"] = [{"text": take() + "\n" + take()} for _ in range(8)]
    return data


def make_pref_data(fortunes):
    """The preference data sets, each row its own fortunes (drawn in turn, skipping those over the
    length limit: the limits cycle so that prompts and completions vary in length)."""
    it = iter(fortunes)
    limits = (40, 110, 70, 25, 90)

    def take(i):
        limit = limits[i % len(limits)]
        return next(f for f in it if len(f) <= limit)

    def prompt(i):
        messages = [{"role": "system", "content": SYSTEM[i % 3]}] if i % 4 == 0 else []
        if i % 5 == 2:  # a whole exchange before the question
            messages += [{"role": "user", "content": take(i + 3)}, {"role": "assistant", "content": take(i + 3)}]
        return messages + [{"role": "user", "content": take(i)}]

    def pair(i):
        return {"chosen": [{"role": "assistant", "content": take(i + 1)}],
                "rejected": [{"role": "assistant", "content": take(i + 2)}]}

    data = {"pref_plain": [{"prompt": take(i), "chosen": " " + take(i + 1), "rejected": " " + take(i + 2)}
                           for i in range(24)]}
    data["pref_conv"] = [{"prompt": prompt(i), **pair(i)} for i in range(24)]
    implicit = []
    for i in range(24):
        p, c = prompt(i), pair(i)
        implicit.append({"chosen": p + c["chosen"], "rejected": p + c["rejected"]})
    data["pref_implicit"] = implicit
    data["pref_eval"] = [{"prompt": prompt(i), **pair(i)} for i in range(8)]
    return data


def main():
    out = sys.argv[1]
    fortunes = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/games/fortunes"
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    bpe = train_tokenizer(fortune_files(fortunes), llama3=True)

    qwen_tok = chat_tokenizer(bpe, False, template("qwen3_training.jinja"))
    qwen = tiny_qwen3(qwen_tok)
    custom = "{#- A custom copy of Qwen3's template, without generation blocks. -#}\n" + template("qwen3.jinja")
    for name, text in (("qwen3", template("qwen3_training.jinja")), ("qwen3_plain", template("qwen3.jinja")),
                       ("qwen3_custom", custom)):
        qwen_tok.chat_template = text
        qwen.save_pretrained(os.path.join(out, name))
        qwen_tok.save_pretrained(os.path.join(out, name))
    llama_tok = chat_tokenizer(bpe, True, template("llama3.jinja"))
    tiny_llama(llama_tok).save_pretrained(os.path.join(out, "llama"))
    llama_tok.save_pretrained(os.path.join(out, "llama"))

    qwen_tok.chat_template = template("qwen3_training.jinja")
    short = short_fortunes(fortunes)
    for name, rows in {**make_data(short, qwen_tok), **make_pref_data(short[3000:])}.items():
        with open(os.path.join(out, "data", name + ".jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    with open(os.path.join(out, "done"), "w") as f:
        json.dump({"transformers": __import__("transformers").__version__, "trl": trl.__version__}, f)


if __name__ == "__main__":
    main()

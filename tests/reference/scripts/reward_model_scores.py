"""What TRL's GRPOTrainer gives for a reward model among its reward_funcs (a folder path), for the exact
checks of the reimplementation's model rewards: reward_fixtures.py's sequence-classification models
loaded as GRPOTrainer.__init__ loads a path (AutoModelForSequenceClassification.from_pretrained(path,
num_labels=1), AutoTokenizer.from_pretrained(path), the eos token as pad token where the tokenizer has
none, config.pad_token_id set to the tokenizer's pad id, the metric name the path's last component),
then each case's pairs scored in ONE batch as GRPOTrainer._calculate_rewards scores them: a
conversational prompt rendered with trl.data_utils.apply_chat_template({"messages": prompt +
completion}, tokenizer, **chat_template_kwargs)["text"], a plain one as prompt + completion; then
tokenizer(text=texts, return_tensors="pt", padding=True, padding_side="right",
add_special_tokens=False) and the model's logits[:, 0] under torch.inference_mode (fp32, CPU).

usage: reward_model_scores.py REWARD_FIXTURES OUT
Writes OUT/scores.json: {case: {model (a folder of REWARD_FIXTURES), name (TRL's metric name),
chat_template_kwargs (or null), pairs: [{prompt, completion}], texts (as rendered), input_ids (the
padded batch), pooled (the index Transformers pools each row at: its rightmost non-pad token), scores}}.
  conv         qwen3_rm, conversational: a system message in one prompt, an empty completion, a
               non-ASCII one, one with a <think> block (the template splits it out), lengths differing
  conv_kwargs  the same with {"enable_thinking": false}, which qwen3_rm's template reads only under
               add_generation_prompt (never set for "messages"): the texts are conv's, as TRL renders them
  plain        llama_rm, plain strings (its tokenizer has no pad token: the eos <|end_of_text|> pads,
               id 1, the config's pad id), one completion ending with the eos text, which the pooling
               then skips (the row is pooled on the token before it)
"""
import json
import os
import sys

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from trl.data_utils import apply_chat_template, is_conversational
from trl.trainer.utils import get_config_model_id


def user(text, system=None):
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]


def assistant(text):
    return [{"role": "assistant", "content": text}]


CONV = [
    (user("What is 2 + 2?"), assistant("4")),
    (user("Tell me a fortune.", system="You are a terse oracle."),
     assistant("You will find what you seek, though not where you left it. Patience, and a good lamp.")),
    (user("Say nothing."), assistant("")),
    (user("Traduis « bonjour » en japonais."), assistant("こんにちは — « konnichiwa », déjà vu ? ✓")),
    (user("Is the sky green?"), assistant("<think>\nIt is blue by day.\n</think>\n\nNo.")),
    (user("Count to five."), assistant("One, two, three, four, five.")),
]
PLAIN = [
    ("The capital of France is", " Paris."),
    ("Once upon a time", " there was a tiny model that scored everything it read, one token at a time."),
    ("Q: 2 + 2 = ?\nA:", " 4<|end_of_text|>"),
    ("Empty completion:", ""),
    ("Café au lait,", " s'il vous plaît — merci!"),
    ("A", " B C D"),
]
CASES = {
    "conv": ("qwen3_rm", CONV, None),
    "conv_kwargs": ("qwen3_rm", CONV, {"enable_thinking": False}),
    "plain": ("llama_rm", PLAIN, None),
}


def load(path):
    """GRPOTrainer.__init__ on a reward_funcs entry that is a path (no model_init_kwargs, no
    reward_processing_classes)."""
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, trust_remote_code=False)
    name = get_config_model_id(model.config).split("/")[-1]
    tok = AutoTokenizer.from_pretrained(get_config_model_id(model.config), revision=None, trust_remote_code=False)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model.config.get_text_config().pad_token_id = tok.pad_token_id
    assert model.dtype == torch.float32, model.dtype
    return model.eval(), tok, name


def score(model, tok, prompts, completions, chat_template_kwargs):
    """GRPOTrainer._calculate_rewards' branch for an nn.Module."""
    if is_conversational({"prompt": prompts[0]}):
        messages = [{"messages": p + c} for p, c in zip(prompts, completions, strict=True)]
        texts = [apply_chat_template(x, tok, **chat_template_kwargs)["text"] for x in messages]
    else:
        texts = [p + c for p, c in zip(prompts, completions, strict=True)]
    inputs = tok(text=texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    with torch.inference_mode():
        scores = model(**inputs).logits[:, 0]
    ids = inputs["input_ids"]
    # Transformers' pooling for sequence classification: the rightmost token that is not the pad id.
    non_pad = (ids != model.config.pad_token_id).int()
    pooled = (torch.arange(ids.shape[-1]) * non_pad).argmax(-1)
    return texts, ids.tolist(), pooled.tolist(), scores.tolist()


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    result = {}
    for case, (folder, pairs, kwargs) in CASES.items():
        model, tok, name = load(os.path.join(fixtures, folder))
        prompts, completions = [p for p, _ in pairs], [c for _, c in pairs]
        texts, ids, pooled, scores = score(model, tok, prompts, completions, kwargs or {})
        result[case] = {"model": folder, "name": name, "chat_template_kwargs": kwargs,
                        "pairs": [{"prompt": p, "completion": c} for p, c in pairs],
                        "texts": texts, "input_ids": ids, "pooled": pooled, "scores": scores}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "scores.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()

"""Reference renderings of TRL's real chat templates by Transformers (apply_chat_template with
tokenize=False, and the {% generation %} spans of return_assistant_tokens_mask), for the Jinja
engine's parity test (tests/lib/tokenizers/chat_template_test.cpp).

Usage: chat_templates.py OUT [HF_FIXTURES]. Writes OUT/templates/*.jinja (TRL 1.16's, copied), OUT/tokenizer/
(a tokenizer folder whose tokenizer_config.json names the special tokens), OUT/conversations.json
and OUT/cases.jsonl: one line per template x conversation x add_generation_prompt, with the text
Transformers renders or the error it raises, and the generation spans (characters). strftime_now
sees a fixed clock (CLOCK below), as the test gives ours. With HF_FIXTURES (hf_fixtures.py's
folder), each case of a template with {% generation %} blocks also holds the input_ids and the
assistant_masks of apply_chat_template(return_assistant_tokens_mask=True) under its
tokenizer_llama3 (a byte-level BPE in Llama-3's layout).
"""
import datetime
import json
import os
import shutil
import sys

import transformers.utils.chat_template_utils as ctu
import trl
from tokenizers import Tokenizer, models
from transformers import AutoTokenizer, PreTrainedTokenizerFast

CLOCK = 1_700_000_000  # 2023-11-14 22:13:20 UTC; local time on both sides
SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "description": "How many days"},
            },
            "required": ["city"],
        },
    },
}

CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}


def conversations():
    u = lambda text: {"role": "user", "content": text}  # noqa: E731
    a = lambda text: {"role": "assistant", "content": text}  # noqa: E731
    s = {"role": "system", "content": "You are a helpful assistant."}
    return [
        {"messages": [u("Hello!")]},
        {"messages": [s, u("What is 2 + 2?")]},
        {"messages": [u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")]},
        {"messages": [s, u("Hi"), a("Hello!"), u("Name a color."), a("Blue.")]},
        {
            "messages": [
                u("What is the weather in Paris?"),
                {"role": "assistant", "content": "", "tool_calls": [CALL]},
                {"role": "tool", "name": "get_weather", "content": "{\"temperature\": 21}"},
                a("It is 21 degrees in Paris."),
            ],
            "tools": [WEATHER],
        },
        {"messages": [s, u("What's the weather like?")], "tools": [WEATHER]},
        {
            "messages": [
                u("Why is the sky blue?"),
                {"role": "assistant", "content": "Rayleigh scattering.", "reasoning_content": "Short light scatters more."},
                u("And sunsets?"),
            ]
        },
        {"messages": [u("Ünïcödé — 日本語 😀 {{ 1 + 1 }} {% if x %}y{% endif %} {# c #}"), a("Ça va: «ok» \\n\t end")]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "Describe this."}]}, a("A list of parts.")]},
        {"messages": [u("  spaced  \n\nlines\n"), a("  answer  ")]},
    ]


class FrozenDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime.datetime.fromtimestamp(CLOCK, tz)


def tokenizer(folder):
    vocab = {token: i for i, token in enumerate(["<unk>", "<s>", "</s>", "<pad>", "a"])}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")), **SPECIAL)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(SPECIAL, f)
    return tok


def main():
    out = sys.argv[1]
    source = os.path.join(os.path.dirname(trl.__file__), "chat_templates")
    templates = sorted(name for name in os.listdir(source) if name.endswith(".jinja"))
    os.makedirs(os.path.join(out, "templates"), exist_ok=True)
    tok = tokenizer(os.path.join(out, "tokenizer"))
    ctu.datetime = FrozenDatetime
    convs = conversations()
    masked = AutoTokenizer.from_pretrained(os.path.join(sys.argv[2], "tokenizer_llama3")) if len(sys.argv) > 2 else None
    with open(os.path.join(out, "conversations.json"), "w") as f:
        json.dump(convs, f, ensure_ascii=False)
    with open(os.path.join(out, "cases.jsonl"), "w") as f:
        for name in templates:
            shutil.copy(os.path.join(source, name), os.path.join(out, "templates", name))
            with open(os.path.join(source, name), encoding="utf-8") as t:
                template = t.read()
            for c, conv in enumerate(convs):
                for prompt in (False, True):
                    case = {"template": name, "conversation": c, "add_generation_prompt": prompt}
                    try:
                        case["text"] = tok.apply_chat_template(
                            conv["messages"], tools=conv.get("tools"), chat_template=template,
                            tokenize=False, add_generation_prompt=prompt)
                        if "generation" in template:
                            messages = ctu._normalize_chat_messages(conv["messages"])
                            _, spans = ctu.render_jinja_template(
                                conversations=[messages], tools=conv.get("tools"), chat_template=template,
                                return_assistant_tokens_mask=True, add_generation_prompt=prompt,
                                **tok.special_tokens_map)
                            case["generation_indices"] = [list(span) for span in spans[0]]
                            if masked is not None:
                                encoded = masked.apply_chat_template(
                                    conv["messages"], tools=conv.get("tools"), chat_template=template,
                                    tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                    add_generation_prompt=prompt)
                                case["input_ids"] = list(encoded["input_ids"])
                                case["assistant_masks"] = list(encoded["assistant_masks"])
                    except Exception as e:  # the template refuses the conversation
                        case["error"] = f"{type(e).__name__}: {e}"
                    f.write(json.dumps(case, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

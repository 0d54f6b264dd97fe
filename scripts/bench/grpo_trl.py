"""The Python side of scripts/bench/grpo_vs_trl: its prompts, TRL's run, and Transformers' generate().

  grpo_trl.py data CHAT_JSONL OUT_JSONL [--num N (64)]
      N plain-text prompts, {"prompt": "..."}: the first line of each of the first fortunes of
      scripts/make_fortune_chat's conversations (the assistant's answer), each prompt once.
  grpo_trl.py train MODEL_DIR TRAIN_FILE OUTPUT_DIR --per_device_train_batch_size B
                    --num_generations G --max_completion_length N --max_steps S
                    [--soft_punish_cache M] [--learning_rate X] [--threads N]
      TRL 1.16's GRPOTrainer with the settings `trainer grpo` gets on the command line (sampling by
      Transformers' generate() in the process, no vLLM; fp32 on the CPU, no gradient checkpointing,
      GRPOConfig's defaults otherwise: loss dapo, beta 0 (no reference model), temperature 1, top_k 0,
      top_p 1; logging every step, nothing saved), rewarded by
      trl.rewards.get_soft_overlong_punishment(max_completion_len=N, soft_punish_cache=M); then
      OUTPUT_DIR/train_results.json as Transformers writes it (train_runtime, ...),
      OUTPUT_DIR/trainer_state.json (its log_history: completions/mean_length of each step) and
      OUTPUT_DIR/grpo_time.json, and on stdout the line `trainer grpo` prints at the end of training,
      "GRPO time: sampling X s (P%), rewards ..., old and reference log-probabilities ..., update ...",
      timed the same way (shares of the four's sum):
        sampling   _generate_single_turn: the generate() call with its padding and EOS cut;
        rewards    _calculate_rewards;
        old and reference log-probabilities   from the end of sampling to the start of the rewards
                   (decoding, length metrics, padding, and the old policy's and the reference's
                   log-probabilities where TRL computes them: none with these settings);
        update     training_step less _prepare_inputs: compute_loss and backward.
  grpo_trl.py generate MODEL_DIR PROMPTS OUT_JSON --rows B --num_generations G --max_new_tokens N
                       [--repeats R (3)] [--threads N]
      Transformers' model.generate(do_sample=True) alone, with the GenerationConfig GRPOTrainer
      builds (temperature 1, top_k 0, top_p 1, no KV-cache option, compile off) under no_grad, on
      the batch a GRPO step samples: the first B / G prompts of PROMPTS, each G times, tokenized and
      left-padded. One untimed warm-up call, then R timed ones; a row's generated tokens are those
      up to and including its first EOS (TRL's completion mask: padding after it not counted).
      Writes OUT_JSON {rows, repeats, tokens, seconds, tokens_per_second} and prints a line.
The model: scripts/bench/sft_trl.py build.
"""
import argparse
import json
import os
import shutil
import time

import torch


def data(chat, out, num):
    prompts, seen = [], set()
    with open(chat, encoding="utf-8") as f:
        for line in f:
            if len(prompts) == num:
                break
            if not line.strip():
                continue
            answer = json.loads(line)["messages"][-1]["content"]
            first = next((s.strip() for s in answer.splitlines() if s.strip()), "")
            if first and first not in seen:
                seen.add(first)
                prompts.append(first)
    if len(prompts) < num:
        raise SystemExit(f"grpo_trl: only {len(prompts)} distinct prompts in {chat} ({num} asked for)")
    with open(out, "w", encoding="utf-8") as f:
        for p in prompts:
            f.write(json.dumps({"prompt": p}, ensure_ascii=False) + "\n")
    print(f"grpo_trl: {len(prompts)} prompts in {out}")


def read_prompts(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["prompt"] for line in f if line.strip()]


def time_line(t):
    total = sum(t.values())
    share = lambda part: f"{part:.2f} s ({100 * part / total:.0f}%)" if total > 0 else f"{part:.2f} s (-)"
    return (f"GRPO time: sampling {share(t['sampling'])}, rewards {share(t['rewards'])}, old and reference "
            f"log-probabilities {share(t['scoring'])}, update {share(t['update'])}")


def train(a):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.rewards import get_soft_overlong_punishment

    class TimedGRPOTrainer(GRPOTrainer):
        """GRPOTrainer with the time split `trainer grpo` reports (see the module's docstring)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.timings = dict(sampling=0.0, rewards=0.0, scoring=0.0, update=0.0)
            self._sampled_at, self._preparing = None, 0.0

        def _generate_single_turn(self, *args, **kwargs):
            start = time.perf_counter()
            out = super()._generate_single_turn(*args, **kwargs)
            self._sampled_at = time.perf_counter()
            self.timings["sampling"] += self._sampled_at - start
            return out

        def _calculate_rewards(self, *args, **kwargs):
            start = time.perf_counter()
            if self._sampled_at is not None:
                self.timings["scoring"] += start - self._sampled_at
                self._sampled_at = None
            out = super()._calculate_rewards(*args, **kwargs)
            self.timings["rewards"] += time.perf_counter() - start
            return out

        def _prepare_inputs(self, *args, **kwargs):
            start = time.perf_counter()
            out = super()._prepare_inputs(*args, **kwargs)
            self._preparing += time.perf_counter() - start
            return out

        def training_step(self, *args, **kwargs):
            self._preparing = 0.0
            start = time.perf_counter()
            out = super().training_step(*args, **kwargs)
            self.timings["update"] += time.perf_counter() - start - self._preparing
            return out

    torch.set_num_threads(a.threads)
    rows = Dataset.from_list([{"prompt": p} for p in read_prompts(a.train_file)])
    args = GRPOConfig(output_dir=a.output_dir, use_cpu=True, bf16=a.bf16 == "true",
                      gradient_checkpointing=False,
                      per_device_train_batch_size=a.per_device_train_batch_size,
                      num_generations=a.num_generations, max_completion_length=a.max_completion_length,
                      max_steps=a.max_steps, learning_rate=a.learning_rate, logging_steps=1, seed=42,
                      report_to="none", save_strategy="no", disable_tqdm=True,
                      model_init_kwargs={"dtype": torch.float32})
    reward = get_soft_overlong_punishment(max_completion_len=a.max_completion_length,
                                          soft_punish_cache=a.soft_punish_cache)
    trainer = TimedGRPOTrainer(model=a.model_dir, reward_funcs=[reward], args=args, train_dataset=rows,
                               processing_class=AutoTokenizer.from_pretrained(a.model_dir))
    metrics = trainer.train().metrics
    trainer.save_metrics("train", metrics)
    trainer.state.save_to_json(os.path.join(a.output_dir, "trainer_state.json"))
    with open(os.path.join(a.output_dir, "grpo_time.json"), "w") as f:
        json.dump(trainer.timings, f)
    print(time_line(trainer.timings), flush=True)


def generate(a):
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    torch.set_num_threads(a.threads)
    if a.rows % a.num_generations:
        raise SystemExit(f"grpo_trl: --rows {a.rows} is not a multiple of --num_generations "
                         f"{a.num_generations}")
    prompts = read_prompts(a.prompts)[: a.rows // a.num_generations]
    if len(prompts) * a.num_generations != a.rows:
        raise SystemExit(f"grpo_trl: {a.prompts} holds fewer than {a.rows // a.num_generations} prompts")
    tok = AutoTokenizer.from_pretrained(a.model_dir)
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32)
    eos = model.generation_config.eos_token_id
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    if tok.eos_token_id not in eos:
        eos = [tok.eos_token_id, *eos]
    config = GenerationConfig(max_new_tokens=a.max_new_tokens, do_sample=True, pad_token_id=tok.pad_token_id,
                              bos_token_id=tok.bos_token_id, eos_token_id=eos, temperature=1.0, top_p=1.0,
                              top_k=0, min_p=None, repetition_penalty=1.0, cache_implementation=None,
                              disable_compile=True)
    ids = [tok(p)["input_ids"] for p in prompts for _ in range(a.num_generations)]
    width = max(map(len, ids))
    input_ids = torch.tensor([[tok.pad_token_id] * (width - len(r)) + r for r in ids])
    attention_mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in ids])
    torch.manual_seed(42)
    tokens, seconds = 0, 0.0
    with torch.no_grad():
        for i in range(a.repeats + 1):
            start = time.perf_counter()
            out = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=config)
            took = time.perf_counter() - start
            completion = out[:, width:]
            is_eos = torch.isin(completion, torch.tensor(eos))
            first = torch.where(is_eos.any(1), is_eos.int().argmax(1),
                                torch.full((a.rows,), completion.size(1)))
            generated = int((torch.arange(completion.size(1)).unsqueeze(0) <= first.unsqueeze(1)).sum())
            if i > 0:  # the first call warms up
                tokens += generated
                seconds += took
    result = dict(rows=a.rows, repeats=a.repeats, tokens=tokens, seconds=seconds,
                  tokens_per_second=tokens / seconds)
    with open(a.out_json, "w") as f:
        json.dump(result, f)
    print(f"grpo_trl: generate() made {tokens} tokens in {seconds:.2f} s over {a.repeats} calls of {a.rows} "
          f"rows (prompts of up to {width} tokens): {tokens / seconds:.1f} tokens/s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("data")
    d.add_argument("chat")
    d.add_argument("out")
    d.add_argument("--num", type=int, default=64)
    t = sub.add_parser("train")
    t.add_argument("model_dir")
    t.add_argument("train_file")
    t.add_argument("output_dir")
    t.add_argument("--per_device_train_batch_size", type=int, default=8)
    t.add_argument("--num_generations", type=int, default=4)
    t.add_argument("--max_completion_length", type=int, default=64)
    t.add_argument("--soft_punish_cache", type=int, default=16)
    t.add_argument("--max_steps", type=int, default=8)
    t.add_argument("--learning_rate", type=float, default=1e-5)
    t.add_argument("--threads", type=int, default=torch.get_num_threads())
    t.add_argument("--bf16", choices=["true", "false"], default="false")
    g = sub.add_parser("generate")
    g.add_argument("model_dir")
    g.add_argument("prompts")
    g.add_argument("out_json")
    g.add_argument("--rows", type=int, default=8)
    g.add_argument("--num_generations", type=int, default=4)
    g.add_argument("--max_new_tokens", type=int, default=64)
    g.add_argument("--repeats", type=int, default=3)
    g.add_argument("--threads", type=int, default=torch.get_num_threads())
    a = parser.parse_args()
    if a.command == "data":
        data(a.chat, a.out, a.num)
    elif a.command == "train":
        shutil.rmtree(a.output_dir, ignore_errors=True)
        train(a)
    else:
        generate(a)


if __name__ == "__main__":
    main()

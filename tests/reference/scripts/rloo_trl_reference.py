"""Reference runs of TRL 1.16's RLOOTrainer (Transformers' generate, no vLLM) on grpo_fixtures.py's
Qwen3, fp32 on the CPU, for the parity checks of an RLOO trainer: every generation as TRL made and
scored it (so that a test replays the run without sampling), each micro-step's loss, the per-step
logs and checksums of the trained parameters. The record is grpo_trl_reference.py's, so that one
test can replay either (the differences are listed below).

usage: rloo_trl_reference.py --case NAME --fixtures DIR --data DIR --out OUT.json
       torchrun --standalone --nproc_per_node 2 rloo_trl_reference.py ...   (gloo; rank 0 writes)
--fixtures is grpo_fixtures.py's folder (the model is FIXTURES/qwen3_eos), --data
tests/reference/inputs/grpo (prompts.jsonl: a "prompt" string and a "solution" column, which only
reaches the reward functions' keyword arguments; eval_prompts.jsonl: 8 more rows as prompts.jsonl's,
the eval case's eval_dataset). A case (CASES) names the data file and the RLOOConfig keys beyond
COMMON; COMMON leaves beta (0.05) and num_generations (2) at RLOOConfig's defaults. The reward
functions are TRL's completion-only ones, on the completion ids:
get_soft_overlong_punishment(max_completion_len=12, soft_punish_cache=6) and
get_repetition_penalty_reward(ngram_size=2, max_penalty=-1.0), in that order.

Writes one JSON object to --out (floats as Python writes them; NaN or infinity, should any occur,
as null):
  case, world_size, fixture {ref: "grpo_fixtures", model: "qwen3_eos"}, data (the file, from the
  repository's root), num_prompts,
  config: the RLOOConfig keys this case sets (COMMON and the case's; reward_clip_range a list),
  lora: null (no case has LoRA; kept for grpo_trl_reference.py's layout),
  reward_funcs: [{name, ...its parameters}], reward_weights: the weights TRL used,
  resolved: what RLOOConfig and the trainer made of them (generation_batch_size,
  steps_per_generation, epsilon_low, epsilon_high, eos_token_ids, pad_token_id, bos_token_id,
  temperature, max_completion_length, num_generations, beta, num_iterations,
  normalize_advantages, reward_clip_range, mask_truncated_completions, the optimizer's settings,
  generation_config: the GenerationConfig generate() was given),
  sampler: {chunks: the train RepeatSampler's prompt indices, a list per generation batch (each
  index once; the sampler yields each num_generations times, the whole chunk repeat_count times),
  repeat_count},
  with evaluation only: eval_data, num_eval_prompts, eval_sampler {order, mini_repeat_count} (as
  grpo_trl_reference.py's),
  generations: a record per call of _generate_and_score_completions on every rank, in call order
  and then rank order:
    index, rank, mode (with evaluation only), global_step, step, prompt_indices, prompts,
    prompt_ids, completion_ids, completions, prompt_ids_padded, prompt_mask,
    completion_ids_padded, completion_mask (with mask_truncated_completions, truncated rows' mask
    is all 0), rewards_per_func, rewards_per_func_gathered, advantages, advantages_gathered and
    permutation: as grpo_trl_reference.py's;
    old_per_token_logps (local rows x padded completion length, 0 where the mask is 0: the
    policy's at generation time, which RLOO always computes, whatever num_iterations; the loss
    reads only their masked sum), old_logps (local rows: that sum, the output's "old_logps"),
    ref_per_token_logps (null with beta 0),
    kl_gathered (every rank's rows: the sequence KL sum((old - ref) * completion_mask) that TRL
    gathers and subtracts from the rewards times beta; null with beta 0),
    rewards_gathered (every rank's rows: the reward the leave-one-out baseline is taken over: the
    weighted nansum of rewards_per_func, NaN (null) where every function returned None, clamped to
    reward_clip_range, minus beta * kl_gathered),
    no num_items_in_batch (RLOO has none),
  micro_steps: a record per compute_loss call on every rank, as grpo_trl_reference.py's: rank,
  mode (with evaluation only), step, global_step, generation, rows, loss (what compute_loss
  returned: the mean over the micro-batch's sequences, NOT scaled for accumulation: RLOOTrainer
  sets loss_is_scaled_for_ga = False, so Transformers' training_step divides it by
  gradient_accumulation_steps before backward() and before adding it to the logged loss),
  per_token_logps and entropies (its rows x padded completion length),
  logs: every entry of state.log_history but the final summary (a step that reuses a generation
  logs no completions/*, kl, rewards/*, reward, reward_std, frac_reward_zero_std nor num_tokens:
  RLOO's kl is a generation metric; step_time is a wall time; evaluation as in
  grpo_trl_reference.py), train: the final summary (runtime figures left out), params_initial and
  params: {name: [sum, sum of squares]} (float64) of every trainable tensor before and after
  training.
"""
import argparse
import contextlib
import json
import math
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import trl.trainer.rloo_trainer as rloo_module
from datasets import Dataset
from transformers import AutoTokenizer
from trl import RLOOConfig, RLOOTrainer
from trl.rewards import get_repetition_penalty_reward, get_soft_overlong_punishment

MAX_COMPLETION = 12
REWARDS = [("soft_overlong_punishment", dict(max_completion_len=MAX_COMPLETION, soft_punish_cache=6)),
           ("repetition_penalty", dict(ngram_size=2, max_penalty=-1.0))]
# grpo_trl_reference.py's COMMON without loss_type, beta and num_generations (RLOO has no loss_type;
# beta 0.05 and num_generations 2 are RLOOConfig's defaults, which the default case keeps).
COMMON = dict(use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none", logging_steps=1,
              seed=42, learning_rate=1e-3, lr_scheduler_type="linear", warmup_steps=0,
              per_device_train_batch_size=8, gradient_accumulation_steps=1, max_steps=4, save_strategy="no",
              disable_tqdm=True, disable_dropout=True, max_completion_length=MAX_COMPLETION,
              temperature=1.0, top_p=1.0, top_k=0, log_completions=True, num_iterations=1)
# CASE: (data file, RLOOConfig keys beyond COMMON; "eval": the eval data file).
CASES = {
    # RLOOConfig's defaults: beta 0.05 (a frozen copy of the initial policy; the sequence KL folded
    # into the rewards), num_generations 2 (the baseline of each completion is its sibling's reward).
    "default": ("prompts", {}),
    # Groups of 4 (the baseline is the mean of the 3 others), the advantages normalized over the
    # generation batch of every process.
    "norm_g4": ("prompts", {"num_generations": 4, "normalize_advantages": True}),
    # The summed rewards (in [-2, 0]) clamped to [-0.6, -0.1] before the KL is subtracted.
    "clip": ("prompts", {"num_generations": 4, "reward_clip_range": [-0.6, -0.1]}),
    # No reference model: the rewards as they are.
    "beta0": ("prompts", {"beta": 0.0, "num_generations": 4}),
    # Each generation used twice: the second pass has sequence ratios off 1, some clipped.
    "iter2": ("prompts", {"num_iterations": 2, "max_steps": 6, "num_generations": 4}),
    # Accumulation over two micro-batches of 4 from one generation batch of 8 (steps_per_generation
    # 2): the loss is divided by 2 by Transformers, not by TRL.
    "accum": ("prompts", {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2,
                          "num_generations": 4}),
    # Truncated completions' mask all 0: their log-probability sums are 0, their ratio 1, and they
    # still count in the mean over sequences.
    "mask_trunc": ("prompts", {"num_generations": 4, "mask_truncated_completions": True}),
    # An evaluation every 2 steps: 8 eval prompts in batches of 2 prompts x 4 generations.
    "eval": ("prompts", {"num_generations": 4, "eval_strategy": "steps", "eval_steps": 2,
                         "per_device_eval_batch_size": 8, "num_generations_eval": 4, "eval": "eval_prompts"}),
}


def clean(value):
    """`value` with NaN and infinities as None (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def tolist(t):
    return None if t is None else t.detach().cpu().tolist()


def prompt_key(prompt):
    return json.dumps(prompt, sort_keys=True, ensure_ascii=False)


def checksums(model):
    """{name: [sum, sum of squares]} of the trainable tensors."""
    out = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        t = p.detach().double()
        out[name] = [t.sum().item(), (t * t).sum().item()]
    return out


class RecordingRLOOTrainer(RLOOTrainer):
    """RLOOTrainer, recording what each generation made and each micro-step computed."""

    def setup_recording(self, prompt_index, eval_prompt_index=None):
        self.rec_prompt_index = prompt_index
        self.rec_eval_prompt_index = eval_prompt_index
        self.rec_generations, self.rec_micro_steps = [], []
        self.rec_permutation = None
        self.rec_rows = None
        self.rec_in_generation = False
        self.rec_scoring_logps = []  # the no-entropy forwards of a generation: old, then ref
        self.rec_gathered = []  # rloo_module.gather's results in a generation: rewards_per_func, kl
        self.rec_grouped_rewards = None  # the first nanstd argument of a generation

    def _generate(self, prompts):
        prompt_ids, completion_ids, completions = super()._generate(prompts)
        self.rec_generated = dict(prompt_ids=[list(map(int, p)) for p in prompt_ids],
                                  completion_ids=[list(map(int, c)) for c in completion_ids],
                                  completions=[c[0]["content"] if isinstance(c, list) else c for c in completions])
        return prompt_ids, completion_ids, completions

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self.rec_rewards = rewards.detach().clone()
        return rewards

    def _generate_and_score_completions(self, inputs):
        rank, n = self.accelerator.process_index, len(inputs)
        training = self.model.training
        index = self.rec_prompt_index if training else self.rec_eval_prompt_index
        record = dict(index=len(self.rec_generations), rank=rank)
        if self.rec_eval_prompt_index is not None:
            record["mode"] = "train" if training else "eval"
        record.update(global_step=self.state.global_step, step=self._step,
                      prompt_indices=[index[prompt_key(x["prompt"])] for x in inputs],
                      prompts=[x["prompt"] for x in inputs])
        self.rec_in_generation = True
        self.rec_scoring_logps, self.rec_gathered, self.rec_grouped_rewards = [], [], None
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            self.rec_in_generation = False
        record.update(self.rec_generated)
        gathered = self.rec_rewards
        expected = 2 if self.beta != 0.0 else 1
        assert len(self.rec_scoring_logps) == expected, len(self.rec_scoring_logps)
        assert len(self.rec_gathered) == expected, len(self.rec_gathered)
        num_generations = self.num_generations if training else self.num_generations_eval
        assert self.rec_grouped_rewards is not None and self.rec_grouped_rewards.size(1) == num_generations
        record.update(
            prompt_ids_padded=tolist(out["prompt_ids"]), prompt_mask=tolist(out["prompt_mask"]),
            completion_ids_padded=tolist(out["completion_ids"]), completion_mask=tolist(out["completion_mask"]),
            rewards_per_func=tolist(gathered[rank * n:(rank + 1) * n]), rewards_per_func_gathered=tolist(gathered),
            advantages=tolist(out["advantages"]), advantages_gathered=list(self._logs["advantages"])[-len(gathered):],
            old_per_token_logps=tolist(self.rec_scoring_logps[0]), old_logps=tolist(out["old_logps"]),
            ref_per_token_logps=tolist(self.rec_scoring_logps[1]) if self.beta != 0.0 else None,
            kl_gathered=tolist(self.rec_gathered[1]) if self.beta != 0.0 else None,
            rewards_gathered=tolist(self.rec_grouped_rewards.reshape(-1)))
        if not training:
            record["permutation"] = None  # evaluation neither shuffles nor splits its batch
        self.rec_generations.append(record)
        return out

    def _prepare_inputs(self, generation_batch):
        inputs = super()._prepare_inputs(generation_batch)
        if self.model.training:
            size = self.args.per_device_train_batch_size
            chunk = self._step % self.args.steps_per_generation
            self.rec_rows = self.rec_permutation[chunk * size:(chunk + 1) * size]
        else:
            self.rec_rows = list(range(len(inputs["completion_ids"])))
        return inputs

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        if kwargs.get("compute_entropy"):
            self.rec_policy = (tolist(logps), tolist(entropies))
        elif self.rec_in_generation:
            self.rec_scoring_logps.append(logps.detach().clone())
        return logps, entropies, aux

    def _compute_loss(self, model, inputs):
        loss = super()._compute_loss(model, inputs)
        record = dict(rank=self.accelerator.process_index)
        if self.rec_eval_prompt_index is not None:
            record["mode"] = "train" if self.model.training else "eval"
        record.update(
            step=self._step, global_step=self.state.global_step,
            generation=self.rec_generations[-1]["index"], rows=self.rec_rows, loss=loss.item(),
            per_token_logps=self.rec_policy[0], entropies=self.rec_policy[1])
        self.rec_micro_steps.append(record)
        return loss


def recording_hooks(trainer_ref):
    """rloo_trainer's module-level shuffle_sequence_dict, gather and nanstd, the same computation,
    keeping the permutation (the same torch.randperm draw), what a generation gathers (the rewards
    per function, then the sequence KL) and the rewards grouped for the baseline (nanstd's first
    argument in a generation)."""
    shuffle_original, gather_original, nanstd_original = (
        rloo_module.shuffle_sequence_dict, rloo_module.gather, rloo_module.nanstd)

    def shuffle(seq_dict):
        batch_size = len(next(v for v in seq_dict.values() if v is not None))
        state = torch.get_rng_state()
        permutation = torch.randperm(batch_size)
        torch.set_rng_state(state)
        result = shuffle_original(seq_dict)
        trainer = trainer_ref[0]
        trainer.rec_permutation = permutation.tolist()
        trainer.rec_generations[-1]["permutation"] = trainer.rec_permutation
        return result

    def gather(tensor):
        result = gather_original(tensor)
        trainer = trainer_ref[0]
        if trainer is not None and trainer.rec_in_generation:
            trainer.rec_gathered.append(result.detach().clone())
        return result

    def nanstd(tensor, *args, **kwargs):
        trainer = trainer_ref[0]
        if trainer is not None and trainer.rec_in_generation and trainer.rec_grouped_rewards is None:
            trainer.rec_grouped_rewards = tensor.detach().clone()
        return nanstd_original(tensor, *args, **kwargs)

    rloo_module.shuffle_sequence_dict = shuffle
    rloo_module.gather = gather
    rloo_module.nanstd = nanstd


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, choices=CASES)
    parser.add_argument("--fixtures", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    a = parser.parse_args()

    data_name, extra = CASES[a.case]
    extra = dict(extra)
    eval_name = extra.pop("eval", None)
    settings = {**COMMON, **extra}
    model_dir = os.path.join(a.fixtures, "qwen3_eos")
    data_file = os.path.join(a.data, data_name + ".jsonl")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo")

    with open(data_file, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    prompt_index = {prompt_key(r["prompt"]): i for i, r in enumerate(rows)}
    assert len(prompt_index) == len(rows), "the prompts must differ"
    eval_rows = eval_prompt_index = None
    if eval_name:
        with open(os.path.join(a.data, eval_name + ".jsonl"), encoding="utf-8") as f:
            eval_rows = [json.loads(line) for line in f if line.strip()]
        eval_prompt_index = {prompt_key(r["prompt"]): i for i, r in enumerate(eval_rows)}
        assert len(eval_prompt_index) == len(eval_rows), "the eval prompts must differ"

    reward_funcs = [get_soft_overlong_punishment(**REWARDS[0][1]), get_repetition_penalty_reward(**REWARDS[1][1])]
    trainer_ref = [None]
    recording_hooks(trainer_ref)
    # stdout carries nothing: the Trainer's printed logs and TRL's completion tables go to stderr.
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory() as tmp:
        config = RLOOConfig(output_dir=tmp, ddp_backend="gloo" if world > 1 else None,
                            model_init_kwargs={"dtype": torch.float32, "attn_implementation": "sdpa"}, **settings)
        trainer = RecordingRLOOTrainer(
            model=model_dir, reward_funcs=reward_funcs, args=config,
            train_dataset=Dataset.from_list(rows),
            eval_dataset=Dataset.from_list(eval_rows) if eval_rows else None,
            processing_class=AutoTokenizer.from_pretrained(model_dir))
        trainer.setup_recording(prompt_index, eval_prompt_index)
        trainer_ref[0] = trainer
        params_initial = checksums(trainer.model)
        sampler = trainer._get_train_sampler()
        chunk = config.generation_batch_size // config.num_generations
        order = list(sampler)[::config.num_generations]
        per_chunk = chunk * sampler.repeat_count
        chunks = [order[i:i + chunk] for i in range(0, len(order), per_chunk)]
        if eval_rows:
            # A sampler as evaluate() builds each time (its own generator, seeded with args.seed).
            eval_sampler = trainer._get_eval_sampler(trainer.eval_dataset)
            eval_order = list(eval_sampler)
            repeats = eval_sampler.mini_repeat_count
            assert eval_order == [i for i in eval_order[::repeats] for _ in range(repeats)]
            eval_sampling = {"order": eval_order[::repeats], "mini_repeat_count": repeats}
        train = trainer.train().metrics
        params = checksums(trainer.model)
        tok = trainer._tokenizer
        clip = trainer.reward_clip_range
        resolved = dict(
            generation_batch_size=config.generation_batch_size, steps_per_generation=config.steps_per_generation,
            epsilon_low=trainer.epsilon_low, epsilon_high=trainer.epsilon_high,
            eos_token_ids=list(trainer.eos_token_ids), pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
            temperature=trainer.temperature, max_completion_length=trainer.max_completion_length,
            num_generations=trainer.num_generations, beta=trainer.beta, num_iterations=trainer.num_iterations,
            normalize_advantages=trainer.normalize_advantages,
            reward_clip_range=list(clip) if clip is not None else None,
            mask_truncated_completions=trainer.mask_truncated_completions,
            optim=getattr(config.optim, "value", config.optim), weight_decay=config.weight_decay,
            adam_beta1=config.adam_beta1, adam_beta2=config.adam_beta2, adam_epsilon=config.adam_epsilon,
            max_grad_norm=config.max_grad_norm,
            generation_config={k: v for k, v in trainer.generation_config.to_diff_dict().items()
                               if k != "transformers_version"})
        reward_weights = trainer.reward_weights.tolist()
        reward_names = list(trainer.reward_func_names)

    records = (trainer.rec_generations, trainer.rec_micro_steps)
    if world > 1:
        gathered = [None] * world
        dist.all_gather_object(gathered, records)
    else:
        gathered = [records]
    if rank == 0:
        generations = sorted((g for r in gathered for g in r[0]), key=lambda g: (g["index"], g["rank"]))
        # Each rank's calls in order, then rank order (evaluation's calls leave _step as it is).
        micro_steps = [m for _, m in sorted(((i, m) for r in gathered for i, m in enumerate(r[1])),
                                            key=lambda x: (x[0], x[1]["rank"]))]
        logs = trainer.state.log_history
        out = {"case": a.case, "world_size": world, "fixture": {"ref": "grpo_fixtures", "model": "qwen3_eos"},
               "data": "tests/reference/inputs/grpo/" + data_name + ".jsonl", "num_prompts": len(rows),
               "config": settings, "lora": None,
               "reward_funcs": [dict(name=n, **p) for n, (_, p) in zip(reward_names, REWARDS)],
               "reward_weights": reward_weights, "resolved": resolved,
               "sampler": {"chunks": chunks, "repeat_count": sampler.repeat_count}}
        if eval_rows:
            out.update({"eval_data": "tests/reference/inputs/grpo/" + eval_name + ".jsonl",
                        "num_eval_prompts": len(eval_rows), "eval_sampler": eval_sampling})
        out.update({"generations": generations, "micro_steps": micro_steps,
                    "logs": [e for e in logs if "train_runtime" not in e],
                    "train": {k: v for k, v in train.items() if "runtime" not in k and "per_second" not in k},
                    "params_initial": params_initial, "params": params})
        with open(a.out, "w") as f:
            json.dump(clean(out), f)
        steps = [e for e in logs if "loss" in e]
        print(f"{a.case} on {world}: {len(generations)} generations, {len(micro_steps)} micro-steps, "
              f"frac_reward_zero_std {[e.get('frac_reward_zero_std') for e in steps]}, "
              f"clip_ratio/region_mean {[e.get('clip_ratio/region_mean') for e in steps]}, "
              f"loss {[round(e['loss'], 5) for e in steps]}", file=sys.stderr)
    if world > 1:
        # As grpo_trl_reference.py: every rank leaves the process group, then the process without the
        # interpreter's teardown (gloo's threads abort it now and then otherwise).
        dist.barrier()
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()

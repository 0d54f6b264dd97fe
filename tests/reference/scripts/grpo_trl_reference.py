"""Reference runs of TRL 1.16's GRPOTrainer (Transformers' generate, no vLLM) on grpo_fixtures.py's
Qwen3, fp32 on the CPU, for `trainer grpo`'s parity checks: every generation as TRL made and scored
it (so that a test replays the run without sampling), each micro-step's loss, the per-step logs and
checksums of the trained parameters.

usage: grpo_trl_reference.py --case NAME --fixtures DIR --data DIR --out OUT.json
       torchrun --standalone --nproc_per_node 2 grpo_trl_reference.py ...   (gloo; rank 0 writes)
--fixtures is grpo_fixtures.py's folder (the model is FIXTURES/qwen3_eos), --data
tests/reference/inputs/grpo (prompts.jsonl: a "prompt" string and a "solution" column, which only
reaches the reward functions' keyword arguments; conv_prompts.jsonl: "prompt" a conversation of a
user turn, some after a system turn; eval_prompts.jsonl: 8 more rows as prompts.jsonl's, the eval
case's eval_dataset). A case (CASES) names the data file and the GRPOConfig keys beyond COMMON.
The reward functions are TRL's completion-only ones, on the completion ids:
get_soft_overlong_punishment(max_completion_len=12, soft_punish_cache=6) and
get_repetition_penalty_reward(ngram_size=2, max_penalty=-1.0), in that order.

Writes one JSON object to --out (floats as Python writes them; NaN or infinity, should any occur,
as null):
  case, world_size, fixture {ref: "grpo_fixtures", model: "qwen3_eos"}, data (the file, from the
  repository's root), num_prompts,
  config: the GRPOConfig keys this case sets (COMMON and the case's), lora: the LoraConfig keys or
  null, reward_funcs: [{name, ...its parameters}], reward_weights: the weights TRL used,
  resolved: what GRPOConfig and the trainer made of them (generation_batch_size,
  steps_per_generation, epsilon_low, epsilon_high, scale_rewards, eos_token_ids, pad_token_id,
  bos_token_id, temperature, max_completion_length, num_generations, loss_type,
  importance_sampling_level, generation_config: the GenerationConfig generate() was given),
  sampler: {chunks: the train RepeatSampler's prompt indices, a list per generation batch (each
  index once; the sampler yields each num_generations times, the whole chunk repeat_count times),
  repeat_count},
  with evaluation only: eval_data (the eval file, from the repository's root), num_eval_prompts,
  eval_sampler: {order: the eval RepeatSampler's prompt indices, each once (it yields each
  num_generations_eval times in this order, which Trainer.evaluate walks in batches of
  per_device_eval_batch_size rows; it builds the sampler again, on args.seed, at each evaluation),
  mini_repeat_count},
  generations: a record per call of _generate_and_score_completions on every rank, in call order
  and then rank order, evaluation's calls among them:
    index (the call's number, from 0), rank, mode (with evaluation only: "train" or "eval"),
    global_step (state.global_step when it ran), step (the trainer's micro-step counter _step),
    prompt_indices (the dataset row of each local row, of the eval file in an eval call),
    prompts (the local rows' prompts), prompt_ids (the tokenized prompts, a list each, unpadded),
    completion_ids (each row's completion as TRL keeps it: cut after the first EOS, the EOS kept;
    a row without EOS holds max_completion_length ids), completions (their decoded text, or the
    assistant message for conversational prompts), prompt_ids_padded and prompt_mask (left-padded
    with pad_token_id to the longest prompt of the rank's generation batch), completion_ids_padded
    and completion_mask (right-padded to its longest completion; with mask_truncated_completions,
    truncated rows' mask is all 0), rewards_per_func (local rows x reward functions),
    rewards_per_func_gathered (all ranks' rows, in rank order), advantages (local rows),
    advantages_gathered, num_items_in_batch (the completion tokens of every rank's generation batch
    in the loss mask), old_per_token_logps and ref_per_token_logps (local rows x padded completion
    length; null when TRL does not compute them: old only where steps_per_generation *
    num_iterations does not divide gradient_accumulation_steps, ref only with beta != 0),
    permutation (the local rows' shuffle before the batch is cut into steps_per_generation
    micro-batches: micro-batch k holds rows permutation[k*B:(k+1)*B], B =
    per_device_train_batch_size; null in an eval call, whose batch is neither shuffled nor split),
  micro_steps: a record per compute_loss call on every rank (prediction_step's in evaluation among
  them, on all of its call's rows in order), each rank's in call order and then rank order: rank,
  mode (with evaluation only), step (_step, which evaluation leaves as it is), global_step,
  generation (the index of the generation it came from), rows (the generation's local rows it
  holds, in order), loss (what compute_loss returned, which backward() takes as is: TRL
  scales it for accumulation itself), per_token_logps and entropies (its rows x padded completion
  length, 0 where the mask is 0),
  logs: every entry of state.log_history but the final summary (a step that reuses a generation
  logs no completions/*, rewards/*, reward, reward_std, frac_reward_zero_std nor num_tokens;
  step_time is a wall time; an evaluation's entry has eval_loss, the eval_ metrics (each the mean
  of its calls' values; eval_num_tokens the train count) and the wall times eval_runtime,
  eval_samples_per_second and eval_steps_per_second; eval_loss is the float32 mean of the gathered
  per-call losses, each repeated per_device_eval_batch_size times, where accelerate's
  gather_for_metrics keeps only the first len(eval_dataset) % (per_device_eval_batch_size *
  processes) of the last gather, if that is not 0: on 2 processes rank 1's last call is left out
  of it), train: the final summary (runtime figures left out), params_initial and params:
  {name: [sum, sum of squares]} (float64) of every trainable tensor before and after training (the
  PeftModel's names without ".default." with LoRA); with LoRA, the adapter as PEFT initialized it
  is saved beside OUT.json in initial_adapter/.
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
import trl.trainer.grpo_trainer as grpo_module
from datasets import Dataset
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer
from trl.rewards import get_repetition_penalty_reward, get_soft_overlong_punishment

MAX_COMPLETION = 12
REWARDS = [("soft_overlong_punishment", dict(max_completion_len=MAX_COMPLETION, soft_punish_cache=6)),
           ("repetition_penalty", dict(ngram_size=2, max_penalty=-1.0))]
COMMON = dict(use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none", logging_steps=1,
              seed=42, learning_rate=1e-3, lr_scheduler_type="linear", warmup_steps=0,
              per_device_train_batch_size=8, gradient_accumulation_steps=1, max_steps=4, save_strategy="no",
              disable_tqdm=True, disable_dropout=True, num_generations=4, max_completion_length=MAX_COMPLETION,
              temperature=1.0, top_p=1.0, top_k=0, log_completions=True, beta=0.0, num_iterations=1,
              loss_type="dapo")
ITER2 = dict(num_iterations=2, max_steps=6)
# CASE: (data file, GRPOConfig keys beyond COMMON; "lora": the LoraConfig keys; "eval": the eval data
# file).
CASES = {
    # Each loss, on-policy (num_iterations 1: the ratios are 1) and without a reference.
    "grpo": ("prompts", {"loss_type": "grpo"}),
    "dr_grpo": ("prompts", {"loss_type": "dr_grpo"}),
    "dapo": ("prompts", {"loss_type": "dapo"}),
    "bnpo": ("prompts", {"loss_type": "bnpo"}),
    "cispo": ("prompts", {"loss_type": "cispo", "epsilon_high": 5.0}),
    "sapo": ("prompts", {"loss_type": "sapo"}),
    "luspo": ("prompts", {"loss_type": "luspo", "importance_sampling_level": "sequence"}),
    "vespo": ("prompts", {"loss_type": "vespo"}),
    # The same on a batch used twice: the second pass has ratios off 1 (old_per_token_logps).
    "dapo_iter2": ("prompts", {"loss_type": "dapo", "epsilon_high": 0.28, **ITER2}),
    "cispo_iter2": ("prompts", {"loss_type": "cispo", "epsilon_high": 1.05, **ITER2}),
    "sapo_iter2": ("prompts", {"loss_type": "sapo", **ITER2}),
    "luspo_iter2": ("prompts", {"loss_type": "luspo", "importance_sampling_level": "sequence", **ITER2}),
    "vespo_iter2": ("prompts", {"loss_type": "vespo", **ITER2}),
    # GSPO: sequence-level ratios with the grpo loss.
    "sequence": ("prompts", {"loss_type": "grpo", "importance_sampling_level": "sequence", **ITER2}),
    # A frozen copy of the initial policy as the reference (beta 0.04), weighted rewards.
    "grpo_beta": ("prompts", {"loss_type": "grpo", "beta": 0.04, "reward_weights": [1.0, 0.5]}),
    # Conversational prompts through qwen3_training.jinja, without thinking.
    "conv": ("conv_prompts", {"loss_type": "dapo", "chat_template_kwargs": {"enable_thinking": False},
                              "reward_weights": [1.0, 0.5]}),
    # LoRA on q_proj and v_proj; the reference is the model with the adapter switched off.
    "lora_beta": ("prompts", {"loss_type": "dapo", "beta": 0.04, "learning_rate": 5e-3,
                              "lora": dict(r=8, lora_alpha=16, lora_dropout=0.0,
                                           target_modules=["q_proj", "v_proj"])}),
    # Rewards scaled by the batch's std, truncated completions out of the loss, the top half of the
    # tokens by entropy only.
    "scale_batch": ("prompts", {"loss_type": "dapo", "scale_rewards": "batch", "mask_truncated_completions": True,
                                "top_entropy_quantile": 0.5}),
    # GDPO's aggregation: each reward normalized in its group, then summed.
    "normalize_sum": ("prompts", {"loss_type": "dapo", "multi_objective_aggregation": "normalize_then_sum",
                                  "reward_weights": [1.0, 0.5]}),
    # Accumulation over two micro-batches of 4 from one generation batch of 8 (steps_per_generation 2).
    "accum": ("prompts", {"loss_type": "dapo", "per_device_train_batch_size": 4,
                          "gradient_accumulation_steps": 2}),
    # Another temperature: the log-probabilities are those of logits / 0.7.
    "temp": ("prompts", {"loss_type": "dapo", "temperature": 0.7, "top_k": 50, "top_p": 0.95}),
    # Two processes only: a group of 8 completions split over the ranks (4 each).
    "span": ("prompts", {"loss_type": "dapo", "per_device_train_batch_size": 4, "num_generations": 8}),
    # dapo with an evaluation every 2 steps: 8 eval prompts in batches of 2 prompts x 4 generations.
    "eval": ("prompts", {"loss_type": "dapo", "eval_strategy": "steps", "eval_steps": 2,
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


def checksums(model, peft):
    """{name: [sum, sum of squares]} of the trainable tensors."""
    out = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if peft:
            name = name.replace(".default.", ".")
        t = p.detach().double()
        out[name] = [t.sum().item(), (t * t).sum().item()]
    return out


class RecordingGRPOTrainer(GRPOTrainer):
    """GRPOTrainer, recording what each generation made and each micro-step computed."""

    def setup_recording(self, prompt_index, eval_prompt_index=None):
        self.rec_prompt_index = prompt_index
        self.rec_eval_prompt_index = eval_prompt_index
        self.rec_generations, self.rec_micro_steps = [], []
        self.rec_permutation = None
        self.rec_rows = None

    def _generate(self, prompts):
        result = super()._generate(prompts)
        prompt_ids, completion_ids, _, completions = result[:4]
        self.rec_generated = dict(prompt_ids=[list(map(int, p)) for p in prompt_ids],
                                  completion_ids=[list(map(int, c)) for c in completion_ids],
                                  completions=[c[0]["content"] if isinstance(c, list) else c for c in completions])
        return result

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
        out = super()._generate_and_score_completions(inputs)
        record.update(self.rec_generated)
        gathered = self.rec_rewards
        record.update(
            prompt_ids_padded=tolist(out["prompt_ids"]), prompt_mask=tolist(out["prompt_mask"]),
            completion_ids_padded=tolist(out["completion_ids"]), completion_mask=tolist(out["completion_mask"]),
            rewards_per_func=tolist(gathered[rank * n:(rank + 1) * n]), rewards_per_func_gathered=tolist(gathered),
            advantages=tolist(out["advantages"]), advantages_gathered=list(self._logs["advantages"])[-len(gathered):],
            num_items_in_batch=int(out["num_items_in_batch"].item()),
            old_per_token_logps=tolist(out.get("old_per_token_logps")),
            ref_per_token_logps=tolist(out.get("ref_per_token_logps")))
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


def recording_shuffle(trainer_ref):
    """TRL's shuffle_sequence_dict (the same torch.randperm draw), keeping the permutation."""
    original = grpo_module.shuffle_sequence_dict

    def shuffle(seq_dict):
        batch_size = len(next(v for v in seq_dict.values() if v is not None))
        state = torch.get_rng_state()
        permutation = torch.randperm(batch_size)
        torch.set_rng_state(state)
        result = original(seq_dict)
        trainer = trainer_ref[0]
        trainer.rec_permutation = permutation.tolist()
        trainer.rec_generations[-1]["permutation"] = trainer.rec_permutation
        return result

    return shuffle


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, choices=CASES)
    parser.add_argument("--fixtures", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    a = parser.parse_args()

    data_name, extra = CASES[a.case]
    extra = dict(extra)
    lora = extra.pop("lora", None)
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

    peft_config = None
    if lora:
        from peft import LoraConfig
        peft_config = LoraConfig(task_type="CAUSAL_LM", **lora)

    reward_funcs = [get_soft_overlong_punishment(**REWARDS[0][1]), get_repetition_penalty_reward(**REWARDS[1][1])]
    trainer_ref = [None]
    grpo_module.shuffle_sequence_dict = recording_shuffle(trainer_ref)
    out_dir = os.path.dirname(os.path.abspath(a.out))
    # stdout carries nothing: the Trainer's printed logs and TRL's completion tables go to stderr.
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory() as tmp:
        config = GRPOConfig(output_dir=tmp, ddp_backend="gloo" if world > 1 else None,
                            model_init_kwargs={"dtype": torch.float32, "attn_implementation": "sdpa"}, **settings)
        trainer = RecordingGRPOTrainer(
            model=model_dir, reward_funcs=reward_funcs, args=config,
            train_dataset=Dataset.from_list(rows),
            eval_dataset=Dataset.from_list(eval_rows) if eval_rows else None,
            processing_class=AutoTokenizer.from_pretrained(model_dir), peft_config=peft_config)
        trainer_ref[0] = trainer
        trainer.setup_recording(prompt_index, eval_prompt_index)
        params_initial = checksums(trainer.model, lora is not None)
        if lora and rank == 0:
            trainer.model.save_pretrained(os.path.join(out_dir, "initial_adapter"))
            os.remove(os.path.join(out_dir, "initial_adapter", "README.md"))  # PEFT's model card
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
        params = checksums(trainer.model, lora is not None)
        tok = trainer._tokenizer
        resolved = dict(
            generation_batch_size=config.generation_batch_size, steps_per_generation=config.steps_per_generation,
            epsilon_low=trainer.epsilon_low, epsilon_high=trainer.epsilon_high, scale_rewards=trainer.scale_rewards,
            eos_token_ids=list(trainer.eos_token_ids), pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
            temperature=trainer.temperature, max_completion_length=trainer.max_completion_length,
            num_generations=trainer.num_generations, loss_type=trainer.loss_type,
            importance_sampling_level=trainer.importance_sampling_level,
            multi_objective_aggregation=trainer.multi_objective_aggregation,
            mask_truncated_completions=trainer.mask_truncated_completions,
            top_entropy_quantile=trainer.top_entropy_quantile, beta=trainer.beta,
            num_iterations=trainer.num_iterations, optim=getattr(config.optim, "value", config.optim),
            weight_decay=config.weight_decay,
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
               "config": settings, "lora": lora,
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
              f"loss {[round(e['loss'], 5) for e in steps]}", file=sys.stderr)
    if world > 1:
        # As dpo_trl_reference.py: every rank leaves the process group, then the process without the
        # interpreter's teardown (gloo's threads abort it now and then otherwise).
        dist.barrier()
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()

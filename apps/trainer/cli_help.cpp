// The `trainer` program's commands as its help lists them: each one's name, call and summary.
#include "apps/trainer/cli_help.h"

#include <fmt/format.h>

namespace trainer::cli {

const std::vector<CommandHelp>& command_helps() {
  static const std::vector<CommandHelp> commands = {
      {"train", "trainer train [CONFIG.json|CONFIG.yaml] [--name value ...]",
       "Train a model and save it, its state and its metrics to output_dir."},
      {"sft", "trainer sft [CONFIG.json|CONFIG.yaml] [--name value ...]",
       "Supervised fine-tuning as TRL's SFTTrainer: a Hugging Face model on conversations, "
       "prompt-completion pairs or text (JSON Lines), through its chat template, packed or not, "
       "with TRL's SFTConfig arguments and defaults."},
      {"dpo", "trainer dpo [CONFIG.json|CONFIG.yaml] [--name value ...]",
       "Preference tuning as TRL's DPOTrainer: a Hugging Face model on prompt/chosen/rejected "
       "pairs "
       "(plain or conversations, the prompt explicit or implicit), against a frozen reference (a "
       "copy, LoRA's base, or log-probabilities computed once), with TRL's DPOConfig arguments and "
       "defaults."},
      {"grpo", "trainer grpo [CONFIG.json|CONFIG.yaml] [--name value ...]",
       "Reinforcement learning as TRL's GRPOTrainer: num_generations completions of each prompt "
       "sampled in the process, scored by reward_funcs (TRL's built-ins or exec:COMMAND programs), "
       "the policy moved by TRL's losses, with TRL's GRPOConfig arguments and defaults."},
      {"rloo", "trainer rloo [CONFIG.json|CONFIG.yaml] [--name value ...]",
       "Reinforcement learning as TRL's RLOOTrainer: num_generations (2) completions of each "
       "prompt "
       "sampled in the process, scored by reward_funcs, the KL to the reference folded into the "
       "reward, REINFORCE's leave-one-out baseline, with TRL's RLOOConfig arguments and defaults."},
      {"reward", "trainer reward [CONFIG.json|CONFIG.yaml] [--name value ...]",
       "A reward model as TRL's RewardTrainer: a Hugging Face model (a causal folder gets a "
       "classifier's head of one label) learns to score chosen above rejected (plain or "
       "conversations, optional margins) by the Bradley-Terry loss, with TRL's RewardConfig "
       "arguments and defaults."},
      {"evaluate", "trainer evaluate [CONFIG.json] [--name value ...]",
       "Evaluate a trained run (output_dir's weights, or a model or adapter folder) on the eval "
       "dataset."},
      {"predict", "trainer predict [CONFIG.json] [--name value ...]",
       "Predict with output_dir/model.safetensors on the eval dataset: predictions.npy, "
       "label_ids.npy and predict_results.json in output_dir (Trainer.predict)."},
      {"plot", "trainer plot OUTPUT_DIR [OUTPUT_DIR ...] [-o FILE]",
       "Draw the loss and each eval metric against step, from each OUTPUT_DIR's "
       "trainer_state.json, as an SVG and an HTML page around it (runs overlaid)."},
      {"generate",
       "trainer generate OUTPUT_DIR [--prompt TEXT] [--max_new_tokens N] [--do_sample B] "
       "[--temperature T] [--top_k K] [--top_p P] [--seed S]",
       "Continue a prompt with a trained language model: a Hugging Face model or adapter folder "
       "(its tokenizer, its generation_config.json) or a gpt run's output_dir, seeded."},
      {"chat",
       "trainer chat DIR [--system TEXT] [--max_new_tokens N] [--do_sample B] [--temperature T] "
       "[--top_k K] [--top_p P] [--seed S] [--chat_template FILE]",
       "Talk to a Hugging Face model through its chat template (as transformers chat): each "
       "message from standard input is answered as it is generated; /clear and /exit."},
      {"tokenize", "trainer tokenize --tokenizer_name DIR [FILE] [--decode] [--no_special_tokens]",
       "Print the ids a Hugging Face tokenizer.json gives each line of FILE (or standard input), "
       "as space-separated numbers; --decode reads such lines and prints their text."},
      {"chat-template",
       "trainer chat-template --tokenizer_name DIR [--chat_template FILE] "
       "[--add_generation_prompt] "
       "[--tools FILE] [CONVERSATIONS.jsonl]",
       "Render each conversation (a JSON line with messages, optionally tools) with the chat "
       "template, as apply_chat_template(tokenize=False): one JSON string a line."},
      {"merge",
       "trainer merge ADAPTER_DIR --output_dir DIR [--torch_dtype auto|float32|bfloat16|float16]",
       "Merge a LoRA adapter folder into its base model (PEFT's merge_and_unload) and write the "
       "result to --output_dir as a Hugging Face model folder."},
      {"env", "trainer env",
       "Print the versions and devices a bug report needs: trainer, LibTorch, CUDA, cuDNN, NCCL, "
       "Gloo, compiler, BLAS, oneDNN, threads (as accelerate env and transformers env)."},
      {"launch", "trainer launch [--nproc-per-node N ...] PROGRAM [ARGS...]",
       "Start PROGRAM as N ranks of a distributed run, with torchrun's environment (RANK, "
       "WORLD_SIZE, ...)."}};
  return commands;
}

// `trainer --help`: what the program is, then each command's call and summary, once.
std::string top_help() {
  std::string out =
      "trainer: train and evaluate models on LibTorch, as Transformers' Trainer does.\n\n"
      "Commands (trainer COMMAND --help for a command's options):\n";
  for (const CommandHelp& c : command_helps())
    out += fmt::format("  {}\n      {}\n", c.usage, c.summary);
  return out;
}

std::string help_of(const std::string& name) {
  for (const CommandHelp& c : command_helps()) {
    if (c.name == name) return c.usage + "\n" + c.summary;
  }
  return "";
}

}  // namespace trainer::cli

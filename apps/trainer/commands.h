// The `trainer` program's commands, one file each (main.cpp dispatches): train, evaluate and
// predict on TrainingArguments, env, plot, generate (generate.h) and tokenize. Each returns the
// exit code; bad input is an InputError, which main turns into one line and exit code 2.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/trainer/cli.h"
#include "lib/tokenizers/chat_template.h"
#include "trainer/training_args.h"

namespace trainer::trl {
class GRPOTrainer;
}  // namespace trainer::trl

namespace trainer::cli {

// The program without its process set-up (main.cpp's): argv parsed (parse_command_line) and its
// command run. Returns the exit code; an error is reported as one line on stderr (report_error:
// 2 for bad input) rather than thrown. The tests run it in-process (testing::run_trainer).
int run_program(int argc, char** argv);

// `trainer train`: loads and checks the data and the model, trains, and writes every result into
// output_dir together (model, state, arguments, metrics), then loss.svg and, for a language
// model, a sample.
int train_command(const TrainingArguments& args);

// `trainer sft`: the config and overrides read as TRL's SFTConfig (apps/trainer/sft.cpp).
int sft_command(const std::string& config,
                const std::vector<std::pair<std::string, std::string>>& overrides);

// Where bf16 is native (TRL's bf16 default): a CUDA device, or a CPU with AVX512_BF16 or AMX.
bool machine_has_bf16();

// TRL's script arguments that are accepted without effect here, warned about (model_revision
// other than main: a local folder has one revision).
void warn_script_arguments(const TrainingArguments& args);

// The folder a tokenizer path names (a folder, or a tokenizer.json in one).
std::string tokenizer_dir(const std::string& path);

// The chat sample that ends `trainer sft` and `trainer dpo` on conversations: output_dir's model
// answers the first user message of *train_file (read at the end; nothing for other data).
std::function<void()> chat_sample(std::shared_ptr<std::string> train_file,
                                  const TrainingArguments& args);

// `trainer dpo`: the config and overrides read as TRL's DPOConfig (apps/trainer/dpo.cpp).
int dpo_command(const std::string& config,
                const std::vector<std::pair<std::string, std::string>>& overrides);

// `trainer reward`: the config and overrides read as TRL's RewardConfig (apps/trainer/reward.cpp).
int reward_command(const std::string& config,
                   const std::vector<std::pair<std::string, std::string>>& overrides);

// `trainer grpo`: the config and overrides read as TRL's GRPOConfig (apps/trainer/grpo.cpp).
// `hook` sees the GRPOTrainer before it trains (a test's replay of another run's samples).
using GrpoTrainerHook = std::function<void(trl::GRPOTrainer&)>;
int grpo_command(const std::string& config,
                 const std::vector<std::pair<std::string, std::string>>& overrides,
                 const GrpoTrainerHook& hook = {});
// `trainer rloo`: the config and overrides read as TRL's RLOOConfig, on GRPO's machinery
// (apps/trainer/grpo.cpp); the hook sees the RLOOTrainer.
int rloo_command(const std::string& config,
                 const std::vector<std::pair<std::string, std::string>>& overrides,
                 const GrpoTrainerHook& hook = {});

// `trainer evaluate`: output_dir's model on the eval split; eval_results.json, merged into
// all_results.json.
int evaluate_command(const TrainingArguments& args);

// `trainer predict`: Trainer.predict on the eval split; predictions.npy, label_ids.npy and
// predict_results.json.
int predict_command(const TrainingArguments& args);

// `trainer env`: what accelerate env and transformers env print, for a C++ program.
int env_command();

// `trainer plot`: the runs' curves as an SVG and an HTML page.
int plot_command(const std::vector<std::string>& output_dirs, const std::string& output,
                 double smoothing);

// `trainer tokenize`: each input line's ids under a tokenizer.json, or (--decode) each line of ids
// as text (apps/trainer/tokenize.cpp).
int tokenize_command(const TokenizeOptions& options);

// `trainer chat-template`: each conversation of a JSON Lines file rendered by a chat template, one
// JSON string a line (apps/trainer/chat_template.cpp).
int chat_template_command(const ChatTemplateOptions& options);

// The chat template of `file` (a .jinja file, with the special tokens of folder `dir`), else of
// the tokenizer folder `dir`. Throws InputError naming `command` when there is none or it does
// not parse.
tokenizers::ChatTemplate load_chat_template(const std::string& dir, const std::string& file,
                                            const std::string& command);

// chat.apply(request), its errors one InputError line after `context`: a raise_exception is
// "the template refuses the conversation: ...".
tokenizers::jinja::Rendered render_conversation(const tokenizers::ChatTemplate& chat,
                                                const tokenizers::ChatRequest& request,
                                                const std::string& context);

// `trainer chat DIR`: a conversation with a Hugging Face model through its chat template
// (apps/trainer/chat.cpp); `trainer generate --chat` templates its prompt the same way.
int chat_command(const GenerateOptions& options);

// `trainer merge ADAPTER_DIR --output_dir DIR`: the adapter's base model with the adapter merged
// (W + scaling B A), written as a Hugging Face model folder with the tokenizer.
int merge_command(const MergeOptions& options);

}  // namespace trainer::cli

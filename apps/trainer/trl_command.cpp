// The TRL commands' shared steps: their arguments, tokenizer, source options, model check and
// chat sample, and where bf16 is native (TRL's default).
#include "apps/trainer/trl_command.h"

#include <fstream>
#include <map>

#include <fmt/format.h>

#include "apps/trainer/generate.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/io/safetensors.h"
#include "lib/models/lora.h"
#include "lib/models/lora_config.h"
#include "lib/runtime/cuda.h"

namespace trainer::cli {
namespace {

// The first user message of the first conversation of `path` (SFT's messages or prompt, DPO's
// prompt or, with an implicit prompt, chosen), for the run's chat sample ("" when
// the data are not conversations).
std::string first_user_message(const std::string& path) {
  if (path.empty()) return "";
  for (const auto& record : trl::read_trl_records(path)) {
    for (const char* key : {"messages", "prompt", "chosen"}) {
      if (!record.contains(key) || !record[key].is_array()) continue;
      for (const auto& message : record[key]) {
        if (message.is_object() && message.value("role", "") == "user" &&
            message.contains("content") && message["content"].is_string()) {
          return message["content"].get<std::string>();
        }
      }
    }
    return "";
  }
  return "";
}

// "SFT" of "sft": how a message names the trainer.
std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return text;
}

}  // namespace

// Where bf16 is native: a CUDA device (Ampere on), or a CPU with AVX512_BF16 or AMX (TRL's
// default is bf16 unless fp16; on other CPUs bf16 is emulated and slower than fp32).
bool machine_has_bf16() {
  if (cuda::available()) return true;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    return line.find(" avx512_bf16") != std::string::npos ||
           line.find(" amx_bf16") != std::string::npos;
  }
  return false;
}
void warn_script_arguments(const TrainingArguments& args) {
  if (args.model_revision() != "main") {
    base::warn("model_revision {} is ignored: {} is a local folder, which has one revision",
               base::shown_text(args.model_revision()),
               args.model_name_or_path().value_or(args.model_type().value_or("the model")));
  }
}

// The folder a tokenizer path names (a folder, or a tokenizer.json in one).
std::string tokenizer_dir(const std::string& path) {
  return base::is_directory(path) ? path : base::parent_dir(path);
}

std::function<void()> chat_sample(std::shared_ptr<std::string> train_file,
                                  const TrainingArguments& args) {
  return [train_file, args] {
    // The first user message, read again at the end on the main process only.
    std::string prompt;
    try {
      prompt = first_user_message(*train_file);
    } catch (const std::exception& e) {
      // Everything is saved: a file changed since is no reason to fail the run.
      base::warn("no chat sample: {}", base::first_line(e.what()));
      return;
    }
    if (prompt.empty() ||
        !(models::is_hf_model_dir(args.output_dir()) || models::is_adapter_dir(args.output_dir())))
      return;
    GenerateOptions options;
    options.output_dir = args.output_dir();
    options.chat = true;
    options.prompt = prompt;
    options.seed = static_cast<uint64_t>(args.seed());
    options.max_new_tokens = 64;
    fmt::print("\nChat sample (trainer generate {} --chat --prompt {} --max_new_tokens 64):\n",
               args.output_dir(), base::shown_text(prompt));
    std::fflush(stdout);
    try {
      generate_text(options);
    } catch (const std::exception& e) {
      base::warn("no chat sample: {}", base::first_line(e.what()));
    }
  };
}

TrainingArguments parse_trl_arguments(
    const std::string& command, const std::string& config,
    const std::vector<std::pair<std::string, std::string>>& overrides, TrainingArguments defaults) {
  TrainingArguments args = TrainingArguments::parse(config, overrides, std::move(defaults));
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (args.model_init_kwargs().contains(key)) {
      args.torch_dtype(args.model_init_kwargs()[key].get<std::string>());
    }
  }
  warn_script_arguments(args);
  if (!args.model_name_or_path() && !args.model_type()) {
    throw InputError(fmt::format(
        "trainer {}: no model (give model_name_or_path, a Hugging Face model or adapter folder, "
        "or model_type with tokenizer_name for a new one)",
        command));
  }
  return args;
}

std::shared_ptr<const tokenizers::Tokenizer> trl_tokenizer(const std::string& command,
                                                           const ModelSource& model) {
  if (model.tokenizer_path.empty()) {
    throw InputError(fmt::format(
        "trainer {}: no tokenizer (the model folder has none: give tokenizer_name)", command));
  }
  return model.tokenizer ? model.tokenizer
                         : std::make_shared<const tokenizers::Tokenizer>(
                               tokenizers::Tokenizer::load(model.tokenizer_path));
}

void finish_trl_source_options(trl::TrlSourceOptions& options, Accelerator& accelerator,
                               const TrainingArguments& args, std::string& train_file) {
  options.context = node_load_context(accelerator);
  options.overwrite_cache = args.overwrite_cache();
  options.is_main = accelerator.is_main_process();
  train_file = options.train_file;
}

TrainingRecipe trl_recipe(
    const std::string& command, const TrainingArguments& args,
    std::function<std::unique_ptr<data::DataSource>(Accelerator&, const TrainingArguments&,
                                                    const ModelSource&, std::string& train_file)>
        data,
    TrlTrainerMaker trainer) {
  auto train_file = std::make_shared<std::string>();
  TrainingRecipe recipe;
  recipe.data = [data = std::move(data), train_file](
                    Accelerator& accelerator, const TrainingArguments& a,
                    const ModelSource& model) { return data(accelerator, a, model, *train_file); };
  recipe.trainer = [command, trainer = std::move(trainer)](
                       std::shared_ptr<models::Model> model, const TrainingArguments& a,
                       std::shared_ptr<const data::Dataset> train,
                       std::shared_ptr<const data::Dataset> eval, data::DataCollator collator) {
    if (!models::as_hf_causal_lm(*model)) {
      throw InputError(fmt::format(
          "trainer {}: {} is not a Hugging Face causal language model ({} trains one: give "
          "model_name_or_path or model_type)",
          command, a.model_name_or_path().value_or(a.model_name()), upper(command)));
    }
    return trainer(std::move(model), a, std::move(train), std::move(eval), std::move(collator));
  };
  recipe.chat_sample = chat_sample(train_file, args);
  return recipe;
}

// A frozen copy of `model`: the model the arguments name made again, given `model`'s weights.
// Those that equal the model folder's file (same name, type and shape: the copy is of the
// starting weights) point into the file mapped, so that the processes of a node share one copy
// of its pages (and none is made on the CPU); the others are copied.
std::shared_ptr<models::Model> reference_copy(const models::Model& model,
                                              const TrainingArguments& args,
                                              const ModelSource& source,
                                              const data::DataInfo& info) {
  auto copy = create_model(args, source, info);
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> mapped;
  if (source.pretrained && !source.pretrained->is_adapter() && !args.uses_lora()) {
    for (auto& [name, tensor] : io::map_model_weights(source.pretrained->model_dir))
      mapped.emplace(name, tensor);
  }
  auto from = model.named_parameters(/*recurse=*/true);
  for (auto& item : copy->named_parameters(/*recurse=*/true)) {
    const torch::Tensor& start = from[item.key()];
    auto file = mapped.find(item.key());
    if (file != mapped.end() && start.device().is_cpu() &&
        file->second.scalar_type() == start.scalar_type() &&
        file->second.sizes() == start.sizes() && torch::equal(file->second, start)) {
      item.value().set_data(file->second);
    } else {
      item.value().copy_(start);
    }
  }
  auto buffers = model.named_buffers(/*recurse=*/true);
  for (auto& item : copy->named_buffers(/*recurse=*/true)) {
    if (buffers.contains(item.key())) item.value().copy_(buffers[item.key()]);
  }
  return copy;
}

}  // namespace trainer::cli

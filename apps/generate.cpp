// `trainer generate OUTPUT_DIR`: the run's gpt rebuilt from its training_args.json, its weights
// loaded, and bytes sampled after the prompt with a seeded CPU generator.
#include "apps/generate.h"

#include <sys/stat.h>

#include <cstdio>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/io/errors.h"
#include "lib/io/files.h"
#include "lib/io/safetensors.h"
#include "lib/models/gpt.h"

namespace trainer {

namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The run's GptConfig: model_config's options, block_size defaulting to the data's
// context_length (dataset_config), as `trainer train` built it.
models::GptConfig gpt_config(const nlohmann::ordered_json& args) {
  models::GptConfig c;
  const auto empty = nlohmann::ordered_json::object();
  const auto& model = args.contains("model_config") ? args["model_config"] : empty;
  const auto& data = args.contains("dataset_config") ? args["dataset_config"] : empty;
  c.block_size = data.value("context_length", c.block_size);
  c.block_size = model.value("block_size", c.block_size);
  c.n_layer = model.value("n_layer", c.n_layer);
  c.n_head = model.value("n_head", c.n_head);
  c.n_embd = model.value("n_embd", c.n_embd);
  c.dropout = model.value("dropout", c.dropout);
  c.bias = model.value("bias", c.bias);
  return c;
}

}  // namespace

int generate_text(const cli::GenerateOptions& options) {
  const std::string& dir = options.output_dir;
  if (!is_directory(dir)) {
    throw InputError(fmt::format(
        "trainer generate: OUTPUT_DIR '{}' is not a folder (give the output_dir of a trained gpt "
        "run)",
        dir));
  }
  const std::string args_path = io::join_path(dir, "training_args.json");
  const std::string weights = io::join_path(dir, "model.safetensors");
  for (const std::string& path : {args_path, weights}) {
    if (!is_file(path)) {
      throw InputError(fmt::format(
          "trainer generate: {} does not exist (OUTPUT_DIR must hold a finished trainer train run "
          "of model_name gpt)",
          path));
    }
  }
  nlohmann::ordered_json args = io::read_json_object(args_path);
  const std::string model_name = args.contains("model_name") && args["model_name"].is_string()
                                     ? args["model_name"].get<std::string>()
                                     : "";
  if (model_name != "gpt") {
    throw InputError(fmt::format(
        "trainer generate: {} is a run of model_name '{}', not gpt (generate samples from a "
        "trained gpt)",
        dir, model_name));
  }
  models::GptConfig config;
  try {
    config = gpt_config(args);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("trainer generate: {}: model_config: {}", args_path, e.what()));
  }
  auto model = std::make_shared<models::Gpt>(config);
  io::load_state_dict(*model, io::map_safetensors(weights).tensors, weights);

  // The prompt's bytes; an empty prompt starts after a newline, as nanoGPT's sample.py does.
  const std::string context = options.prompt.empty() ? "\n" : options.prompt;
  torch::Tensor prompt = torch::empty({static_cast<int64_t>(context.size())}, torch::kLong);
  for (size_t i = 0; i < context.size(); ++i) {
    prompt[static_cast<int64_t>(i)] = static_cast<int64_t>(static_cast<unsigned char>(context[i]));
  }
  models::SamplingOptions sampling;
  sampling.max_new_tokens = options.max_new_tokens;
  sampling.temperature = options.temperature;
  sampling.top_k = std::min<int64_t>(options.top_k, config.vocab_size);
  torch::Tensor ids = models::generate(*model, prompt, sampling,
                                       at::make_generator<at::CPUGeneratorImpl>(options.seed));
  std::string text;
  text.reserve(static_cast<size_t>(ids.numel()));
  auto a = ids.accessor<int64_t, 1>();
  for (int64_t i = options.prompt.empty() ? 1 : 0; i < ids.numel(); ++i) {
    text.push_back(static_cast<char>(a[i]));
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace trainer

// `trainer generate OUTPUT_DIR`: the run's gpt rebuilt from its training_args.json, its weights
// loaded, and bytes sampled after the prompt with a seeded CPU generator.
#include "apps/trainer/generate.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/data/registry.h"
#include "lib/io/safetensors.h"
#include "lib/models/gpt.h"
#include "lib/models/registry.h"

namespace trainer {

std::string sample_text(models::Gpt& model, const cli::GenerateOptions& options,
                        int64_t data_context) {
  // The prompt's bytes; an empty prompt starts after a newline, as nanoGPT's sample.py does.
  const std::string context = options.prompt.empty() ? "\n" : options.prompt;
  std::vector<int64_t> bytes(context.begin(), context.end());
  for (auto& b : bytes) b = static_cast<unsigned char>(b);
  torch::Tensor prompt = torch::tensor(bytes, torch::kLong);
  models::SamplingOptions sampling;
  sampling.max_new_tokens = options.max_new_tokens;
  sampling.temperature = options.temperature;
  sampling.top_k = std::min<int64_t>(options.top_k, model.config().vocab_size);
  sampling.context = std::max<int64_t>(1, std::min(data_context, model.config().block_size) - 1);
  torch::Tensor ids = models::generate(model, prompt, sampling,
                                       at::make_generator<at::CPUGeneratorImpl>(options.seed));
  std::string text;
  text.reserve(static_cast<size_t>(ids.numel()));
  auto a = ids.accessor<int64_t, 1>();
  for (int64_t i = options.prompt.empty() ? 1 : 0; i < ids.numel(); ++i) {
    text.push_back(static_cast<char>(a[i]));
  }
  return text;
}

int generate_text(const cli::GenerateOptions& options) {
  const std::string& dir = options.output_dir;
  if (!base::is_directory(dir)) {
    throw InputError(fmt::format(
        "trainer generate: OUTPUT_DIR '{}' is not a folder (give the output_dir of a trained gpt "
        "run)",
        dir));
  }
  const std::string args_path = base::join_path(dir, "training_args.json");
  const std::string weights = base::join_path(dir, "model.safetensors");
  for (const std::string& path : {args_path, weights}) {
    struct stat info {};
    const bool found = ::stat(path.c_str(), &info) == 0;
    if (!found || !S_ISREG(info.st_mode)) {
      // A symlink loop or a folder in the file's place is not a missing file: say which.
      const std::string why = found ? std::string("is not a file")
                              : errno == ENOENT
                                  ? std::string("does not exist")
                                  : fmt::format("cannot be read: {}", std::strerror(errno));
      throw InputError(fmt::format(
          "trainer generate: {} {} (OUTPUT_DIR must hold a finished trainer train run of "
          "model_name gpt)",
          path, why));
    }
  }
  nlohmann::ordered_json args = base::read_json_object(args_path);
  const std::string model_name = args.contains("model_name") && args["model_name"].is_string()
                                     ? args["model_name"].get<std::string>()
                                     : "";
  if (model_name != "gpt") {
    throw InputError(fmt::format(
        "trainer generate: {} is a run of model_name '{}', not gpt (generate samples from a "
        "trained gpt)",
        dir, model_name));
  }
  // The model as `trainer train` built it: its model_config, shaped for the data's settings
  // (context length and vocabulary; the corpus itself is not read).
  auto field = [&](const char* key) {
    return args.contains(key) ? nlohmann::ordered_json(args[key]) : nlohmann::ordered_json();
  };
  auto text_of = [&](const char* key) {
    return field(key).is_string() ? field(key).get<std::string>() : std::string();
  };
  auto source = data::make_data_source(text_of("dataset_name"), text_of("dataset_dir"),
                                       field("dataset_config"));
  auto model = std::dynamic_pointer_cast<models::Gpt>(
      models::make_model("gpt", field("model_config"), source->info()));
  io::load_state_dict(*model, io::map_safetensors(weights).tensors, weights);
  const auto shape = source->info().input_shape;
  std::string text =
      sample_text(*model, options, shape.empty() ? model->config().block_size : shape.back());
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace trainer

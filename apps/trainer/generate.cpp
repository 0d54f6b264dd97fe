// `trainer generate OUTPUT_DIR`: the run's gpt rebuilt from its training_args.json, its weights
// loaded, and bytes sampled after the prompt with a seeded CPU generator; or a Hugging Face
// folder's model and tokenizer, greedy or sampled, with a KV cache.
#include "apps/trainer/generate.h"

#include <cstdio>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/data/registry.h"
#include "lib/data/text_files.h"
#include "lib/io/safetensors.h"
#include "lib/models/generation_config.h"
#include "lib/models/gpt.h"
#include "lib/models/hf_pretrained.h"
#include "lib/models/lora.h"
#include "lib/models/registry.h"
#include "lib/models/sampling.h"
#include "lib/tokenizers/tokenizer.h"

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

namespace {

// The ids generation starts from: the prompt's, or the BOS token alone for an empty prompt
// (generation_config.json's, else config.json's); refused when it leaves no position to fill.
std::vector<int32_t> prompt_ids(const tokenizers::Tokenizer& tokenizer,
                                const cli::GenerateOptions& options,
                                const models::GenerationConfig& generation,
                                const models::HfConfig& config) {
  if (!data::is_utf8_text(options.prompt)) {
    throw InputError(fmt::format("trainer generate: --prompt {} is not UTF-8 text",
                                 base::shown_text(options.prompt)));
  }
  std::vector<int32_t> prompt = tokenizer.encode(options.prompt);
  if (prompt.empty()) {
    if (generation.bos_token_id) {
      prompt.push_back(static_cast<int32_t>(*generation.bos_token_id));
    } else if (config.bos_token_id < 0) {
      throw InputError(
          "trainer generate: the prompt gives no tokens and the model has no "
          "bos_token_id to start from (give --prompt TEXT)");
    } else {
      prompt.push_back(static_cast<int32_t>(config.bos_token_id));
    }
  }
  const int64_t positions = config.max_position_embeddings;
  if (static_cast<int64_t>(prompt.size()) >= positions) {
    throw InputError(fmt::format(
        "trainer generate: the prompt is {} tokens; the model reads at most {} positions "
        "(max_position_embeddings) and must have room for one more",
        prompt.size(), positions));
  }
  return prompt;
}

}  // namespace

HfSession::HfSession(const models::PretrainedSource& source, const cli::GenerateOptions& options)
    : options(options),
      tokenizer(tokenizers::Tokenizer::load(source.tokenizer_dir)),
      generator(at::make_generator<at::CPUGeneratorImpl>(options.seed)) {
  loaded = models::load_pretrained(source, "auto");
  model = models::as_hf_causal_lm(*loaded);
  if (model->dtype() != torch::kFloat) loaded->to(torch::kFloat);
  loaded->eval();
  // As train refuses it: an id past the model's embedding would index out of its range.
  if (tokenizer.vocab_size() > model->config().vocab_size) {
    throw InputError(fmt::format(
        "trainer generate: the tokenizer of {} has {} tokens, more than the model's vocab_size {}",
        source.tokenizer_dir, tokenizer.vocab_size(), model->config().vocab_size));
  }
  generation = models::read_generation_config(source.model_dir, model->config().vocab_size);
  sample = options.do_sample.value_or(generation.do_sample.value_or(false));
  // Sampling's settings: the command line's, else generation_config.json's, else Transformers'
  // defaults (as model.generate's keyword arguments override its generation config).
  warpers = options;
  if (!options.given.count("--temperature"))
    warpers.temperature = generation.temperature.value_or(1.0);
  if (!options.given.count("--top_k")) warpers.top_k = generation.top_k.value_or(50);
  if (!options.given.count("--top_p")) warpers.top_p = generation.top_p.value_or(1.0);
  eos = generation.has_eos ? generation.eos_token_ids : model->config().eos_token_ids;
}

std::vector<int64_t> HfSession::generate(std::vector<int64_t> ids,
                                         const std::function<void(int64_t)>& on_token) {
  models::SamplingSettings settings;
  settings.do_sample = sample;
  settings.max_new_tokens = options.max_new_tokens;
  settings.temperature = warpers.temperature;
  settings.top_k = warpers.top_k;
  settings.top_p = warpers.top_p;
  settings.min_p = generation.min_p;
  settings.repetition_penalty = generation.repetition_penalty;
  settings.no_repeat_ngram_size = generation.no_repeat_ngram_size;
  settings.bad_words_ids = generation.bad_words_ids;
  settings.eos_token_ids = eos;
  settings.use_cache = options.use_cache;
  const torch::Tensor prompt = torch::tensor(ids, torch::kLong).unsqueeze(0);
  const torch::Tensor tokens = models::generate_tokens(*model, prompt, {}, settings, generator,
                                                       [&](const torch::Tensor& step) {
                                                         if (on_token)
                                                           on_token(step[0].item<int64_t>());
                                                       });
  for (int64_t i = 0; i < tokens.size(1); ++i) ids.push_back(tokens[0][i].item<int64_t>());
  return ids;
}

namespace {

// `trainer generate` on a Hugging Face folder: its tokenizer encodes the prompt (or, with --chat,
// the folder's chat template renders it as a user message), tokens follow greedily or sampled,
// until an EOS token of generation_config.json or max_new_tokens. An adapter folder generates
// with its base model and the adapter; the base's folder gives the generation config, and the
// tokenizer where the adapter folder has none.
int generate_hf(const models::PretrainedSource& source, const cli::GenerateOptions& options) {
  HfSession session(source, options);
  std::vector<int32_t> prompt;
  if (options.chat) {
    prompt = chat_prompt_ids(session, source.tokenizer_dir, options, options.prompt);
  } else {
    prompt = prompt_ids(session.tokenizer, options, session.generation, session.model->config());
  }
  const std::vector<int64_t> ids = session.generate({prompt.begin(), prompt.end()}, {});
  std::string out;
  if (options.output_ids) {
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  } else {
    out = session.tokenizer.decode(std::vector<int32_t>(ids.begin(), ids.end()),
                                   /*skip_special_tokens=*/true);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (out.empty() || out.back() != '\n') std::fputc('\n', stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int generate_text(const cli::GenerateOptions& options) {
  const std::string& dir = options.output_dir;
  // An adapter folder of a Hugging Face base; one of a registry gpt (no base folder) is that
  // run's folder.
  if (models::is_hf_model_dir(dir))
    return generate_hf(*models::read_pretrained_source(dir), options);
  std::optional<models::LoraConfig> adapter;
  if (models::is_adapter_dir(dir)) adapter = models::read_adapter_config(dir);
  if (adapter && !adapter->base_model_name_or_path.empty()) {
    return generate_hf(models::adapter_source(dir, *adapter), options);
  }
  if (!base::is_directory(dir)) {
    throw InputError(fmt::format(
        "trainer generate: OUTPUT_DIR '{}' is not a folder (give the output_dir of a trained gpt "
        "run)",
        dir));
  }
  const std::string args_path = base::join_path(dir, "training_args.json");
  const std::string weights = base::join_path(dir, base::hf::kWeights);
  for (const std::string& path : {args_path, weights}) {
    // A symlink loop or a folder in the file's place is not a missing file: say which.
    const std::string problem = base::path_problem(path);
    if (!problem.empty() || !base::is_regular_file(path)) {
      const std::string why = problem.empty() ? std::string("is not a file") : problem;
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
  std::shared_ptr<models::Model> holder = model;
  if (adapter) {
    // LoRA on the gpt: its adapters, saved with the base in model.safetensors.
    auto peft = std::make_shared<models::PeftModel>(model, *adapter);
    peft->load_weights(dir);
    holder = peft;
  } else {
    io::load_state_dict(*model, io::map_safetensors(weights).tensors, weights);
  }
  const auto shape = source->info().input_shape;
  std::string text =
      sample_text(*model, options, shape.empty() ? model->config().block_size : shape.back());
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace trainer

// What train, evaluate and predict share before they run.
#include "apps/trainer/run_setup.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <new>

#include <unistd.h>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/data/clm.h"
#include "lib/distributed/env.h"
#include "lib/io/npy.h"
#include "lib/io/safetensors.h"
#include "lib/models/gpt.h"
#include "lib/models/hf_pretrained.h"
#include "lib/models/lora.h"
#include "lib/models/registry.h"
#include "lib/models/torchscript.h"
#include "lib/tokenizers/tokenizer.h"

namespace trainer::cli {

namespace {

// Refuses a model_name_or_path that is neither a Hugging Face model folder nor an adapter folder
// when it cannot be the TorchScript file either: a folder without config.json (or whose
// config.json cannot be read: say why), a path that cannot be looked at (a loop of links, no
// permission), or, in a text-file run, a missing path.
void check_model_name_or_path(const TrainingArguments& args) {
  if (!args.model_name_or_path()) return;
  const std::string& path = *args.model_name_or_path();
  if (models::is_hf_model_dir(path) || models::is_adapter_dir(path)) return;
  const std::string problem = base::path_problem(path);
  // A missing file outside a text-file run is a TorchScript file's to report.
  if (problem == "does not exist" && uses_text_files(args)) {
    throw InputError(fmt::format(
        "model_name_or_path {} does not exist (a Hugging Face model folder, or a TorchScript "
        "file; nothing is downloaded)",
        path));
  }
  if (!problem.empty() && problem != "does not exist") {
    throw InputError(fmt::format("model_name_or_path {} {}", path, problem));
  }
  if (base::is_directory(path)) {
    const std::string config = base::join_path(path, base::hf::kConfig);
    const std::string config_problem = base::path_problem(config);
    if (!config_problem.empty() && config_problem != "does not exist") {
      throw InputError(fmt::format("model_name_or_path {}: {} {}", path, config, config_problem));
    }
    throw InputError(fmt::format(
        "model_name_or_path {} holds no config.json (not a Hugging Face model folder)", path));
  }
}

}  // namespace

bool uses_text_files(const TrainingArguments& args) {
  return args.train_file() || args.validation_file();
}

namespace {

// The folder (or file) of tokenizer.json the arguments name: tokenizer_name, else the model's
// folder (an adapter folder's own tokenizer, else its base model's), else config_name's folder;
// "" when none.
std::string named_tokenizer_path(const TrainingArguments& args, const ModelSource& source) {
  if (args.tokenizer_name()) return *args.tokenizer_name();
  if (source.pretrained) return source.pretrained->tokenizer_dir;
  if (args.config_name() && base::is_directory(*args.config_name())) return *args.config_name();
  return "";
}

}  // namespace

ModelSource resolve_model_source(const TrainingArguments& args) {
  ModelSource source;
  if (args.model_name_or_path()) {
    source.pretrained = models::read_pretrained_source(*args.model_name_or_path());
    if (source.pretrained) {
      source.config = source.pretrained->config;
    } else {
      check_model_name_or_path(args);
    }
  }
  if (!source.config && args.config_name()) {
    const std::string& name = *args.config_name();
    const std::string path =
        base::is_directory(name) ? base::join_path(name, base::hf::kConfig) : name;
    source.config = models::parse_hf_config(base::read_json_object(path), path);
    source.config->dtype = "float32";
    source.config->json["dtype"] = "float32";
  }
  source.tokenizer_path = named_tokenizer_path(args, source);
  if (uses_text_files(args) || args.tokenizer_name()) {
    if (source.tokenizer_path.empty()) {
      throw InputError(
          "train_file and validation_file need a tokenizer: give tokenizer_name (a folder holding "
          "tokenizer.json), or a model_name_or_path folder that holds one");
    }
    source.tokenizer = std::make_shared<const tokenizers::Tokenizer>(
        tokenizers::Tokenizer::load(source.tokenizer_path));
  }
  if (!source.config && args.model_type()) {
    // A fresh model of model_type: the tokenizer's vocabulary, BOS and EOS, where there is one,
    // rather than Transformers' defaults.
    const auto* t = source.tokenizer.get();
    source.config = models::hf_config_from_defaults(
        *args.model_type(), args.model_config(), t ? t->vocab_size() : 0,
        t ? t->bos_token_id().value_or(-1) : -1, t ? t->eos_token_id().value_or(-1) : -1);
  }
  return source;
}

data::LoadContext node_load_context(Accelerator& accelerator) {
  data::LoadContext context;
  context.run_first = [&accelerator](const std::function<void()>& load) {
    accelerator.local_main_process_first(load);
  };
  context.local_main = accelerator.is_local_main_process();
  context.cache_dir = base::cache_dir();
  return context;
}

std::unique_ptr<data::DataSource> data_source(Accelerator& accelerator,
                                              const TrainingArguments& args,
                                              const ModelSource& model) {
  data::LoadContext context = node_load_context(accelerator);
  if (uses_text_classification(args, model)) return text_classification_source(args, model);
  if (uses_text_files(args)) {
    data::ClmOptions options;
    options.train_file = args.train_file().value_or("");
    options.validation_file = args.validation_file().value_or("");
    options.validation_split_percentage = args.validation_split_percentage();
    options.keep_linebreaks = args.keep_linebreaks();
    options.text_column_name = args.text_column_name();
    const auto& config = model.config;
    options.tokenizer_path = model.tokenizer_path;
    options.tokenizer = model.tokenizer;
    if (!config && !args.block_size()) {
      throw InputError(
          "train_file needs a Hugging Face model (model_name_or_path, config_name or model_type) "
          "or a block_size");
    }
    options.block_size = args.block_size().value_or(
        std::min<int64_t>(1024, config ? config->max_position_embeddings : 1024));
    if (config && options.block_size > config->max_position_embeddings) {
      throw InputError(fmt::format(
          "block_size {} is longer than the model's {} positions (max_position_embeddings)",
          options.block_size, config->max_position_embeddings));
    }
    if (args.overwrite_cache()) context.cache_dir.clear();
    return data::make_clm_source(options, std::move(context));
  }
  return data::make_data_source(args.dataset_name(), args.dataset_dir(), args.dataset_config(),
                                std::move(context));
}

bool wants_eval(const TrainingArguments& args) {
  return args.eval_strategy() != "no" || args.do_eval();
}

bool needs_eval_split(const TrainingArguments& args) {
  return wants_eval(args) || args.eval_on_start() || args.do_predict();
}

namespace {

// One tensor as a .npy file's bytes: float32 for outputs, int64 for labels.
std::string npy_of(torch::Tensor tensor) {
  const bool floating = tensor.is_floating_point();
  tensor = tensor.to(floating ? torch::kFloat : torch::kLong).contiguous().cpu();
  return io::npy_bytes(floating ? "<f4" : "<i8", tensor.sizes().vec(), tensor.data_ptr(),
                       static_cast<size_t>(tensor.nbytes()));
}

}  // namespace

void save_predictions(Trainer& trainer, const PredictionResult& result, int64_t num_samples,
                      const TrainingArguments& args, base::WriteBatch& batch) {
  Metrics metrics = result.metrics;
  metrics["predict_samples"] = static_cast<double>(num_samples);
  if (trainer.accelerator().is_main_process()) {
    auto write = [&](const std::string& name, const torch::Tensor& tensor) {
      base::write_file_atomic(base::join_path(args.output_dir(), name), npy_of(tensor), &batch);
    };
    if (result.predictions.defined()) write("predictions.npy", result.predictions);
    if (result.label_ids.defined()) write("label_ids.npy", result.label_ids);
    for (size_t k = 0; k < result.prediction_batches.size(); ++k) {
      write(fmt::format("predictions_{}.npy", k), result.prediction_batches[k]);
    }
    for (size_t k = 0; k < result.label_id_batches.size(); ++k) {
      write(fmt::format("label_ids_{}.npy", k), result.label_id_batches[k]);
    }
  }
  trainer.log_metrics("predict", metrics);
  trainer.save_metrics("predict", metrics, &batch);
}

std::unique_ptr<OutputDir> lock_output_dir(const TrainingArguments& args) {
  if (dist::read_dist_env().rank != 0) return nullptr;
  return std::make_unique<OutputDir>(args.output_dir());
}

namespace {

// The machine's memory as the kernel counts it (MemTotal), in bytes; 0 when unknown.
uint64_t memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

// "12.3 GB" for a byte count.
std::string gigabytes(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

// A model too large for the machine: one line with what it asked for and what there is, not the
// allocator's "[enforce fail at alloc_cpu.cpp:...] ... can't allocate memory".
[[noreturn]] void model_too_large(const TrainingArguments& args, const std::string& detail) {
  std::string needed = "more memory than the machine has";
  const std::string marker = "you tried to allocate ";
  const size_t at = detail.find(marker);
  if (at != std::string::npos) {
    const double bytes = std::strtod(detail.c_str() + at + marker.size(), nullptr);
    needed = fmt::format("{:.0f} bytes ({}) for one of its tensors", bytes, gigabytes(bytes));
  }
  const uint64_t total = memory_bytes();
  throw InputError(fmt::format(
      "model {} with model_config {} is too large for this machine: it needs {}, and the machine "
      "has {} bytes ({}) of memory in all; choose a smaller model or model_config",
      args.model_name_or_path().value_or(
          args.config_name().value_or(args.model_type().value_or(args.model_name()))),
      base::shown(args.model_config()), needed, total, gigabytes(static_cast<double>(total))));
}

}  // namespace

std::map<std::string, std::string> tokenizer_files(const std::string& path,
                                                   const tokenizers::Tokenizer* loaded) {
  const std::string dir = base::is_directory(path) ? path : base::parent_dir(path);
  std::map<std::string, std::string> files;
  if (loaded) files = loaded->files();
  for (const char* name : base::hf::kTokenizerFiles) {
    const std::string file = base::join_path(dir, name);
    if (!files.count(name) && base::exists(file)) files[name] = base::read_file(file);
  }
  return files;
}

std::string model_label(const TrainingArguments& args) {
  return args.model_name_or_path() ? *args.model_name_or_path() : args.model_name();
}

namespace {

// A Hugging Face model: model_name_or_path's folder, or a fresh one of config_name / model_type;
// with what save_pretrained writes beside its weights (config, generation config, tokenizer).
std::shared_ptr<models::Model> create_hf_model(const TrainingArguments& args,
                                               const ModelSource& source,
                                               const data::DataInfo& info) {
  const models::HfConfig& config = *source.config;
  if (config.sequence_classification) {
    if (info.task == data::TaskKind::kCausalLM ||
        (info.task == data::TaskKind::kClassification && info.num_labels != config.num_labels) ||
        (info.task == data::TaskKind::kRegression && config.num_labels != 1)) {
      throw InputError(
          fmt::format("{} is a sequence classifier of {} label{}; the data set's task is {}{}",
                      models::hf_architecture(config), config.num_labels,
                      config.num_labels == 1 ? "" : "s", data::task_name(info.task),
                      info.task == data::TaskKind::kClassification
                          ? fmt::format(" with {} classes", info.num_labels)
                          : std::string()));
    }
  } else if (info.task != data::TaskKind::kCausalLM) {
    throw InputError(fmt::format(
        "a {} model learns causal language modeling; the data set's task is {} (give train_file)",
        config.model_type, data::task_name(info.task)));
  }
  const bool pretrained = source.pretrained.has_value();
  if (pretrained && !args.model_config().empty()) {
    throw InputError(fmt::format(
        "model_config {} is not used with a pretrained folder: its config.json gives the model",
        base::shown(args.model_config())));
  }
  if (!config.sequence_classification && config.vocab_size < info.num_labels) {
    throw InputError(fmt::format("the tokenizer has {} tokens, more than the model's vocab_size {}",
                                 info.num_labels, config.vocab_size));
  }
  // An adapter folder: its base model with the adapter (AutoPeftModelForCausalLM).
  if (pretrained && source.pretrained->is_adapter()) {
    const std::string& dir = source.pretrained->path;
    if (args.uses_lora()) {
      throw InputError(fmt::format(
          "model_name_or_path {} is an adapter folder: its {} gives the LoRA settings (leave out "
          "use_peft and target_modules)",
          dir, base::hf::kAdapterConfig));
    }
    auto peft = models::load_peft_model(*source.pretrained, args.torch_dtype());
    peft->pretrained_files[base::hf::kAdapterConfig] = models::adapter_config_json(peft->config());
    for (auto& [name, contents] : tokenizer_files(source.tokenizer_path, source.tokenizer.get())) {
      peft->pretrained_files[name] = contents;
    }
    return peft;
  }
  std::shared_ptr<models::HfCausalLM> model;
  std::string folder;
  if (pretrained) {
    folder = source.pretrained->model_dir;
    model = models::load_hf_model(folder, config, args.torch_dtype());
  } else {
    // A fresh model is allocated in full: one larger than the machine is said before.
    const double bytes = 4.0 * static_cast<double>(models::hf_num_parameters(config));
    if (bytes > static_cast<double>(memory_bytes())) {
      throw InputError(fmt::format(
          "a {} model of {} parameters needs {} for its float32 weights alone; the machine has {} "
          "of memory (choose a smaller model_config)",
          config.model_type, base::thousands(models::hf_num_parameters(config)), gigabytes(bytes),
          gigabytes(static_cast<double>(memory_bytes()))));
    }
    model = models::make_hf_causal_lm(config);
    if (args.torch_dtype() != "auto")
      model->to(models::hf_dtype(args.torch_dtype(), "torch_dtype"));
    if (args.config_name() && base::is_directory(*args.config_name())) {
      folder = *args.config_name();
    }
  }
  model->pretrained_files = models::hf_pretrained_files(*model, folder);
  if (source.tokenizer) {
    for (auto& [name, contents] : tokenizer_files(source.tokenizer_path, source.tokenizer.get())) {
      model->pretrained_files[name] = contents;
    }
  }
  return model;
}

// PEFT's print_trainable_parameters(), on the main process.
void print_trainable_parameters(const models::PeftModel& model) {
  if (dist::read_dist_env().rank != 0) return;
  fmt::print("{}\n", model.trainable_parameters_text());
  std::fflush(stdout);
}

// The model with LoRA adapters when the arguments ask for them (use_peft, target_modules), with
// PEFT's default target_modules for a Hugging Face model type; what output_dir gets beside the
// adapter: adapter_config.json and the tokenizer's files.
std::shared_ptr<models::Model> with_lora(const TrainingArguments& args,
                                         std::shared_ptr<models::Model> model) {
  if (auto* peft = dynamic_cast<models::PeftModel*>(model.get())) {
    print_trainable_parameters(*peft);
    return model;
  }
  if (!args.uses_lora()) return model;
  if (dynamic_cast<models::TorchScriptModel*>(model.get())) {
    throw InputError(fmt::format(
        "use_peft: LoRA adds adapters to the registry's models and Hugging Face folders, not to a "
        "TorchScript module ({}): train it in full, or add the adapters in Python",
        model_label(args)));
  }
  models::LoraConfig config = args.lora_config();
  auto* hf = models::as_hf_causal_lm(*model);
  if (hf && !args.model_name_or_path()) {
    throw InputError(
        "use_peft: LoRA adapts a pretrained model: give model_name_or_path a Hugging Face model "
        "folder (model_type and config_name build a fresh one: train it in full)");
  }
  if (config.target_modules.empty() && hf) {
    // PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING.
    config.target_modules = models::peft_default_target_modules(hf->config().model_type);
    if (config.target_modules.empty()) {
      // PEFT's own refusal ("Please specify `target_modules`").
      throw InputError(fmt::format(
          "use_peft: PEFT has no default target_modules for model_type {}: give target_modules "
          "(the names of linear layers, e.g. {}, or all-linear)",
          hf->config().model_type,
          hf->config().fused_projections ? "qkv_proj,o_proj" : "q_proj,v_proj"));
    }
  }
  if (hf) config.base_model_name_or_path = *args.model_name_or_path();
  config.task_type = hf ? (hf->is_classifier() ? "SEQ_CLS" : "CAUSAL_LM") : "";
  // PEFT's PeftModelForSequenceClassification trains the classifier's head in full beside the
  // adapters (its modules_to_save gain "classifier" and "score"; this model's head is score).
  if (hf && hf->is_classifier() &&
      std::find(config.modules_to_save.begin(), config.modules_to_save.end(), "score") ==
          config.modules_to_save.end()) {
    config.modules_to_save.push_back("score");
  }
  // Transformers' from_pretrained draws nothing (nor does our load, under NoInitWeights): PEFT's
  // adapters are the first draws after set_seed(seed), so they start as PEFT's would.
  if (hf) torch::manual_seed(static_cast<uint64_t>(args.seed()));
  auto peft = std::make_shared<models::PeftModel>(model, config);
  // The base's tokenizer goes with the adapter; its config.json does not (the folder is an
  // adapter folder, not a model folder).
  for (const auto& [name, contents] : model->pretrained_files) {
    if (name != base::hf::kConfig && name != base::hf::kGenerationConfig) {
      peft->pretrained_files[name] = contents;
    }
  }
  peft->pretrained_files[base::hf::kAdapterConfig] = models::adapter_config_json(peft->config());
  print_trainable_parameters(*peft);
  return peft;
}

}  // namespace

std::shared_ptr<models::Model> create_model(const TrainingArguments& args,
                                            const ModelSource& source, const data::DataInfo& info) {
  // Both named (a config's model_name, a --model_name_or_path on the command line): the file
  // gives the model, and says so rather than ignoring model_name in silence.
  if (args.model_name_or_path() && args.model_name() != "basic_net" &&
      dist::read_dist_env().rank == 0) {
    base::warn("model_name {} is not used: model_name_or_path {} gives the model",
               args.model_name(), *args.model_name_or_path());
  }
  try {
    std::shared_ptr<models::Model> model;
    if (source.config) {
      model = create_hf_model(args, source, info);
    } else if (args.model_name_or_path()) {
      model = models::load_torchscript(*args.model_name_or_path(), args.model_config(), info);
    } else {
      model = models::make_model(args.model_name(), args.model_config(), info);
    }
    return with_lora(args, std::move(model));
  } catch (const std::bad_alloc&) {
    model_too_large(args, "");
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (what.find("can't allocate memory") == std::string::npos) throw;
    model_too_large(args, what);
  }
}

TrainedRun load_trained_run(Accelerator& accelerator, const TrainingArguments& args) {
  // run_clm's --do_eval without --do_train: a Hugging Face folder without LoRA, or an adapter
  // folder, is evaluated as it is (its weights come with the model); otherwise output_dir's
  // weights are loaded into the model (LoRA on a model folder: output_dir's adapter).
  const ModelSource model = resolve_model_source(args);
  const bool hf_folder = model.pretrained && !model.pretrained->is_adapter();
  const bool folder =
      (model.pretrained && model.pretrained->is_adapter()) || (hf_folder && !args.uses_lora());
  const bool adapter = hf_folder && args.uses_lora();
  std::string weights =
      base::join_path(args.output_dir(), adapter ? base::hf::kAdapterWeights : base::hf::kWeights);
  if (!folder && !base::exists(weights) &&
      (adapter || !base::exists(base::join_path(args.output_dir(), base::hf::kWeightsIndex)))) {
    throw InputError(fmt::format(
        "{} does not exist (train first, or set output_dir to a trained run)", weights));
  }
  TrainedRun run;
  auto source = data_source(accelerator, args, model);
  run.eval_dataset = source->split("eval", args.max_eval_samples());
  check_not_empty(*run.eval_dataset, "eval", *source);
  run.collator = source->collator();
  run.model = create_model(args, model, source->info());
  run.compute_metrics = metrics_for_task(run.model->task().kind);
  // Mapped, not read: a damaged or huge file fails on its header before any of it is read.
  if (!folder) run.model->load_weights(args.output_dir());
  check_model_takes(*run.model, *run.eval_dataset, run.collator, "eval", *source, args);
  return run;
}

void add_perplexity(Metrics& metrics, data::TaskKind task) {
  // Where the evaluation read its loss as perplexity (a language model's loss over its labels).
  auto loss = metrics.find("eval_loss");
  if (task == data::TaskKind::kCausalLM && loss != metrics.end() &&
      metrics.count("eval_perplexity")) {
    metrics["perplexity"] = std::exp(loss->second);
  }
}

std::unique_ptr<OutputDir> lock_for_results(const TrainingArguments& args) {
  auto output = lock_output_dir(args);
  std::string all_results = base::join_path(args.output_dir(), "all_results.json");
  if (output && base::exists(all_results)) base::read_json_object(all_results);
  return output;
}

}  // namespace trainer::cli

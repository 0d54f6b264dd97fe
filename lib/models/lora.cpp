// LoRA adapters on a model's linear layers, PEFT's way: which layers, their initialisation, what
// trains, the names adapter_model.safetensors holds, loading an adapter folder, merging.
#include "lib/models/lora.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/io/safetensors.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/hf_config.h"
#include "lib/models/hf_pretrained.h"
#include "lib/models/linear.h"

namespace trainer::models {
namespace {

constexpr const char* kPrefix = "base_model.model.";

// Modules by name, in the model's order.
using NamedModules = std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>;

// The base's linear layers that can carry an adapter, by name, in the model's order.
NamedModules linear_layers(Model& base) {
  NamedModules layers;
  for (const auto& item : base.named_modules("", /*include_self=*/false)) {
    if (dynamic_cast<LoraHost*>(item.value().get())) layers.emplace_back(item.key(), item.value());
  }
  return layers;
}

// "q_proj, k_proj, ... (model.layers.0.self_attn.q_proj, ...)": the layers' last names, each once.
std::string layer_names_text(const NamedModules& layers) {
  std::vector<std::string> names;
  for (const auto& [key, module] : layers) {
    const std::string last = key.substr(key.rfind('.') + 1);
    if (std::find(names.begin(), names.end(), last) == names.end()) names.push_back(last);
  }
  if (names.empty()) return "none";
  return fmt::format("{} (e.g. {})", fmt::join(names, ", "), layers.front().first);
}

// A module holding one parameter "weight".
std::shared_ptr<torch::nn::Module> weight_module(const torch::Tensor& value) {
  auto m = std::make_shared<torch::nn::Module>();
  m->register_parameter("weight", value);
  return m;
}

// PEFT's update_layer: lora_A and lora_B made as nn.Linear (each weight Kaiming-uniform, a = sqrt
// 5, drawn in that order), then reset_lora_parameters: "true" A Kaiming-uniform again, B zeros;
// "gaussian" A normal(0, 1/r), B zeros; "false" both as nn.Linear made them. The same draws from
// the default generator, so that a run seeded as PEFT's starts from PEFT's adapter.
void init_adapter(torch::Tensor& A, torch::Tensor& B, const std::string& how, int64_t r) {
  torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(A, std::sqrt(5.0));
  torch::nn::init::kaiming_uniform_(B, std::sqrt(5.0));
  if (how == "false") return;
  if (how == "gaussian") {
    A.normal_(0.0, 1.0 / static_cast<double>(r));
  } else {
    torch::nn::init::kaiming_uniform_(A, std::sqrt(5.0));
  }
  B.zero_();
}

// PEFT adapts a Hugging Face model's lm_head as a linear layer (and, tied, its merge changes
// the input embedding as well); here the output layer is no linear layer: refused by name.
void refuse_output_layer_target(Model& model, const LoraConfig& config) {
  if (!as_hf_causal_lm(model) || config.target_regex) return;
  for (const std::string& t : config.target_modules) {
    if (t == "lm_head" || base::ends_with(t, ".lm_head")) {
      throw InputError(fmt::format(
          "target_modules: {} is the model's output layer, which LoRA does not adapt here "
          "(PEFT does, as a linear layer; merged into a tied model it changes the input "
          "embedding too); leave it out",
          t));
    }
  }
}

// The linear layers target_modules names, as PEFT matches them: "all-linear" all but the
// output layer, none inside a module to save. Throws InputError when none is taken, and warns
// of each target name that matches no layer.
NamedModules match_targets(Model& model, const LoraConfig& config) {
  const NamedModules layers = linear_layers(model);
  NamedModules targets;
  std::set<std::string> matched_targets;
  size_t excluded = 0;
  for (const auto& [key, module] : layers) {
    bool take = false;
    if (inside_module_to_save(config, key)) {
      // PEFT: a module to save (and what it holds) trains in full, without adapters.
      if (config.all_linear() || lora_target_matches(config, key)) ++excluded;
    } else if (config.all_linear()) {
      // The output layer stays out, as PEFT leaves out the output embeddings (a Hugging Face
      // model's lm_head is no linear layer here).
      take = key != model.output_layer();
    } else if (lora_target_matches(config, key)) {
      take = true;
      for (const std::string& t : config.target_modules) {
        if (names_module(t, key)) matched_targets.insert(t);
      }
    }
    if (take) targets.emplace_back(key, module);
  }
  if (config.target_modules.empty() && !config.target_regex) {
    throw InputError(fmt::format(
        "target_modules is empty: name the linear layers that get adapters; the model's linear "
        "layers are {}",
        layer_names_text(layers)));
  }
  if (targets.empty() && excluded > 0) {
    throw InputError(
        "target_modules match only layers of modules_to_save, which train in full without "
        "adapters: no layer gets an adapter (name other target_modules)");
  }
  if (targets.empty()) {
    const std::string asked = config.target_regex
                                  ? base::shown_text(*config.target_regex)
                                  : fmt::format("{}", fmt::join(config.target_modules, ", "));
    throw InputError(fmt::format(
        "target_modules {} match no linear layer of the model; its linear layers are {}", asked,
        layer_names_text(layers)));
  }
  if (!config.target_regex && !config.all_linear()) {
    for (const std::string& t : config.target_modules) {
      if (!matched_targets.count(t)) {
        base::warn_once(fmt::format(
            "target_modules: {} matches no linear layer of the model (its linear layers are "
            "{})",
            t, layer_names_text(layers)));
      }
    }
  }
  return targets;
}

// Adds an adapter, lora_A and lora_B, to the linear layer `module` (named `key`) and trains its
// bias under bias "lora_only"; a layer that holds its weight transposed sets
// config.fan_in_fan_out, as PEFT's config of such a model says.
void add_adapter(const std::string& key, torch::nn::Module& module, LoraConfig& config) {
  auto* host = dynamic_cast<LoraHost*>(&module);
  const torch::Tensor w = host->host_weight();
  // A rank past the layer's larger side adds nothing (B A has rank <= min(in, out)) and only
  // allocates: refused before the allocation.
  const int64_t widest = std::max(host->in_features(), host->out_features());
  if (config.r > widest) {
    throw InputError(
        fmt::format("lora_r {} is larger than layer {} ({} inputs, {} outputs): at most {}",
                    config.r, key, host->in_features(), host->out_features(), widest));
  }
  // Beside a bf16 or fp16 base the adapters are float32, as PEFT's autocast_adapter_dtype.
  const auto dtype = w.scalar_type() == torch::kBFloat16 || w.scalar_type() == torch::kHalf
                         ? torch::kFloat
                         : w.scalar_type();
  auto options = torch::TensorOptions(dtype).device(w.device());
  torch::Tensor A = torch::empty({config.r, host->in_features()}, options);
  torch::Tensor B = torch::empty({host->out_features(), config.r}, options);
  init_adapter(A, B, config.init_lora_weights, config.r);
  module.register_module("lora_A", weight_module(A));
  module.register_module("lora_B", weight_module(B));
  host->lora = LoraAdapter{A, B, config.scaling(), config.lora_dropout};
  if (host->fan_in_fan_out()) config.fan_in_fan_out = true;
  if (config.bias == "lora_only" && host->host_bias().defined()) {
    host->host_bias().set_requires_grad(true);
  }
}

// The modules of `base` that config.modules_to_save names, their parameters set to train; throws
// InputError for a name that matches none, a module without parameters, and an embedding tied
// to the output layer (PEFT would train an untied copy).
std::vector<std::string> take_modules_to_save(Model& model, const LoraConfig& config) {
  std::vector<std::string> taken;
  std::set<std::string> saved_modules;
  const HfCausalLM* hf = as_hf_causal_lm(model);
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    if (!module_to_save_matches(config, item.key())) continue;
    auto params = item.value()->parameters();
    if (params.empty()) {
      throw InputError(fmt::format(
          "modules_to_save: {} holds no parameters of its own in this model (nothing to train)",
          item.key()));
    }
    const bool embedding =
        base::ends_with(item.key(), "wte") || base::ends_with(item.key(), "embed_tokens");
    if (hf && hf->config().tie_word_embeddings && embedding) {
      throw InputError(fmt::format(
          "modules_to_save: {} is tied to the output layer in this model (tie_word_embeddings "
          "true); PEFT would train an untied copy of it, which is not done here: leave it out",
          item.key()));
    }
    for (auto& p : params) p.set_requires_grad(true);
    for (const std::string& name : config.modules_to_save) {
      if (names_module(name, item.key())) saved_modules.insert(name);
    }
    taken.push_back(item.key());
  }
  for (const std::string& name : config.modules_to_save) {
    if (!saved_modules.count(name) && name == "lm_head" && hf && hf->config().tie_word_embeddings) {
      throw InputError(
          "modules_to_save: lm_head is tied to the input embedding in this model "
          "(tie_word_embeddings true); a tied head is not trained apart from the embedding here "
          "(PEFT would train an untied copy): leave it out");
    }
    // PEFT's SEQ_CLS lists "classifier" beside "score" for the heads of other models.
    if (!saved_modules.count(name) && name == "classifier" && config.task_type == "SEQ_CLS") {
      continue;
    }
    if (!saved_modules.count(name)) {
      throw InputError(fmt::format(
          "modules_to_save: {} matches no module of the model (e.g. lm_head, or a layer's name)",
          base::shown_text(name)));
    }
  }
  return taken;
}

}  // namespace

HfCausalLM* as_hf_causal_lm(Model& model) { return find_wrapped<HfCausalLM>(model); }

PeftModel::PeftModel(std::shared_ptr<Model> base, LoraConfig config)
    : ModelWrapper(std::move(base)), config_(std::move(config)) {
  check_lora_config(config_);
  task_ = wrapped_->task();
  auto holder = register_module("base_model", std::make_shared<torch::nn::Module>());
  holder->register_module("model", wrapped_);
  refuse_output_layer_target(*wrapped_, config_);
  const NamedModules targets = match_targets(*wrapped_, config_);

  // Everything frozen, then what trains: the adapters, modules_to_save, the biases asked for.
  for (auto& p : wrapped_->parameters()) p.set_requires_grad(false);
  for (const auto& [key, module] : targets) {
    add_adapter(key, *module, config_);
    adapted_.push_back(key);
  }
  // As PEFT saves it: "all-linear" spelled out as the layers it took.
  if (config_.all_linear()) config_.target_modules = adapted_;
  if (config_.bias == "all") {
    for (auto& item : wrapped_->named_parameters()) {
      if (item.key().find("bias") != std::string::npos) item.value().set_requires_grad(true);
    }
  }
  modules_to_save_ = take_modules_to_save(*wrapped_, config_);
}

io::NamedTensors PeftModel::adapter_state_dict() const {
  std::set<std::string> adapted(adapted_.begin(), adapted_.end());
  io::NamedTensors out;
  for (const auto& item : wrapped_->named_parameters()) {
    const std::string& name = item.key();
    const size_t dot = name.rfind('.');
    const std::string owner = dot == std::string::npos ? "" : name.substr(0, dot);
    const std::string leaf = name.substr(dot + 1);
    const bool lora = names_module("lora_A", owner) || names_module("lora_B", owner);
    bool saved_module = false;
    for (const std::string& m : modules_to_save_) {
      if (owner == m || base::starts_with(owner, m + ".")) saved_module = true;
    }
    const bool is_bias = leaf == "bias";
    bool keep = lora || saved_module;
    if (config_.bias == "all" && name.find("bias") != std::string::npos) keep = true;
    if (config_.bias == "lora_only" && is_bias && adapted.count(owner)) keep = true;
    if (!keep) continue;
    // A bias of a layer with an adapter is its base_layer's in PEFT's module tree.
    std::string key = kPrefix + name;
    if (is_bias && adapted.count(owner) && !saved_module)
      key = kPrefix + owner + ".base_layer.bias";
    out.emplace_back(key, item.value());
  }
  return out;
}

void PeftModel::load_adapter(const io::NamedTensors& tensors, const std::string& path) {
  io::NamedTensors wanted = adapter_state_dict();
  std::map<std::string, torch::Tensor> by_name(wanted.begin(), wanted.end());
  std::set<std::string> seen;
  torch::NoGradGuard no_grad;
  for (const auto& [name, value] : tensors) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      throw InputError(fmt::format(
          "{}: {} is not a tensor of this model's adapters (an adapter of another model, or of "
          "other target_modules?)",
          path, name));
    }
    if (it->second.sizes() != value.sizes()) {
      throw InputError(fmt::format(
          "{}: {} has shape {}, the model's is {} (an adapter of another base model?)", path, name,
          base::shape_text(value.sizes().vec()), base::shape_text(it->second.sizes().vec())));
    }
    if (!at::isFloatingType(value.scalar_type())) {
      throw InputError(fmt::format("{}: {} holds {} (floating-point values are wanted)", path, name,
                                   tensor_text(value)));
    }
    if (!io::all_finite(value)) {
      throw InputError(fmt::format("{}: {} holds values that are not finite", path, name));
    }
    it->second.copy_(value);
    seen.insert(name);
  }
  for (const auto& [name, value] : wanted) {
    if (!seen.count(name)) {
      throw InputError(
          fmt::format("{}: {} is missing (the adapter's config names it)", path, name));
    }
  }
}

std::vector<std::string> PeftModel::save_weights(const std::string& dir, uint64_t max_shard_bytes,
                                                 base::WriteBatch* batch) const {
  io::NamedTensors tensors;
  for (const auto& [name, value] : adapter_state_dict()) {
    tensors.emplace_back(name, value.detach().contiguous());
  }
  io::save_safetensors(base::join_path(dir, base::hf::kAdapterWeights), tensors, {}, batch);
  std::vector<std::string> files = {base::hf::kAdapterWeights};
  // A base of no folder (a registry model, a fresh Hugging Face one) is part of the run.
  if (config_.base_model_name_or_path.empty()) {
    for (std::string& f : wrapped_->save_weights(dir, max_shard_bytes, batch)) {
      files.push_back(std::move(f));
    }
  }
  return files;
}

void PeftModel::load_weights(const std::string& dir) {
  if (config_.base_model_name_or_path.empty()) {
    wrapped_->load_weights(dir);  // the base with its adapters
    return;
  }
  const std::string path = base::join_path(dir, base::hf::kAdapterWeights);
  io::MappedSafetensors file = io::map_safetensors(path);
  load_adapter(file.tensors, path);
}

void PeftModel::set_adapters_enabled(bool enabled) {
  for (const auto& item : wrapped_->named_modules("", /*include_self=*/false)) {
    auto* host = dynamic_cast<LoraHost*>(item.value().get());
    if (host && host->lora) host->lora->enabled = enabled;
  }
}

std::shared_ptr<Model> PeftModel::merge_and_unload() {
  torch::NoGradGuard no_grad;
  for (const auto& item : wrapped_->named_modules("", /*include_self=*/false)) {
    auto* host = dynamic_cast<LoraHost*>(item.value().get());
    if (!host || !host->lora) continue;
    const LoraAdapter& lora = *host->lora;
    torch::Tensor w = host->host_weight();
    torch::Tensor delta = torch::matmul(lora.B, lora.A) * lora.scaling;
    if (host->fan_in_fan_out()) delta = delta.t();
    w.copy_((w.to(delta.scalar_type()) + delta).to(w.scalar_type()));
    item.value()->unregister_module("lora_A");
    item.value()->unregister_module("lora_B");
    host->lora.reset();
  }
  for (auto& p : wrapped_->parameters()) p.set_requires_grad(true);
  adapted_.clear();
  return wrapped_;
}

std::string PeftModel::trainable_parameters_text() const {
  int64_t trainable = 0, all = 0;
  for (const auto& p : parameters()) {
    all += p.numel();
    if (p.requires_grad()) trainable += p.numel();
  }
  for (const auto& item : wrapped_->named_modules("", /*include_self=*/false)) {
    if (std::find(modules_to_save_.begin(), modules_to_save_.end(), item.key()) ==
        modules_to_save_.end())
      continue;
    for (const auto& p : item.value()->parameters()) all += p.numel();
  }
  return fmt::format(
      "trainable params: {} || all params: {} || trainable%: {:.4f}", base::thousands(trainable),
      base::thousands(all),
      100.0 * static_cast<double>(trainable) / static_cast<double>(std::max<int64_t>(all, 1)));
}

std::shared_ptr<PeftModel> load_peft_model(const PretrainedSource& source,
                                           const std::string& dtype) {
  if (!source.is_adapter()) {
    throw std::invalid_argument("load_peft_model: " + source.path + " is not an adapter folder");
  }
  const std::string& dir = source.path;
  const std::string config_path = base::join_path(dir, base::hf::kAdapterConfig);
  const std::string path = base::join_path(dir, base::hf::kAdapterWeights);
  if (!base::exists(path)) {
    throw InputError(fmt::format(
        "{} does not exist (an adapter folder holds it beside {}; adapter_model.bin is not read)",
        path, base::hf::kAdapterConfig));
  }
  std::shared_ptr<PeftModel> model;
  auto base = load_hf_model(source.model_dir, source.config, dtype);
  try {
    model = std::make_shared<PeftModel>(base, *source.adapter);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", config_path, e.what()));
  }
  io::MappedSafetensors file = io::map_safetensors(path);
  model->load_adapter(file.tensors, path);
  return model;
}

std::shared_ptr<PeftModel> load_peft_model(const std::string& dir, const std::string& dtype) {
  return load_peft_model(adapter_source(dir, read_adapter_config(dir)), dtype);
}

std::shared_ptr<Model> load_pretrained(const PretrainedSource& source, const std::string& dtype) {
  if (source.is_adapter()) return load_peft_model(source, dtype);
  return load_hf_model(source.model_dir, source.config, dtype);
}

}  // namespace trainer::models

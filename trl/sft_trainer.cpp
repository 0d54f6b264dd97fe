// SFTTrainer's pieces on LibTorch: the rows as tensors, TRL's collator, the data source of
// `trainer sft`, and compute_loss with TRL's metrics.
#include "trl/sft_trainer.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/models/hf_causal_lm.h"
#include "lib/models/lora.h"
#include "trl/sft_cache.h"

namespace trainer::trl {
namespace {

using torch::Tensor;

Tensor to_tensor(const std::vector<int32_t>& values) {
  return torch::tensor(std::vector<int64_t>(values.begin(), values.end()), torch::kLong);
}

// Right-padding of 1-D int64 tensors to one length (a multiple of `multiple` when given).
Tensor pad_right(const std::vector<Tensor>& rows, int64_t value, std::optional<int64_t> multiple) {
  int64_t length = 0;
  for (const auto& r : rows) length = std::max(length, r.size(0));
  if (multiple && *multiple > 0) length = (length + *multiple - 1) / *multiple * *multiple;
  Tensor out = torch::full({static_cast<int64_t>(rows.size()), length}, value, torch::kLong);
  for (size_t i = 0; i < rows.size(); ++i) out[i].slice(0, 0, rows[i].size(0)).copy_(rows[i]);
  return out;
}

class SftSource : public data::DataSource {
 public:
  explicit SftSource(SftSourceOptions options) : options_(std::move(options)) {}

  data::DataInfo info() override {
    data::DataInfo info;
    info.task = data::TaskKind::kCausalLM;
    info.input_shape = {options_.data.max_length.value_or(longest_)};
    info.num_labels = options_.tokenizer->vocab_size();
    return info;
  }

  std::shared_ptr<const data::Dataset> split(const std::string& split,
                                             std::optional<int64_t> max_samples) override {
    const std::string& path = split == "train" ? options_.train_file : options_.eval_file;
    if (path.empty()) {
      throw InputError(fmt::format(
          "trainer sft: no {} data (give {})", split == "train" ? "training" : "evaluation",
          split == "train" ? "train_file, or dataset_name a file or folder"
                           : "validation_file, or dataset_name a folder with a test file"));
    }
    SftDataOptions data = options_.data;
    if (split != "train") data.packing = options_.eval_packing;
    // The node's first process prepares the split and caches it; the others read the cache.
    std::optional<SftData> prepared;
    bool from_cache = false;
    const std::string cache = cache_path(path, data, max_samples);
    options_.context.run_first([&] {
      if (!cache.empty() && !options_.overwrite_cache) prepared = read_sft_cache(cache);
      from_cache = prepared.has_value();
      if (prepared) return;
      prepared = prepare(path, data, max_samples);
      if (!cache.empty() && options_.context.local_main) {
        try {
          write_sft_cache(cache, *prepared);
        } catch (const std::exception&) {
          // A cache that cannot be written costs the next run the preparation, nothing more.
        }
      }
    });
    if (options_.is_main) report(split, path, *prepared, data.packing, data, from_cache);
    for (const auto& row : prepared->rows) {
      longest_ = std::max<int64_t>(longest_, static_cast<int64_t>(row.input_ids.size()));
    }
    return std::make_shared<SftDataset>(std::move(prepared->rows));
  }

  data::DataCollator collator() const override {
    return sft_collator(options_.pad_token_id, options_.padding_free, options_.pad_to_multiple_of);
  }
  std::string location() const override { return options_.train_file; }
  std::string split_name(const std::string& split) const override {
    return split == "train" ? "train_file " + options_.train_file + "'s train"
                            : "eval file " + options_.eval_file + "'s";
  }

 private:
  // TRL's preparation of one split, shuffled (shuffle_dataset) where TRL shuffles.
  SftData prepare(const std::string& path, const SftDataOptions& data,
                  std::optional<int64_t> max_samples) const {
    std::vector<nlohmann::ordered_json> records = read_sft_records(path);
    if (max_samples && *max_samples < static_cast<int64_t>(records.size())) {
      records.resize(static_cast<size_t>(std::max<int64_t>(0, *max_samples)));
    }
    const tokenizers::ChatTemplate* chat =
        options_.chat_template ? &*options_.chat_template : nullptr;
    SftData prepared;
    if (options_.shuffle && data.packing) {
      // TRL shuffles the tokenized rows, packs them, and shuffles the packed rows.
      SftDataOptions unpacked = data;
      unpacked.packing = false;
      unpacked.max_length = std::nullopt;
      prepared = prepare_sft_dataset(records, *options_.tokenizer, chat, unpacked, path);
      shuffle(prepared.rows);
      for (const auto& row : prepared.rows) {
        if (static_cast<int64_t>(row.input_ids.size()) > *data.max_length) ++prepared.truncated;
      }
      prepared.rows = pack_rows(std::move(prepared.rows), *data.max_length, data.packing_strategy);
    } else {
      prepared = prepare_sft_dataset(records, *options_.tokenizer, chat, data, path);
    }
    if (options_.shuffle) shuffle(prepared.rows);
    return prepared;
  }

  // The split's cache file ("" without a cache folder).
  std::string cache_path(const std::string& path, const SftDataOptions& d,
                         std::optional<int64_t> max_samples) const {
    if (options_.context.cache_dir.empty()) return "";
    const std::string settings = fmt::format(
        "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", d.dataset_text_field, d.max_length.value_or(-1),
        d.truncation_mode, d.packing, d.packing_strategy,
        d.completion_only_loss ? static_cast<int>(*d.completion_only_loss) : -1,
        d.assistant_only_loss, d.eos_token.value_or("\x01none"), options_.shuffle, options_.seed,
        max_samples.value_or(-1), options_.chat_template ? options_.chat_template->name() : "");
    const std::string key =
        sft_cache_key(path, options_.tokenizer->fingerprint(),
                      options_.chat_template ? options_.chat_template->source() : "", settings);
    return base::join_path(base::join_path(options_.context.cache_dir, "sft"), key + ".bin");
  }

  void shuffle(std::vector<SftRow>& rows) const {
    std::mt19937_64 generator(static_cast<uint64_t>(options_.seed));
    std::shuffle(rows.begin(), rows.end(), generator);
  }

  // One line on what the data became; a warning with the counts where TRL cuts or drops rows
  // without a word.
  static void report(const std::string& split, const std::string& path, const SftData& data,
                     bool packed, const SftDataOptions& options, bool from_cache) {
    int64_t labels = 0, tokens = 0;
    for (const auto& row : data.rows) {
      tokens += static_cast<int64_t>(row.input_ids.size());
      // A sequence's first token is predicted from nothing: its label never counts.
      std::vector<int32_t> starts = {0};
      for (int32_t length : row.seq_lengths) starts.push_back(starts.back() + length);
      for (size_t i = 0, s = 0; i < row.labels.size(); ++i) {
        while (s < starts.size() && static_cast<size_t>(starts[s]) < i) ++s;
        const bool first = s < starts.size() && static_cast<size_t>(starts[s]) == i;
        labels += row.labels[i] != -100 && !first;
      }
    }
    fmt::print("SFT {} data: {} {} examples from {} -> {} rows{}, {} tokens, {} with a label{}\n",
               split, data.examples, shape_name(data.shape), path, data.rows.size(),
               packed ? fmt::format(" ({} packed)", options.packing_strategy) : "", tokens, labels,
               from_cache ? " (from the node's cache)" : "");
    if (data.truncated > 0 && options.max_length) {
      base::warn("{} of the {} examples are longer than max_length {}: {} (as TRL does)",
                 data.truncated, data.examples, *options.max_length,
                 packed && options.packing_strategy == "bfd_split" ? "split into more sequences"
                 : packed && options.packing_strategy == "wrapped" ? "cut across rows"
                                                                   : "their ends cut");
    }
    if (data.dropped > 0) {
      base::warn(
          "{} of the {} examples have no label token (after truncation) and are dropped "
          "(as TRL does)",
          data.dropped, data.examples);
    }
  }

  SftSourceOptions options_;
  int64_t longest_ = 0;
};

}  // namespace

data::Example SftDataset::get(int64_t index) const {
  const SftRow& row = rows_.at(static_cast<size_t>(index));
  data::Example example{to_tensor(row.input_ids), to_tensor(row.labels)};
  if (!row.seq_lengths.empty()) {
    std::vector<int64_t> positions;
    positions.reserve(row.input_ids.size());
    for (int32_t length : row.seq_lengths) {
      for (int32_t p = 0; p < length; ++p) positions.push_back(p);
    }
    example.positions = torch::tensor(positions, torch::kLong);
  }
  return example;
}

data::DataCollator sft_collator(int64_t pad_token_id, bool padding_free,
                                std::optional<int64_t> pad_to_multiple_of) {
  return [=](const std::vector<data::Example>& examples) {
    std::vector<Tensor> ids, labels, positions;
    for (const auto& e : examples) {
      ids.push_back(e.input);
      labels.push_back(e.target);
      positions.push_back(e.positions.defined() ? e.positions
                                                : torch::arange(e.input.size(0), torch::kLong));
    }
    data::Batch batch;
    if (padding_free) {
      batch["input_ids"] = pad_right({torch::cat(ids)}, pad_token_id, pad_to_multiple_of);
      Tensor label_row = pad_right({torch::cat(labels)}, -100, pad_to_multiple_of);
      Tensor position_row = pad_right({torch::cat(positions)}, 0, pad_to_multiple_of);
      // A sequence's first token is not predicted from the one before it.
      label_row.masked_fill_(position_row.eq(0), -100);
      batch["labels"] = label_row;
      batch["position_ids"] = position_row;
      return batch;
    }
    std::vector<Tensor> ones;
    for (const auto& i : ids) ones.push_back(torch::ones_like(i));
    batch["input_ids"] = pad_right(ids, pad_token_id, pad_to_multiple_of);
    batch["labels"] = pad_right(labels, -100, pad_to_multiple_of);
    batch["attention_mask"] = pad_right(ones, 0, pad_to_multiple_of);
    return batch;
  };
}

std::unique_ptr<data::DataSource> make_sft_source(SftSourceOptions options) {
  return std::make_unique<SftSource>(std::move(options));
}

SftSourceOptions sft_source_options(const TrainingArguments& args,
                                    std::shared_ptr<const tokenizers::Tokenizer> tokenizer,
                                    const std::string& tokenizer_dir) {
  SftSourceOptions o;
  o.data.dataset_text_field = args.dataset_text_field();
  o.data.max_length = args.max_length();
  o.data.truncation_mode = args.truncation_mode();
  o.data.packing = args.packing();
  o.data.packing_strategy = args.packing_strategy();
  o.data.completion_only_loss = args.completion_only_loss();
  o.data.assistant_only_loss = args.assistant_only_loss();
  o.data.eos_token = args.eos_token();
  o.eval_packing = args.eval_packing().value_or(args.packing());
  o.shuffle = args.shuffle_dataset();
  o.seed = args.seed();
  // TRL: padding-free with packing bfd / bfd_split, or when asked.
  o.padding_free = args.padding_free() || (args.packing() && args.packing_strategy() != "wrapped");
  o.pad_to_multiple_of = args.pad_to_multiple_of();
  if (args.train_file() || args.validation_file()) {
    o.train_file = args.train_file().value_or("");
    o.eval_file = args.validation_file().value_or("");
    // Read only when evaluating, but a file named that is not there is said now (datasets would).
    for (const auto& [name, file] :
         {std::pair{"train_file", o.train_file}, std::pair{"validation_file", o.eval_file}}) {
      if (file.empty() || base::is_regular_file(file)) continue;
      const std::string problem = base::path_problem(file);
      throw InputError(fmt::format("argument {}: {} {}", name, file,
                                   problem.empty() ? "is not a file" : problem));
    }
  } else if (!args.given("dataset_name")) {
    throw InputError(
        "trainer sft: no data (give train_file, or dataset_name a .json/.jsonl file or a folder "
        "of them)");
  } else {
    std::optional<std::string> config;
    if (args.dataset_config().is_string()) config = args.dataset_config().get<std::string>();
    SftFiles files = resolve_sft_files(dataset_location(args.dataset_name(), config),
                                       args.dataset_train_split(), args.dataset_test_split());
    o.train_file = files.train;
    o.eval_file = files.eval;
  }
  // The pad token: pad_token, else the tokenizer's, else its eos token (TRL).
  if (args.pad_token()) {
    auto id = tokenizer->token_to_id(*args.pad_token());
    if (!id) {
      throw InputError(
          fmt::format("argument pad_token: \"{}\" is not in the vocabulary of the tokenizer in {}",
                      *args.pad_token(), tokenizer_dir));
    }
    o.pad_token_id = *id;
  } else if (auto pad = tokenizer->pad_token_id()) {
    o.pad_token_id = *pad;
  } else if (auto eos = tokenizer->eos_token_id()) {
    o.pad_token_id = *eos;
  } else {
    throw InputError(fmt::format(
        "trainer sft: the tokenizer in {} has neither a pad_token nor an eos_token; give "
        "pad_token",
        tokenizer_dir));
  }
  if (args.eos_token() && !tokenizer->token_to_id(*args.eos_token())) {
    throw InputError(
        fmt::format("argument eos_token: \"{}\" is not in the vocabulary of the tokenizer in {}",
                    *args.eos_token(), tokenizer_dir));
  }
  if (const auto& path = args.chat_template_path()) {
    if (base::is_directory(*path)) {
      o.chat_template = tokenizers::ChatTemplate::from_dir(*path);
      if (!o.chat_template) {
        throw InputError(fmt::format(
            "argument chat_template_path: {} holds no chat template (chat_template.jinja, or "
            "tokenizer_config.json's chat_template)",
            *path));
      }
    } else {
      o.chat_template = tokenizers::ChatTemplate::from_source(
          base::read_file(*path, size_t{1} << 26), *path, tokenizer_dir);
    }
  } else {
    o.chat_template = tokenizers::ChatTemplate::from_dir(tokenizer_dir);
  }
  o.tokenizer = std::move(tokenizer);
  return o;
}

RouterAuxLoss resolve_router_aux_loss(const TrainingArguments& args, models::Model& model,
                                      bool write_config) {
  models::HfCausalLM* hf = models::as_hf_causal_lm(model);
  const bool moe = hf && hf->config().num_experts > 0;
  const std::optional<double> given = args.router_aux_loss_coef();
  if (given && *given != 0 && !moe) {
    throw InputError(fmt::format(
        "argument router_aux_loss_coef: {} is set but the model is not a Mixture-of-Experts model "
        "that returns its router logits, so there is no auxiliary loss to weight (give null or 0)",
        base::python_float(*given)));
  }
  RouterAuxLoss aux;
  aux.coef = given.value_or(moe ? hf->config().router_aux_loss_coef : 0.0);
  aux.enabled = moe && aux.coef != 0;
  if (write_config && moe) hf->set_router_aux_loss(aux.enabled, aux.coef);
  return aux;
}

LossOutput SFTTrainer::compute_loss(models::Model& model, const data::Batch& inputs,
                                    bool return_outputs, const torch::Tensor& num_items_in_batch) {
  data::Batch batch = inputs;
  batch.token_stats = true;
  batch.router_aux_loss = aux_.enabled;
  batch.dft_loss = args().loss_type().front() == "dft";
  batch.label_smoothing = args().label_smoothing_factor();
  if (num_items_in_batch.defined() && !batch.num_items_in_batch.defined()) {
    batch.num_items_in_batch = num_items_in_batch;
  }
  // TRL divides by the label tokens clamped to at least 1: a batch with none (rows of a single
  // token) is a loss of 0, not 0 / 0.
  if (batch.num_items_in_batch.defined()) {
    batch.num_items_in_batch = batch.num_items_in_batch.clamp_min(1);
  } else {
    batch.num_items_in_batch = inputs.at("labels").slice(1, 1).ne(-100).sum().clamp_min(1);
  }
  models::ModelOutput out = model.forward(batch);
  const bool training = model.is_training();
  Accelerator& accelerator = this->accelerator();
  Tensor loss = out.loss;
  if (aux_.enabled && out.aux_loss.defined()) {
    // TRL: the weighted router loss after the loss's scaling by the processes (which the
    // Trainer's training_step does here, hence the division), over the accumulation steps when
    // num_items_in_batch counts the window's tokens. The label smoother's path adds none.
    const bool smoothed = batch.label_smoothing > 0 && !batch.dft_loss;
    if (!smoothed) {
      double scale = aux_.coef;
      if (num_items_in_batch.defined()) {
        scale /= static_cast<double>(current_gradient_accumulation_steps());
        if (training && accelerator.num_processes() > 1 && args().average_tokens_across_devices())
          scale /= static_cast<double>(accelerator.num_processes());
      }
      loss = loss + scale * out.aux_loss;
    }
    Tensor aux = out.aux_loss.detach().to(torch::kFloat).reshape({1});
    if (accelerator.num_processes() > 1) {
      aux = accelerator.reduce(aux.to(accelerator.device()), Reduction::kSum).cpu() /
            static_cast<double>(accelerator.num_processes());
    }
    (training ? train_ : eval_).aux_loss.push_back(aux.item<double>());
  }
  // entropy sum, argmax hits, label tokens, and (training) the batch's tokens, over processes.
  Tensor tokens;
  if (inputs.contains("attention_mask")) {
    tokens = inputs.at("attention_mask").sum().to(torch::kFloat);
  } else {
    tokens =
        torch::scalar_tensor(static_cast<double>(inputs.at("input_ids").size(1)), torch::kFloat);
  }
  Tensor stats =
      out.token_stats.defined() ? out.token_stats.detach() : torch::zeros({3}, torch::kFloat);
  Tensor all = torch::cat({stats.to(torch::kFloat).cpu(), tokens.cpu().reshape({1})});
  if (accelerator.num_processes() > 1) {
    all = accelerator.reduce(all.to(accelerator.device()), Reduction::kSum).cpu();
  }
  const double entropy = all[0].item<double>(), correct = all[1].item<double>(),
               count = all[2].item<double>();
  Means& means = training ? train_ : eval_;
  means.entropy.push_back(count > 0 ? entropy / count : 0.0);
  means.accuracy.push_back(count > 0 ? correct / count : 0.0);
  if (training) total_train_tokens_ += all[3].item<double>();
  return {loss, return_outputs ? out.logits : Tensor()};
}

void SFTTrainer::add_logged_metrics(nlohmann::ordered_json& logs, const std::string& prefix) {
  Means& means = prefix.empty() ? train_ : eval_;
  if (means.entropy.empty()) return;  // nothing since the last log (TRL's cleared metrics)
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  const std::string p = prefix.empty() ? "" : prefix + "_";
  logs[p + "entropy"] = mean(means.entropy);
  logs[p + "mean_token_accuracy"] = mean(means.accuracy);
  logs[p + "num_tokens"] = total_train_tokens_;
  if (!means.aux_loss.empty()) logs[p + "aux_loss"] = mean(means.aux_loss);
  means = {};
}

}  // namespace trainer::trl

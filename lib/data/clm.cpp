// run_clm.py's data preparation on LibTorch tensors: read, tokenize, group_texts, cache.
#include "lib/data/clm.h"

#include <sys/stat.h>
#include <zlib.h>

#include <filesystem>

#include <fmt/format.h>
#include <torch/torch.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/data/lm_files.h"
#include "lib/tokenizers/tokenizer.h"

namespace trainer::data {

using tokenizers::Tokenizer;

BlockDataset::BlockDataset(torch::Tensor tokens, int64_t block_size)
    : tokens_(std::move(tokens)), block_size_(block_size), size_(tokens_.numel() / block_size) {}

Example BlockDataset::get(int64_t index) const {
  torch::Tensor block =
      tokens_.slice(0, index * block_size_, (index + 1) * block_size_).to(torch::kLong);
  return {block, block};
}

std::optional<Batch> BlockDataset::get_batch(const torch::Tensor& indices) const {
  torch::Tensor ids = tokens_.view({size_, block_size_}).index_select(0, indices).to(torch::kLong);
  return Batch{{"input_ids", ids}, {"labels", ids.clone()}};
}

torch::Tensor group_texts(const std::vector<std::vector<int32_t>>& ids, int64_t block_size) {
  constexpr size_t kMapBatch = 1000;  // datasets' map(batched=True) default batch_size
  std::vector<int32_t> out;
  for (size_t begin = 0; begin < ids.size(); begin += kMapBatch) {
    const size_t end = std::min(ids.size(), begin + kMapBatch);
    const size_t start = out.size();
    for (size_t i = begin; i < end; ++i) out.insert(out.end(), ids[i].begin(), ids[i].end());
    const size_t total = out.size() - start;
    out.resize(start + total / static_cast<size_t>(block_size) * static_cast<size_t>(block_size));
  }
  return torch::from_blob(out.data(), {static_cast<int64_t>(out.size())}, torch::kInt).clone();
}

namespace {

constexpr char kCacheMagic[8] = {'T', 'R', 'C', 'L', 'M', '1', 0, 0};

// What decides the cached ids: the files (path, size, modification time), the tokenizer, the
// options; a hex key.
std::string cache_key(const ClmOptions& o, const Tokenizer& tokenizer) {
  std::string text =
      fmt::format("v1|{}|{}|{}|{}|{}|", tokenizer.fingerprint(), o.block_size, o.keep_linebreaks,
                  o.text_column_name, o.validation_split_percentage);
  for (const std::string& file : {o.train_file, o.validation_file}) {
    struct stat info {};
    std::error_code ec;
    const std::string real =
        file.empty() ? "" : std::filesystem::weakly_canonical(file, ec).string();
    if (!file.empty() && ::stat(file.c_str(), &info) == 0) {
      text += fmt::format("{}:{}:{}.{}|", real, info.st_size, info.st_mtim.tv_sec,
                          info.st_mtim.tv_nsec);
    } else {
      text += "-|";
    }
  }
  const auto* bytes = reinterpret_cast<const Bytef*>(text.data());
  return fmt::format("{:08x}{:08x}", crc32(0, bytes, text.size()), adler32(1, bytes, text.size()));
}

struct Tokenized {
  torch::Tensor train, validation;  // int32, multiples of block_size
};

std::vector<std::vector<int32_t>> encode_all(const Tokenizer& tokenizer,
                                             const std::vector<std::string>& texts, size_t begin,
                                             size_t end) {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) ids.push_back(tokenizer.encode(texts[i]));
  return ids;
}

Tokenized tokenize(const ClmOptions& o, const Tokenizer& tokenizer) {
  Tokenized out;
  if (!o.train_file.empty()) {
    auto texts = read_lm_file(o.train_file, o.text_column_name, o.keep_linebreaks);
    size_t split = 0;
    if (o.validation_file.empty()) {
      split = static_cast<size_t>(validation_split_boundary(static_cast<int64_t>(texts.size()),
                                                            o.validation_split_percentage));
      out.validation = group_texts(encode_all(tokenizer, texts, 0, split), o.block_size);
    }
    out.train = group_texts(encode_all(tokenizer, texts, split, texts.size()), o.block_size);
  }
  if (!o.validation_file.empty()) {
    auto texts = read_lm_file(o.validation_file, o.text_column_name, o.keep_linebreaks);
    out.validation = group_texts(encode_all(tokenizer, texts, 0, texts.size()), o.block_size);
  }
  if (!out.train.defined()) out.train = torch::empty({0}, torch::kInt);
  if (!out.validation.defined()) out.validation = torch::empty({0}, torch::kInt);
  return out;
}

void write_cache(const std::string& path, const Tokenized& t) {
  std::string bytes(kCacheMagic, sizeof kCacheMagic);
  const int64_t counts[2] = {t.train.numel(), t.validation.numel()};
  bytes.append(reinterpret_cast<const char*>(counts), sizeof counts);
  for (const auto& part : {t.train, t.validation}) {
    bytes.append(static_cast<const char*>(part.data_ptr()), part.numel() * sizeof(int32_t));
  }
  std::filesystem::create_directories(base::parent_dir(path));
  base::write_file_atomic(path, bytes);
}

// The cached ids, or nothing when the file is absent or not whole.
std::optional<Tokenized> read_cache(const std::string& path) {
  if (!base::exists(path)) return std::nullopt;
  std::string bytes = base::read_file(path);
  int64_t counts[2];
  if (bytes.size() < sizeof kCacheMagic + sizeof counts ||
      bytes.compare(0, sizeof kCacheMagic, std::string(kCacheMagic, sizeof kCacheMagic)) != 0) {
    return std::nullopt;
  }
  std::memcpy(counts, bytes.data() + sizeof kCacheMagic, sizeof counts);
  const size_t header = sizeof kCacheMagic + sizeof counts;
  if (counts[0] < 0 || counts[1] < 0 ||
      bytes.size() != header + static_cast<size_t>(counts[0] + counts[1]) * sizeof(int32_t)) {
    return std::nullopt;
  }
  Tokenized t;
  auto* data = reinterpret_cast<int32_t*>(bytes.data() + header);
  t.train = torch::from_blob(data, {counts[0]}, torch::kInt).clone();
  t.validation = torch::from_blob(data + counts[0], {counts[1]}, torch::kInt).clone();
  return t;
}

class ClmSource : public DataSource {
 public:
  ClmSource(ClmOptions options, LoadContext context)
      : options_(std::move(options)),
        context_(std::move(context)),
        tokenizer_(options_.tokenizer ? options_.tokenizer
                                      : std::make_shared<const Tokenizer>(
                                            Tokenizer::load(options_.tokenizer_path))) {}

  DataInfo info() override {
    return {TaskKind::kCausalLM, {options_.block_size}, tokenizer_->vocab_size()};
  }

  std::shared_ptr<const Dataset> split(const std::string& split,
                                       std::optional<int64_t> max_samples) override {
    if (!loaded_) {
      context_.run_first([&] { load(); });
    }
    torch::Tensor tokens = split == "train" ? loaded_->train : loaded_->validation;
    if (max_samples && *max_samples * options_.block_size < tokens.numel()) {
      tokens = tokens.slice(0, 0, *max_samples * options_.block_size);
    }
    return std::make_shared<BlockDataset>(tokens, options_.block_size);
  }

  std::string location() const override {
    return options_.train_file.empty() ? options_.validation_file : options_.train_file;
  }
  std::string split_name(const std::string& split) const override {
    if (split == "train") return "train_file " + options_.train_file + "'s train";
    return options_.validation_file.empty()
               ? fmt::format("validation ({}% of train_file)", options_.validation_split_percentage)
               : "validation_file " + options_.validation_file + "'s";
  }

 private:
  void load() {
    const std::string cache = context_.cache_dir.empty()
                                  ? ""
                                  : base::join_path(base::join_path(context_.cache_dir, "clm"),
                                                    cache_key(options_, *tokenizer_) + ".bin");
    if (!cache.empty()) {
      if (auto hit = read_cache(cache)) {
        loaded_ = std::move(*hit);
        return;
      }
    }
    Tokenized fresh = tokenize(options_, *tokenizer_);
    if (!cache.empty() && context_.local_main) {
      try {
        write_cache(cache, fresh);
      } catch (const std::exception&) {
        // A cache that cannot be written costs the next run the tokenization, nothing more.
      }
    }
    loaded_ = std::move(fresh);
  }

  ClmOptions options_;
  LoadContext context_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::optional<Tokenized> loaded_;
};

}  // namespace

std::unique_ptr<DataSource> make_clm_source(const ClmOptions& options, LoadContext context) {
  if (options.block_size < 1) {
    throw InputError(
        fmt::format("block_size {} is not allowed (a positive integer)", options.block_size));
  }
  if (options.train_file.empty() && options.validation_file.empty()) {
    throw InputError("train_file or validation_file is needed for language modeling on text files");
  }
  return std::make_unique<ClmSource>(options, std::move(context));
}

}  // namespace trainer::data

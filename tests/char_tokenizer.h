// A tokenizer.json of single characters, what the TRL data tests and the TRL data fuzz target
// prepare with (no Python, torch-free): printable ASCII and "\n" (first after <unk> 0, or last),
// the added tokens given (special, not normalized), and with `bos` one of them put first by a
// TemplateProcessing, as Llama's tokenizers add BOS.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::testing {

inline std::string char_tokenizer_json(const std::vector<std::string>& added_tokens,
                                       const std::string& bos = "", bool newline_first = true) {
  using Json = nlohmann::ordered_json;
  Json vocab = Json::object();
  vocab["<unk>"] = 0;
  if (newline_first) vocab["\n"] = 1;
  for (char c = 32; c < 127; ++c) vocab[std::string(1, c)] = static_cast<int>(vocab.size());
  if (!newline_first) vocab["\n"] = static_cast<int>(vocab.size());
  Json added = Json::array();
  int bos_id = -1;
  for (const std::string& token : added_tokens) {
    const int id = static_cast<int>(vocab.size() + added.size());
    if (token == bos) bos_id = id;
    added.push_back({{"id", id},
                     {"content", token},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  Json post_processor = nullptr;
  if (bos_id >= 0) {
    post_processor = {
        {"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
  }
  const Json tokenizer = {{"version", "1.0"},
                          {"truncation", nullptr},
                          {"padding", nullptr},
                          {"added_tokens", added},
                          {"normalizer", nullptr},
                          {"pre_tokenizer", nullptr},
                          {"post_processor", post_processor},
                          {"decoder", nullptr},
                          {"model",
                           {{"type", "BPE"},
                            {"dropout", nullptr},
                            {"unk_token", "<unk>"},
                            {"continuing_subword_prefix", nullptr},
                            {"end_of_word_suffix", nullptr},
                            {"fuse_unk", false},
                            {"byte_fallback", false},
                            {"ignore_merges", false},
                            {"vocab", vocab},
                            {"merges", Json::array()}}}};
  return tokenizer.dump();
}

}  // namespace trainer::testing

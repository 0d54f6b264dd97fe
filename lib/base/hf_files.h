// The file names of a Hugging Face folder (what save_pretrained writes and from_pretrained reads),
// in one place for every floor that reads or writes one: a model folder, an adapter folder, and
// the tokenizer's files beside them.
#pragma once

namespace trainer::base::hf {

inline constexpr const char* kConfig = "config.json";
inline constexpr const char* kGenerationConfig = "generation_config.json";
inline constexpr const char* kWeights = "model.safetensors";
inline constexpr const char* kWeightsIndex = "model.safetensors.index.json";
inline constexpr const char* kAdapterConfig = "adapter_config.json";
inline constexpr const char* kAdapterWeights = "adapter_model.safetensors";
inline constexpr const char* kTokenizer = "tokenizer.json";
inline constexpr const char* kTokenizerConfig = "tokenizer_config.json";
inline constexpr const char* kSpecialTokensMap = "special_tokens_map.json";
inline constexpr const char* kChatTemplate = "chat_template.jinja";

// The tokenizer's files save_pretrained writes beside a model (those that exist are copied).
inline constexpr const char* kTokenizerFiles[] = {kTokenizer, kTokenizerConfig, kSpecialTokensMap,
                                                  kChatTemplate};

}  // namespace trainer::base::hf

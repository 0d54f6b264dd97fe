// Transformers' generate(): a left-padded batch decoded with the KV cache, its logits processors
// and a multinomial draw per row, stopped at the EOS ids.
#include "lib/models/sampling.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "lib/base/warn.h"

namespace trainer::models {
namespace {

using torch::Tensor;
namespace idx = torch::indexing;

// RepetitionPenaltyLogitsProcessor: every id seen (the padding excepted) scored down: a negative
// score times the penalty, a positive one divided by it.
Tensor repetition_penalty(const Tensor& scores, const Tensor& ids, const Tensor& padding,
                          double penalty) {
  const int64_t vocab = scores.size(-1);
  Tensor positions = torch::arange(ids.size(1), ids.options());
  Tensor seen_ids = ids.masked_fill(positions.unsqueeze(0) < padding.unsqueeze(1), vocab);
  Tensor seen = torch::zeros({scores.size(0), vocab + 1}, scores.options().dtype(torch::kBool))
                    .scatter_(1, seen_ids, true)
                    .slice(1, 0, vocab);
  return torch::where(seen, torch::where(scores < 0, scores * penalty, scores / penalty), scores);
}

// NoRepeatNGramLogitsProcessor and NoBadWordsLogitsProcessor: per row, the tokens that would
// repeat an n-gram of the row, or end a bad word whose other tokens end the row, set to -inf.
Tensor ban_tokens(const Tensor& scores, const Tensor& ids, const SamplingSettings& s) {
  if (s.no_repeat_ngram_size <= 0 && s.bad_words_ids.empty()) return scores;
  Tensor cpu = ids.to(torch::kCPU).contiguous();
  const auto rows = cpu.accessor<int64_t, 2>();
  std::vector<int64_t> banned_rows, banned_ids;
  const auto n = static_cast<size_t>(std::max<int64_t>(0, s.no_repeat_ngram_size));
  for (int64_t b = 0; b < cpu.size(0); ++b) {
    std::vector<int64_t> row(rows[b].data(), rows[b].data() + cpu.size(1));
    auto ban = [&](int64_t token) {
      banned_rows.push_back(b);
      banned_ids.push_back(token);
    };
    if (n > 0 && row.size() + 1 >= n) {
      const size_t prefix = row.size() - (n - 1);
      for (size_t i = 0; i + n <= row.size(); ++i) {
        if (std::equal(row.begin() + i, row.begin() + i + n - 1, row.begin() + prefix))
          ban(row[i + n - 1]);
      }
    }
    for (const auto& word : s.bad_words_ids) {
      const size_t rest = word.size() - 1;
      if (rest <= row.size() && std::equal(word.begin(), word.end() - 1, row.end() - rest))
        ban(word.back());
    }
  }
  if (banned_ids.empty()) return scores;
  auto index = [&](const std::vector<int64_t>& v) {
    return torch::tensor(v, torch::kLong).to(scores.device());
  };
  return scores.index_put({index(banned_rows), index(banned_ids)},
                          torch::tensor(-INFINITY, scores.options()));
}

// TopKLogitsWarper: scores below the k-th largest set to -inf.
Tensor top_k(const Tensor& scores, int64_t k) {
  k = std::min(k, scores.size(-1));
  Tensor kth = std::get<0>(scores.topk(k)).select(-1, k - 1).unsqueeze(-1);
  return scores.masked_fill(scores < kth, -INFINITY);
}

// TopPLogitsWarper: the smallest tokens whose probabilities add up to at most 1 - top_p removed,
// the most probable always kept.
Tensor top_p(const Tensor& scores, double p) {
  auto [sorted, order] = scores.sort(/*dim=*/-1, /*descending=*/false);
  Tensor remove = sorted.softmax(-1).cumsum(-1) <= (1 - p);
  remove.index_put_({idx::Ellipsis, -1}, false);
  return scores.masked_fill(remove.scatter(1, order, remove), -INFINITY);
}

// MinPLogitsWarper: tokens less probable than min_p times the most probable one removed.
Tensor min_p(const Tensor& scores, double p) {
  Tensor probs = scores.softmax(-1);
  Tensor remove = probs < p * probs.amax(-1, /*keepdim=*/true);
  remove.scatter_(-1, std::get<1>(probs.topk(1, -1)), false);
  return scores.masked_fill(remove, -INFINITY);
}

}  // namespace

Tensor process_scores(Tensor scores, const Tensor& ids, const Tensor& prompt_padding,
                      const SamplingSettings& s) {
  if (s.repetition_penalty != 1.0)
    scores = repetition_penalty(scores, ids, prompt_padding, s.repetition_penalty);
  scores = ban_tokens(scores, ids, s);
  if (!s.do_sample) return scores;
  if (s.temperature != 1.0) scores = scores / s.temperature;
  if (s.top_k > 0) scores = top_k(scores, s.top_k);
  if (s.top_p < 1.0) scores = top_p(scores, s.top_p);
  if (s.min_p) scores = min_p(scores, *s.min_p);
  return scores;
}

Tensor generate_tokens(HfCausalLM& model, const Tensor& input_ids, const Tensor& attention_mask,
                       const SamplingSettings& s, at::Generator& generator,
                       const std::function<void(const Tensor&)>& on_step) {
  torch::NoGradGuard no_grad;
  const int64_t B = input_ids.size(0);
  const auto device = input_ids.device();
  Tensor mask = attention_mask.defined() ? attention_mask.to(torch::kLong)
                                         : torch::ones_like(input_ids, torch::kLong);
  // Each row's left padding: the first real token's index (argmax of the mask, as Transformers).
  const Tensor padding = mask.ne(0).to(torch::kInt).argmax(1);
  const bool padded = attention_mask.defined() && mask.eq(0).any().item<bool>();
  Tensor ids = input_ids;
  Tensor eos = torch::tensor(s.eos_token_ids, torch::kLong).to(device);
  Tensor unfinished = torch::ones({B}, torch::TensorOptions(torch::kLong).device(device));
  // Positions as prepare_inputs_for_generation makes them: the real tokens counted, padding at 1.
  auto positions = [&](int64_t last) {
    Tensor p = mask.cumsum(-1) - 1;
    p = p.masked_fill(mask.eq(0), 1);
    return p.slice(1, p.size(1) - last);
  };
  KVCache cache;
  Tensor input = ids;
  std::vector<Tensor> steps;
  const int64_t limit = model.max_positions();
  for (int64_t step = 0; step < s.max_new_tokens; ++step) {
    if (ids.size(1) >= limit) {
      base::warn("generation stopped after {} new tokens: the model reads at most {} positions",
                 step, limit);
      break;
    }
    const bool whole = !s.use_cache || model.cache_goes_stale(cache.length, ids.size(1));
    if (whole) {
      cache = KVCache();
      input = ids;
    }
    KVCache* c = s.use_cache ? &cache : nullptr;
    Tensor hidden = model.hidden_states(input, padded ? mask : Tensor(), c,
                                        padded ? positions(input.size(1)) : Tensor());
    Tensor scores = model.lm_logits(hidden.select(1, -1)).to(torch::kFloat);
    scores = process_scores(scores, ids, padding, s);
    Tensor next = s.do_sample
                      ? torch::multinomial(scores.softmax(-1), 1, false, generator).squeeze(1)
                      : scores.argmax(-1);
    if (eos.numel() > 0) next = next * unfinished + s.pad_token_id * (1 - unfinished);
    ids = torch::cat({ids, next.unsqueeze(1)}, 1);
    mask = torch::cat({mask, torch::ones({B, 1}, mask.options())}, 1);
    steps.push_back(next);
    if (on_step) on_step(next);
    if (eos.numel() > 0) {
      unfinished = unfinished * torch::isin(next, eos).logical_not().to(torch::kLong);
      if (unfinished.max().item<int64_t>() == 0) break;
    }
    input = next.unsqueeze(1);
  }
  if (steps.empty()) return torch::empty({B, 0}, input_ids.options());
  return torch::stack(steps, 1);
}

}  // namespace trainer::models

// Linear layers that can carry a LoRA adapter, as PEFT's lora.Linear wraps nn.Linear and
// Transformers' Conv1D: every linear layer of the registry's models and of the Hugging Face models
// is one of these, so that lib/models/lora.h can add an adapter to any of them by name.
#pragma once

#include <optional>

#include <torch/nn/functional/linear.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace trainer::models {

// One layer's adapter: y + lora_B(lora_A(dropout(x))) * scaling, computed in the adapter's dtype
// (float32 beside a bf16 base, as PEFT keeps them) and added in the layer's. A [r, in] and
// B [out, r] are the parameters of the modules "lora_A" and "lora_B" registered under the layer.
struct LoraAdapter {
  torch::Tensor A, B;
  double scaling = 1.0;
  double dropout = 0.0;
  bool enabled = true;  // off: the layer is the base's alone (PEFT's disable_adapter)
};

// A layer an adapter can be added to.
class LoraHost {
 public:
  virtual ~LoraHost() = default;
  // The weight as the layer stores it ([out, in]; [in, out] when fan_in_fan_out) and its bias
  // (undefined when it has none).
  virtual torch::Tensor host_weight() const = 0;
  virtual torch::Tensor host_bias() const = 0;
  // GPT-2's Conv1D stores its weight transposed (PEFT's fan_in_fan_out).
  virtual bool fan_in_fan_out() const { return false; }
  int64_t in_features() const { return host_weight().size(fan_in_fan_out() ? 0 : 1); }
  int64_t out_features() const { return host_weight().size(fan_in_fan_out() ? 1 : 0); }

  std::optional<LoraAdapter> lora;

 protected:
  // y plus the adapter's share for input x (y itself without an adapter).
  torch::Tensor add_lora(const torch::Tensor& x, const torch::Tensor& y, bool training) const;
};

// nn.Linear with room for an adapter (PyTorch's names: weight [out, in], bias [out]).
class LinearImpl : public torch::nn::LinearImpl, public LoraHost {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  // aten::linear, not the C++ frontend's F::linear: that one multiplies by weight.t(), a view,
  // which autocast never caches, so a bf16 forward cast every weight again at every call (each
  // decoding step of a generation); aten::linear casts the weight itself, once per autocast region.
  torch::Tensor forward(const torch::Tensor& x) {
    return add_lora(x, torch::linear(x, weight, bias), is_training());
  }
  torch::Tensor host_weight() const override { return weight; }
  torch::Tensor host_bias() const override { return bias; }
};
TORCH_MODULE(Linear);

inline torch::Tensor LoraHost::add_lora(const torch::Tensor& x, const torch::Tensor& y,
                                        bool training) const {
  if (!lora || !lora->enabled) return y;
  torch::Tensor h = x.scalar_type() == lora->A.scalar_type() ? x : x.to(lora->A.scalar_type());
  if (training && lora->dropout > 0) h = torch::dropout(h, lora->dropout, true);
  torch::Tensor delta = torch::linear(torch::linear(h, lora->A), lora->B) * lora->scaling;
  return delta.scalar_type() == y.scalar_type() ? y + delta : (y + delta).to(y.scalar_type());
}

}  // namespace trainer::models

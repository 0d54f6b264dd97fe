// DeepSpeed's zero_optimization read as a plan (the stage, offloading, ZeRO++ and MiCS refused),
// the top-level features not built refused, and the helpers every reader of the config uses.
#include <algorithm>

#include <fmt/format.h>

#include "lib/accelerate/deepspeed_reading.h"
#include "lib/base/json_text.h"
#include "lib/base/warn.h"

namespace trainer::deepspeed {

using base::shown;

InputError refused(const std::string& key, const json& value, const std::string& allowed) {
  return InputError(
      fmt::format("argument deepspeed: {} {} is not allowed ({})", key, shown(value), allowed));
}

bool is_auto(const json& value) { return value.is_string() && value == "auto"; }

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

const json& field(const json& object, const char* key) {
  static const json none;
  auto it = object.find(key);
  return it == object.end() ? none : *it;
}

const json& block(const json& config, const char* key) {
  const json& value = field(config, key);
  if (!value.is_null() && !value.is_object()) throw refused(key, value, "a JSON object");
  return value;
}

void check_keys(const json& object, const std::string& where,
                const std::vector<std::string>& allowed, const std::string& note) {
  for (const auto& entry : object.items()) {
    if (contains(allowed, entry.key())) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    throw InputError(fmt::format("argument deepspeed: {}.{} is not a key it takes ({}{})", where,
                                 entry.key(), list, note));
  }
}

namespace {

// One offload block: its device, cpu (where a CPU run's state is already) or none.
bool read_offload(const json& zero, const char* key) {
  const json& offload = field(zero, key);
  if (offload.is_null()) return false;
  const std::string where = std::string("zero_optimization.") + key;
  if (!offload.is_object()) throw refused(where, offload, "a JSON object");
  const json& device = field(offload, "device");
  if (device == "cpu") return true;
  if (device.is_null() || device == "none") return false;
  throw refused(where + ".device", device, "cpu or none: offloading to NVMe is not built");
}

// The zero_optimization keys that change only DeepSpeed's buckets, overlap and saving, or nothing
// on this sharding (the others DeepSpeed refuses too).
const std::vector<std::string>& harmless_zero_keys() {
  static const std::vector<std::string> harmless = {"stage",
                                                    "allgather_partitions",
                                                    "allgather_bucket_size",
                                                    "overlap_comm",
                                                    "reduce_scatter",
                                                    "reduce_bucket_size",
                                                    "contiguous_gradients",
                                                    "round_robin_gradients",
                                                    "sub_group_size",
                                                    "elastic_checkpoint",
                                                    "ignore_unused_parameters",
                                                    "legacy_stage1",
                                                    "load_from_fp32_weights",
                                                    "memory_efficient_linear",
                                                    "use_multi_rank_bucket_allreduce",
                                                    "stage3_prefetch_bucket_size",
                                                    "stage3_param_persistence_threshold",
                                                    "stage3_model_persistence_threshold",
                                                    "stage3_max_live_parameters",
                                                    "stage3_max_reuse_distance",
                                                    "stage3_gather_16bit_weights_on_model_save",
                                                    "stage3_gather_fp16_weights_on_model_save",
                                                    "stage3_module_granularity_threshold",
                                                    "module_granularity_threshold",
                                                    "log_trace_cache_warnings",
                                                    "offload_param",
                                                    "offload_optimizer",
                                                    "cpu_offload",
                                                    "cpu_offload_params",
                                                    "cpu_offload_use_pin_memory",
                                                    "zero_hpz_partition_size",
                                                    "zero_quantized_weights",
                                                    "zero_quantized_nontrainable_weights",
                                                    "zero_quantized_gradients",
                                                    "mics_shard_size",
                                                    "mics_hierarchical_params_gather"};
  return harmless;
}

// ZeRO++'s quantization and secondary partitions and MiCS: refused unless off.
void refuse_zero_plus_plus(const json& zero) {
  for (const char* key : {"zero_quantized_weights", "zero_quantized_nontrainable_weights",
                          "zero_quantized_gradients", "mics_hierarchical_params_gather"}) {
    const json& value = field(zero, key);
    if (!value.is_null() && value != false)
      throw refused(std::string("zero_optimization.") + key, value,
                    "false: ZeRO++ and MiCS are not built");
  }
  const json& hpz = field(zero, "zero_hpz_partition_size");
  if (!hpz.is_null() && hpz != 1)
    throw refused("zero_optimization.zero_hpz_partition_size", hpz,
                  "1: ZeRO++'s secondary partitions within a node are not built");
  const json& mics = field(zero, "mics_shard_size");
  if (!mics.is_null() && !(mics.is_number() && mics.get<double>() <= 0))
    throw refused("zero_optimization.mics_shard_size", mics, "-1: MiCS is not built");
}

// offload_param, offload_optimizer and the older cpu_offload keys: whether the state goes to
// the CPU.
bool read_offloads(const json& zero) {
  // Both read (and checked), whatever the first says.
  const bool offload_param = read_offload(zero, "offload_param");
  bool offload = read_offload(zero, "offload_optimizer") || offload_param;
  for (const char* key : {"cpu_offload", "cpu_offload_params"}) {
    const json& value = field(zero, key);
    if (value.is_null()) continue;
    if (!value.is_boolean())
      throw refused(std::string("zero_optimization.") + key, value, "true or false");
    offload = offload || value.get<bool>();
  }
  return offload;
}

}  // namespace

void read_zero(const json& config, DeepSpeedPlan& plan) {
  const json& zero = block(config, "zero_optimization");
  if (zero.is_null()) return;
  const json& stage = field(zero, "stage");
  if (!stage.is_null()) {
    const auto whole = base::whole_number(stage);
    if (!whole || *whole < 0 || *whole > 3)
      throw refused("zero_optimization.stage", stage, "0, 1, 2 or 3");
    plan.stage = static_cast<int>(*whole);
  }
  check_keys(zero, "zero_optimization", harmless_zero_keys(), "; DeepSpeed refuses it too");
  refuse_zero_plus_plus(zero);
  const bool offload = read_offloads(zero);
  if (plan.stage == 0) return;
  FsdpPlan fsdp;
  fsdp.strategy = plan.stage == 1   ? "shard_optimizer"
                  : plan.stage == 2 ? "shard_grad_op"
                                    : "full_shard";
  // ZeRO-3 gathers a module's parameters as it runs: a unit per block.
  fsdp.auto_wrap = plan.stage == 3;
  fsdp.offload = offload;
  plan.fsdp = fsdp;
}

void read_features(const json& config) {
  static const std::vector<std::string> enabled_blocks = {"amp",
                                                          "flops_profiler",
                                                          "tensorboard",
                                                          "wandb",
                                                          "csv_monitor",
                                                          "comet",
                                                          "comms_logger",
                                                          "elasticity",
                                                          "autotuning",
                                                          "curriculum_learning",
                                                          "data_efficiency",
                                                          "quantize_training",
                                                          "nebula",
                                                          "eigenvalue",
                                                          "progressive_layer_drop",
                                                          "hybrid_engine",
                                                          "torch_autocast",
                                                          "compile",
                                                          "sparse_attention",
                                                          "compression_training"};
  static const std::vector<std::string> harmless = {"train_batch_size",
                                                    "train_micro_batch_size_per_gpu",
                                                    "gradient_accumulation_steps",
                                                    "gradient_clipping",
                                                    "optimizer",
                                                    "scheduler",
                                                    "fp16",
                                                    "bf16",
                                                    "bfloat16",
                                                    "zero_optimization",
                                                    "steps_per_print",
                                                    "wall_clock_breakdown",
                                                    "memory_breakdown",
                                                    "dump_state",
                                                    "zero_allow_untested_optimizer",
                                                    "zero_force_ds_cpu_optimizer",
                                                    "prescale_gradients",
                                                    "gradient_predivide_factor",
                                                    "checkpoint",
                                                    "aio",
                                                    "activation_checkpointing",
                                                    "pipeline",
                                                    "disable_allgather",
                                                    "sparse_gradients",
                                                    "communication_data_type",
                                                    "seq_parallel_communication_data_type",
                                                    "data_types",
                                                    "load_universal_checkpoint",
                                                    "use_data_before_expert_parallelism"};
  for (const auto& [key, value] : config.items()) {
    if (contains(enabled_blocks, key)) {
      const bool off = value.is_object() && field(value, "enabled") == false;
      const bool defaults_off = value.is_object() && !value.contains("enabled") &&
                                key != "sparse_attention" && key != "compression_training";
      if (!off && !defaults_off) throw refused(key, value, "{\"enabled\": false}: not built");
    } else if (key == "sparse_gradients") {
      if (value != false) throw refused(key, value, "false: sparse gradients are not built");
    } else if (key == "communication_data_type" || key == "seq_parallel_communication_data_type") {
      if (!value.is_null() && value != "fp32")
        throw refused(key, value, "null or \"fp32\": the gradients are reduced in float32");
    } else if (key == "data_types") {
      const json& accum = value.is_object() ? field(value, "grad_accum_dtype") : value;
      if (!accum.is_null() && accum != "fp32")
        throw refused("data_types.grad_accum_dtype", accum,
                      "null or \"fp32\": gradients accumulate in float32");
    } else if (!contains(harmless, key)) {
      // Once a process: the config is read again wherever the arguments are.
      base::warn_once(fmt::format(
          "argument deepspeed: {} is not a key DeepSpeed reads; ignored, as DeepSpeed ignores it",
          key));
    }
  }
}

}  // namespace trainer::deepspeed

// What train() builds before its loop: the Accelerator's options from the arguments, the optimizer
// optim names with Transformers' weight-decay grouping, and the learning-rate schedule.
#include <set>

#include <torch/torch.h>

#include "lib/base/text.h"
#include "lib/base/warn.h"
#include "lib/optim/optimizers.h"
#include "lib/optim/schedules.h"
#include "trainer/trainer.h"

namespace trainer {
namespace {

// Transformers' weight-decay grouping: no decay on biases (and norm layers' weights, which
// LibTorch names *.weight under a norm module; BasicNet has none).
std::vector<optim::ParamGroup> parameter_groups(const torch::nn::Module& model,
                                                const TrainingArguments& args) {
  std::vector<torch::Tensor> decay, no_decay;
  // Transformers leaves out the parameters of layer norms (found by their type), besides biases
  // and names that say norm.
  std::set<const void*> layer_norm;
  for (const auto& module : model.modules(/*include_self=*/true)) {
    if (!module->as<torch::nn::LayerNorm>() && !module->as<torch::nn::GroupNorm>()) continue;
    for (const auto& p : module->parameters(/*recurse=*/false))
      layer_norm.insert(p.unsafeGetTensorImpl());
  }
  for (const auto& item : model.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const std::string& name = item.key();
    bool is_bias = base::ends_with(name, "bias");
    // GPT-2's names for its layer norms: ln_1, ln_2, ln_f.
    bool is_ln = name.rfind("ln_", 0) == 0 || name.find(".ln_") != std::string::npos;
    bool is_norm = name.find("norm") != std::string::npos || is_ln ||
                   layer_norm.count(item.value().unsafeGetTensorImpl()) > 0;
    (is_bias || is_norm ? no_decay : decay).push_back(item.value());
  }
  std::vector<optim::ParamGroup> groups;
  if (!decay.empty()) groups.push_back({decay, args.weight_decay()});
  if (!no_decay.empty()) groups.push_back({no_decay, 0.0});
  return groups;
}

}  // namespace

AcceleratorOptions accelerator_options(const TrainingArguments& args) {
  DistributedDataParallelKwargs ddp;
  if (args.ddp_bucket_cap_mb()) ddp.bucket_cap_mb = static_cast<double>(*args.ddp_bucket_cap_mb());
  ddp.find_unused_parameters = args.ddp_find_unused_parameters();
  ddp.broadcast_buffers = args.ddp_broadcast_buffers();
  ddp.static_graph = args.ddp_static_graph();
  std::optional<FullyShardedDataParallelPlugin> fsdp;
  if (auto plan = args.fsdp_plan()) {
    FullyShardedDataParallelPlugin o;
    o.strategy = plan->strategy == "full_shard"      ? ShardingStrategy::kFullShard
                 : plan->strategy == "shard_grad_op" ? ShardingStrategy::kShardGradOp
                                                     : ShardingStrategy::kShardOptimizer;
    // auto_wrap: every block a unit, or those of the named classes, or those of at least
    // min_num_params parameters.
    o.wrap_blocks = plan->auto_wrap && plan->layer_classes.empty() && plan->min_num_params == 0;
    o.wrap_classes = plan->layer_classes;
    o.min_num_params = plan->min_num_params;
    o.offload = plan->offload;
    o.backward_prefetch = plan->backward_prefetch;
    o.forward_prefetch = plan->forward_prefetch;
    o.sync_module_states = plan->sync_module_states;
    fsdp = o;
  }
  return AcceleratorOptions()
      .fsdp(fsdp)
      .mixed_precision(args.mixed_precision())
      .cpu(args.use_cpu())
      .backend(args.ddp_backend().value_or(""))
      .timeout(std::chrono::seconds(args.ddp_timeout()))
      .ddp_kwargs(ddp)
      .data_on_device(args.data_on_device());
}

optim::OptimizerChoice optimizer_choice(const TrainingArguments& args) {
  const OptimizerPlan plan = args.optimizer_plan();
  optim::OptimizerChoice choice;
  choice.name = plan.name;
  choice.lr = args.learning_rate();
  choice.adam_beta1 = args.adam_beta1();
  choice.adam_beta2 = args.adam_beta2();
  choice.adam_epsilon = args.adam_epsilon();
  choice.options = plan.options;
  return choice;
}

std::shared_ptr<torch::optim::Optimizer> Trainer::create_optimizer() {
  const OptimizerPlan plan = args_.optimizer_plan();
  auto weight_decay = plan.options.find("weight_decay");
  if (weight_decay != plan.options.end() && accelerator_->is_main_process()) {
    // Transformers passes it to the optimizer, whose two groups each set their own.
    base::warn(
        "optim_args weight_decay={} has no effect: each parameter group sets its own (weight_decay "
        "{} on weights, 0.0 on biases and norms), as in Transformers; set weight_decay instead",
        base::python_float(weight_decay->second), base::python_float(args_.weight_decay()));
  }
  optimizer_ = optim::make_optimizer(optimizer_choice(args_), parameter_groups(*model_, args_));
  return optimizer_;
}

std::shared_ptr<optim::LRScheduler> Trainer::create_scheduler(int64_t num_training_steps,
                                                              torch::optim::Optimizer& optimizer) {
  const std::string& type = args_.lr_scheduler_type();
  if (type == optim::kReduceLrOnPlateau) {
    // Transformers hands lr_scheduler_kwargs to torch as they are: mode is min unless they say.
    if (!args_.lr_scheduler_kwargs().contains("mode") && args_.best_metric_greater_is_better()) {
      base::warn_once(fmt::format(
          "reduce_lr_on_plateau cuts the rate when {} stops decreasing (torch's mode min, as in "
          "Transformers), but a greater {} is better: set lr_scheduler_kwargs {{\"mode\": "
          "\"max\"}}",
          args_.best_metric_key(), args_.best_metric_name()));
    }
    lr_scheduler_ = std::make_shared<optim::ReduceLROnPlateau>(
        optimizer, optim::parse_plateau_options(args_.lr_scheduler_kwargs()));
    return lr_scheduler_;
  }
  // The optimizer's initial rate, as Transformers reads optimizer.defaults["lr"].
  const optim::LrSchedule schedule(type, args_.lr_scheduler_kwargs(),
                                   args_.get_warmup_steps(num_training_steps), num_training_steps,
                                   args_.learning_rate());
  lr_scheduler_ = std::make_shared<optim::LambdaLR>(
      optimizer, [schedule](int64_t step) { return schedule(step); });
  return lr_scheduler_;
}

}  // namespace trainer

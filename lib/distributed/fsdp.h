// Sharded data parallel on c10d: ZeRO's three stages as PyTorch's FSDP and DeepSpeed name them.
// The model's parameters are laid out unit by unit (the root, and each wrapped block) in flat
// buffers, padded to a multiple of the world size; rank r owns chunk r of each. The optimizer sees
// only its chunk (one 1-D view per parameter it touches, as FSDP's use_orig_params), so AdamW's
// moments are sharded in every stage:
//   stage 1 (shard_optimizer): gradients all-reduced, each rank keeps its chunk;
//   stage 2 (shard_grad_op):   gradients reduce-scattered as each unit's backward ends;
//   stage 3 (full_shard):      parameters too: a unit's are all-gathered just before its forward
//                              and again before its backward, and freed after each.
// Stages 1 and 2 all-gather the updated chunks after each optimizer step. Nothing but c10d's
// collectives goes on the wire (Gloo composes reduce-scatter of an all-reduce; NCCL has its own).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/distributed/ddp.h"
#include "lib/distributed/process_group.h"
#include "lib/models/model.h"

namespace torch::autograd {
struct Node;
}

namespace trainer::dist {

enum class ShardingStrategy { kShardOptimizer, kShardGradOp, kFullShard };

struct FsdpOptions {
  ShardingStrategy strategy = ShardingStrategy::kFullShard;
  // Which of the model's blocks (Model::blocks()) are units of their own: every one
  // (wrap_blocks: auto_wrap, transformer_layer_cls_to_wrap), or those holding at least
  // min_num_params parameters. The other parameters form the root unit, gathered for the whole
  // forward and backward.
  bool wrap_blocks = false;
  int64_t min_num_params = 0;
  // Wrap the blocks of these classes (Block::class_name; InputError when the model has none).
  std::vector<std::string> wrap_classes;
  // Start the all-gather of the unit backward reaches next while this one computes (FSDP's
  // BACKWARD_PRE), and in forward the next block's (forward_prefetch).
  bool backward_prefetch = true;
  bool forward_prefetch = false;
  // Broadcast rank 0's parameters and buffers when wrapping.
  bool sync_module_states = true;
  // CPU offload of the chunks and the optimizer state: what a CPU run does anyway; on a CUDA
  // device not built (InputError).
  bool offload = false;
};

// One parameter's part of this rank's chunk: elements [begin, begin + view.numel()) of the
// flattened parameter. `view` shares the chunk's memory; it is what the optimizer updates, and
// its grad the reduced gradient of those elements.
struct LocalSlice {
  std::string name;  // the parameter's name in the wrapped model
  std::vector<int64_t> shape;
  int64_t begin = 0;
  torch::Tensor view;
  bool trainable = true;
};

class FullyShardedDataParallel : public models::ModelWrapper,
                                 public GradSync,
                                 private models::BlockHooks {
 public:
  // Wraps `module` (registered as "module") on the default process group, or alone with one
  // process. Throws InputError when a unit mixes dtypes or devices; DistError when the ranks'
  // models differ.
  FullyShardedDataParallel(std::shared_ptr<models::Model> module, FsdpOptions options);
  ~FullyShardedDataParallel() override;

  models::ModelOutput forward(const data::Batch& inputs) override;
  torch::Tensor forward(const torch::Tensor& x) override;

  models::Model& module() { return *wrapped_; }
  std::shared_ptr<models::Model> module_ptr() const { return wrapped_; }
  const FsdpOptions& options() const { return options_; }

  // Off (no_sync): backward leaves the gradients unreduced in the parameters, to be added to the
  // next synchronising backward's.
  bool require_backward_grad_sync() const override { return require_sync_; }
  void set_require_backward_grad_sync(bool sync) override { require_sync_ = sync; }

  // This rank's slice of `param` (a parameter of the wrapped model), or an undefined tensor when
  // its chunk holds none of it.
  torch::Tensor local_view(const torch::Tensor& param) const;
  const std::vector<LocalSlice>& local_slices() const { return slices_; }
  // After the optimizer changed the chunks (a step, a checkpoint loaded): stages 1 and 2
  // all-gather them into the full parameters; full sharding gathers at the next forward.
  void after_optimizer_step();
  // torch.nn.utils.clip_grad_norm_ over the sharded gradients: the global 2-norm (one all-reduce
  // of the squares' sum); the gradients scaled so that it is at most max_norm (infinity: only the
  // norm). Returns the norm before clipping.
  torch::Tensor clip_grad_norm_(double max_norm);
  // Runs f with every unit's full parameters in place (FSDP's summon_full_params), on every rank
  // or (rank0_only) on rank 0 only; then full sharding frees them again. Every rank calls it.
  void with_full_params(const std::function<void()>& f, bool rank0_only = false);

  // What this rank holds now: parameter bytes (chunks and gathered units) and gradient bytes
  // (sharded and unreduced).
  struct StateBytes {
    int64_t parameters = 0;
    int64_t gradients = 0;
  };
  StateBytes state_bytes() const;
  // The units, root first: their names ("" for the root) and parameter counts.
  std::vector<std::pair<std::string, int64_t>> units() const;

 private:
  struct Param {
    std::string name;
    torch::Tensor tensor;
    int64_t offset = 0;
    int64_t numel = 0;
    bool trainable = true;
  };
  struct Unit {
    std::string name;
    std::vector<Param> params;
    int64_t numel = 0;
    int64_t chunk = 0;        // elements per rank (numel padded to a multiple of the world size)
    torch::Tensor full;       // [chunk * world]: the parameters' storage, freed when sharded
    torch::Tensor shard;      // [chunk]: this rank's master chunk
    torch::Tensor grad_full;  // the unreduced gradients of a synchronising backward
    Pending gathering;        // a prefetched all-gather
    bool gathered = false;
    bool has_frozen = false;
    int64_t trainable = 0;  // parameters whose gradients are waited for
    int64_t grads_seen = 0;
    bool reduced = false;
    int block = -1;  // the block it wraps; -1 for the root
  };

  // Wrapping, in the constructor's order: rank 0's parameters and buffers to every rank; the
  // units (the wrapped blocks, and the root), returning which unit each block parameter joins
  // (by TensorImpl); every parameter placed in its unit; a unit's flat buffer and this rank's
  // chunk of it; the chunk's slices for the optimizer; the hooks that take each gradient.
  void sync_with_ranks();
  std::map<const void*, size_t> choose_units();
  void assign_parameters(const std::map<const void*, size_t>& owner);
  void flatten(Unit& unit);
  void add_slices(size_t unit);
  void hook_gradients(size_t unit);

  void before_block(size_t index) override;
  torch::Tensor after_block(size_t index, torch::Tensor output) override;
  void begin_forward();
  void end_forward(const std::vector<torch::Tensor>& outputs);
  void unshard(Unit& unit);
  void prefetch(Unit& unit);
  void reshard(Unit& unit);
  void pre_backward(size_t unit);
  void on_grad_ready(size_t unit, size_t param);
  // Moves a parameter's accumulated gradient into its unit's unreduced buffer.
  void take_grad(Unit& unit, Param& param);
  void reduce(Unit& unit);
  void queue_final_callback();
  void final_callback();
  // The unit of the nearest wrapped block after (step +1) or before (step -1) block `index`.
  Unit* neighbour(int index, int step);

  FsdpOptions options_;
  int world_ = 1;
  int rank_ = 0;
  std::vector<Unit> units_;      // [0] is the root
  std::vector<int> block_unit_;  // per block: its unit, or -1
  std::vector<LocalSlice> slices_;
  std::vector<size_t> slice_unit_;          // per slice: its unit
  std::vector<int64_t> slice_offset_;       // per slice: where it starts in its unit's chunk
  std::map<const void*, size_t> slice_of_;  // a parameter's TensorImpl -> its slice
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  bool require_sync_ = true;
  bool sync_ = false;  // whether the backward of the current forward reduces
  bool callback_queued_ = false;
};

}  // namespace trainer::dist

// FSDP's plugin (parse_fsdp_plan): the plans the fsdp words and fsdp_config keys make, in both
// spellings of Accelerate's keys, and the one line each bad word, key or value is refused with.
#include "lib/accelerate/fsdp_plugin.h"

#include <gtest/gtest.h>

#include "lib/base/errors.h"
#include "tests/test_util.h"

namespace trainer {
namespace fsdp_plugin_test {

using json = nlohmann::ordered_json;

std::optional<FsdpPlan> plan(const std::string& fsdp, const std::string& config = "{}") {
  return parse_fsdp_plan(fsdp, json::parse(config));
}

TEST(FsdpPlugin, NoStrategyOrNoShardIsNoPlan) {
  EXPECT_FALSE(plan(""));
  EXPECT_FALSE(plan(" \t "));
  EXPECT_FALSE(plan("no_shard"));
  // no_shard is DDP: its fsdp_config is not read.
  EXPECT_FALSE(plan("no_shard", R"({"wrap": 1})"));
}

TEST(FsdpPlugin, AStrategyAloneKeepsFsdpsDefaults) {
  const auto p = plan("full_shard");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->strategy, "full_shard");
  EXPECT_FALSE(p->auto_wrap);
  EXPECT_FALSE(p->offload);
  EXPECT_EQ(p->min_num_params, 0);
  EXPECT_TRUE(p->layer_classes.empty());
  EXPECT_TRUE(p->backward_prefetch);
  EXPECT_FALSE(p->forward_prefetch);
  EXPECT_TRUE(p->sync_module_states);
  EXPECT_FALSE(p->sharded_state_dict);
}

TEST(FsdpPlugin, WordsAreSplitOnWhiteSpaceInAnyOrder) {
  const auto p = plan(" offload\tauto_wrap  shard_grad_op ");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->strategy, "shard_grad_op");
  EXPECT_TRUE(p->auto_wrap);
  EXPECT_TRUE(p->offload);
  EXPECT_EQ(plan("shard_optimizer")->strategy, "shard_optimizer");
}

TEST(FsdpPlugin, AccelerateSpellingsAndTransformersSpellingsReadAlike) {
  // Accelerate's config file: "fsdp_" prefixes, class names separated by commas, flags as text.
  const auto a = plan("full_shard auto_wrap", R"({
      "fsdp_transformer_layer_cls_to_wrap": "GPT2Block, LlamaDecoderLayer",
      "fsdp_backward_prefetch": "NO_PREFETCH", "fsdp_forward_prefetch": "true",
      "fsdp_sync_module_states": false, "fsdp_state_dict_type": "SHARDED_STATE_DICT",
      "fsdp_offload_params": true, "fsdp_use_orig_params": true,
      "fsdp_cpu_ram_efficient_loading": "false", "fsdp_activation_checkpointing": false})");
  const auto t = plan("full_shard auto_wrap", R"({
      "transformer_layer_cls_to_wrap": ["GPT2Block", "LlamaDecoderLayer"],
      "backward_prefetch": "no_prefetch", "forward_prefetch": true,
      "sync_module_states": "false", "state_dict_type": "SHARDED_STATE_DICT",
      "offload_params": true, "limit_all_gathers": true, "xla": false})");
  for (const auto& p : {a, t}) {
    ASSERT_TRUE(p);
    EXPECT_EQ(p->layer_classes, (std::vector<std::string>{"GPT2Block", "LlamaDecoderLayer"}));
    EXPECT_FALSE(p->backward_prefetch);
    EXPECT_TRUE(p->forward_prefetch);
    EXPECT_FALSE(p->sync_module_states);
    EXPECT_TRUE(p->sharded_state_dict);
    EXPECT_TRUE(p->offload);
  }
  // min_num_params as Accelerate writes it; one key in both spellings with one value.
  const auto m = plan("shard_grad_op auto_wrap",
                      R"({"fsdp_min_num_params": 1e8, "min_num_params": 100000000,
                          "state_dict_type": "FULL_STATE_DICT"})");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->min_num_params, 100000000);
  EXPECT_FALSE(m->sharded_state_dict);
}

TEST(FsdpPlugin, BadWordsKeysAndValuesAreOneLineEach) {
  const std::vector<std::vector<std::string>> rows = {
      {"bogus", "{}",
       "argument fsdp: bogus is not allowed (allowed: full_shard, shard_grad_op, shard_optimizer, "
       "no_shard, auto_wrap, offload; hybrid_shard needs several nodes' groups, not built)"},
      {"full_shard shard_grad_op", "{}",
       "argument fsdp: full_shard and shard_grad_op are two strategies; choose one"},
      {"auto_wrap offload", "{}",
       "argument fsdp: \"auto_wrap offload\" names no strategy (add full_shard, shard_grad_op or "
       "shard_optimizer)"},
      {"", R"({"min_num_params": 10})",
       "argument fsdp_config: used only with fsdp (full_shard, shard_grad_op or "
       "shard_optimizer)"},
      {"full_shard", R"({"wrap": 1})",
       "argument fsdp_config: wrap is not a key it takes (allowed: min_num_params, "
       "transformer_layer_cls_to_wrap, backward_prefetch, forward_prefetch, limit_all_gathers, "
       "sync_module_states, use_orig_params, state_dict_type, cpu_ram_efficient_loading, "
       "offload_params, activation_checkpointing, xla)"},
      {"full_shard", R"({"fsdp_state_dict_type": "FULL_STATE_DICT",
                         "state_dict_type": "SHARDED_STATE_DICT"})",
       "argument fsdp_config: fsdp_state_dict_type \"FULL_STATE_DICT\" and state_dict_type "
       "\"SHARDED_STATE_DICT\" name one setting; give it once"},
      {"full_shard auto_wrap", R"({"min_num_params": -1})",
       "argument fsdp_config: min_num_params -1 is not allowed (an integer >= 0)"},
      {"full_shard auto_wrap", R"({"min_num_params": 2.5})",
       "argument fsdp_config: min_num_params 2.5 is not allowed (an integer >= 0)"},
      {"full_shard auto_wrap", R"({"transformer_layer_cls_to_wrap": []})",
       "argument fsdp_config: transformer_layer_cls_to_wrap [] is not allowed (a class name or a "
       "list of them)"},
      {"full_shard auto_wrap", R"({"transformer_layer_cls_to_wrap": " , "})",
       "argument fsdp_config: transformer_layer_cls_to_wrap \" , \" is not allowed (a class name "
       "or a list of them)"},
      {"full_shard", R"({"backward_prefetch": "BACKWARD_POST"})",
       "argument fsdp_config: backward_prefetch \"BACKWARD_POST\" is not allowed (backward_pre or "
       "no_prefetch; backward_post is not built)"},
      {"full_shard", R"({"fsdp_forward_prefetch": "yes"})",
       "argument fsdp_config: fsdp_forward_prefetch \"yes\" is not allowed (true or false)"},
      {"full_shard", R"({"state_dict_type": "LOCAL_STATE_DICT"})",
       "argument fsdp_config: state_dict_type \"LOCAL_STATE_DICT\" is not allowed "
       "(FULL_STATE_DICT or SHARDED_STATE_DICT)"},
      {"full_shard", R"({"activation_checkpointing": true})",
       "argument fsdp_config: activation_checkpointing true is not allowed (false: not built)"},
      {"full_shard", R"({"min_num_params": 100})",
       "argument fsdp_config: min_num_params chooses auto_wrap's units; add auto_wrap to fsdp "
       "(\"full_shard auto_wrap\")"},
      {"shard_grad_op", R"({"transformer_layer_cls_to_wrap": "Block"})",
       "argument fsdp_config: transformer_layer_cls_to_wrap chooses auto_wrap's units; add "
       "auto_wrap to fsdp (\"shard_grad_op auto_wrap\")"},
      {"full_shard auto_wrap", R"({"min_num_params": 100, "transformer_layer_cls_to_wrap": "B"})",
       "argument fsdp_config: min_num_params and transformer_layer_cls_to_wrap are mutually "
       "exclusive; give one"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row[0] + " " + row[1]);
    const std::string message = testing::input_error_of([&] { plan(row[0], row[1]); });
    EXPECT_EQ(message, row[2]);
  }
}

}  // namespace fsdp_plugin_test
}  // namespace trainer

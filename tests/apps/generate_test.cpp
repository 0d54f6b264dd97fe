// `trainer generate` through the real binary: a run folder holding a gpt's training_args.json
// and model.safetensors samples the same bytes for the same seed, continues the prompt, and bad
// input is one line and exit code 2.
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/io/safetensors.h"
#include "lib/models/gpt.h"
#include "tests/test_util.h"

namespace trainer {
namespace generate_test {

using testing::run;
using testing::TempDir;

// A run folder as `trainer train` leaves it for a small gpt (random weights).
class Generate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    models::GptConfig c;
    c.block_size = 16;
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 32;
    torch::manual_seed(3);
    models::Gpt model(c);
    io::save_safetensors(dir_->file("model.safetensors"), io::state_dict(model));
    nlohmann::json args = {{"model_name", "gpt"},
                           {"model_config", {{"n_layer", 2}, {"n_head", 2}, {"n_embd", 32}}},
                           {"dataset_name", "text"},
                           {"dataset_config", {{"context_length", 16}}}};
    std::ofstream(dir_->file("training_args.json")) << args.dump(2);
  }
  static void TearDownTestSuite() { delete dir_; }
  static testing::ProcessResult generate(const std::string& args) {
    return run(testing::kTrainerBin + " generate " + dir_->path() + " " + args);
  }
  static TempDir* dir_;
};
TempDir* Generate::dir_ = nullptr;

TEST_F(Generate, TheSameSeedSamplesTheSameBytesAfterThePrompt) {
  auto a = generate("--prompt 'Hello, ' --max_new_tokens 40 --seed 1");
  auto b = generate("--prompt 'Hello, ' --max_new_tokens 40 --seed 1");
  auto c = generate("--prompt 'Hello, ' --max_new_tokens 40 --seed 2");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.err, "");
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_EQ(a.out.rfind("Hello, ", 0), 0u) << a.out;
  // The prompt, 40 bytes, and a newline when the sample does not end with one.
  EXPECT_GE(a.out.size(), 7u + 40u);
  EXPECT_LE(a.out.size(), 7u + 40u + 1u);
  // top_k 1 is greedy: any seed gives the same text.
  auto g1 = generate("--prompt abc --max_new_tokens 10 --top_k 1 --seed 1");
  auto g2 = generate("--prompt abc --max_new_tokens 10 --top_k 1 --seed 9");
  ASSERT_EQ(g1.exit_code, 0) << g1.err;
  EXPECT_EQ(g1.out, g2.out);
  // A prompt longer than the context (16) is cropped to its last 15 bytes as context.
  auto long_prompt = generate("--prompt " + std::string(50, 'x') + " --max_new_tokens 5");
  ASSERT_EQ(long_prompt.exit_code, 0) << long_prompt.err;
  EXPECT_EQ(long_prompt.out.rfind(std::string(50, 'x'), 0), 0u);
  // No prompt: the sample starts after a newline that is not printed.
  auto bare = generate("--max_new_tokens 12 --seed 5");
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_GE(bare.out.size(), 12u);
}

TEST_F(Generate, BadInputIsOneLineAndExitCodeTwo) {
  auto expect_bad = [](const testing::ProcessResult& r, const std::string& part) {
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
    EXPECT_EQ(testing::lines_of(r.err).size(), 1u) << r.err;
  };
  expect_bad(generate("--temperature 0"), "--temperature 0 is not allowed");
  expect_bad(generate("--temperature -1"), "--temperature -1 is not allowed");
  expect_bad(generate("--top_p 0"), "--top_p 0 is not allowed (a number in (0, 1]");
  expect_bad(generate("--do_sample maybe"), "--do_sample maybe is not allowed (true or false)");
  expect_bad(generate("--top_k -1"), "--top_k -1 is not allowed");
  expect_bad(generate("--max_new_tokens x"), "--max_new_tokens x is not allowed");
  expect_bad(run(testing::kTrainerBin + " generate " + dir_->file("missing")), "is not a folder");
  expect_bad(run(testing::kTrainerBin + " generate"), "needs OUTPUT_DIR");
  TempDir other;
  expect_bad(run(testing::kTrainerBin + " generate " + other.path()),
             "training_args.json does not exist");
  std::ofstream(other.file("training_args.json")) << R"({"model_name": "basic_net"})";
  std::ofstream(other.file("model.safetensors")) << "x";
  expect_bad(run(testing::kTrainerBin + " generate " + other.path()),
             "is a run of model_name 'basic_net', not gpt");
}

}  // namespace generate_test
}  // namespace trainer

// safetensors: the byte layout of the format, a round trip of every dtype we write, state-dict
// loading with clear mismatches, and corrupt files as InputError.
#include "lib/io/safetensors.h"

#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/models/models.h"
#include "tests/test_util.h"

namespace trainer::io {
namespace safetensors_test {

using testing::TempDir;

TEST(Safetensors, ByteLayoutIsTheFormats) {
  TempDir dir;
  save_safetensors(dir.file("a.safetensors"), {{"w", torch::tensor({1.0f, 2.0f})}});
  std::string bytes = testing::slurp(dir.file("a.safetensors"));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  ASSERT_EQ(bytes.size(), 8 + n + 8);
  EXPECT_EQ(n % 8, 0u);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["w"]["dtype"], "F32");
  EXPECT_EQ(header["w"]["shape"], nlohmann::json({2}));
  EXPECT_EQ(header["w"]["data_offsets"], nlohmann::json({0, 8}));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  float values[2];
  std::memcpy(values, bytes.data() + 8 + n, 8);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], 2.0f);
}

TEST(Safetensors, RoundTripKeepsNamesOrderDtypesAndValues) {
  TempDir dir;
  NamedTensors tensors = {{"b", torch::randn({3, 4})},
                          {"a", torch::arange(6, torch::kLong).reshape({2, 3})},
                          {"c", torch::randn({2}).to(torch::kDouble)},
                          {"d", torch::tensor({1, 0, 1}).to(torch::kBool)},
                          {"e", torch::randn({5}).to(torch::kBFloat16)}};
  save_safetensors(dir.file("t.safetensors"), tensors);
  NamedTensors loaded = load_safetensors(dir.file("t.safetensors"));
  ASSERT_EQ(loaded.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(loaded[i].first, tensors[i].first);
    EXPECT_EQ(loaded[i].second.scalar_type(), tensors[i].second.scalar_type());
    EXPECT_TRUE(torch::equal(loaded[i].second, tensors[i].second));
  }
}

TEST(Safetensors, StateDictRoundTripIntoAFreshModel) {
  TempDir dir;
  auto a = models::make_model("basic_net");
  auto b = models::make_model("basic_net");
  save_safetensors(dir.file("m.safetensors"), state_dict(*a));
  load_state_dict(*b, load_safetensors(dir.file("m.safetensors")), "m");
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& item : pa) EXPECT_TRUE(torch::equal(item.value(), pb[item.key()]));
}

// This process's resident pages of mapped files, in KiB.
int64_t rss_file_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8));
  }
  return -1;
}

TEST(Safetensors, AMappedTensorsPagesLeaveMemoryAndReadBackTheSame) {
  TempDir dir;
  torch::manual_seed(3);
  const torch::Tensor big = torch::randn({4, 1 << 20});  // 16 MiB
  save_safetensors(dir.file("m.safetensors"), {{"small", torch::ones({3})}, {"big", big}});
  MappedSafetensors mapped = map_safetensors(dir.file("m.safetensors"));
  const torch::Tensor& in_file = mapped.tensors[1].second;
  const double sum = in_file.sum().item<double>();  // every page read: resident
  const int64_t before = rss_file_kib();
  release_mapped_pages(in_file);
  const int64_t after = rss_file_kib();
  EXPECT_GT(before - after, 15 * 1024) << before << " -> " << after;
  EXPECT_TRUE(torch::equal(in_file, big));  // mapped back from the file
  EXPECT_EQ(in_file.sum().item<double>(), sum);
  // A tensor of its own memory is left alone.
  torch::Tensor own = big.clone();
  release_mapped_pages(own);
  EXPECT_TRUE(torch::equal(own, big));
}

TEST(Safetensors, AllFiniteFindsEveryNanAndInfinityInEveryType) {
  for (auto type : {torch::kFloat, torch::kBFloat16, torch::kHalf, torch::kDouble}) {
    torch::Tensor t = torch::linspace(-1e4, 1e4, 1001).to(type);
    EXPECT_TRUE(all_finite(t)) << type;
    EXPECT_TRUE(all_finite(t.t().unsqueeze(0).expand({3, 1001})));  // not contiguous
    for (double bad : {std::nan(""), double{INFINITY}, -double{INFINITY}}) {
      for (int64_t at : {0, 517, 1000}) {
        torch::Tensor copy = t.clone();
        copy[at] = bad;
        EXPECT_FALSE(all_finite(copy)) << type << " " << bad << " at " << at;
        EXPECT_FALSE(all_finite(copy.view({7, 143}).t())) << type;  // not contiguous
      }
    }
  }
  // The largest finite values are finite.
  EXPECT_TRUE(all_finite(torch::tensor({65504.0}).to(torch::kHalf)));
  EXPECT_TRUE(all_finite(torch::tensor({3.38e38}).to(torch::kBFloat16)));
  EXPECT_TRUE(all_finite(torch::tensor({3.4028234e38f})));
}

TEST(Safetensors, StateDictMismatchesAreNamed) {
  auto model = models::make_model("basic_net");
  NamedTensors tensors = state_dict(*model);
  NamedTensors wrong_shape = tensors;
  wrong_shape[0].second = torch::zeros({3});
  EXPECT_THROW(
      {
        try {
          load_state_dict(*model, wrong_shape, "x.safetensors");
        } catch (const InputError& e) {
          EXPECT_STREQ(
              e.what(),
              "x.safetensors: tensor 'conv1.weight' has shape 3, the model expects 32x1x3x3");
          throw;
        }
      },
      InputError);
  NamedTensors missing(tensors.begin() + 1, tensors.end());
  EXPECT_THROW(load_state_dict(*model, missing, "x"), InputError);
  NamedTensors extra = tensors;
  extra.emplace_back("fc3.weight", torch::zeros({1}));
  EXPECT_THROW(load_state_dict(*model, extra, "x"), InputError);
}

TEST(Safetensors, CorruptFilesAreInputErrors) {
  TempDir dir;
  auto write = [&](const std::string& bytes) {
    std::ofstream(dir.file("bad"), std::ios::binary) << bytes;
    return dir.file("bad");
  };
  auto message = [&](const std::string& bytes) {
    try {
      load_safetensors(write(bytes));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("abc").find("shorter than the 8-byte header length"), std::string::npos);
  EXPECT_NE(message(std::string("\xff\0\0\0\0\0\0\0{}", 10)).find("runs past the end"),
            std::string::npos);
  EXPECT_NE(message(std::string("\x02\0\0\0\0\0\0\0{x", 10)).find("not valid JSON"),
            std::string::npos);
  std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  std::string prefix(8, '\0');
  prefix[0] = static_cast<char>(header.size());
  EXPECT_NE(message(prefix + header + std::string(8, '\0')).find("outside the 8 bytes of data"),
            std::string::npos);
  header = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})";
  prefix[0] = static_cast<char>(header.size());
  EXPECT_NE(message(prefix + header + std::string(16, '\0')).find("its shape needs 12"),
            std::string::npos);
  header = R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})";
  prefix[0] = static_cast<char>(header.size());
  EXPECT_NE(message(prefix + header + std::string(1, '\0')).find("unknown dtype 'Q4'"),
            std::string::npos);
}

// Headers that the parser once took, or that reached undefined behaviour before a check.
TEST(Safetensors, HeadersBeyondTheChecksAreInputErrors) {
  TempDir dir;
  auto message = [&](const std::string& header, size_t data_bytes) {
    std::string prefix(8, '\0');
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    std::ofstream(dir.file("bad"), std::ios::binary)
        << prefix << header << std::string(data_bytes, '\0');
    for (bool mapped : {false, true}) {
      try {
        if (mapped) {
          map_safetensors(dir.file("bad"));
        } else {
          load_safetensors(dir.file("bad"));
        }
      } catch (const InputError& e) {
        if (mapped) return std::string(e.what());
      }
    }
    return std::string("no error");
  };
  // The running product of the shape overflowed int64_t (undefined behaviour) before its 0.
  EXPECT_NE(
      message(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", 0)
          .find("whose size overflows 64 bits"),
      std::string::npos);
  // ... or wrapped to the size of the data.
  EXPECT_NE(
      message(R"({"w":{"dtype":"I64","shape":[2305843009213693953],"data_offsets":[0,8]}})", 8)
          .find("overflows"),
      std::string::npos);
  // A dimension of 1e300 became an integer through an undefined conversion.
  EXPECT_NE(message(R"({"w":{"dtype":"U8","shape":[1e300],"data_offsets":[0,1]}})", 1)
                .find("shape that is not a list of integers"),
            std::string::npos);
  EXPECT_NE(message(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0.5,1]}})", 1)
                .find("data_offsets that are not non-negative integers"),
            std::string::npos);
  EXPECT_NE(
      message(R"({"w":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,1]}})", 1)
          .find("more than 2^63 - 1"),
      std::string::npos);
  EXPECT_NE(message(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"I16","shape":[2],"data_offsets":[2,6]}})",
                    6)
                .find("tensors 'a' and 'b' overlap"),
            std::string::npos);
  EXPECT_NE(
      message(R"({"__metadata__":{"format":5}})", 0).find("__metadata__ key 'format' holds 5"),
      std::string::npos);
  EXPECT_NE(message(R"({"__metadata__":"pt"})", 0).find("__metadata__ is not a JSON object"),
            std::string::npos);
  // The tensors cover the data section, as the safetensors library checks: bytes inserted
  // between two tensors, before the first or appended after the last are refused.
  EXPECT_NE(message(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                    R"("b":{"dtype":"U8","shape":[2],"data_offsets":[5,7]}})",
                    7)
                .find("3 bytes lie between tensors 'a' and 'b'"),
            std::string::npos);
  EXPECT_NE(message(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", 3)
                .find("1 bytes lie before the first tensor 'a'"),
            std::string::npos);
  EXPECT_NE(message(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 10)
                .find("8 bytes lie past the last tensor 'a'"),
            std::string::npos);
  EXPECT_NE(message(R"({"__metadata__":{}})", 4).find("4 bytes lie past the last tensor"),
            std::string::npos);
  // Zero-size tensors share an offset with their neighbours without overlapping them.
  EXPECT_EQ(message(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
                    R"("b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                    1),
            "no error");
}

}  // namespace safetensors_test
}  // namespace trainer::io

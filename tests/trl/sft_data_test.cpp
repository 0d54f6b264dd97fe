// TRL's SFT data preparation (trl/sft_data.h): the rows of every shape, mask, truncation and
// packing equal to those TRL 1.16's SFTTrainer prepares on the fixtures of sft_fixtures.py
// (tests/reference/scripts/sft_rows_reference.py), pack_rows on TRL's own examples and across
// map()'s batches of 1000, and the files of a data set as `datasets` picks and types them.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/files.h"
#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/test_util.h"
#include "trl/sft_data.h"

namespace trainer {
namespace sft_data_test {

using Json = nlohmann::ordered_json;
using trl::SftRow;

// TRL's prepared rows on those fixtures (cases.json) and its pack_dataset (pack.json).
std::string sft_rows_dir() { return testing::reference_dir("sft_rows"); }

std::vector<int32_t> ints(const Json& value) { return value.get<std::vector<int32_t>>(); }

// Rows from lists of input_ids (labels equal to them).
std::vector<SftRow> rows_of(const std::vector<std::vector<int32_t>>& ids) {
  std::vector<SftRow> rows;
  for (const auto& row : ids) rows.push_back({row, row, {}});
  return rows;
}

std::vector<std::vector<int32_t>> ids_of(const std::vector<SftRow>& rows) {
  std::vector<std::vector<int32_t>> out;
  for (const SftRow& row : rows) out.push_back(row.input_ids);
  return out;
}

std::vector<std::vector<int32_t>> seq_lengths_of(const std::vector<SftRow>& rows) {
  std::vector<std::vector<int32_t>> out;
  for (const SftRow& row : rows) out.push_back(row.seq_lengths);
  return out;
}

// pack_dataset's docstring: [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10], [11]] at seq_length 4.
TEST(SftPacking, TrlsDocstringExamples) {
  const std::vector<std::vector<int32_t>> ids = {{1, 2, 3, 4, 5}, {6, 7}, {8, 9, 10}, {11}};
  const auto bfd = trl::pack_rows(rows_of(ids), 4, "bfd");
  EXPECT_EQ(ids_of(bfd), (std::vector<std::vector<int32_t>>{{1, 2, 3, 4}, {8, 9, 10, 11}, {6, 7}}));
  EXPECT_EQ(seq_lengths_of(bfd), (std::vector<std::vector<int32_t>>{{4}, {3, 1}, {2}}));
  const auto split = trl::pack_rows(rows_of(ids), 4, "bfd_split");
  EXPECT_EQ(ids_of(split),
            (std::vector<std::vector<int32_t>>{{1, 2, 3, 4}, {8, 9, 10, 5}, {6, 7, 11}}));
  EXPECT_EQ(seq_lengths_of(split), (std::vector<std::vector<int32_t>>{{4}, {3, 1}, {2, 1}}));
  const auto wrapped = trl::pack_rows(rows_of(ids), 4, "wrapped");
  EXPECT_EQ(ids_of(wrapped),
            (std::vector<std::vector<int32_t>>{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11}}));
  EXPECT_EQ(seq_lengths_of(wrapped), (std::vector<std::vector<int32_t>>{{}, {}, {}}));
  // Labels travel with their tokens.
  std::vector<SftRow> labelled = rows_of(ids);
  labelled[0].labels = {-100, -100, 3, 4, 5};
  EXPECT_EQ(trl::pack_rows(labelled, 4, "bfd")[0].labels, (std::vector<int32_t>{-100, -100, 3, 4}));
}

// Each batch of 1000 rows is packed on its own: 1001 one-token rows at seq_length 4 make 250 full
// rows, then the 1001st alone; wrapped likewise; an empty row packs to nothing.
TEST(SftPacking, EachBatchOf1000Alone) {
  std::vector<std::vector<int32_t>> ids;
  for (int32_t i = 0; i < 1001; ++i) ids.push_back({i});
  for (const char* strategy : {"bfd", "bfd_split", "wrapped"}) {
    const auto packed = trl::pack_rows(rows_of(ids), 4, strategy);
    ASSERT_EQ(packed.size(), 251u) << strategy;
    EXPECT_EQ(packed[0].input_ids, (std::vector<int32_t>{0, 1, 2, 3})) << strategy;
    EXPECT_EQ(packed[249].input_ids, (std::vector<int32_t>{996, 997, 998, 999})) << strategy;
    EXPECT_EQ(packed[250].input_ids, (std::vector<int32_t>{1000})) << strategy;
  }
  EXPECT_TRUE(trl::pack_rows(rows_of({{}, {}}), 4, "bfd").empty());
  EXPECT_EQ(testing::input_error_of([] { trl::pack_rows({}, 4, "best"); }),
            "packing_strategy 'best' is not one of bfd, bfd_split, wrapped (TRL's pack_dataset)");
  EXPECT_THROW(trl::pack_rows(rows_of({{1}}), 0, "bfd"), std::invalid_argument);
}

// TRL's pack_dataset over 2500 rows (lengths 0 to 150, three batches), every strategy.
TEST(SftPacking, EqualsTrlsPackDatasetOver2500Rows) {
  const std::string dir = sft_rows_dir();
  ASSERT_FALSE(dir.empty());
  const Json pack = Json::parse(testing::slurp(dir + "/pack.json"));
  std::vector<SftRow> rows;
  for (size_t i = 0; i < pack["rows"]["input_ids"].size(); ++i) {
    rows.push_back({ints(pack["rows"]["input_ids"][i]), ints(pack["rows"]["labels"][i]), {}});
  }
  ASSERT_EQ(rows.size(), 2500u);
  for (const char* strategy : {"bfd", "bfd_split", "wrapped"}) {
    const auto packed = trl::pack_rows(rows, pack["seq_length"].get<int64_t>(), strategy);
    const Json& expected = pack[strategy];
    ASSERT_EQ(packed.size(), expected["input_ids"].size()) << strategy;
    size_t equal = 0, tokens = 0;
    for (size_t i = 0; i < packed.size(); ++i) {
      const bool same = packed[i].input_ids == ints(expected["input_ids"][i]) &&
                        packed[i].labels == ints(expected["labels"][i]) &&
                        (expected.contains("seq_lengths")
                             ? packed[i].seq_lengths == ints(expected["seq_lengths"][i])
                             : packed[i].seq_lengths.empty());
      EXPECT_TRUE(same) << strategy << " row " << i;
      equal += same;
      tokens += packed[i].input_ids.size();
    }
    std::printf("pack_rows %s: %zu of %zu rows (%zu tokens) equal to TRL's pack_dataset\n",
                strategy, equal, packed.size(), tokens);
  }
}

// SftDataOptions from a case's SFTConfig fields.
trl::SftDataOptions options_of(const Json& fields) {
  trl::SftDataOptions o;
  for (const auto& [key, value] : fields.items()) {
    if (key == "assistant_only_loss") {
      o.assistant_only_loss = value.get<bool>();
    } else if (key == "completion_only_loss") {
      o.completion_only_loss = value.get<bool>();
    } else if (key == "max_length") {
      o.max_length = value.get<int64_t>();
    } else if (key == "truncation_mode") {
      o.truncation_mode = value.get<std::string>();
    } else if (key == "packing") {
      o.packing = value.get<bool>();
    } else if (key == "packing_strategy") {
      o.packing_strategy = value.get<std::string>();
    } else {
      ADD_FAILURE() << "unknown option " << key;
    }
  }
  return o;
}

TEST(SftParity, RowsEqualTrlsSftTrainer) {
  const std::string dir = sft_rows_dir();
  ASSERT_FALSE(dir.empty());
  const std::string fixtures = testing::sft_fixtures_dir();
  const Json cases = Json::parse(testing::slurp(dir + "/cases.json"));
  ASSERT_EQ(cases.size(), 16u);
  for (const Json& c : cases) {
    const std::string name = c["name"];
    const std::string model = fixtures + "/" + c["model"].get<std::string>();
    const std::string data = c["data"].get<std::string>();
    const std::string path =
        data.rfind("inputs/", 0) == 0 ? dir + "/" + data : fixtures + "/data/" + data;
    const trl::SftDataOptions options = options_of(c["options"]);
    const auto tokenizer = tokenizers::Tokenizer::load(model);
    const auto chat = tokenizers::ChatTemplate::from_dir(model);
    const trl::SftData prepared = trl::prepare_sft_dataset(trl::read_trl_records(path), tokenizer,
                                                           chat ? &*chat : nullptr, options, path);
    EXPECT_EQ(prepared.examples, c["examples"].get<int64_t>()) << name;
    const Json& expected = c["rows"];
    ASSERT_EQ(prepared.rows.size(), expected.size()) << name;
    size_t equal = 0, tokens = 0, masked = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const SftRow& row = prepared.rows[i];
      EXPECT_EQ(row.input_ids, ints(expected[i]["input_ids"])) << name << " row " << i;
      EXPECT_EQ(row.labels, ints(expected[i]["labels"])) << name << " row " << i;
      const std::vector<int32_t> seq_lengths = expected[i].contains("seq_lengths")
                                                   ? ints(expected[i]["seq_lengths"])
                                                   : std::vector<int32_t>{};
      EXPECT_EQ(row.seq_lengths, seq_lengths) << name << " row " << i;
      equal += row.input_ids == ints(expected[i]["input_ids"]) &&
               row.labels == ints(expected[i]["labels"]) && row.seq_lengths == seq_lengths;
      tokens += row.input_ids.size();
      for (int32_t label : row.labels) masked += label == -100;
    }
    EXPECT_EQ(prepared.tokens, static_cast<int64_t>(tokens)) << name;
    if (!options.packing) {
      EXPECT_EQ(prepared.dropped, prepared.examples - static_cast<int64_t>(expected.size()))
          << name;
    }
    // Rows longer than max_length: those of the same data prepared with the default 1024 (which
    // none reaches) longer than it.
    int64_t longer = 0;
    if (c["options"].contains("max_length")) {
      for (const Json& other : cases) {
        if (other["model"] != c["model"] || other["data"] != c["data"] ||
            other["options"].contains("max_length")) {
          continue;
        }
        for (const Json& row : other["rows"]) {
          longer += static_cast<int64_t>(row["input_ids"].size()) > *options.max_length;
        }
        break;
      }
    }
    EXPECT_EQ(prepared.truncated, longer) << name;
    std::printf(
        "%s (%s): %zu of %zu rows equal to TRL's (%zu tokens, %zu without loss; %lld records, "
        "%lld longer than max_length, %lld dropped)\n",
        name.c_str(), shape_name(prepared.shape), equal, expected.size(), tokens, masked,
        static_cast<long long>(prepared.examples), static_cast<long long>(prepared.truncated),
        static_cast<long long>(prepared.dropped));
  }
}

}  // namespace sft_data_test
}  // namespace trainer

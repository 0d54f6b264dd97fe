// The files of a TRL trainer's data: a .json/.jsonl file's records as `datasets` hands them to
// TRL, and which files of a folder load_dataset(folder) takes as its train and test splits.
#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/text.h"
#include "lib/data/json_columns.h"
#include "lib/data/lm_files.h"
#include "trl/data_files.h"

namespace trainer::trl {

namespace {

// datasets' NON_WORDS_CHARS: what may stand beside a split's keyword in a name.
bool separator(char c) {
  return c == '-' || c == '.' || c == '_' || c == ' ' || (c >= '0' && c <= '9');
}

// Whether `name` (a file or folder name) says `keyword` as datasets' patterns read it: the name
// itself (folders only), "{keyword}[sep]*" or "*[sep]{keyword}[sep]*" (and "*[sep]{keyword}" for
// folders).
bool names_keyword(std::string_view name, std::string_view keyword, bool folder) {
  for (size_t at = name.find(keyword); at != std::string_view::npos;
       at = name.find(keyword, at + 1)) {
    const bool before = at == 0 || separator(name[at - 1]);
    const size_t end = at + keyword.size();
    const bool after = end < name.size() ? separator(name[end]) : folder;
    if (before && after) return true;
  }
  return false;
}

// datasets' SPLIT_KEYWORDS, in its order of splits.
struct Split {
  const char* name;
  std::vector<std::string_view> keywords;
};
const std::vector<Split>& splits() {
  static const std::vector<Split> kSplits = {{"train", {"train", "training"}},
                                             {"validation", {"validation", "valid", "dev", "val"}},
                                             {"test", {"test", "testing", "eval", "evaluation"}}};
  return kSplits;
}

// The data files under `dir` (relative paths, sorted), as datasets lists them: hidden files and
// folders ("." or "__" first) and its FILES_TO_IGNORE left out; .json and .jsonl only.
void data_files(const std::string& dir, const std::string& prefix, std::vector<std::string>& out) {
  static const std::vector<std::string> kIgnored = {"README.md",         "config.json",
                                                    "dataset_info.json", "dataset_infos.json",
                                                    "dummy_data.zip",    "dataset_dict.json"};
  for (const std::string& name : base::list_directory(dir)) {
    if (base::starts_with(name, ".") || base::starts_with(name, "__")) continue;
    const std::string path = dir + "/" + name;
    if (base::is_directory(path)) {
      data_files(path, prefix + name + "/", out);
    } else if ((base::ends_with(name, ".json") || base::ends_with(name, ".jsonl")) &&
               std::find(kIgnored.begin(), kIgnored.end(), name) == kIgnored.end()) {
      out.push_back(prefix + name);
    }
  }
}

// The split `file` (relative) falls in by `stage`: 0 the sharded data/{split}-00000-of-00001.*
// names, 1 its folders' names, 2 its own name; "" for none.
std::vector<std::string> splits_of(const std::string& file, int stage) {
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t slash = file.find('/', at);
    parts.push_back(file.substr(at, slash == std::string::npos ? std::string::npos : slash - at));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  const std::string& name = parts.back();
  std::vector<std::string> found;
  if (stage == 0) {
    // data/{split}-[0-9]{5}-of-[0-9]{5}*.*: the split any word.
    const size_t dash = name.find('-');
    auto digits = [&](size_t at) {
      return at + 5 <= name.size() && std::all_of(name.begin() + at, name.begin() + at + 5,
                                                  [](char c) { return c >= '0' && c <= '9'; });
    };
    if (parts.size() == 2 && parts[0] == "data" && dash != std::string::npos && dash > 0 &&
        digits(dash + 1) && name.compare(dash + 6, 4, "-of-") == 0 && digits(dash + 10) &&
        name.find('.', dash + 15) != std::string::npos) {
      found.push_back(name.substr(0, dash));
    }
    return found;
  }
  for (const Split& split : splits()) {
    bool match = false;
    for (std::string_view keyword : split.keywords) {
      if (stage == 1) {
        for (size_t i = 0; i + 1 < parts.size(); ++i)
          match |= names_keyword(parts[i], keyword, true);
      } else {
        match |= names_keyword(name, keyword, false);
      }
    }
    if (match) found.push_back(split.name);
  }
  return found;
}

}  // namespace

std::vector<nlohmann::ordered_json> read_trl_records(const std::string& path) {
  std::vector<nlohmann::ordered_json> records;
  for (data::JsonRecord& record : data::read_json_records(path)) {
    records.push_back(std::move(record.value));
  }
  data::type_like_datasets(records);
  return records;
}

std::string dataset_location(const std::string& dataset_name,
                             const std::optional<std::string>& dataset_config) {
  if (!dataset_config) return dataset_name;
  const std::string sub = dataset_name + "/" + *dataset_config;
  if (base::is_directory(dataset_name) && dataset_config->find("..") == std::string::npos &&
      base::is_directory(sub)) {
    return sub;
  }
  if (*dataset_config == "default") return dataset_name;
  throw InputError(fmt::format(
      "argument dataset_config: {}: dataset_name {} has no subfolder {} (a configuration of a "
      "local data set is its subfolder; null or default: the data set itself)",
      base::shown_text(*dataset_config), dataset_name, base::shown_text(*dataset_config)));
}

DataFiles resolve_data_files(const std::string& dataset_name, const std::string& train_split,
                             const std::string& test_split) {
  if (base::is_regular_file(dataset_name)) return {dataset_name, ""};
  if (!base::is_directory(dataset_name)) {
    const std::string problem = base::path_problem(dataset_name);
    throw InputError(fmt::format("dataset_name {}: {}", dataset_name,
                                 problem.empty() ? "is not a file or a folder" : problem));
  }
  std::vector<std::string> files;
  data_files(dataset_name, "", files);
  if (files.empty()) {
    throw InputError(fmt::format(
        "dataset_name {} holds no .json or .jsonl data file (hidden files, config.json and "
        "dataset_info.json left out, as `datasets` leaves them out)",
        dataset_name));
  }
  // datasets' order: the sharded names, then folder names, then file names; the first that puts
  // any file in a split decides; without one, every file is train.
  std::vector<std::pair<std::string, std::vector<std::string>>> split_files;
  for (int stage = 0; stage < 3 && split_files.empty(); ++stage) {
    for (const std::string& file : files) {
      for (const std::string& split : splits_of(file, stage)) {
        auto it = std::find_if(split_files.begin(), split_files.end(),
                               [&](const auto& s) { return s.first == split; });
        if (it == split_files.end()) it = split_files.insert(split_files.end(), {split, {}});
        it->second.push_back(file);
      }
    }
  }
  if (split_files.empty()) split_files.push_back({"train", files});
  auto one = [&](const std::string& split) -> std::string {
    for (const auto& [name, in] : split_files) {
      if (name != split) continue;
      if (in.size() > 1) {
        throw InputError(fmt::format(
            "dataset_name {}: the {} split has {} files ({}); trainer sft reads one file a "
            "split: join them, or give the file as dataset_name",
            dataset_name, split, in.size(), fmt::join(in, ", ")));
      }
      return dataset_name + "/" + in[0];
    }
    return "";
  };
  DataFiles out{one(train_split), one(test_split)};
  if (out.eval.empty() && test_split == "test") out.eval = one("validation");
  if (out.train.empty()) {
    std::vector<std::string> names;
    for (const auto& split : split_files) names.push_back(split.first);
    throw InputError(fmt::format(
        "dataset_name {} has no {} split: `datasets` splits its files by name into {} (a train "
        "file is named train*.jsonl or training*.jsonl, or lies in a train/ folder; any split "
        "is data/{{split}}-00000-of-00001.jsonl)",
        dataset_name, train_split, fmt::join(names, ", ")));
  }
  return out;
}

}  // namespace trainer::trl

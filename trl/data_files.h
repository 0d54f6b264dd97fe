// The files of a TRL trainer's data (`trainer sft`, `trainer dpo` and the next ones): a
// .json/.jsonl file's records as `datasets` hands them to TRL, and which files of a folder
// load_dataset(folder) takes as its train and test splits. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::trl {

// The records of a .json/.jsonl file as `datasets` hands them to TRL (data::read_json_records,
// then data::type_like_datasets: every column in every record, null where missing; nested
// objects typed as its JSON loader types them), each a JSON object. InputError as the reader says.
std::vector<nlohmann::ordered_json> read_trl_records(const std::string& path);

// dataset_name as load_dataset(dataset_name) takes a local path: a file is the train file; a
// folder's .json/.jsonl files are split by name as `datasets` splits a folder
// (data/{split}-00000-of-00001.*, then folders named after a split, then file names: train,
// training; validation, valid, dev, val; test, testing, eval, evaluation; each followed or
// preceded by one of "-._ 0-9"), all of them train when no name says otherwise. `eval` is the
// test split (TRL's dataset_test_split), else the validation split, else "". InputError when
// there is no train file, or a split holds several files. `train_split` and `test_split` name
// the splits (TRL's dataset_train_split and dataset_test_split: a split named otherwise than
// test has no validation split in its place).
struct DataFiles {
  std::string train, eval;
};
DataFiles resolve_data_files(const std::string& dataset_name,
                             const std::string& train_split = "train",
                             const std::string& test_split = "test");
// The folder or file TRL's dataset_name and dataset_config name: dataset_name, or with a
// configuration's name its subfolder of that name ("default": the folder itself when it has no
// such subfolder). InputError otherwise.
std::string dataset_location(const std::string& dataset_name,
                             const std::optional<std::string>& dataset_config);

}  // namespace trainer::trl

// The file side of checkpoints, torch-free: the manifest (each file's size and CRC-32) written
// last into a checkpoint and checked before anything is loaded from it, the checkpoint-<step>
// folders of an output_dir, and the directory operations that make a save atomic (flush, rename
// or exchange into place, remove a whole tree).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kManifestFormat = "trainer-checkpoint/1";

// One file of a checkpoint as its manifest records it.
struct ManifestFile {
  std::string name;  // a plain file name in the checkpoint folder
  uint64_t size = 0;
  uint32_t crc32 = 0;
};

// What a checkpoint holds, and of which run: enough to refuse one of another model or batch size
// before loading it.
struct Manifest {
  int64_t global_step = 0;
  std::string model_name;
  int64_t world_size = 1;
  int64_t total_batch_size = 0;  // per-device batch x processes x gradient accumulation
  bool save_only_model = false;
  // Saved by a sharded run (fsdp): the parameters and AdamW's moments are in each rank's
  // sharded_state_<r>_of_<N>.safetensors, model.safetensors only with FULL_STATE_DICT.
  bool sharded = false;
  std::vector<ManifestFile> files;

  nlohmann::ordered_json to_json() const;
  const ManifestFile* find(const std::string& name) const;
};

// The size and CRC-32 (zlib's) of `dir`/`name`, read in chunks. Throws std::runtime_error
// naming the file when it cannot be read.
ManifestFile describe_file(const std::string& dir, const std::string& name);

// Parses manifest text. Throws InputError "<source>: ..." for anything that is not a manifest of
// this format: not JSON, missing or mistyped keys, a file name with a '/', a repeated file.
Manifest parse_manifest(const std::string& text, const std::string& source);

// Reads `checkpoint_dir`/manifest.json and checks every file it names (present, a regular file,
// the recorded size and CRC-32) and that it names the files a checkpoint needs (the model, the
// state, and unless save_only_model the optimizer, the schedule and every rank's state). Throws
// InputError "checkpoint <dir> is damaged: <file> ..." on the first problem; nothing of the
// checkpoint has been loaded by then.
Manifest verify_checkpoint(const std::string& checkpoint_dir);

// The names of the files a checkpoint of this kind must hold.
std::vector<std::string> required_checkpoint_files(const Manifest& manifest);

// "rank_state_<rank>.safetensors".
std::string rank_state_name(int64_t rank);
// Rank `rank`'s slices of a sharded run's parameters and moments, of `world_size` ranks.
std::string sharded_state_name(int64_t rank, int64_t world_size);

// The checkpoint-<step> folders in `output_dir`, by step, oldest first (other names ignored).
struct CheckpointDir {
  int64_t step;
  std::string path;
};
std::vector<CheckpointDir> list_checkpoints(const std::string& output_dir);

// The step of a path whose last part is checkpoint-<step> as checkpoint_path() writes it (no sign,
// no leading zeros, at most 18 digits); nothing for any other name.
std::optional<int64_t> checkpoint_step(const std::string& path);

// Where a run with overwrite_output_dir keeps the earlier run's checkpoint-* folders until its own
// results are saved (then they go): out of the way of this run's names, its rotation and its
// restarts, and still there when the run fails or is stopped.
inline constexpr const char* kEarlierCheckpointsDir = "earlier-checkpoints";

// "<output_dir>/checkpoint-<step>".
std::string checkpoint_path(const std::string& output_dir, int64_t step);

// Removes the staging folders (.tmp-checkpoint-*) and half-removed folders (.removing-*) a
// killed run left in `output_dir` (under OutputDir's lock: no live writer). Returns how many.
int remove_stale_checkpoint_folders(const std::string& output_dir);

}  // namespace trainer

// File helpers: whole-file reads with clear errors, and atomic writes (temporary file + rename)
// so that a crash never leaves a half-written result in output_dir.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace trainer::io {

// Reads a whole file. Throws InputError naming the path when it cannot be opened or read.
std::string read_file(const std::string& path);

// Writes `data` to `path` through a temporary file in the same directory and a rename, creating
// missing parent directories. Throws std::runtime_error naming the path on failure.
void write_file_atomic(const std::string& path, const std::string& data);

// Writes `value` as indented JSON (2 spaces, trailing newline), atomically.
void write_json(const std::string& path, const nlohmann::ordered_json& value);

// Parses a JSON file. Throws InputError naming the file and the parser's message.
nlohmann::ordered_json read_json(const std::string& path);

// Joins two path parts with exactly one '/'.
std::string join_path(const std::string& dir, const std::string& name);

// The trainer's per-user cache directory: $TRAINER_CACHE, else $XDG_CACHE_HOME/trainer, else
// $HOME/.cache/trainer; "" when none of them is set. Not created here.
std::string cache_dir();

}  // namespace trainer::io

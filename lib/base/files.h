// File helpers: whole-file reads with clear errors, and atomic writes (temporary file + rename)
// so that a crash never leaves a half-written result in output_dir.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::base {

// Opens `path` for reading without waiting on a FIFO (O_NONBLOCK) and returns the descriptor.
// Throws InputError naming the path (after `label`) when it cannot be opened or is not a regular
// file (or a pipe, where `allow_pipes`).
int open_for_reading(const std::string& path, const std::string& label = "",
                     bool allow_pipes = true);

// Whether `path` is (or links to) a directory; a regular file.
bool is_directory(const std::string& path);
bool is_regular_file(const std::string& path);

// Whether something is at `path` (links followed). A path that cannot be looked at for another
// reason than its absence (a loop of links, a folder one may not search) counts as there, so
// that opening it next says why. Never throws (std::filesystem::exists does, on a loop).
bool exists(const std::string& path);

// Why `path` cannot be looked at, as a message goes on after the path: "" when it can; "does
// not exist"; else "cannot be read: " and strerror's words ("Too many levels of symbolic
// links", "Permission denied").
std::string path_problem(const std::string& path);

// How long read_file waits on a named FIFO (one in a folder) that sends nothing before it gives
// up; a pipe from the shell (/dev/stdin) is waited for without end, as cat would.
inline constexpr int kPipeWaitSeconds = 10;

// Reads a whole file (or pipe, unless `allow_pipes` is false). Throws InputError naming the path
// (after `label`, e.g. "IDX file ") when it cannot be opened or read, is a directory or a device
// (or a pipe, when refused), holds more than max_bytes, or is a named FIFO that sends nothing for
// kPipeWaitSeconds.
std::string read_file(const std::string& path, size_t max_bytes = SIZE_MAX,
                      const std::string& label = "", bool allow_pipes = true);

// Writes `data` to `path` through a temporary file in the same directory (flushed to the disk),
// a rename and a flush of the directory, creating missing parent directories. Throws
// std::runtime_error naming the path on failure (a full disk included), leaving the file that
// was at `path` as it was and no temporary file. With a `batch`, the rename waits for its
// commit().
class WriteBatch;
void write_file_atomic(const std::string& path, const std::string& data,
                       WriteBatch* batch = nullptr);
// The same for data in pieces, written one after another (never joined in memory: a model's
// tensors go to the file from where they are).
void write_file_atomic(const std::string& path, const std::vector<std::string_view>& pieces,
                       WriteBatch* batch = nullptr);

// Files that land together or not at all: a write given the batch (write_file_atomic's `batch`,
// and every writer that passes one down) only writes and flushes its temporary file (where a full
// disk shows); commit() renames them all into place, then removes the paths given to
// remove_on_commit (unless written in the batch). Destroyed without a commit, it removes its
// temporary files and every earlier file stays.
class WriteBatch {
 public:
  WriteBatch();
  ~WriteBatch();
  WriteBatch(const WriteBatch&) = delete;
  WriteBatch& operator=(const WriteBatch&) = delete;
  void remove_on_commit(const std::string& path);
  // True when the batch holds a write of `path`.
  bool staged(const std::string& path) const;
  void commit();

 private:
  friend void write_file_atomic(const std::string&, const std::vector<std::string_view>&,
                                WriteBatch*);
  std::vector<std::pair<std::string, std::string>> staged_;  // temporary file, target
  std::vector<std::string> removed_;
};

// A file that grows as a run goes (a log): each append() reaches the operating system at once, so
// a killed process loses nothing appended. Throws std::runtime_error "cannot write <path>: ...".
class AppendFile {
 public:
  // Opens `path` for appending, creating it and its missing parents; `truncate` empties it first.
  AppendFile(const std::string& path, bool truncate);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  void append(const std::string& data);
  // Flushes the file to the disk.
  void sync();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// Creates `dir` and its missing parents (mkdir -p) with POSIX calls (LibTorch exports a copy of
// std::filesystem that some builds bind to). Returns the directories it created, deepest first;
// when it fails, it removes those it created first.
// Throws std::runtime_error "cannot create <label> <dir>: <reason>".
std::vector<std::string> make_directories(const std::string& dir,
                                          const std::string& label = "directory");

// The names in `dir` (not . and ..), sorted; empty when it cannot be read.
std::vector<std::string> list_directory(const std::string& dir);

// Removes the temporary files a killed write_file_atomic left in `dir` (<name>.tmp.<pid>.<hex>):
// all of them where no other process writes (under OutputDir's lock), or, with
// `only_dead_writers`, those whose writer's pid no longer runs on this machine (a cache that
// other runs write too). Returns how many.
int remove_stale_temporaries(const std::string& dir, bool only_dead_writers = false);

// Writes `value` as indented JSON (2 spaces, trailing newline), atomically.
void write_json(const std::string& path, const nlohmann::ordered_json& value,
                WriteBatch* batch = nullptr);

// Parses a JSON file. Throws InputError naming the file and the parser's message.
nlohmann::ordered_json read_json(const std::string& path);

// read_json for a file that must hold one JSON object (all_results.json): anything else is an
// InputError too.
nlohmann::ordered_json read_json_object(const std::string& path);

// The directory part of `path` ("." for a bare name, "/" for a name under the root).
std::string parent_dir(const std::string& path);

// The last part of `path` (the whole of it when it has no '/').
std::string base_name(const std::string& path);

// Joins two path parts with exactly one '/'.
std::string join_path(const std::string& dir, const std::string& name);

// Opens /dev/null on whichever of stdin, stdout and stderr is closed (trainer train >&-), so that
// no file the program opens later takes fd 1 or 2 and receives its printed lines.
void open_standard_streams();

// The trainer's per-user cache directory: $TRAINER_CACHE, else $XDG_CACHE_HOME/trainer, else
// $HOME/.cache/trainer; "" when none of them is set. Not created here.
std::string cache_dir();

// Checks, before anything is written, that `dir` is a directory this process can write, or one it
// could create: the nearest existing folder on its path is a directory in which a folder can be
// made (a probe, made and removed: access() says yes to root on a read-only mount). Creates
// nothing that stays. Throws InputError naming `label` and `dir`: "argument logging_dir: /x/f/logs:
// /x/f is a file, not a directory", "argument logging_dir: /proc/1/logs cannot be written: No such
// file or directory (in /proc/1)".
void check_writable_dir(const std::string& dir, const std::string& label);

// The folder a command writes its results into (output_dir, merge's --output_dir): `dir` as it
// is when it is a folder this process may write, else created with its missing parents. Every
// way it can fail is the user's destination, an InputError (exit code 2) naming `label` and
// `dir`: a file in its place or on its path, a loop of links, a parent that cannot be written
// (/proc/1/x, /sys/x). Returns the directories it created, deepest first.
std::vector<std::string> make_output_directory(const std::string& dir, const std::string& label);

// Flushes a file or a directory to the disk (fsync). Throws std::runtime_error naming it.
void sync_path(const std::string& path);

// Moves the finished folder `staged` to `target`: a rename when `target` does not exist, else an
// atomic exchange after which the old folder is removed. Then flushes the parent directory.
// Either way there is never a moment without a complete `target` once one existed.
void move_into_place(const std::string& staged, const std::string& target);

// Removes `path` and everything under it (rm -rf) without following symlinks; first renames it
// to a hidden name beside it so that a crash midway never leaves a partial folder under its
// name. Returns false (and leaves what it could not remove) on failure.
bool remove_tree(const std::string& path);

}  // namespace trainer::base

// A run's output_dir, guarded: checked and created before anything runs, locked so that one run
// at a time writes there, cleared of the temporary files a killed run left, and read for what an
// earlier run saved (so that train does not mix its results with another run's).
#pragma once

#include <string>
#include <vector>

namespace trainer {

class OutputDir {
 public:
  // Creates `dir` when missing and takes its lock (output_dir/.trainer.lock, holding our pid).
  // Throws InputError naming the directory: a path that is a file, a symlink loop, a directory
  // that cannot be created or written, a lock another process holds (naming its pid).
  explicit OutputDir(const std::string& dir);
  // Releases the lock and removes the lock file; removes the directories this run created (the
  // output_dir and missing parents) again where it left nothing in them.
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  const std::string& path() const { return dir_; }
  // What the directory held when it was locked (names, sorted), without the lock file and the
  // temporary files of killed writes, which the constructor removed.
  const std::vector<std::string>& earlier_entries() const { return earlier_; }

 private:
  std::string dir_;
  std::string lock_path_;
  int lock_fd_ = -1;
  std::vector<std::string> created_;  // directories this run created, deepest first
  std::vector<std::string> earlier_;
};

// The files a `trainer train` run writes in output_dir (a later run replaces all of them).
const std::vector<std::string>& run_result_files();

}  // namespace trainer

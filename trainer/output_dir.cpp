// OutputDir: checks and creation with one-line errors, a POSIX record lock on a lock file (whose
// holder's pid fcntl reports), and the listing of what an earlier run left.
#include "trainer/output_dir.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/hf_files.h"
#include "trainer/checkpoint_manifest.h"

namespace trainer {
namespace {

constexpr const char* kLockName = ".trainer.lock";

}  // namespace

const std::vector<std::string>& run_result_files() {
  static const std::vector<std::string> names = {
      base::hf::kWeights,   "model.pt",           "training_args.json",
      "trainer_state.json", "train_results.json", "eval_results.json",
      "all_results.json",   "loss.svg",           "loss_curve.npy"};
  return names;
}

OutputDir::OutputDir(const std::string& dir)
    : dir_(dir), lock_path_(base::join_path(dir, kLockName)) {
  // Every level this run creates, deepest first, so that a failed run removes them all.
  created_ = base::make_output_directory(dir, "output_dir");
  // The lock lives on an inode the path still names: a run that removed the file between our
  // open and our lock leaves us holding a lock nobody else sees, so check and retry.
  for (int attempt = 0; lock_fd_ < 0; ++attempt) {
    int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw InputError(
          fmt::format("cannot create {} (the run's lock): {}", lock_path_, std::strerror(errno)));
    }
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (::fcntl(fd, F_SETLK, &lock) != 0) {
      int error = errno;
      struct flock holder {};
      holder.l_type = F_WRLCK;
      holder.l_whence = SEEK_SET;
      ::fcntl(fd, F_GETLK, &holder);
      ::close(fd);
      if (error != EACCES && error != EAGAIN) {
        throw InputError(fmt::format("cannot lock {}: {}", lock_path_, std::strerror(error)));
      }
      throw InputError(fmt::format(
          "output_dir {} is in use by another run (pid {}); wait for it to end or choose another "
          "output_dir",
          dir, holder.l_type == F_UNLCK ? std::string("unknown") : std::to_string(holder.l_pid)));
    }
    struct stat opened {
    }, named{};
    if (::fstat(fd, &opened) == 0 && ::stat(lock_path_.c_str(), &named) == 0 &&
        opened.st_ino == named.st_ino && opened.st_dev == named.st_dev) {
      lock_fd_ = fd;
    } else {
      ::close(fd);
      if (attempt > 100) throw InputError(fmt::format("cannot lock {}", lock_path_));
    }
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) == 0) {
    [[maybe_unused]] ssize_t n = ::pwrite(lock_fd_, pid.data(), pid.size(), 0);
  }
  base::remove_stale_temporaries(dir);
  remove_stale_checkpoint_folders(dir);
  for (const std::string& name : base::list_directory(dir)) {
    if (name != kLockName) earlier_.push_back(name);
  }
}

OutputDir::~OutputDir() {
  if (lock_fd_ >= 0) {
    // Unlinked while still locked: a run waiting on the old inode notices and retries.
    ::unlink(lock_path_.c_str());
    ::close(lock_fd_);
  }
  // Fails, harmlessly, where the run left something.
  for (const std::string& dir : created_) {
    if (::rmdir(dir.c_str()) != 0) break;
  }
}

}  // namespace trainer

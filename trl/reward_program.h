// `exec:COMMAND` rewards of `trainer grpo`: a program in any language, started once through
// /bin/sh in the working directory and kept alive, that reads one JSON object a line (the prompt,
// the completion, its ids, the row's other columns, the step) and writes one number a line back
// (null: no reward, TRL's None). Its death, its silence past the timeout, or a line that is not a
// number is one line naming the program and the row.
#pragma once

#include <sys/types.h>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::trl {

// What went wrong with a reward program (the trainer exits 1 with this line).
class RewardProgramError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RewardProgram {
 public:
  // Starts `/bin/sh -c command` (stdin and stdout piped, stderr the trainer's). `timeout_seconds`
  // bounds the wait for each answer (and for the program to read what it is sent).
  // RewardProgramError when it cannot start.
  RewardProgram(std::string command, double timeout_seconds);
  // Closes its stdin (its cue to end), waits a moment, then kills it.
  ~RewardProgram();
  RewardProgram(const RewardProgram&) = delete;
  RewardProgram& operator=(const RewardProgram&) = delete;

  // Each request written as one compact JSON line, and one answer line read per request: a
  // number (a JSON number, or NaN / Infinity as Python prints them) or null. `rows` names each
  // request's data row in messages ("data.jsonl row 3"). Requests and answers flow both ways
  // at once, so a program may answer each line as it comes or read several first.
  // RewardProgramError naming the command and the row for an exit, a timeout or a bad line.
  std::vector<std::optional<double>> score(const std::vector<nlohmann::ordered_json>& requests,
                                           const std::vector<std::string>& rows);

  const std::string& command() const { return command_; }

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& row);
  std::string exit_status();

  std::string command_;
  double timeout_;
  pid_t pid_ = -1;
  pid_t group_ = -1;        // its process group (the program's pid), killed at the end
  int in_ = -1, out_ = -1;  // its stdin (we write), its stdout (we read)
  std::string pending_;     // read past the last full line
};

// One answer line: a number, NaN/Infinity spelt as Python or JSON would, or null (nullopt).
// std::nullopt in `ok` when the line is neither.
struct RewardAnswer {
  bool ok = false;
  std::optional<double> value;
};
RewardAnswer parse_reward_answer(const std::string& line);

}  // namespace trainer::trl

// The map of the house (docs/architecture.md) holds: every folder of apps/, trl/, trainer/ and lib/
// is on it, and every file includes only its own folder and the folders its row allows, and names
// no namespace of a folder it may not include (a type reached through another header still
// counts). The rows are read from the document itself, so the map and the check cannot differ.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace trainer {
namespace architecture_test {

namespace fs = std::filesystem;

// One row of the table: a folder, the folders it may include, and its namespace ("" when it
// has none of its own).
struct Floor {
  std::string folder;
  std::vector<std::string> may_include;
  std::string ns;
};

// The rows of the table under the heading "## Which way includes point", read as
// "| `folder/` | `a/`, `b/` (or: nothing) | `trainer::x` |".
std::vector<Floor> read_map(const std::string& markdown) {
  std::vector<Floor> floors;
  size_t start = markdown.find("## Which way includes point");
  if (start == std::string::npos) return floors;
  std::vector<std::string> lines = testing::lines_of(markdown.substr(start));
  const std::regex quoted("`([^`]*)`");
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.rfind("## ", 0) == 0) break;
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    size_t from = 1;
    for (size_t bar; (bar = line.find('|', from)) != std::string::npos; from = bar + 1)
      cells.push_back(line.substr(from, bar - from));
    if (cells.size() < 3) continue;
    auto names = [&](const std::string& cell) {
      std::vector<std::string> out;
      for (std::sregex_iterator it(cell.begin(), cell.end(), quoted), end; it != end; ++it)
        out.push_back((*it)[1]);
      return out;
    };
    Floor floor;
    std::vector<std::string> self = names(cells[0]);
    if (self.size() != 1) continue;
    floor.folder = self[0];
    floor.may_include = names(cells[1]);
    std::vector<std::string> ns = names(cells[2]);
    if (!ns.empty()) floor.ns = ns[0];
    floors.push_back(floor);
  }
  return floors;
}

// The row a path belongs to: the longest folder (or file) of the map it lies under.
const Floor* floor_of(const std::vector<Floor>& floors, const std::string& path) {
  const Floor* best = nullptr;
  for (const Floor& floor : floors) {
    const std::string& f = floor.folder;
    bool under = f.back() == '/' ? path.rfind(f, 0) == 0 : path == f;
    if (under && (!best || f.size() > best->folder.size())) best = &floor;
  }
  return best;
}

// The last part of a namespace, as code names it: "trainer::dist" -> "dist".
std::string short_name(const std::string& ns) {
  size_t colons = ns.rfind("::");
  return colons == std::string::npos ? "" : ns.substr(colons + 2);
}

// Whether `code` names `name::` as a namespace of ours: not after "::" (torch::data::) nor
// inside an identifier (metadata::), and not in a // comment.
bool names_namespace(const std::string& code, const std::string& name) {
  for (const std::string& line : testing::lines_of(code)) {
    size_t comment = line.find("//");
    const std::string text = line.substr(0, comment);
    for (size_t at = text.find(name + "::"); at != std::string::npos;
         at = text.find(name + "::", at + 1)) {
      char before = at == 0 ? ' ' : text[at - 1];
      if (before != ':' && before != '_' && !std::isalnum(static_cast<unsigned char>(before)))
        return true;
    }
  }
  return false;
}

// Every breach of the map under `root`: "<file>: includes <header> (<folder> may include ...)",
// "<file>: names <ns>:: ...", "<file>: no floor of the map holds it".
std::vector<std::string> violations(const std::string& root, const std::vector<Floor>& floors) {
  std::vector<std::string> found;
  const std::regex include("^\\s*#\\s*include\\s+\"([^\"]+)\"");
  std::vector<std::string> files;
  for (const char* top : {"apps", "trl", "trainer", "lib"}) {
    if (!fs::is_directory(fs::path(root) / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(root) / top)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() && (ext == ".h" || ext == ".cpp"))
        files.push_back(fs::relative(entry.path(), root).string());
    }
  }
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) {
    const Floor* mine = floor_of(floors, file);
    if (!mine) {
      found.push_back(file + ": no floor of the map holds it");
      continue;
    }
    auto allowed = [&](const Floor* target) {
      return target == mine || std::find(mine->may_include.begin(), mine->may_include.end(),
                                         target->folder) != mine->may_include.end();
    };
    const std::string code = testing::slurp((fs::path(root) / file).string());
    for (const std::string& line : testing::lines_of(code)) {
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string header = m[1];
      const Floor* target = floor_of(floors, header);
      if (target && !allowed(target)) {
        std::string list;
        for (const auto& f : mine->may_include) list += (list.empty() ? "" : ", ") + f;
        found.push_back(file + ": includes " + header + " (" + mine->folder + " may include " +
                        (list.empty() ? "nothing" : list) + ")");
      }
    }
    for (const Floor& other : floors) {
      const std::string name = short_name(other.ns);
      if (name.empty() || allowed(&other) || other.ns == mine->ns) continue;
      if (names_namespace(code, name))
        found.push_back(file + ": names " + name + ":: of " + other.folder + ", which " +
                        mine->folder + " may not include");
    }
  }
  return found;
}

std::vector<Floor> the_map() {
  return read_map(testing::slurp(std::string(SOURCE_DIR) + "/docs/architecture.md"));
}

TEST(Architecture, TheMapHasEveryFloor) {
  std::vector<Floor> floors = the_map();
  std::set<std::string> folders;
  for (const Floor& floor : floors) folders.insert(floor.folder);
  for (const char* folder :
       {"apps/", "trl/", "trainer/", "lib/accelerate/", "lib/distributed/", "lib/data/",
        "lib/models/", "lib/optim/", "lib/io/", "lib/report/", "lib/runtime/", "lib/base/"}) {
    EXPECT_EQ(folders.count(folder), 1u) << folder << " is not a row of docs/architecture.md";
  }
}

TEST(Architecture, IncludesPointDownTheFloors) {
  std::vector<std::string> found = violations(SOURCE_DIR, the_map());
  std::string all;
  for (const auto& v : found) all += v + "\n";
  EXPECT_TRUE(found.empty()) << all;
}

// The check itself catches an upward include, a namespace reached around the map, and a folder
// that is not on it.
TEST(Architecture, TheCheckCatchesWhatGoesUpward) {
  testing::TempDir dir;
  fs::create_directories(dir.file("lib/data"));
  fs::create_directories(dir.file("lib/base"));
  fs::create_directories(dir.file("trainer"));
  fs::create_directories(dir.file("lib/newroom"));
  std::ofstream(dir.file("lib/base/ok.h")) << "#pragma once\n";
  std::ofstream(dir.file("lib/data/up.cpp"))
      << "#include \"lib/base/ok.h\"\n#include \"trainer/trainer.h\"\n";
  std::ofstream(dir.file("trainer/around.cpp"))
      << "// dist::all_reduce in a comment is fine\nvoid f() { dist::all_reduce(x); }\n"
         "void g() { torch::data::x(); metadata::y(); }\n";
  std::ofstream(dir.file("lib/newroom/a.h")) << "#pragma once\n";
  std::vector<Floor> floors = read_map(
      "## Which way includes point\n\n| folder | may include | namespace |\n|---|---|---|\n"
      "| `trainer/` | `lib/data/`, `lib/base/` | `trainer` |\n"
      "| `lib/distributed/` | `lib/base/` | `trainer::dist` |\n"
      "| `lib/data/` | `lib/base/` | `trainer::data` |\n"
      "| `lib/base/` | nothing | `trainer::base` |\n");
  ASSERT_EQ(floors.size(), 4u);
  EXPECT_EQ(violations(dir.path(), floors),
            (std::vector<std::string>{
                "lib/data/up.cpp: includes trainer/trainer.h (lib/data/ may include lib/base/)",
                "lib/newroom/a.h: no floor of the map holds it",
                "trainer/around.cpp: names dist:: of lib/distributed/, which trainer/ may not "
                "include"}));
}

}  // namespace architecture_test
}  // namespace trainer

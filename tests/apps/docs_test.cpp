// The documentation's code snippets are the code the build compiles: in README.md and every
// docs/*.md, each `<!-- snippet: FILE NAME -->` is followed by a cpp block equal to the lines
// between `// docs-snippet: NAME` and `// docs-snippet-end` in FILE (dedented); the tutorial's
// three levels (ddp, accelerator, trainer) are among them, in that order, in one file.
// TRAINER_UPDATE_DOCS=1 rewrites each file's blocks in that file.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace trainer {
namespace docs_test {

// The lines between the markers for `name` in `path`, less their common indentation.
std::string snippet(const std::string& path, const std::string& name) {
  std::vector<std::string> lines = testing::lines_of(testing::slurp(path));
  std::vector<std::string> body;
  bool inside = false, found = false;
  for (const std::string& line : lines) {
    std::string trimmed = line.substr(std::min(line.size(), line.find_first_not_of(' ')));
    if (trimmed == "// docs-snippet: " + name) {
      inside = found = true;
    } else if (inside && trimmed == "// docs-snippet-end") {
      inside = false;
    } else if (inside) {
      body.push_back(line);
    }
  }
  EXPECT_TRUE(found && !inside) << path << " has no complete snippet '" << name << "'";
  size_t indent = std::string::npos;
  for (const std::string& line : body) {
    if (line.find_first_not_of(' ') != std::string::npos)
      indent = std::min(indent, line.find_first_not_of(' '));
  }
  std::string out;
  for (const std::string& line : body)
    out += (line.size() > indent ? line.substr(indent) : std::string()) + "\n";
  return out;
}

// README.md, then docs/*.md in the order of their names, relative to the source tree.
std::vector<std::string> documentation_files() {
  std::vector<std::string> docs;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(SOURCE_DIR) + "/docs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".md")
      docs.push_back("docs/" + entry.path().filename().string());
  }
  std::sort(docs.begin(), docs.end());
  docs.insert(docs.begin(), "README.md");
  return docs;
}

// Checks one file's snippets against the code, rewrites them there under TRAINER_UPDATE_DOCS, and
// returns their names in the order of the file.
std::vector<std::string> check_snippets(const std::string& relative) {
  const std::string path = std::string(SOURCE_DIR) + "/" + relative;
  const std::string text = testing::slurp(path);
  // A marker, then the cpp block right after it.
  const std::regex block(R"(<!-- snippet: (\S+) (\S+) -->\n```cpp\n([\s\S]*?)```)");
  std::string rewritten;
  size_t last = 0;
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), block);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const std::string code = snippet(std::string(SOURCE_DIR) + "/" + m[1].str(), m[2].str());
    EXPECT_EQ(m[3].str(), code) << relative << "'s snippet " << m[2] << " differs from " << m[1]
                                << ": rewrite it with TRAINER_UPDATE_DOCS=1 "
                                   "build/bin/trainer_base_tests --gtest_filter=Docs.*";
    names.push_back(m[2].str());
    rewritten += text.substr(last, m.position(0) - last);
    rewritten += "<!-- snippet: " + m[1].str() + " " + m[2].str() + " -->\n```cpp\n" + code + "```";
    last = m.position(0) + m.length(0);
  }
  rewritten += text.substr(last);
  if (std::getenv("TRAINER_UPDATE_DOCS") && rewritten != text)
    std::ofstream(path, std::ios::binary) << rewritten;
  return names;
}

// Whether `names` holds `levels` in their order (other snippets may come between).
bool holds_in_order(const std::vector<std::string>& names, const std::vector<std::string>& levels) {
  auto next = names.begin();
  for (const std::string& level : levels) {
    next = std::find(next, names.end(), level);
    if (next == names.end()) return false;
    ++next;
  }
  return true;
}

TEST(Docs, SnippetsAreTheCompiledCode) {
  const std::vector<std::string> tutorial = {"ddp", "accelerator", "trainer"};
  std::vector<std::string> holders;
  std::string seen;
  for (const std::string& file : documentation_files()) {
    const std::vector<std::string> names = check_snippets(file);
    for (const std::string& name : names) seen += " " + file + ":" + name;
    if (holds_in_order(names, tutorial)) holders.push_back(file);
  }
  // One snippet for each level of the tutorial, in the tutorial's order, in one file.
  EXPECT_FALSE(holders.empty())
      << "no documentation file holds the snippets ddp, accelerator and trainer in that order; "
         "snippets found:"
      << (seen.empty() ? std::string(" none") : seen);
}

}  // namespace docs_test
}  // namespace trainer

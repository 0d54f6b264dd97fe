// The README's code snippets are the code the build compiles: each `<!-- snippet: FILE NAME -->`
// is followed by a cpp block equal to the lines between `// readme-snippet: NAME` and
// `// readme-snippet-end` in FILE (dedented). TRAINER_UPDATE_DOCS=1 rewrites the README's blocks.
#include <cstdlib>
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
    if (trimmed == "// readme-snippet: " + name) {
      inside = found = true;
    } else if (inside && trimmed == "// readme-snippet-end") {
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

TEST(Docs, ReadmeSnippetsAreTheCompiledCode) {
  const std::string readme_path = std::string(SOURCE_DIR) + "/README.md";
  const std::string readme = testing::slurp(readme_path);
  // A marker, then the cpp block right after it.
  const std::regex block(R"(<!-- snippet: (\S+) (\S+) -->\n```cpp\n([\s\S]*?)```)");
  std::string rewritten;
  size_t last = 0;
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(readme.begin(), readme.end(), block);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const std::string code = snippet(std::string(SOURCE_DIR) + "/" + m[1].str(), m[2].str());
    EXPECT_EQ(m[3].str(), code) << "README.md's snippet " << m[2] << " differs from " << m[1]
                                << ": rewrite it with TRAINER_UPDATE_DOCS=1 "
                                   "build/bin/trainer_base_tests --gtest_filter=Docs.*";
    names.push_back(m[2].str());
    rewritten += readme.substr(last, m.position(0) - last);
    rewritten += "<!-- snippet: " + m[1].str() + " " + m[2].str() + " -->\n```cpp\n" + code + "```";
    last = m.position(0) + m.length(0);
  }
  rewritten += readme.substr(last);
  if (std::getenv("TRAINER_UPDATE_DOCS")) std::ofstream(readme_path, std::ios::binary) << rewritten;
  // One snippet for each level of the tutorial.
  EXPECT_EQ(names, (std::vector<std::string>{"ddp", "accelerator", "trainer"}));
}

}  // namespace docs_test
}  // namespace trainer

// `trainer chat-template --tokenizer_name DIR [--chat_template FILE] [--add_generation_prompt]
// [--tools FILE] [CONVERSATIONS.jsonl]`: each line's conversation rendered by the chat template as
// apply_chat_template(tokenize=False) renders it, one JSON string a line: what a user runs to see
// what the model is trained on or prompted with.
#include <cstdio>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include <fmt/format.h>

#include "apps/trainer/commands.h"
#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_text.h"
#include "lib/base/text.h"
#include "lib/tokenizers/chat_template.h"

namespace trainer::cli {

tokenizers::ChatTemplate load_chat_template(const std::string& dir, const std::string& file,
                                            const std::string& command) {
  if (!file.empty()) {
    const std::string source = base::read_file(file, size_t{64} << 20, "chat template ");
    return tokenizers::ChatTemplate::from_source(source, file, dir);
  }
  if (!base::is_directory(dir)) {
    throw InputError(
        fmt::format("trainer {}: --tokenizer_name {}: {}", command, dir, base::path_problem(dir)));
  }
  auto found = tokenizers::ChatTemplate::from_dir(dir);
  if (!found) {
    throw InputError(fmt::format(
        "trainer {}: {} has no chat template (no chat_template.jinja, no chat_template in "
        "tokenizer_config.json); give one with --chat_template FILE",
        command, dir));
  }
  return std::move(*found);
}

tokenizers::jinja::Rendered render_conversation(const tokenizers::ChatTemplate& chat,
                                                const tokenizers::ChatRequest& request,
                                                const std::string& context) {
  try {
    return chat.apply(request);
  } catch (const tokenizers::jinja::TemplateError& e) {
    const bool refused = e.kind == tokenizers::jinja::TemplateError::Kind::kRaised;
    throw InputError(fmt::format(
        "{}: {}{}", context, refused ? "the template refuses the conversation: " : "", e.what()));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", context, e.what()));
  }
}

int chat_template_command(const ChatTemplateOptions& options) {
  const tokenizers::ChatTemplate chat =
      load_chat_template(options.tokenizer_name, options.chat_template, "chat-template");
  nlohmann::ordered_json tools;
  if (!options.tools.empty()) {
    tools = base::read_json(options.tools);
    if (!tools.is_array())
      throw InputError(
          fmt::format("trainer chat-template: --tools {} must hold a list of tool "
                      "schemas, not {}",
                      options.tools, base::a_type(tools)));
  }
  std::ifstream file;
  if (!options.file.empty()) {
    try {  // missing, unreadable, a folder: one line
      ::close(base::open_for_reading(options.file, "CONVERSATIONS.jsonl "));
    } catch (const InputError& e) {
      throw InputError(std::string("trainer chat-template: ") + e.what());
    }
  }
  if (!options.file.empty()) file.open(options.file, std::ios::binary);
  std::istream& in = options.file.empty() ? std::cin : file;
  const std::string named = options.file.empty() ? "standard input" : options.file;
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (base::trimmed(line, " \t\r").empty()) continue;
    const std::string where = fmt::format("{} line {}", named, line_number);
    const nlohmann::ordered_json row = base::parse_json(line, where);
    if (!row.is_object() || !row.contains("messages")) {
      throw InputError(fmt::format(
          "trainer chat-template: {}: a line is a JSON object with \"messages\" (and optionally "
          "\"tools\"), not {}",
          where, base::shown(row)));
    }
    tokenizers::ChatRequest request;
    request.messages = row["messages"];
    request.tools = row.contains("tools") ? row["tools"] : tools;
    request.add_generation_prompt = options.add_generation_prompt;
    for (const auto& [key, value] : row.items()) {
      if (key != "messages" && key != "tools") request.kwargs[key] = value;
    }
    const tokenizers::jinja::Rendered rendered =
        render_conversation(chat, request, "trainer chat-template: " + where);
    nlohmann::ordered_json out = rendered.text;
    if (options.generation_indices) {
      nlohmann::ordered_json spans = nlohmann::ordered_json::array();
      for (const auto& [b, e] : rendered.generation_chars)
        spans.push_back(nlohmann::ordered_json::array({b, e}));
      out = {{"text", rendered.text}, {"generation_indices", spans}};
    }
    const std::string text =
        out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) return 1;
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace trainer::cli

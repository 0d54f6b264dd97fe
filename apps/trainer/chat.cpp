// `trainer chat DIR` (as `transformers chat`): a conversation with a Hugging Face model through
// its chat template. Each message read is added as a user turn, the conversation is rendered
// with the generation prompt and tokenized as apply_chat_template does, and the answer is printed
// as its tokens come, until an EOS or end-of-turn token; /clear starts over, /exit ends. When
// standard input is not a terminal, each line is a message and its answer one line of output
// (scriptable). `trainer generate --chat` templates its prompt through the same path.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <fmt/format.h>

#include "apps/trainer/commands.h"
#include "apps/trainer/generate.h"
#include "lib/base/errors.h"
#include "lib/base/utf8.h"
#include "lib/data/text_files.h"

namespace trainer {
namespace {

using json = nlohmann::ordered_json;

// The conversation's ids through the template, with the generation prompt, checked against the
// model's positions.
std::vector<int32_t> conversation_ids(const tokenizers::ChatTemplate& chat,
                                      const HfSession& session, const json& messages,
                                      const std::string& command) {
  tokenizers::ChatRequest request;
  request.messages = messages;
  request.add_generation_prompt = true;
  const tokenizers::jinja::Rendered rendered =
      cli::render_conversation(chat, request, "trainer " + command);
  std::vector<int32_t> ids = session.tokenizer.encode(rendered.text, false);
  const int64_t positions = session.model->config().max_position_embeddings;
  if (static_cast<int64_t>(ids.size()) >= positions) {
    throw InputError(fmt::format(
        "trainer {}: the conversation is {} tokens; the model reads at most {} positions "
        "(max_position_embeddings) and must have room for one more",
        command, ids.size(), positions));
  }
  return ids;
}

json first_messages(const std::string& system) {
  json messages = json::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  return messages;
}

// The tokens that end a turn beside the EOS ids: the end-of-turn tokens of the common templates
// that this template writes and this vocabulary holds.
void add_end_of_turn(HfSession& session, const tokenizers::ChatTemplate& chat) {
  if (auto eos = session.tokenizer.eos_token_id()) session.eos.push_back(*eos);
  for (const char* token : {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>",
                            "<|eom_id|>", "<turn|>", "<|return|>"}) {
    if (chat.source().find(token) == std::string::npos) continue;
    if (auto id = session.tokenizer.token_to_id(token)) session.eos.push_back(*id);
  }
}

models::PretrainedSource chat_source(const std::string& dir) {
  if (auto source = models::read_pretrained_source(dir)) return *source;
  throw InputError(fmt::format(
      "trainer chat: {} is not a Hugging Face model folder (config.json) or an adapter folder "
      "over one",
      dir));
}

bool write_out(const std::string& text) {
  return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() &&
         std::fflush(stdout) == 0;
}

}  // namespace

std::vector<int32_t> chat_prompt_ids(const HfSession& session, const std::string& tokenizer_dir,
                                     const cli::GenerateOptions& options,
                                     const std::string& message) {
  if (!data::is_utf8_text(message))
    throw InputError("trainer generate: --prompt is not UTF-8 text");
  const tokenizers::ChatTemplate chat =
      cli::load_chat_template(tokenizer_dir, options.chat_template, "generate");
  json messages = first_messages(options.system);
  messages.push_back({{"role", "user"}, {"content", message}});
  return conversation_ids(chat, session, messages, "generate");
}

namespace cli {

int chat_command(const GenerateOptions& options) {
  const models::PretrainedSource source = chat_source(options.output_dir);
  HfSession session(source, options);
  const tokenizers::ChatTemplate chat =
      load_chat_template(source.tokenizer_dir, options.chat_template, "chat");
  add_end_of_turn(session, chat);
  const bool terminal = ::isatty(STDIN_FILENO) != 0;
  json messages = first_messages(options.system);
  std::string line;
  int64_t line_number = 0;
  while (true) {
    if (terminal && !write_out("> ")) return 1;
    if (!std::getline(std::cin, line)) break;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit") break;
    if (line == "/clear") {
      messages = first_messages(options.system);
      if (terminal && !write_out("(conversation cleared)\n")) return 1;
      continue;
    }
    if (line.empty()) continue;
    if (!data::is_utf8_text(line)) {
      throw InputError(
          fmt::format("trainer chat: standard input line {} is not UTF-8 text", line_number));
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    const std::vector<int32_t> prompt = conversation_ids(chat, session, messages, "chat");
    std::vector<int32_t> answer;
    std::string shown;
    auto stream = [&](int64_t token) {
      answer.push_back(static_cast<int32_t>(token));
      const std::string text = session.tokenizer.decode(answer, /*skip_special_tokens=*/true);
      // Print what is new once it ends on a whole character (a token may hold half of one).
      if (text.size() > shown.size() && base::is_valid_utf8(text) &&
          text.compare(0, shown.size(), shown) == 0) {
        write_out(text.substr(shown.size()));
        shown = text;
      }
    };
    session.generate({prompt.begin(), prompt.end()}, stream);
    if (!answer.empty() &&
        std::find(session.eos.begin(), session.eos.end(), answer.back()) != session.eos.end())
      answer.pop_back();
    const std::string reply = session.tokenizer.decode(answer, /*skip_special_tokens=*/true);
    if (reply.size() > shown.size()) write_out(reply.substr(std::min(shown.size(), reply.size())));
    if (!write_out("\n")) return 1;
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  return 0;
}

}  // namespace cli
}  // namespace trainer

// libFuzzer target for chat templates (the Jinja engine, tokenizers::ChatTemplate): any bytes as
// a template, rendered on a fixed conversation with tools, under small bounds. Only
// jinja::TemplateError or trainer::InputError may come out; a render's text is valid UTF-8 within
// the output bound and its generation spans lie inside the text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lib/base/errors.h"
#include "lib/base/utf8.h"
#include "lib/tokenizers/chat_template.h"

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "chat_template fuzz: %s\n", what);
  abort();
}

const nlohmann::ordered_json& conversation() {
  static const auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi {{ x }} \u00e9"},
    {"role": "assistant", "content": "Hello", "reasoning_content": "think",
     "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
    {"role": "tool", "content": "{\"r\": [1, 2.5, null, true]}"},
    {"role": "user", "content": [{"type": "text", "text": "parts"}]}])");
  return messages;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer::tokenizers;
  const std::string source(reinterpret_cast<const char*>(data), size);
  jinja::Limits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_call_depth = 20;
  limits.max_nesting = 60;
  limits.max_seconds = 1.0;
  try {
    jinja::Template t = jinja::Template::parse(source, "fuzz", limits);
    std::vector<std::pair<std::string, jinja::Value>> vars = {
        {"messages", jinja::Value::from_json(conversation())},
        {"tools", jinja::Value::from_json(nlohmann::ordered_json::parse(
                      R"([{"type": "function", "function": {"name": "f"}}])"))},
        {"add_generation_prompt", jinja::Value::boolean(true)},
        {"bos_token", jinja::Value::string("<s>")}};
    for (bool prompt : {false, true}) {
      vars[2].second = jinja::Value::boolean(prompt);
      const jinja::Rendered r = t.render(vars);
      if (r.text.size() > limits.max_output_bytes) fail("output past its bound");
      if (!trainer::base::is_valid_utf8(r.text)) fail("output is not UTF-8");
      for (const auto& [b, e] : r.generation_bytes)
        if (b > e || e > r.text.size()) fail("a generation span outside the text");
    }
  } catch (const jinja::TemplateError& e) {
    if (std::string(e.what()).find('\n') != std::string::npos) fail("a multi-line error");
  } catch (const trainer::InputError&) {
  }
  return 0;
}

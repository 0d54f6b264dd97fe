// SFT data that TRL cannot prepare, and options it refuses: each one line naming the file, the
// row and what is allowed; what TRL accepts quietly (completion_only_loss on language modeling
// data, an empty text completion); the records of a file as `datasets` types them, and the files
// of a folder as it splits them. On a tokenizer of single characters made here (no Python).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/tokenizers/chat_template.h"
#include "lib/tokenizers/tokenizer.h"
#include "tests/char_tokenizer.h"
#include "tests/test_util.h"
#include "trl/sft_data.h"

namespace trainer {
namespace sft_input_test {

using Json = nlohmann::ordered_json;
using testing::input_error_of;

// A folder with a tokenizer of single characters (printable ASCII and "\n", ids 1.., <unk> 0),
// the added tokens <|im_start|> <|im_end|> </s> (its eos_token) and <s>, a BOS its post-processor
// adds.
std::string tiny_tokenizer(const testing::TempDir& dir) {
  std::ofstream(dir.file("tokenizer.json"))
      << testing::char_tokenizer_json({"<|im_start|>", "<|im_end|>", "</s>", "<s>"}, "<s>");
  std::ofstream(dir.file("tokenizer_config.json"))
      << R"({"bos_token": "<s>", "eos_token": "</s>"})";
  return dir.path();
}

// ChatML with {% generation %} around the assistant's turns; a "bad" role refused.
// (Transformers' trim_blocks eats the newline after a block tag: "\n" is written as an expression.)
const char* kTemplate =
    "{% for m in messages %}{% if m.role == 'bad' %}{{ raise_exception('unknown role: ' ~ m.role) "
    "}}{% endif %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% generation %}"
    "{{ m.content }}<|im_end|>{% endgeneration %}{% else %}{{ m.content }}<|im_end|>{% endif %}"
    "{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    "{% if tools %}[{{ tools | length }} tools]{% endif %}{% if flag %}[flag]{% endif %}";

struct Fixture {
  testing::TempDir dir;
  tokenizers::Tokenizer tokenizer = tokenizers::Tokenizer::load(tiny_tokenizer(dir));
  tokenizers::ChatTemplate chat =
      tokenizers::ChatTemplate::from_source(kTemplate, "chatml.jinja", dir.path());
  tokenizers::ChatTemplate plain = tokenizers::ChatTemplate::from_source(
      "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}", "plain.jinja",
      dir.path());

  trl::SftData prepare(const std::string& records, const trl::SftDataOptions& options = {},
                       const tokenizers::ChatTemplate* with = nullptr) const {
    std::vector<Json> rows;
    for (const std::string& line : testing::lines_of(records)) rows.push_back(Json::parse(line));
    return trl::prepare_sft_dataset(rows, tokenizer, with ? with : &chat, options, "data.jsonl");
  }
  std::string error(const std::string& records, const trl::SftDataOptions& options = {},
                    const tokenizers::ChatTemplate* with = nullptr) const {
    return input_error_of([&] { prepare(records, options, with); });
  }
  std::vector<int32_t> ids(const std::string& text, bool special = true) const {
    return tokenizer.encode(text, special);
  }
};

const std::string kChat =
    R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})";

// What TRL prepares: plain text gets the eos token once and the BOS of the post-processor; a
// conversation rendered and tokenized without special tokens, its assistant turn masked in.
TEST(SftInput, WhatEachShapeBecomes) {
  const Fixture f;
  trl::SftData text = f.prepare(R"({"text": "ab"})"
                                "\n"
                                R"({"text": "cd</s>"})");
  EXPECT_EQ(text.shape, trl::SftShape::kLanguageModeling);
  ASSERT_EQ(text.rows.size(), 2u);
  EXPECT_EQ(text.rows[0].input_ids, f.ids("ab</s>"));
  EXPECT_EQ(text.rows[1].input_ids, f.ids("cd</s>"));  // not twice
  EXPECT_EQ(text.rows[0].labels, text.rows[0].input_ids);
  EXPECT_EQ(text.tokens, 8);

  trl::SftDataOptions only_assistant;
  only_assistant.assistant_only_loss = true;
  const trl::SftData chat = f.prepare(kChat, only_assistant);
  EXPECT_EQ(chat.shape, trl::SftShape::kConversational);
  const std::vector<int32_t> ids =
      f.ids("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n", false);
  ASSERT_EQ(chat.rows[0].input_ids, ids);
  std::vector<int32_t> labels(ids.size(), -100);
  for (size_t i = ids.size() - 4; i + 1 < ids.size(); ++i) labels[i] = ids[i];  // "yo<|im_end|>"
  EXPECT_EQ(chat.rows[0].labels, labels);

  // Prompt-completion: the completion (and its eos) alone in the loss; an empty completion is
  // the eos token alone.
  const trl::SftData pc = f.prepare(R"({"prompt": "ab", "completion": "c"})"
                                    "\n"
                                    R"({"prompt": "ab", "completion": ""})");
  EXPECT_EQ(pc.shape, trl::SftShape::kPromptCompletion);
  EXPECT_EQ(pc.rows[0].input_ids, f.ids("abc</s>"));
  const int32_t eos = *f.tokenizer.token_to_id("</s>");
  EXPECT_EQ(pc.rows[0].labels, (std::vector<int32_t>{-100, -100, -100, f.ids("c", false)[0], eos}));
  EXPECT_EQ(pc.rows[1].labels, (std::vector<int32_t>{-100, -100, -100, eos}));

  // {from, value} become {role, content}; tools as a JSON text are the list; template variables.
  const trl::SftData converted = f.prepare(
      R"({"conversations": [{"from": "user", "value": "hi"}], "tools": "[{\"name\": \"f\"}]",)"
      R"( "chat_template_kwargs": {"flag": true}})");
  EXPECT_EQ(converted.shape, trl::SftShape::kConversational);
  EXPECT_EQ(converted.rows[0].input_ids,
            f.ids("<|im_start|>user\nhi<|im_end|>\n[1 tools][flag]", false));
}

// completion_only_loss true on data without a completion changes nothing, as in TRL (no
// completion mask to apply); truncation keeps the start or the end; rows left without a label
// are dropped and counted.
TEST(SftInput, OptionsTrlAcceptsQuietly) {
  const Fixture f;
  trl::SftDataOptions o;
  o.completion_only_loss = true;
  const trl::SftData text = f.prepare(R"({"text": "abc"})", o);
  EXPECT_EQ(text.rows[0].labels, f.ids("abc</s>"));
  o = {};
  o.max_length = 2;
  const std::string rows = R"({"prompt": "abc", "completion": "d"})"
                           "\n"
                           R"({"prompt": "", "completion": "bcd"})";
  const trl::SftData start = f.prepare(rows, o);
  EXPECT_EQ(start.examples, 2);
  EXPECT_EQ(start.truncated, 2);
  EXPECT_EQ(start.dropped, 1);  // "<s>a" of row 1 has no label
  ASSERT_EQ(start.rows.size(), 1u);
  EXPECT_EQ(start.rows[0].input_ids, f.ids("b"));
  EXPECT_EQ(start.rows[0].labels, (std::vector<int32_t>{-100, f.ids("b")[1]}));
  o.truncation_mode = "keep_end";
  const trl::SftData end = f.prepare(rows, o);
  EXPECT_EQ(end.dropped, 0);
  ASSERT_EQ(end.rows.size(), 2u);
  EXPECT_EQ(end.rows[0].input_ids, f.ids("d</s>", false));
  EXPECT_EQ(end.rows[0].labels, f.ids("d</s>", false));
}

TEST(SftInput, BadRecordsAreOneLineEach) {
  const Fixture f;
  trl::SftDataOptions only_assistant;
  only_assistant.assistant_only_loss = true;
  const std::string shapes =
      "; TRL reads 'text' (a text; dataset_text_field names the column), 'messages' (a list of "
      "{role, content}), 'conversations' (a list of {from, value}), or 'prompt' and 'completion' "
      "(two texts, or two lists of messages)";
  EXPECT_EQ(f.error(R"({"title": "x", "body": null})"),
            "data.jsonl row 1 is no shape of SFT data TRL knows (its columns: 'title')" + shapes);
  EXPECT_EQ(f.error(R"({"conversations": []})"),
            "data.jsonl row 1 is no shape of SFT data TRL knows: 'conversations' is an empty list "
            "(its columns: 'conversations')" +
                shapes);
  EXPECT_EQ(f.error(kChat + "\n" + R"({"text": "x"})"),
            "data.jsonl row 2 has no 'messages' (its columns: 'text'); row 1 is conversational "
            "data, and every row holds what it holds: 'messages', a list of messages");
  EXPECT_EQ(f.error(R"({"prompt": "a", "completion": 5})"),
            "data.jsonl row 1: 'completion' is an integer (5), not a text; prompt-completion data "
            "holds 'prompt' and 'completion' texts");
  EXPECT_EQ(f.error(R"({"prompt": [{"role": "user", "content": "a"}], "completion": "b"})"),
            "data.jsonl row 1: 'completion' is a string (\"b\"), not a list of messages; "
            "conversational prompt-completion data holds 'prompt' and 'completion' lists of "
            "messages");
  EXPECT_EQ(f.error(kChat + "\n" + R"({"messages": []})"),
            "data.jsonl row 2: 'messages' is an empty list; a conversation holds at least one "
            "message");
  EXPECT_EQ(f.error(R"({"messages": [{"role": "user", "content": "a"}, "b"]})"),
            "data.jsonl row 1: message 2 of 'messages' is a string (\"b\"), not a message (an "
            "object with 'role' and 'content')");
  // An empty completion of messages: TRL's is_conversational looks at "prompt" or "completion"
  // by Python's set order and fails on completion[0], or trains on none of the row.
  EXPECT_EQ(f.error(R"({"prompt": [{"role": "user", "content": "a"}], "completion": []})"),
            "data.jsonl row 1: 'completion' is an empty list; a conversation holds at least one "
            "message (TRL fails on an empty completion, or trains on none of the row)");
  EXPECT_EQ(f.error(kChat + "\n" + R"({"messages": [{"role": "bad", "content": "a"}]})"),
            "data.jsonl row 2: the chat template refuses the conversation: chat template "
            "chatml.jinja line 1: raise_exception: unknown role: bad");
  EXPECT_EQ(
      f.error(kChat + "\n" + R"({"messages": [{"role": "user", "content": "a"}]})", only_assistant),
      "data.jsonl row 2: You're using `assistant_only_loss=True`, but this example has no "
      "assistant tokens (TRL's RuntimeError): the chat template's {% generation %} blocks "
      "mark none of its tokens; give the row an assistant message, or use a template with "
      "{% generation %} around the assistant's turns");
  EXPECT_EQ(f.error(kChat, only_assistant, &f.plain),
            "assistant_only_loss needs a chat template with {% generation %} blocks around the "
            "assistant's tokens, and plain.jinja has none (TRL swaps in its own training template "
            "for the model families it knows, and refuses the others); give a training template "
            "with chat_template_path, such as TRL's chat_templates/*_training.jinja");
  EXPECT_EQ(f.error(R"({"text": "a"})", only_assistant),
            "data.jsonl row 1: assistant_only_loss needs conversational data ('messages', or "
            "'prompt' and 'completion' lists of messages) (TRL: You set "
            "`assistant_only_loss=True`, but the dataset is not conversational)");
  // TRL looks at the data before it converts {from, value}, and refuses it.
  EXPECT_EQ(f.error(R"({"conversations": [{"from": "user", "value": "a"}]})", only_assistant),
            "data.jsonl row 1: assistant_only_loss needs conversational data ('messages', or "
            "'prompt' and 'completion' lists of messages), and TRL checks 'conversations' of "
            "{from, value} before it converts them: give 'messages' of {role, content} (TRL: You "
            "set `assistant_only_loss=True`, but the dataset is not conversational)");
  EXPECT_EQ(f.error(R"({"messages": [{"role": "user", "content": "a"}], "tools": "[1,"})"),
            "data.jsonl row 1: 'tools' is a text that is not JSON (\"[1,\"); tools is a list of "
            "tool schemas, or that list as a JSON text");
  EXPECT_EQ(f.error(R"({"messages": [{"role": "user", "content": "a"}], "tools": 3})"),
            "data.jsonl row 1: 'tools' is an integer (3), not a list of tool schemas");
  EXPECT_EQ(f.error(R"({"text": "a", "chat_template_kwargs": [1]})"),
            "data.jsonl row 1: 'chat_template_kwargs' is an array ([1]), not an object of "
            "template variables");
  EXPECT_EQ(f.error(R"({"text": "a", "chat_template_kwargs": {"add_generation_prompt": true}})"),
            "data.jsonl row 1: chat_template_kwargs holds 'add_generation_prompt', a parameter of "
            "apply_chat_template that TRL sets itself, not a template variable "
            "(chat_template_kwargs holds variables such as enable_thinking)");
  EXPECT_EQ(input_error_of([&] {
              trl::prepare_sft_dataset({Json::parse(kChat)}, f.tokenizer, nullptr, {}, "d.jsonl");
            }),
            "d.jsonl row 1 is conversational, but the tokenizer " + f.tokenizer.path() +
                " has no chat template (no chat_template.jinja, no chat_template in "
                "tokenizer_config.json); give one with chat_template_path");
  EXPECT_EQ(
      input_error_of([&] { trl::prepare_sft_dataset({}, f.tokenizer, nullptr, {}, "d.jsonl"); }),
      "d.jsonl holds no records");
}

TEST(SftInput, BadOptionsAreOneLineEach) {
  const Fixture f;
  trl::SftDataOptions o;
  o.packing = true;
  o.max_length = std::nullopt;
  EXPECT_EQ(f.error(kChat, o),
            "packing needs a max_length, the length of the packed rows (TRL: When packing is "
            "enabled, `max_length` can't be `None`.)");
  o = {};
  o.truncation_mode = "keep_middle";
  EXPECT_EQ(f.error(kChat, o),
            "truncation_mode 'keep_middle' is not keep_start or keep_end (TRL: Unsupported "
            "truncation mode)");
  o = {};
  o.packing_strategy = "first_fit";
  EXPECT_EQ(f.error(kChat, o),
            "packing_strategy 'first_fit' is not one of bfd, bfd_split, wrapped (TRL's "
            "pack_dataset)");
  o = {};
  o.max_length = 0;
  EXPECT_EQ(f.error(kChat, o),
            "max_length 0 is not a number of tokens; give one of at least 1, or null for no "
            "truncation");
  o = {};
  o.eos_token = "<eos>";
  EXPECT_EQ(f.error(kChat, o), "eos_token '<eos>' is not in the vocabulary of the tokenizer " +
                                   f.tokenizer.path() +
                                   " (TRL requires the eos_token to be a token of it)");
  // A tokenizer without an eos token (no tokenizer_config.json) cannot end texts.
  const auto no_eos =
      tokenizers::Tokenizer::from_json(testing::slurp(f.dir.file("tokenizer.json")), "bare.json");
  EXPECT_EQ(input_error_of([&] {
              trl::prepare_sft_dataset({Json::parse(R"({"text": "a"})")}, no_eos, nullptr, {},
                                       "d.jsonl");
            }),
            "d.jsonl row 1 is language modeling, whose texts TRL ends with the tokenizer's "
            "eos_token, and the tokenizer bare.json has none; set eos_token");
  // bfd-requeue, TRL's old name of bfd_split, is taken with a warning.
  o = {};
  o.packing = true;
  o.max_length = 4;
  o.packing_strategy = "bfd-requeue";
  EXPECT_EQ(f.prepare(R"({"text": "abcdef"})", o).rows.size(), 2u);
  // eos_token chosen by SFTConfig: the texts' end, and the template's eos_token.
  o = {};
  o.eos_token = "<|im_end|>";
  EXPECT_EQ(f.prepare(R"({"text": "a"})", o).rows[0].input_ids, f.ids("a<|im_end|>"));
}

// The records of a file as `datasets` hands them over: every column in every row, messages of
// different keys as they were, objects of the same keys in the first one's order, integers
// beside floats made floats, a Json column's JSON texts parsed.
TEST(DataFiles, RecordsAsDatasetsTypesThem) {
  testing::TempDir dir;
  std::ofstream(dir.file("d.jsonl"))
      << R"({"messages": [{"role": "user", "content": "a"}], "x": {"b": 1, "a": 2}, "t": [1]})"
         "\n"
      << R"({"messages": [{"content": "b", "role": "user", "name": "n"}], "x": {"a": 2.5, "b": 3},)"
      << R"( "t": "[2]", "k": "1"})"
         "\n";
  const auto records = trl::read_trl_records(dir.file("d.jsonl"));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].dump(),
            R"({"messages":[{"role":"user","content":"a"}],"x":{"b":1,"a":2.0},"t":[1],"k":null})");
  EXPECT_EQ(records[1].dump(),
            R"({"messages":[{"content":"b","role":"user","name":"n"}],"x":{"b":3,"a":2.5},"t":[2],)"
            R"("k":"1"})");
  EXPECT_EQ(input_error_of([&] { trl::read_trl_records(dir.file("d.csv")); }),
            "data file '" + dir.file("d.csv") +
                "' has the extension '.csv'; use .json or .jsonl (JSON Lines: a JSON object a "
                "line)");
}

// A folder's files split by name as `datasets` splits them; TRL's eval split is "test".
TEST(DataFiles, AFoldersTrainAndEvalFiles) {
  testing::TempDir dir;
  auto touch = [&](const std::string& name) {
    std::filesystem::create_directories(std::filesystem::path(dir.file(name)).parent_path());
    std::ofstream(dir.file(name)) << "{}\n";
  };
  touch("train.jsonl");
  touch("my_validation.jsonl");
  touch("README.md");
  touch("config.json");
  touch(".hidden/test.jsonl");
  EXPECT_EQ(trl::resolve_data_files(dir.path()).train, dir.file("train.jsonl"));
  EXPECT_EQ(trl::resolve_data_files(dir.path()).eval, dir.file("my_validation.jsonl"));
  touch("eval-2.json");
  EXPECT_EQ(trl::resolve_data_files(dir.path()).eval, dir.file("eval-2.json"));
  EXPECT_EQ(trl::resolve_data_files(dir.file("train.jsonl")).train, dir.file("train.jsonl"));
  EXPECT_EQ(trl::resolve_data_files(dir.file("train.jsonl")).eval, "");
  // Folders named after a split come first; a file of no split alone is train.
  testing::TempDir nested;
  std::filesystem::create_directories(nested.file("train"));
  std::filesystem::create_directories(nested.file("test"));
  std::ofstream(nested.file("train/a.jsonl")) << "{}\n";
  std::ofstream(nested.file("test/train_b.jsonl")) << "{}\n";
  EXPECT_EQ(trl::resolve_data_files(nested.path()).train, nested.file("train/a.jsonl"));
  EXPECT_EQ(trl::resolve_data_files(nested.path()).eval, nested.file("test/train_b.jsonl"));
  testing::TempDir one;
  std::ofstream(one.file("chats.jsonl")) << "{}\n";
  EXPECT_EQ(trl::resolve_data_files(one.path()).train, one.file("chats.jsonl"));
  std::ofstream(one.file("more.jsonl")) << "{}\n";
  EXPECT_EQ(input_error_of([&] { trl::resolve_data_files(one.path()); }),
            "dataset_name " + one.path() +
                ": the train split has 2 files (chats.jsonl, more.jsonl); trainer sft reads one "
                "file a split: join them, or give the file as dataset_name");
  testing::TempDir only_test;
  std::ofstream(only_test.file("test.jsonl")) << "{}\n";
  EXPECT_EQ(input_error_of([&] { trl::resolve_data_files(only_test.path()); }),
            "dataset_name " + only_test.path() +
                " has no train split: `datasets` splits its files by name into test (a train file "
                "is named train*.jsonl or training*.jsonl, or lies in a train/ folder; any split "
                "is data/{split}-00000-of-00001.jsonl)");
  // TRL's dataset_train_split / dataset_test_split name the splits (the alignment handbook's
  // train_sft, test_sft: data/{split}-00000-of-00001.jsonl), and dataset_config a subfolder.
  testing::TempDir named;
  std::filesystem::create_directories(named.file("chat/data"));
  std::ofstream(named.file("chat/data/train_sft-00000-of-00001.jsonl")) << "{}\n";
  std::ofstream(named.file("chat/data/test_sft-00000-of-00001.jsonl")) << "{}\n";
  const std::string chat = trl::dataset_location(named.path(), std::string("chat"));
  EXPECT_EQ(chat, named.file("chat"));
  EXPECT_EQ(trl::dataset_location(named.path(), std::string("default")), named.path());
  EXPECT_EQ(trl::dataset_location(named.path(), std::nullopt), named.path());
  EXPECT_EQ(trl::resolve_data_files(chat, "train_sft", "test_sft").train,
            named.file("chat/data/train_sft-00000-of-00001.jsonl"));
  EXPECT_EQ(trl::resolve_data_files(chat, "train_sft", "test_sft").eval,
            named.file("chat/data/test_sft-00000-of-00001.jsonl"));
  EXPECT_EQ(trl::resolve_data_files(chat, "train_sft", "test").eval, "");
  EXPECT_EQ(input_error_of([&] { trl::dataset_location(named.path(), std::string("en")); }),
            "argument dataset_config: en: dataset_name " + named.path() +
                " has no subfolder en (a configuration of a local data set is its subfolder; "
                "null or default: the data set itself)");
  testing::TempDir empty;
  EXPECT_EQ(input_error_of([&] { trl::resolve_data_files(empty.path()); }),
            "dataset_name " + empty.path() +
                " holds no .json or .jsonl data file (hidden files, config.json and "
                "dataset_info.json left out, as `datasets` leaves them out)");
  EXPECT_EQ(input_error_of([&] { trl::resolve_data_files(empty.file("nothing")); }),
            "dataset_name " + empty.file("nothing") + ": does not exist");
}

}  // namespace sft_input_test
}  // namespace trainer

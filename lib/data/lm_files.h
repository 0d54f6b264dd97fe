// The data files of run_clm.py (train_file, validation_file) read as Hugging Face `datasets` 5.2
// reads them, and the percent split of one file into train and validation (torch-free).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::data {

// The examples (texts) of one run_clm data file, in file order, chosen by the extension (after the
// last '.', case-sensitive, as run_clm's split(".")[-1]):
//
// ".txt" (and a name without an extension, such as fortunes' files: run_clm would refuse it): the
// lines of `datasets`' text loader: the file decoded as UTF-8 (a leading BOM stays, as U+FEFF at
// the start of the first line), "\r\n" and a lone "\r" read as "\n" (universal newlines), then cut
// after each "\n" only: since datasets 2.1 (huggingface/datasets#3910) U+0085, U+2028, U+2029, \v,
// \f and \x1c-\x1e stay inside their line. Each line keeps its "\n" where `keep_linebreaks`
// (run_clm's default), else loses it; an empty line is an example ("\n" or ""); a last line without
// a break is one too; a NUL byte is text.
//
// ".json", ".jsonl": the `text_column` strings of the records of `datasets`' JSON loader: JSON
// objects one after another, separated by JSON whitespace or nothing (pyarrow's reader: blank
// lines, "\r" line ends, an object over several lines, two on a line all read), a leading UTF-8
// BOM skipped; or, when the file (after BOM and blanks) is one top-level array, its elements:
// objects as records, or texts, each element the record {"text": element}. Which of the two:
// where '[' is the first byte, datasets' test (a '{' before the first '"' in the array's first 100
// bytes: objects); after blanks, pandas reads it: the first element's type. A key given twice in
// a JSON Lines record is an error (pyarrow's); in an array's objects, or nested, the last stands.
//
// Throws InputError (one line, naming the file, and the line or the array element) where
// `datasets` or run_clm after it would fail: another extension (the allowed ones listed), a
// missing, unreadable or non-regular file, a UTF-16/32 file, invalid UTF-8 (line and byte
// offset: datasets' UnicodeDecodeError), invalid JSON (NaN and Infinity included, which pyarrow
// reads in other columns), a record that is not an object, a record without `text_column` (its
// columns listed: datasets fills a null, which run_clm cannot tokenize) or where it is not a
// string (null, a number, a list, ...), and a file with no example at all (empty, only blanks,
// an empty array: `datasets` refuses those too). An object holding the records under a field
// ({"data": [...]}) is one record without a text column: run_clm passes no `field`.
std::vector<std::string> read_lm_file(const std::string& path,
                                      const std::string& text_column = "text",
                                      bool keep_linebreaks = true);

// The examples of a data file's `bytes` as read_lm_file reads them, by `extension` ("txt",
// "json" or "jsonl"); `path` names the file in errors. Throws InputError as read_lm_file does.
std::vector<std::string> parse_lm_bytes(std::string_view bytes, const std::string& extension,
                                        const std::string& path,
                                        const std::string& text_column = "text",
                                        bool keep_linebreaks = true);

// One record of a JSON data file, and where it stands in the file ("line 3", "element 2 of the
// top-level array"), for messages.
struct JsonRecord {
  nlohmann::ordered_json value;  // a JSON object
  std::string where;
};

// The records of a ".json"/".jsonl" file's `bytes` as `datasets`' JSON loader finds them (the
// objects of JSON Lines, or one top-level array's objects, or its texts each as {"text": text}),
// before any column is read: the reader read_lm_file's JSON files go through. `path` names the
// file in errors. Throws InputError as read_lm_file does (but for the text column).
std::vector<JsonRecord> parse_json_records(std::string_view bytes, const std::string& path);

// parse_json_records of the file `path`, which must end in ".json" or ".jsonl" (else an
// InputError saying so), a regular, readable file.
std::vector<JsonRecord> read_json_records(const std::string& path);

// run_clm's split of one file when there is no validation_file: validation = train[:p%], train =
// train[p%:], at the index `datasets`' ReadInstruction gives both with its default "closest"
// rounding: int(round(p * count / 100.0)) (Python's round: halves to even; 5% of 10 is 0, of 30
// is 2, of 50 is 2), clamped to [0, count]. run_clm's percentage is a whole number (datasets'
// split strings take no other); a fraction is computed by the same formula. Throws InputError
// "validation_split_percentage <p> is not between 0 and 100" outside [0, 100] (or NaN), and
// std::invalid_argument for a negative count.
int64_t validation_split_boundary(int64_t count, double percentage);

}  // namespace trainer::data

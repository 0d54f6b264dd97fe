// The records of a JSON data file as Hugging Face `datasets` 5.2 hands them to Python once its
// JSON loader has typed their columns (torch-free): what a script that reads each row of
// load_dataset("json", ...) sees, nested objects and lists included.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

namespace trainer::data {

// Rewrites `records` (JSON objects, in file order) as `datasets` hands them back:
//
// - every record has every column (the union, in the order first seen); a missing one is null;
// - where the objects at a nested place have different keys (find_mixed_struct_types_field_paths:
//   messages with and without "tool_calls", tool-call arguments of different tools), or where
//   objects or lists share a place with other values, or scalars of different kinds (a string and
//   a number, a bool and a number) do, that place becomes a Json column: its values come back as
//   they were, but that a string that parses as JSON comes back parsed ("1" as 1, "null" as null,
//   "[...]" as a list: json_encode_field keeps such a string as the JSON it holds);
// - elsewhere pyarrow's struct: objects with the same keys all in the first one's order, and
//   integers beside floats at one place made floats (2 as 2.0).
//
// Left out: pandas' ujson writes a Json column's floats with 10 decimals (0.1234567890123 comes
// back 0.123456789), and the loader looks for mixed objects in its first 10 MiB only.
void type_like_datasets(std::vector<nlohmann::ordered_json>& records);

}  // namespace trainer::data

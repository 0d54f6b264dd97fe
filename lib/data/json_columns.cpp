// `datasets`' typing of a JSON file's columns (find_mixed_struct_types_field_paths, then
// pyarrow's inference), replayed on the records: which places become Json columns and which
// structs, lists and floats.
#include "lib/data/json_columns.h"

#include <memory>
#include <set>
#include <string>
#include <utility>

#include "lib/base/json_text.h"

namespace trainer::data {

namespace {

using Json = nlohmann::ordered_json;

// What `datasets` makes of the values at one place of the records.
struct Column {
  enum class Kind { kNothing, kJson, kStruct, kList, kFloat, kScalar };
  Kind kind = Kind::kNothing;
  std::vector<std::pair<std::string, Column>> fields;  // kStruct, in pyarrow's order
  std::unique_ptr<Column> element;                     // kList
};

std::set<std::string> keys_of(const Json& object) {
  std::set<std::string> keys;
  for (const auto& item : object.items()) keys.insert(item.key());
  return keys;
}

// The column of the (non-null) `values` at one place; `root` for the records themselves, whose
// keys may differ (a missing column is null).
Column infer(const std::vector<const Json*>& values, bool root) {
  Column column;
  if (values.empty()) return column;
  auto all = [&](auto test) {
    for (const Json* v : values) {
      if (!test(*v)) return false;
    }
    return true;
  };
  auto any = [&](auto test) {
    for (const Json* v : values) {
      if (test(*v)) return true;
    }
    return false;
  };
  if (all([](const Json& v) { return v.is_object(); })) {
    const std::set<std::string> first = keys_of(*values[0]);
    if (!root && (first.empty() || any([&](const Json& v) { return keys_of(v) != first; }))) {
      column.kind = Column::Kind::kJson;
      return column;
    }
    column.kind = Column::Kind::kStruct;
    std::set<std::string> seen;
    for (const Json* v : values) {
      for (const auto& item : v->items()) {
        if (!seen.insert(item.key()).second) continue;
        std::vector<const Json*> children;
        for (const Json* w : values) {
          auto found = w->find(item.key());
          if (found != w->end() && !found->is_null()) children.push_back(&*found);
        }
        column.fields.emplace_back(item.key(), infer(children, false));
      }
    }
    return column;
  }
  if (all([](const Json& v) { return v.is_array(); })) {
    std::vector<const Json*> elements;
    for (const Json* v : values) {
      for (const Json& e : *v) {
        if (!e.is_null()) elements.push_back(&e);
      }
    }
    column.kind = Column::Kind::kList;
    column.element = std::make_unique<Column>(infer(elements, false));
    return column;
  }
  if (any([](const Json& v) { return v.is_object() || v.is_array(); })) {
    column.kind = Column::Kind::kJson;
    return column;
  }
  // Scalars: pyarrow promotes integers beside floats, and fails on any other mix, which
  // `datasets` answers by making the place a Json column.
  if (all([](const Json& v) { return v.is_number(); })) {
    const bool floats = any([](const Json& v) { return v.is_number_float(); });
    const bool integers = any([](const Json& v) { return !v.is_number_float(); });
    column.kind = floats && integers ? Column::Kind::kFloat : Column::Kind::kScalar;
    return column;
  }
  const auto kind = values[0]->type();
  column.kind = all([&](const Json& v) { return v.type() == kind; }) ? Column::Kind::kScalar
                                                                     : Column::Kind::kJson;
  return column;
}

// `value` as `datasets` hands it back under `column`.
void apply(const Column& column, Json& value, bool root) {
  if (value.is_null()) return;
  switch (column.kind) {
    case Column::Kind::kNothing:
    case Column::Kind::kScalar:
      return;
    case Column::Kind::kFloat:
      if (value.is_number() && !value.is_number_float()) value = value.get<double>();
      return;
    case Column::Kind::kJson:
      if (value.is_string()) {
        // json_encode_field keeps a string that parses as JSON as that JSON (one nested past
        // our depth limit stays a string).
        const std::string& text = value.get_ref<const std::string&>();
        if (base::json_too_deep_at(text) != std::string_view::npos) return;
        Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!parsed.is_discarded()) value = std::move(parsed);
      }
      return;
    case Column::Kind::kList:
      if (value.is_array()) {
        for (Json& element : value) apply(*column.element, element, false);
      }
      return;
    case Column::Kind::kStruct: {
      if (!value.is_object()) return;
      Json ordered = Json::object();
      for (const auto& [key, field] : column.fields) {
        auto found = value.find(key);
        if (found == value.end()) {
          if (root) ordered[key] = nullptr;
          continue;
        }
        Json child = std::move(*found);
        apply(field, child, false);
        ordered[key] = std::move(child);
      }
      value = std::move(ordered);
      return;
    }
  }
}

}  // namespace

void type_like_datasets(std::vector<Json>& records) {
  std::vector<const Json*> values;
  for (const Json& record : records) values.push_back(&record);
  const Column column = infer(values, /*root=*/true);
  for (Json& record : records) apply(column, record, /*root=*/true);
}

}  // namespace trainer::data

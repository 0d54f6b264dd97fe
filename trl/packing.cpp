// TRL's packing (trl/data_utils.py: _SegmentTree, _pack_bfd, _pack_wrapped, pack_dataset),
// step for step, so that the bins, their order and the order inside them are TRL's.
#include "trl/packing.h"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "lib/base/errors.h"

namespace trainer::trl {

namespace {

// TRL's _SegmentTree: the largest free space under each node, so that search(v) finds the
// smallest free space >= v among the values 1..maxval added.
class SegmentTree {
 public:
  explicit SegmentTree(int64_t maxval) : maxval_(maxval) {
    // 1 << (maxval - 1).bit_length()
    int64_t bits = 0;
    for (int64_t v = maxval - 1; v > 0; v >>= 1) ++bits;
    size_ = int64_t{1} << bits;
    tree_.assign(static_cast<size_t>(2 * size_), 0);
  }
  void add(int64_t value) { set(value, value); }
  void remove(int64_t value) { set(value, 0); }
  int64_t search(int64_t value) const {
    check(value);
    int64_t i = 1;
    while (i < size_) i = tree_[static_cast<size_t>(i << 1)] >= value ? i << 1 : (i << 1) + 1;
    return tree_[static_cast<size_t>(i)];
  }

 private:
  void check(int64_t value) const {
    if (value <= 0 || value > maxval_) {
      throw std::logic_error(fmt::format("SegmentTree: {} is not in 1..{}", value, maxval_));
    }
  }
  void set(int64_t value, int64_t leaf) {
    check(value);
    int64_t i = size_ + value - 1;
    tree_[static_cast<size_t>(i)] = leaf;
    while (i > 1) {
      i >>= 1;
      tree_[static_cast<size_t>(i)] =
          std::max(tree_[static_cast<size_t>(i << 1)], tree_[static_cast<size_t>((i << 1) + 1)]);
    }
  }
  int64_t maxval_, size_;
  std::vector<int64_t> tree_;
};

// A sequence to pack: where its tokens lie in a row of the batch.
struct Piece {
  size_t row;
  size_t begin, end;
  int64_t length() const { return static_cast<int64_t>(end - begin); }
};

// _pack_bfd on one batch.
void pack_bfd(const std::vector<SftRow>& batch, int64_t seq_length, bool split,
              std::vector<SftRow>& out) {
  const auto s = static_cast<size_t>(seq_length);
  std::vector<Piece> pieces;
  for (size_t r = 0; r < batch.size(); ++r) {
    const size_t n = batch[r].input_ids.size();
    if (n == 0) continue;  // empty sequences are filtered out
    if (!split) {
      pieces.push_back({r, 0, std::min(n, s)});  // pc.list_slice(column, 0, seq_length)
      continue;
    }
    for (size_t at = 0; at < n; at += s) pieces.push_back({r, at, std::min(n, at + s)});
  }
  // lengths.sort("descending", by=0): Arrow's sort_indices, a stable sort.
  std::vector<size_t> order(pieces.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return pieces[a].length() > pieces[b].length(); });

  struct Bin {
    std::vector<size_t> ids;
    int64_t length = 0;
  };
  std::vector<Bin> bins;
  SegmentTree tree(seq_length);
  tree.add(seq_length);  // the max, `seq_length` bin is always available
  std::map<int64_t, std::deque<size_t>> space_to_bin;
  for (const size_t id : order) {
    const int64_t length = pieces[id].length();
    int64_t space = tree.search(length);
    size_t bin;
    if (space < seq_length) {  // an existing bin with exactly this much space
      bin = space_to_bin[space].front();
      space_to_bin[space].pop_front();
    } else {
      bin = bins.size();
      bins.emplace_back();
    }
    bins[bin].ids.push_back(id);
    bins[bin].length += length;
    if (space < seq_length && space_to_bin[space].empty()) tree.remove(space);
    space -= length;
    space_to_bin[space].push_back(bin);
    if (space > 0) tree.add(space);
  }
  for (const Bin& bin : bins) {
    SftRow row;
    row.input_ids.reserve(static_cast<size_t>(bin.length));
    row.labels.reserve(static_cast<size_t>(bin.length));
    for (const size_t id : bin.ids) {
      const Piece& p = pieces[id];
      const SftRow& from = batch[p.row];
      row.input_ids.insert(row.input_ids.end(), from.input_ids.begin() + p.begin,
                           from.input_ids.begin() + p.end);
      row.labels.insert(row.labels.end(), from.labels.begin() + p.begin,
                        from.labels.begin() + p.end);
      row.seq_lengths.push_back(static_cast<int32_t>(p.length()));
    }
    out.push_back(std::move(row));
  }
}

// _pack_wrapped on one batch.
void pack_wrapped(const std::vector<SftRow>& batch, int64_t seq_length, std::vector<SftRow>& out) {
  std::vector<int32_t> ids, labels;
  for (const SftRow& row : batch) {
    ids.insert(ids.end(), row.input_ids.begin(), row.input_ids.end());
    labels.insert(labels.end(), row.labels.begin(), row.labels.end());
  }
  const auto s = static_cast<size_t>(seq_length);
  for (size_t at = 0; at < ids.size(); at += s) {
    const size_t end = std::min(ids.size(), at + s);
    SftRow row;
    row.input_ids.assign(ids.begin() + at, ids.begin() + end);
    row.labels.assign(labels.begin() + at, labels.begin() + end);
    out.push_back(std::move(row));
  }
}

}  // namespace

void check_packing_strategy(const std::string& strategy) {
  if (strategy != "bfd" && strategy != "bfd_split" && strategy != "wrapped") {
    throw InputError(fmt::format(
        "packing_strategy '{}' is not one of bfd, bfd_split, wrapped (TRL's pack_dataset)",
        strategy));
  }
}

std::vector<SftRow> pack_rows(std::vector<SftRow> rows, int64_t seq_length,
                              const std::string& strategy) {
  check_packing_strategy(strategy);
  if (seq_length < 1) {
    throw std::invalid_argument(fmt::format("pack_rows: seq_length {} < 1", seq_length));
  }
  for (const SftRow& row : rows) {
    if (row.labels.size() != row.input_ids.size()) {
      throw std::invalid_argument(
          fmt::format("pack_rows: a row of {} input_ids has {} labels (TRL: All columns must "
                      "have values of the same length)",
                      row.input_ids.size(), row.labels.size()));
    }
  }
  std::vector<SftRow> out;
  std::vector<SftRow> batch;
  for (size_t begin = 0; begin < rows.size(); begin += kMapBatchSize) {
    const size_t end = std::min(rows.size(), begin + kMapBatchSize);
    batch.assign(std::make_move_iterator(rows.begin() + static_cast<std::ptrdiff_t>(begin)),
                 std::make_move_iterator(rows.begin() + static_cast<std::ptrdiff_t>(end)));
    if (strategy == "wrapped") {
      pack_wrapped(batch, seq_length, out);
    } else {
      pack_bfd(batch, seq_length, strategy == "bfd_split", out);
    }
  }
  return out;
}

}  // namespace trainer::trl

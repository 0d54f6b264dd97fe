// TRL 1.16's pack_dataset over tokenized rows (torch-free): Best Fit Decreasing bins that keep
// each sequence whole (bfd: truncated to the bin; bfd_split: cut into bin-sized pieces) or the
// rows' tokens wrapped into rows of a fixed length (wrapped), per batch of 1000 rows as
// Dataset.map(batched=True) hands them over.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer::trl {

// One row of a prepared SFT data set.
struct SftRow {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;       // -100 where no loss
  std::vector<int32_t> seq_lengths;  // bfd/bfd_split packing: the lengths of the sequences in
                                     // this row, in order; else empty
};

// The rows Dataset.map(batched=True) hands one call: 1000 (its default batch_size).
inline constexpr size_t kMapBatchSize = 1000;

// InputError unless `strategy` is one of pack_dataset's: bfd, bfd_split, wrapped.
void check_packing_strategy(const std::string& strategy);

// TRL's pack_dataset(dataset, seq_length, strategy) on `rows` (input_ids and labels of equal
// lengths), each batch of kMapBatchSize rows packed on its own, batches in order:
//
// "bfd" (_pack_bfd, on_seq_length_overflow="truncate"): empty rows dropped, each cut to its first
//   seq_length tokens, then sorted by length, longest first (a stable sort: equal lengths keep
//   their order), each put in the bin whose free space fits it most tightly (_SegmentTree; the
//   earliest such bin), else a new one. A row per bin in the order bins were opened, its
//   sequences in the order they went in; seq_lengths their lengths.
// "bfd_split" (on_seq_length_overflow="split"): the same, but a row longer than seq_length is cut
//   into pieces of seq_length tokens (the last shorter), each packed as a sequence of its own.
// "wrapped" (_pack_wrapped): the batch's tokens end to end, cut every seq_length tokens (the last
//   row shorter); no seq_lengths.
//
// Throws InputError for another strategy (the three named), std::invalid_argument for
// seq_length < 1 or a row whose labels are not as long as its input_ids.
std::vector<SftRow> pack_rows(std::vector<SftRow> rows, int64_t seq_length,
                              const std::string& strategy);

}  // namespace trainer::trl

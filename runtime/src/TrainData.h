//===- TrainData.h - fp8-run's training internals, shared by its files -*- C++ -*-===//
//
// Train.cpp (the loop), TrainData.cpp (token files and batches), Checkpoint.cpp (checkpoints) and
// TrainReport.cpp (the memory report and the loss PNG) implement octet/runtime/Train.h.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_SRC_TRAINDATA_H
#define OCTET_RUNTIME_SRC_TRAINDATA_H

#include "octet/runtime/Train.h"

#include <memory>
#include <string>
#include <utility>

namespace octet::rt {

inline bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Refuses a token at or past the model's vocabulary (the rows of its embedding table or its
/// loss's classes), naming the file and the first such token.
void checkVocabulary(const Plan &p, int tokenInput, const TokenData &d, const std::string &dtype);

/// splitmix64: the batch positions are a pure function of (seed, step, row),
/// so a resumed run reads exactly the batches the uninterrupted run would.
uint64_t batchMix(uint64_t x);

struct Batcher {
  const TokenData *tokens;
  size_t begin = 0, end = 0; // the range batches come from
  int64_t B = 0, T = 0;
  std::string labels;
  /// Data-parallel ranks read rows [firstRow, firstRow + B) of the combined batch of step `step`
  /// (firstRow = rank * B): together they read what one process over the combined batch would.
  /// Under gradient accumulation micro-batch m of a step reads from row m * ranks * B on
  /// (`rowOffset`), so N micro-batches of B rows read the rows one batch of N * B would.
  int64_t firstRow = 0;

  /// Inputs (x) and labels (y) for one step (one micro-batch of it).
  std::pair<TensorPtr, TensorPtr> get(uint64_t seed, int64_t step, int64_t rowOffset = 0) const {
    auto x = std::make_shared<Tensor>(DType::I64, Shape{B, T});
    auto y = std::make_shared<Tensor>(DType::I64, Shape{B, T});
    size_t span = end - begin - size_t(T) - 1;
    for (int64_t b = 0; b < B; ++b) {
      uint64_t row = uint64_t(firstRow + rowOffset + b);
      size_t start = begin + size_t(batchMix(seed ^ batchMix(uint64_t(step) * 65536 + row)) % (span + 1));
      for (int64_t t = 0; t < T; ++t) {
        x->data<int64_t>()[b * T + t] = (*tokens)[start + size_t(t)];
        y->data<int64_t>()[b * T + t] = (*tokens)[start + size_t(t) + (labels == "same" ? 0 : 1)];
      }
    }
    return {x, y};
  }
};

} // namespace octet::rt

#endif

//===- MemoryPlan.h - Activation arena planning ----------------*- C++ -*-===//
//
// Buffer lifetimes come from the schedule (the plan's op order); every
// non-constant tensor gets an offset in one arena such that buffers alive at
// the same time never overlap. Greedy by size (largest first, lowest offset
// that fits), as TFLite's and IREE's simple arena planners do.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_CONVERSION_MEMORYPLAN_H
#define OCTET_CONVERSION_MEMORYPLAN_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace octet {

struct BufferRequest {
  int value;      ///< plan value id
  int64_t bytes;  ///< size in bytes
  int first;      ///< index of the op that defines it (-1: a graph input)
  int last;       ///< index of the last op that reads it (number of ops: alive at the end)
};

struct BufferPlacement {
  int value;
  int64_t offset, bytes;
};

struct MemoryPlan {
  int64_t arenaBytes = 0;
  std::vector<BufferPlacement> buffers;
};

MemoryPlan planMemory(const std::vector<BufferRequest> &requests, int64_t alignment);

/// The instant most bytes are alive at once, a lower bound of any arena: the op index (the first
/// such), the bytes alive while it runs (aligned as the arena aligns them) and the requests alive
/// then, largest first. The arena exceeds `bytes` by what the greedy placement loses to gaps.
struct LivePeak {
  int op = -1;
  int64_t bytes = 0;
  std::vector<std::size_t> alive; ///< indices into the requests
};
LivePeak livePeak(const std::vector<BufferRequest> &requests, int64_t alignment);

} // namespace octet

#endif

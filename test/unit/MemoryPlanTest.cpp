//===- MemoryPlanTest.cpp - The activation arena planner --------------------===//
#include "octet/Conversion/MemoryPlan.h"

#include <gtest/gtest.h>

#include <random>

using namespace octet;

namespace {

/// No two buffers whose lifetimes overlap share a byte; every offset is aligned.
void expectValid(const std::vector<BufferRequest> &req, const MemoryPlan &plan, int64_t alignment) {
  ASSERT_EQ(plan.buffers.size(), req.size());
  for (size_t i = 0; i < req.size(); ++i) {
    const BufferPlacement &a = plan.buffers[i];
    EXPECT_EQ(a.offset % alignment, 0);
    EXPECT_LE(a.offset + a.bytes, plan.arenaBytes);
    for (size_t j = i + 1; j < req.size(); ++j) {
      const BufferPlacement &b = plan.buffers[j];
      const BufferRequest &ra = req[size_t(a.value)], &rb = req[size_t(b.value)];
      bool alive = ra.first <= rb.last && rb.first <= ra.last;
      bool overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      EXPECT_FALSE(alive && overlap) << "values " << a.value << " and " << b.value;
    }
  }
}

TEST(MemoryPlan, BuffersWithDisjointLifetimesShareBytes) {
  // A chain x0 -> x1 -> x2 -> x3: each buffer dies when the next is made.
  std::vector<BufferRequest> req = {{0, 1000, -1, 0}, {1, 1000, 0, 1}, {2, 1000, 1, 2}, {3, 1000, 2, 3}};
  MemoryPlan p = planMemory(req, 256);
  expectValid(req, p, 256);
  EXPECT_EQ(p.arenaBytes, 2048); // two 1024-byte slots alternate
}

TEST(MemoryPlan, RandomSchedulesAreValidAndBeatNoReuse) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferRequest> req;
    int64_t total = 0;
    for (int v = 0; v < 200; ++v) {
      int first = int(rng() % 100) - 1, len = int(rng() % 20);
      int64_t bytes = 1 + int64_t(rng() % 100000);
      req.push_back({v, bytes, first, first + len});
      total += (bytes + 63) / 64 * 64;
    }
    MemoryPlan p = planMemory(req, 64);
    expectValid(req, p, 64);
    EXPECT_LT(p.arenaBytes, total);
  }
}

TEST(MemoryPlan, LivePeakIsTheBusiestOpAndWhatIsAliveThere) {
  // x0 (input, read by op 2), x1 made by op 0 and read by op 3, x2 made by op 1 and read by op 1
  // only (freed right after), x3 made by op 2 and alive to the end (op 4). At op 1 x0, x1 and x2
  // take 1280 bytes aligned to 256; at op 2 x0, x1 and x3 take 512 + 512 + 768.
  std::vector<BufferRequest> req = {{0, 300, -1, 2}, {1, 500, 0, 3}, {2, 200, 1, 1}, {3, 700, 2, 4}};
  LivePeak peak = livePeak(req, 256);
  EXPECT_EQ(peak.op, 2);
  EXPECT_EQ(peak.bytes, 512 + 512 + 768);
  ASSERT_EQ(peak.alive.size(), 3u);
  EXPECT_EQ(peak.alive[0], 3u); // largest first
  EXPECT_EQ(peak.alive[1], 1u);
  EXPECT_EQ(peak.alive[2], 0u);
}

TEST(MemoryPlan, LivePeakBoundsTheArenaFromBelow) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferRequest> req;
    for (int v = 0; v < 200; ++v) {
      int first = int(rng() % 100) - 1, len = int(rng() % 20);
      req.push_back({v, 1 + int64_t(rng() % 100000), first, first + len});
    }
    LivePeak peak = livePeak(req, 64);
    EXPECT_LE(peak.bytes, planMemory(req, 64).arenaBytes);
    // The bytes alive at the peak op, counted directly.
    int64_t alive = 0;
    for (const BufferRequest &r : req)
      if (std::max(r.first, 0) <= peak.op && peak.op <= std::max(r.last, std::max(r.first, 0)))
        alive += (r.bytes + 63) / 64 * 64;
    EXPECT_EQ(alive, peak.bytes);
  }
}

} // namespace

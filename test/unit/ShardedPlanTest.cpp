//===- ShardedPlanTest.cpp - A rank loads its shard of the plan alone ------===//
//
// A fully sharded plan carries each sharded parameter whole (the constant's "shards" and
// "whole_shape"); each rank keeps 1/shards of it. Loaded as fp8-run loads it (LoadOptions
// deferBytes), a sharded constant stays in the file and selectShards points it at the rank's bytes:
// no rank holds the whole tensor, and the bytes streamed are those the whole load gives.
//
//===----------------------------------------------------------------------===//
#include "TestPlan.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace octet::rt;

namespace {

// The whole of `w` and `m`: [1023, 1025] float32 (1,048,575 elements), over 2 ranks 524,288 each
// (2 MiB, deferred at fp8-run's 1 MiB), rank 1's last element padding. `m` a splat of 0.5.
constexpr int64_t kWhole = 1023 * 1025, kPart = (kWhole + 1) / 2;

std::string writeShardedPlan(const std::string &path, std::vector<float> &w) {
  w.resize(size_t(kWhole));
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = float(i % 977) - float(i / 977) * 0.5f;
  std::string data(w.size() * 4, '\0');
  std::memcpy(data.data(), w.data(), data.size());
  size_t mAt = data.size();
  float half = 0.5f;
  data.append(reinterpret_cast<const char *>(&half), 4);
  std::string part = std::to_string(kPart), bytes = std::to_string(kWhole * 4);
  std::string header =
      R"({"format": "octet-plan", "version": 1, "producer": "test",)"
      R"( "values": [{"name": "w", "dtype": "float32", "shape": [)" + part + R"(]},)"
      R"( {"name": "m", "dtype": "float32", "shape": [)" + part + R"(]},)"
      R"( {"name": "w_out", "dtype": "float32", "shape": [)" + part + R"(]}],)"
      R"( "outputs": [2],)"
      R"( "constants": [{"value": 0, "offset": 0, "bytes": )" + bytes +
      R"(, "kind": "state", "role": "weight_shard", "shards": 2, "whole_shape": [1023, 1025]},)"
      R"( {"value": 1, "offset": )" + std::to_string(mAt) +
      R"(, "bytes": 4, "kind": "state", "splat": true, "shards": 2, "whole_shape": [1023, 1025]}],)"
      R"( "ops": [{"type": "Identity", "name": "id_w", "in": [0], "out": [2]}]})";
  return writePlanFile(path, header, data);
}

std::vector<float> streamed(const Plan &p, int id) {
  std::vector<float> got(size_t(constantBytes(p, id) / 4), -1.0f);
  forEachChunk(p, id, [&](uint64_t at, const uint8_t *src, size_t n) {
    std::memcpy(reinterpret_cast<uint8_t *>(got.data()) + at, src, n);
  });
  return got;
}

} // namespace

TEST(ShardedPlan, EachRankReadsItsPartAlone) {
  std::string path = ::testing::TempDir() + "/sharded.plan";
  std::vector<float> w;
  writeShardedPlan(path, w);
  for (int rank : {0, 1}) {
    Plan whole = loadPlan(path);
    selectShards(whole, rank);
    Plan lazy = loadPlan(path, {kDeferBytes});
    // Neither constant is held, whole or in part, until it is streamed.
    ASSERT_EQ(lazy.deferred.size(), 2u);
    EXPECT_TRUE(lazy.constants.empty());
    ASSERT_EQ(lazy.sharded.size(), 2u);
    for (auto &[id, sh] : lazy.sharded)
      EXPECT_FALSE(sh.data) << "the whole of '" << lazy.values[size_t(id)].name << "' was read into memory";
    selectShards(lazy, rank);
    std::vector<float> gotW = streamed(lazy, 0), gotM = streamed(lazy, 1);
    ASSERT_EQ(gotW.size(), size_t(kPart));
    EXPECT_EQ(std::memcmp(gotW.data(), whole.constants.at(0)->bytes.data(), gotW.size() * 4), 0) << "rank " << rank;
    EXPECT_EQ(std::memcmp(gotM.data(), whole.constants.at(1)->bytes.data(), gotM.size() * 4), 0) << "rank " << rank;
    // The rank's elements of the whole; the last rank's padding zeros, the splat's too.
    EXPECT_EQ(gotW.front(), w[size_t(rank * kPart)]);
    EXPECT_EQ(gotM.front(), 0.5f);
    if (rank == 1) {
      EXPECT_EQ(gotW[size_t(kPart - 2)], w.back());
      EXPECT_EQ(gotW.back(), 0.0f);
      EXPECT_EQ(gotM.back(), 0.0f);
    } else {
      EXPECT_EQ(gotW.back(), w[size_t(kPart - 1)]);
      EXPECT_EQ(gotM.back(), 0.5f);
    }
    // The CPU reference materializes the rank's part: what it runs is the whole load's shard.
    Executor ex(lazy);
    ex.run({}, false);
    EXPECT_EQ(ex.value("w_out")->bytes, whole.constants.at(0)->bytes) << "rank " << rank;
    EXPECT_EQ(ex.state().at("m")->bytes, whole.constants.at(1)->bytes) << "rank " << rank;
  }
  // A rank the plan has no shard for is refused, as for a plan loaded whole.
  Plan lazy = loadPlan(path, {kDeferBytes});
  EXPECT_THROW(selectShards(lazy, 2), Error);
  std::remove(path.c_str());
}

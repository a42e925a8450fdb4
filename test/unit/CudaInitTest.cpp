//===- CudaInitTest.cpp - Weights drawn and streamed to the device -------===//
//
// fp8-run --init-params on the GPU (Init.cu) draws what the CPU draws (NormalInit.h's stream), in
// float32, float16 and bfloat16, whole or a rank's shard; and a plan whose weights stay in the file
// (Plan::deferred) is streamed to the device and computes what the whole-loaded plan computes.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/CudaExecutor.h"
#include "octet/runtime/Executor.h"
#include "CudaTestUtil.h"
#include "TestPlan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace octet::rt;

namespace {

/// Floats a and b differ by at most `ulps` units in the last place.
bool withinUlps(float a, float b, int ulps) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if ((ia < 0) != (ib < 0))
    return a == b;
  return std::abs(int64_t(ia) - int64_t(ib)) <= ulps;
}

TEST(CudaInit, NormalDrawsMatchTheCpu) {
  REQUIRE_GPU();
  std::string path = ::testing::TempDir() + "/cuda-init.plan";
  std::vector<float> w;
  writeTestPlan(path, w);
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t first : {int64_t(0), int64_t(786433)}) { // whole, or a shard starting on an odd element
      Plan plan = loadPlan(path);
      plan.values[0].dtype = dt; // w as a float16 / bfloat16 weight
      plan.values[3].dtype = dt;
      plan.constants[0] = std::make_shared<Tensor>(dt, plan.values[0].shape);
      Executor cpu(plan);
      auto gpu = cuda::makeCudaRunner(plan);
      const int64_t whole = 768 * 1024 + 1000000; // past the shard's end: zeros
      cpu.drawNormal("w", 0x1234567ull, 0.02, whole, first);
      gpu->drawNormal("w", 0x1234567ull, 0.02, whole, first);
      cpu.run({}, false);
      gpu->run({}, false);
      Tensor c = cpu.value("w_out")->castTo(DType::F32), g = gpu->value("w_out")->castTo(DType::F32);
      int64_t off = 0;
      double sum2 = 0;
      for (int64_t i = 0; i < c.numel(); ++i) {
        float x = c.data<float>()[i], y = g.data<float>()[i];
        off += x != y;
        ASSERT_TRUE(withinUlps(x, y, 1)) << dtypeName(dt) << " first " << first << " element " << i << ": " << x
                                         << " vs " << y;
        sum2 += double(x) * x;
      }
      EXPECT_LE(off, 2) << dtypeName(dt); // last-bit differences of double log/sin/cos: about 1 in 2^29
      EXPECT_NEAR(std::sqrt(sum2 / double(c.numel())), 0.02, 0.0005) << dtypeName(dt);
    }
}

TEST(CudaInit, DeferredWeightsStreamToTheDevice) {
  REQUIRE_GPU();
  std::string path = ::testing::TempDir() + "/cuda-deferred.plan";
  std::vector<float> w;
  writeTestPlan(path, w);
  Plan lazy = loadPlan(path, {kDeferBytes});
  ASSERT_EQ(lazy.deferred.size(), 2u);
  auto gpu = cuda::makeCudaRunner(std::move(lazy));
  gpu->run({}, false);
  Tensor got = *gpu->value("w_out");
  ASSERT_EQ(got.bytes.size(), w.size() * 4);
  EXPECT_EQ(std::memcmp(got.bytes.data(), w.data(), got.bytes.size()), 0);
  Tensor m = *gpu->stateTensor("m");
  for (size_t i = 0; i < m.bytes.size(); ++i)
    ASSERT_EQ(m.bytes[i], 0) << i;
  EXPECT_EQ(gpu->value("b_out")->data<float>()[3], 4.0f);
}

} // namespace

//===- CudaJitTest.cpp - What NVRTC makes of generated chains (no GPU needed) ===//
//
// The Pointwise code generator's translation units compiled for Hopper and their binaries
// inspected: what the generator's choices let NVRTC share between the programs of a chain.
//
//===----------------------------------------------------------------------===//
#include "../../runtime/cuda/DeviceKernels.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

namespace {
namespace dev = octet::rt::cuda::dev;

/// The bytes of `v` (an instruction's 32-bit immediate) in `bin`, counted.
int countWord(const std::string &bin, uint32_t v) {
  int n = 0;
  for (size_t i = 0; i + 4 <= bin.size(); ++i)
    n += std::memcmp(bin.data() + i, &v, 4) == 0;
  return n;
}

/// A GELU recomputed in its gradient's cast pass (the chain FusedOps builds: the GELU program, the
/// second stream, then the gradient's program, which octet's autodiff writes with geluF's order of
/// operations): the input both read is loaded once, the gradient's scalar constants are compiled
/// in, and NVRTC computes tanh once for both. The tanh's threshold (tanhf's 9.0109 immediate,
/// 0x41102CB4) appears half as often in the kernel as in the same chain where the GELU reads
/// another tensor.
TEST(PointwiseJit, GeluAndItsGradientShareOneTanh) {
  if (std::string why = dev::PwJit::unavailable(); !why.empty())
    GTEST_SKIP() << why;
  auto chain = [](const void *geluInput) {
    const int64_t rows = 64, cols = 256;
    auto *base = reinterpret_cast<unsigned char *>(uintptr_t(0x100000));
    dev::PwArgs gelu, grad;
    for (dev::PwArgs *a : {&gelu, &grad}) {
      a->shape.rank = 2, a->shape.d[0] = rows, a->shape.d[1] = cols;
      a->n = rows * cols;
      a->outType = dev::PwType::BF16;
    }
    gelu.nIn = 1, gelu.nCode = 1;
    gelu.in[0] = geluInput;
    gelu.inType[0] = dev::PwType::BF16;
    gelu.inStr[0].s[0] = cols, gelu.inStr[0].s[1] = 1;
    gelu.op[0] = dev::Ew::GeluTanh, gelu.arg[0][0] = 1;
    // dY * 0.5 (1 + tanh(k (x + ((0.044715 x) x) x))): inputs x, 0.044715, k, 1, 0.5, dY.
    const float consts[] = {0.044715f, 0.7978845608028654f, 1.0f, 0.5f};
    grad.nIn = 6;
    grad.in[0] = base;
    grad.in[5] = base + (1 << 20);
    for (int j : {0, 5}) {
      grad.inType[j] = dev::PwType::BF16;
      grad.inStr[j].s[0] = cols, grad.inStr[j].s[1] = 1;
    }
    for (int j = 1; j <= 4; ++j) {
      grad.in[j] = base + (2 << 20) + 64 * j;
      grad.known[j] = true, grad.value[j] = consts[j - 1];
    }
    // slots: 1 x, 2 c, 3 k, 4 one, 5 half, 6 dY; instruction i is slot 7 + i
    const int code[][3] = {{int(dev::Ew::Mul), 2, 1}, {int(dev::Ew::Mul), 7, 1},  {int(dev::Ew::Mul), 8, 1},
                           {int(dev::Ew::Add), 1, 9}, {int(dev::Ew::Mul), 3, 10}, {int(dev::Ew::Tanh), 11, 0},
                           {int(dev::Ew::Add), 4, 12}, {int(dev::Ew::Mul), 5, 13}, {int(dev::Ew::Mul), 6, 14}};
    grad.nCode = 9;
    for (int i = 0; i < grad.nCode; ++i) {
      grad.op[i] = dev::Ew(code[i][0]);
      grad.arg[i][0] = int8_t(code[i][1]), grad.arg[i][1] = int8_t(code[i][2]);
    }
    auto jit = std::make_unique<dev::PwJit>();
    EXPECT_EQ(jit->addCastChain({gelu, grad}, {false, false}, rows, cols, false, 2, 0), 0);
    return jit;
  };
  auto shared = chain(reinterpret_cast<const void *>(uintptr_t(0x100000)));
  auto apart = chain(reinterpret_cast<const void *>(uintptr_t(0x400000)));
  std::string src = shared->source(), other = apart->source(), bin, otherBin;
  EXPECT_NE(src.find("x1_0[3] = x0_0[3];"), std::string::npos) << "x is loaded once\n" << src;
  EXPECT_EQ(other.find("x1_0[3] = x0_0[3];"), std::string::npos) << "two tensors, two loads";
  EXPECT_NE(src.find("const float x1_1s = __uint_as_float(1027024659u);"), std::string::npos)
      << "0.044715 compiled in\n" << src;
  EXPECT_EQ(src.find("in1_1[0]"), std::string::npos) << "a known constant is not loaded";
  ASSERT_EQ(dev::PwJit::compile(src, 90, bin), "");
  ASSERT_EQ(dev::PwJit::compile(other, 90, otherBin), "");
  int once = countWord(bin, 0x41102CB4u), twice = countWord(otherBin, 0x41102CB4u);
  EXPECT_GT(once, 0);
  EXPECT_EQ(2 * once, twice) << "tanh computed once per element where both programs read x";
}
} // namespace

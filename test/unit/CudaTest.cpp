//===- CudaTest.cpp - CUDA kernels against the CPU reference ---------------===//
//
// Every test skips (GTEST_SKIP, reported as skipped by ctest) where no GPU
// with FP8 tensor cores is present; on the lent H100 they run through
// `device` (results in docs/TESTING.md). The cast kernels' tests are in CudaCastTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "octet/runtime/CudaExecutor.h"
#include "octet/runtime/Executor.h"
#include "octet/runtime/Plan.h"
#include "octet/runtime/Fp8.h"
#include "octet/runtime/Pointwise.h"
#include "octet/runtime/Tensor.h"
#include "../../runtime/cuda/DeviceKernels.h"
#include "CudaTestUtil.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <vector>

using namespace octet::rt;
using namespace octet::rt::cudatest;

namespace {

/// delayedScaleAll (tensors as [T, L] arrays) and delayedScaleList (a list of pointers, here in
/// reverse order; more tensors than blocks, so blocks take several) against the CPU rule.
TEST(CudaDelayedScale, AllTensorsInOneLaunchMatchTheCpuRule) {
  REQUIRE_GPU();
  const int T = 1100;
  const int64_t L = 1024;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> hist(size_t(T * L)), amax(T), prev(T);
  std::vector<uint8_t> fmt(T);
  for (int t = 0; t < T; ++t) {
    for (int64_t i = 0; i < L; ++i)
      hist[size_t(t * L + i)] = u(rng) < 0.3f ? 0.0f : std::ldexp(u(rng), int(u(rng) * 40) - 20);
    amax[t] = std::ldexp(u(rng), int(u(rng) * 40) - 20);
    prev[t] = 1.0f + u(rng);
    fmt[t] = uint8_t(t % 2);
  }
  amax[0] = 0.0f, amax[1] = INFINITY, amax[2] = NAN, amax[3] = 1e-40f; // keep-previous and overflow cases
  for (int64_t i = 0; i < L; ++i)
    hist[size_t(0 * L + i)] = hist[size_t(2 * L + i)] = 0.0f;
  for (bool mostRecent : {false, true})
    for (bool pow2 : {false, true})
      for (int margin : {0, 2})
        for (bool list : {false, true}) {
          DeviceBuffer<float> dh(hist.size()), da(T), dp(T), dnh(hist.size()), ds(T), dsi(T);
          DeviceBuffer<uint8_t> df(T);
          DeviceBuffer<cuda::DelayedScaleTensor> dl(T);
          dh.upload(hist);
          da.upload(amax);
          dp.upload(prev);
          df.upload(fmt);
          if (list) {
            std::vector<cuda::DelayedScaleTensor> l;
            for (int t = T - 1; t >= 0; --t)
              l.push_back({dh.p + t * L, da.p + t, dp.p + t, dnh.p + t * L, ds.p + t, dsi.p + t, fmt[size_t(t)] != 0});
            dl.upload(l);
            ASSERT_EQ(cuda::delayedScaleList(T, L, dl.p, margin, mostRecent, pow2), "");
          } else {
            ASSERT_EQ(cuda::delayedScaleAll(T, L, dh.p, da.p, dp.p, df.p, margin, mostRecent, pow2, dnh.p, ds.p, dsi.p),
                      "");
          }
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::vector<float> nh = dnh.download(), s = ds.download(), si = dsi.download();
          for (int t = 0; t < T; ++t) {
            std::vector<float> rolled(static_cast<size_t>(L));
            rolled[0] = amax[size_t(t)];
            for (int64_t i = 1; i < L; ++i)
              rolled[size_t(i)] = hist[size_t(t * L + i - 1)];
            DelayedScaling cfg{fmt[size_t(t)] ? Fp8Format::E5M2 : Fp8Format::E4M3FN, margin, mostRecent, pow2};
            float want = delayedScale(rolled.data(), L, prev[size_t(t)], cfg);
            EXPECT_EQ(std::memcmp(&s[size_t(t)], &want, 4), 0) << "tensor " << t << ": " << s[size_t(t)] << " vs " << want;
            float wantInv = 1.0f / want;
            EXPECT_EQ(std::memcmp(&si[size_t(t)], &wantInv, 4), 0) << "tensor " << t;
            EXPECT_EQ(std::memcmp(&nh[size_t(t * L)], rolled.data(), size_t(L) * 4), 0) << "history of tensor " << t;
          }
        }
}

TEST(CudaAdamW, MultiTensorUpdateEqualsTheCpuArithmetic) {
  REQUIRE_GPU();
  std::vector<int64_t> sizes = {1, 1000, 65536 + 7, 4096};
  cuda::AdamW c{0.9f, 0.95f, float(1.0 - 0.9), float(1.0 - 0.95), 1e-8f, 1.0f - 3e-4f * 0.1f, 3e-4f / (1.0f - 0.9f * 0.9f),
                std::sqrt(1.0f - 0.95f * 0.95f)};
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<std::vector<float>> P, G, M, V;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> bufs;
  std::vector<float *> dp, dg, dm, dv;
  for (int64_t n : sizes) {
    const size_t count = static_cast<size_t>(n);
    std::vector<float> p(count), gr(count), m(count), v(count);
    for (int64_t i = 0; i < n; ++i) {
      p[size_t(i)] = g(rng) * 0.02f, gr[size_t(i)] = g(rng) * 1e-3f, m[size_t(i)] = g(rng) * 1e-4f;
      v[size_t(i)] = std::fabs(g(rng)) * 1e-7f;
    }
    for (auto *vec : {&p, &gr, &m, &v}) {
      bufs.push_back(std::make_unique<DeviceBuffer<float>>(size_t(n)));
      bufs.back()->upload(*vec);
    }
    dp.push_back(bufs[bufs.size() - 4]->p), dg.push_back(bufs[bufs.size() - 3]->p);
    dm.push_back(bufs[bufs.size() - 2]->p), dv.push_back(bufs[bufs.size() - 1]->p);
    P.push_back(p), G.push_back(gr), M.push_back(m), V.push_back(v);
  }
  int T = int(sizes.size());
  DeviceBuffer<float *> pp(T), pg(T), pm(T), pv(T);
  DeviceBuffer<int64_t> ps(T);
  pp.upload(dp), pg.upload(dg), pm.upload(dm), pv.upload(dv), ps.upload(sizes);
  ASSERT_EQ(cuda::adamwAll(T, pp.p, pg.p, pm.p, pv.p, ps.p, c), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int t = 0; t < T; ++t) {
    std::vector<float> gp(size_t(sizes[size_t(t)])), gm(gp.size()), gv(gp.size());
    cudaMemcpy(gp.data(), dp[size_t(t)], gp.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gm.data(), dm[size_t(t)], gm.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gv.data(), dv[size_t(t)], gv.size() * 4, cudaMemcpyDeviceToHost);
    size_t bad = 0;
    for (size_t i = 0; i < gp.size(); ++i) { // the graph's float operations, one rounding each
      float gi = G[size_t(t)][i];
      float w = P[size_t(t)][i] * c.decay;
      float m2a = M[size_t(t)][i] * c.beta1, m2b = gi * c.oneMinusBeta1, m2 = m2a + m2b;
      float g2 = gi * gi, v2a = V[size_t(t)][i] * c.beta2, v2b = g2 * c.oneMinusBeta2, v2 = v2a + v2b;
      float den = std::sqrt(v2) / c.bc2Sqrt + c.eps;
      float upd = (m2 / den) * c.stepSize, p2 = w - upd;
      bad += gp[i] != p2 || gm[i] != m2 || gv[i] != v2;
    }
    EXPECT_EQ(bad, 0u) << "tensor " << t << " of " << gp.size() << " elements";
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Index arithmetic of the executor's generic kernels (merged dimensions,
// 32-bit multiply-shift division, tiled transposes, the 64-bit fallback)
//===----------------------------------------------------------------------===//

namespace {
namespace dev = octet::rt::cuda::dev;

std::vector<int64_t> rowMajor(const std::vector<int64_t> &shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    st[i - 1] = st[i] * shape[i];
  return st;
}

/// Transposes x (shape `xs`, row-major) by `perm` on the GPU with elements of T; compares with a host loop.
template <typename T> void expectTransposeMatches(const std::vector<int64_t> &xs, const std::vector<int> &perm) {
  int64_t n = 1;
  for (int64_t d : xs)
    n *= d;
  std::vector<T> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[size_t(i)] = T(uint64_t(i) * 2654435761u + 17);
  std::vector<int64_t> xst = rowMajor(xs), os(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    os[i] = xs[size_t(perm[i])];
  std::vector<int64_t> ost = rowMajor(os);
  dev::CopyArgs c;
  c.elemSize = sizeof(T);
  c.n = n;
  c.shape.rank = int(os.size());
  for (size_t i = 0; i < os.size(); ++i) {
    c.shape.d[i] = os[i];
    c.srcStr.s[i] = xst[size_t(perm[i])];
    c.dstStr.s[i] = ost[i];
  }
  DeviceBuffer<T> dx(static_cast<size_t>(n)), dy(static_cast<size_t>(n));
  dx.upload(x);
  c.src = dx.p;
  c.dst = dy.p;
  ASSERT_EQ(dev::stridedCopy(c, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<T> y = dy.download();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, src = 0;
    for (size_t d = os.size(); d-- > 0;) {
      src += (rem % os[d]) * xst[size_t(perm[d])];
      rem /= os[d];
    }
    ASSERT_EQ(y[size_t(i)], x[size_t(src)]) << "element " << i << " of a " << sizeof(T) << "-byte transpose";
  }
}

TEST(CudaKernels, TransposesMatchTheHost) {
  REQUIRE_GPU();
  // Tiled (the unit-stride dims differ; edges not multiples of 32) and plain strided copies; byte
  // transposes with 16-byte multiples take the 64 x 64 tile kernel (edges not multiples of 64,
  // batched, and FP8 GEMM operand shapes); copies whose innermost dim stays contiguous move it in
  // 16-, 8- or 4-byte pieces (the attention head split [B, T, H, d] -> [B, H, T, d], runs of 6).
  for (auto [shape, perm] : std::vector<std::pair<std::vector<int64_t>, std::vector<int>>>{
           {{1, 64, 16, 128}, {0, 2, 1, 3}},
           {{3, 5, 7, 6}, {1, 0, 2, 3}},
           {{80, 208}, {1, 0}},
           {{2048, 768}, {1, 0}},
           {{3, 48, 112}, {0, 2, 1}},
           {{37, 70}, {1, 0}},
           {{3, 45, 33}, {0, 2, 1}},
           {{2, 5, 40, 9}, {0, 2, 1, 3}},
           {{4, 6, 33, 64}, {0, 2, 3, 1}},
           {{7, 3, 5}, {2, 1, 0}},
           {{1, 9, 1, 300}, {3, 0, 2, 1}}}) {
    expectTransposeMatches<uint8_t>(shape, perm);
    expectTransposeMatches<uint16_t>(shape, perm);
    expectTransposeMatches<uint32_t>(shape, perm);
    expectTransposeMatches<uint64_t>(shape, perm);
  }
}

/// Slice, Split and Concat of BF16 values (octet-assign-precision stores a fused QKV projection's
/// split and its gradients' concatenation in BF16): the CPU's bytes, eagerly and as a graph. A
/// [6, 10, 96] value split in three along the last axis, the parts concatenated in another order,
/// and a strided slice of the whole.
TEST(CudaKernels, Bf16CopiesMatchTheCpu) {
  REQUIRE_GPU();
  Plan plan;
  auto bf16 = [&](const std::string &n, Shape sh) {
    int id = addValue(plan, n, std::move(sh));
    plan.values[size_t(id)].dtype = DType::BF16;
    return id;
  };
  auto ints = [&](const std::string &n, std::vector<int64_t> v) {
    int id = addValue(plan, n, {int64_t(v.size())});
    plan.values[size_t(id)].dtype = DType::I64;
    auto t = std::make_shared<Tensor>(DType::I64, Shape{int64_t(v.size())});
    std::copy(v.begin(), v.end(), t->data<int64_t>());
    plan.constants[id] = t;
    plan.constantKinds[id] = ConstantKind::Const;
    return id;
  };
  int x = bf16("x", {6, 10, 96}), q = bf16("q", {6, 10, 32}), k = bf16("k", {6, 10, 32}), v = bf16("v", {6, 10, 32});
  int cat = bf16("cat", {6, 10, 96}), sl = bf16("slice", {3, 10, 30});
  plan.inputs = {x};
  plan.outputs = {q, cat, sl};
  addOp(plan, "Split", "split", {x, ints("sizes", {32, 32, 32})}, {q, k, v}).attrs["axis"].i = 2;
  addOp(plan, "Concat", "concat", {v, q, k}, {cat}).attrs["axis"].i = -1;
  addOp(plan, "Slice", "slice", {x, ints("starts", {1, 5}), ints("ends", {6, 95}), ints("axes", {0, 2}), ints("steps", {2, 3})},
        {sl});
  std::mt19937 rng(53);
  auto xs = std::make_shared<Tensor>(randomTensor({6, 10, 96}, rng, 1.0f).castTo(DType::BF16));
  expectOutputsMatchCpu(plan, {{"x", xs}}, 2, 0, {q, cat, sl});
}

/// out[4,5,6,7] = op(a, b) with broadcasting inputs, against the same float arithmetic on the host.
TEST(CudaKernels, BroadcastingElementwiseMatchesTheHost) {
  REQUIRE_GPU();
  std::vector<int64_t> os{4, 5, 6, 7};
  std::vector<int64_t> shapes[] = {{5, 1, 7}, {4, 1, 6, 1}, {1}, {4, 5, 6, 7}, {6, 7}};
  std::mt19937 rng(7);
  std::normal_distribution<float> g;
  for (auto &as : shapes)
    for (auto &bs : shapes)
      for (dev::Ew op : {dev::Ew::Add, dev::Ew::Mul, dev::Ew::Sub, dev::Ew::Div}) {
        auto fill = [&](const std::vector<int64_t> &s) {
          int64_t n = 1;
          for (int64_t d : s)
            n *= d;
          std::vector<float> v(static_cast<size_t>(n));
          for (float &f : v)
            f = g(rng);
          return v;
        };
        std::vector<float> a = fill(as), b = fill(bs);
        auto strides = [&](const std::vector<int64_t> &s) { // broadcast strides over os
          std::vector<int64_t> st(os.size(), 0), own = rowMajor(s);
          for (size_t i = 0; i < s.size(); ++i)
            if (s[i] != 1)
              st[os.size() - s.size() + i] = own[i];
          return st;
        };
        std::vector<int64_t> sa = strides(as), sb = strides(bs);
        dev::EwArgs e;
        e.op = op;
        e.nIn = 2;
        e.n = 4 * 5 * 6 * 7;
        e.shape.rank = 4;
        for (int i = 0; i < 4; ++i) {
          e.shape.d[i] = os[size_t(i)];
          e.inStr[0].s[i] = sa[size_t(i)];
          e.inStr[1].s[i] = sb[size_t(i)];
        }
        DeviceBuffer<float> da(a.size()), db(b.size()), dout(static_cast<size_t>(e.n));
        da.upload(a);
        db.upload(b);
        e.in[0] = da.p;
        e.in[1] = db.p;
        e.inType[0] = e.inType[1] = e.outType = int(octet::rt::DType::F32);
        e.out = dout.p;
        ASSERT_EQ(dev::elementwise(e, nullptr), "");
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float> y = dout.download();
        for (int64_t i = 0; i < e.n; ++i) {
          int64_t rem = i, oa = 0, ob = 0;
          for (int d = 3; d >= 0; --d) {
            int64_t c = rem % os[size_t(d)];
            rem /= os[size_t(d)];
            oa += c * sa[size_t(d)];
            ob += c * sb[size_t(d)];
          }
          float x = a[size_t(oa)], z = b[size_t(ob)];
          float want = op == dev::Ew::Add ? x + z : op == dev::Ew::Mul ? x * z : op == dev::Ew::Sub ? x - z : x / z;
          ASSERT_EQ(y[size_t(i)], want) << "element " << i << " op " << int(op);
        }
      }
}

/// BF16 and float32 Add, Sub, Mul and Div of a whole tensor and one broadcast row (either side), or
/// of two whole tensors: the 16-byte row kernel (rows of 24 and 40 BF16, 12 float32) and, for rows
/// of 20 BF16 (40 bytes) or an operand one element off 16-byte alignment, the generic kernels; every
/// result the host's float arithmetic rounded as the CPU reference rounds (floatToBf16).
TEST(CudaKernels, RowBroadcastElementwiseMatchesTheHost) {
  REQUIRE_GPU();
  std::mt19937 rng(11);
  std::normal_distribution<float> g;
  for (octet::rt::DType t : {octet::rt::DType::BF16, octet::rt::DType::F32})
    for (int64_t len : {24, 40, 20, 12})
      for (int mode = 0; mode < 4; ++mode) // 0: a whole + b row, 1: a row + b whole, 2: both whole, 3: b misaligned
        for (dev::Ew op : {dev::Ew::Add, dev::Ew::Sub, dev::Ew::Mul, dev::Ew::Div}) {
          const int64_t rows = 70000; // past 65535: the kernel's grid-stride loop over rows
          const bool bf = t == octet::rt::DType::BF16;
          const int64_t n = rows * len, na = mode == 1 ? len : n, nb = mode == 0 ? len : n;
          auto round = [&](float f) { return bf ? octet::rt::bf16ToFloat(octet::rt::floatToBf16(f)) : f; };
          std::vector<float> a(static_cast<size_t>(na)), b(static_cast<size_t>(nb));
          for (float &f : a)
            f = round(g(rng));
          for (float &f : b)
            f = round(g(rng));
          const size_t elt = bf ? 2 : 4, off = mode == 3 ? 1 : 0;
          auto bytesOf = [&](const std::vector<float> &v) {
            std::vector<uint8_t> out(v.size() * elt);
            for (size_t i = 0; i < v.size(); ++i) {
              if (bf) {
                uint16_t h = octet::rt::floatToBf16(v[i]);
                std::memcpy(&out[i * 2], &h, 2);
              } else {
                std::memcpy(&out[i * 4], &v[i], 4);
              }
            }
            return out;
          };
          DeviceBuffer<uint8_t> da(size_t(na) * elt), db(size_t(nb) * elt + 16), dout(size_t(n) * elt);
          da.upload(bytesOf(a));
          std::vector<uint8_t> bb = bytesOf(b);
          ASSERT_EQ(cudaMemcpy(db.p + off * elt, bb.data(), bb.size(), cudaMemcpyHostToDevice), cudaSuccess);
          dev::EwArgs e;
          e.op = op;
          e.nIn = 2;
          e.n = n;
          e.shape.rank = 2;
          e.shape.d[0] = rows;
          e.shape.d[1] = len;
          e.inStr[0].s[0] = mode == 1 ? 0 : len;
          e.inStr[1].s[0] = mode == 0 ? 0 : len;
          e.inStr[0].s[1] = e.inStr[1].s[1] = 1;
          e.in[0] = da.p;
          e.in[1] = db.p + off * elt;
          e.inType[0] = e.inType[1] = e.outType = int(t);
          e.out = dout.p;
          ASSERT_EQ(dev::elementwise(e, nullptr), "");
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::vector<uint8_t> y = dout.download();
          for (int64_t i = 0; i < n; ++i) {
            float x = a[size_t(mode == 1 ? i % len : i)], z = b[size_t(mode == 0 ? i % len : i)];
            float want = round(op == dev::Ew::Add ? x + z : op == dev::Ew::Mul ? x * z : op == dev::Ew::Sub ? x - z : x / z);
            float got;
            if (bf) {
              uint16_t h;
              std::memcpy(&h, &y[size_t(i) * 2], 2);
              got = octet::rt::bf16ToFloat(h);
            } else {
              std::memcpy(&got, &y[size_t(i) * 4], 4);
            }
            ASSERT_EQ(got, want) << "element " << i << " op " << int(op) << " len " << len << " mode " << mode
                                 << (bf ? " bf16" : " f32");
          }
        }
}

/// Over 2^31 elements the kernels index in 64 bits: a [2^29 + 1, 4] uint8 output of a broadcast row.
TEST(CudaKernels, IndexSpacesBeyond32BitsUse64BitOffsets) {
  REQUIRE_GPU();
  int64_t rows = (int64_t(1) << 29) + 1, n = rows * 4;
  std::vector<float> row{1, 2, 3, 250};
  DeviceBuffer<float> din(4);
  din.upload(row);
  uint8_t *out = nullptr;
  if (cudaMalloc(&out, size_t(n)) != cudaSuccess)
    GTEST_SKIP() << "no room for a 2 GiB output";
  dev::EwArgs e;
  e.op = dev::Ew::Copy;
  e.in[0] = din.p;
  e.inType[0] = 0;
  e.out = out;
  e.outType = int(octet::rt::DType::U8);
  e.n = n;
  e.shape.rank = 2;
  e.shape.d[0] = rows;
  e.shape.d[1] = 4;
  e.inStr[0].s[1] = 1;
  std::string err = dev::elementwise(e, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> tail(64);
  cudaMemcpy(tail.data(), out + n - 64, 64, cudaMemcpyDeviceToHost);
  cudaFree(out);
  ASSERT_EQ(err, "");
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(tail[size_t(i)], uint8_t(row[size_t(i % 4)])) << "element " << n - 64 + i;
}
} // namespace

namespace {
/// A Pointwise program (x * 0.5 * (1 + tanh(x * c)) then Where(mask, y, -1e9), with a [4, 1, 7]
/// and a [5, 1] input broadcasting to [4, 5, 7]) on the GPU against the CPU's applyPointwise.
TEST(CudaKernels, PointwiseProgramMatchesTheCpu) {
  REQUIRE_GPU();
  using octet::rt::PwOp;
  const std::vector<int64_t> os{4, 5, 7};
  std::mt19937 rng(3);
  std::normal_distribution<float> g;
  std::vector<float> x(4 * 7), c(5), k{0.5f, 1.0f, -1e9f};
  std::vector<uint8_t> mask(4 * 5 * 7);
  for (float &v : x)
    v = 3 * g(rng);
  for (float &v : c)
    v = g(rng);
  for (size_t i = 0; i < mask.size(); ++i)
    mask[i] = uint8_t(i % 3 != 0);
  // Inputs: 0 x [4,1,7], 1 c [5,1], 2 half [], 3 one [], 4 mask [4,5,7], 5 neg [].
  std::vector<std::pair<PwOp, std::array<int, 3>>> code = {
      {PwOp::Mul, {0, 1, -1}}, {PwOp::Tanh, {6, -1, -1}}, {PwOp::Add, {7, 3, -1}},
      {PwOp::Mul, {0, 2, -1}}, {PwOp::Mul, {9, 8, -1}},  {PwOp::Where, {4, 10, 5}}};
  DeviceBuffer<float> dx(x.size()), dc(c.size()), dk(3), dout(4 * 5 * 7);
  DeviceBuffer<uint8_t> dm(mask.size());
  dx.upload(x);
  dc.upload(c);
  dk.upload(k);
  dm.upload(mask);
  dev::PwArgs a;
  a.nIn = 6;
  a.nCode = int(code.size());
  const void *ins[] = {dx.p, dc.p, dk.p, dk.p + 1, dm.p, dk.p + 2};
  std::vector<std::vector<int64_t>> strides = {{7, 0, 1}, {0, 1, 0}, {0, 0, 0}, {0, 0, 0}, {35, 7, 1}, {0, 0, 0}};
  for (int j = 0; j < 6; ++j) {
    a.in[j] = ins[j];
    a.inType[j] = j == 4 ? dev::PwType::Bool : dev::PwType::F32;
    for (int d = 0; d < 3; ++d)
      a.inStr[j].s[d] = strides[size_t(j)][size_t(d)];
  }
  for (size_t i = 0; i < code.size(); ++i) {
    a.op[i] = dev::ewOf(code[i].first);
    for (int j = 0; j < 3; ++j)
      a.arg[i][j] = int8_t(code[i].second[size_t(j)] + 1);
  }
  a.out = dout.p;
  a.shape.rank = 3;
  for (int d = 0; d < 3; ++d)
    a.shape.d[d] = os[size_t(d)];
  a.n = 4 * 5 * 7;
  ASSERT_EQ(dev::pointwise(a, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> y = dout.download();
  for (int64_t i = 0; i < a.n; ++i) {
    int64_t i0 = i / 35, i1 = (i / 7) % 5, i2 = i % 7;
    float r[12] = {x[size_t(i0 * 7 + i2)], c[size_t(i1)], k[0], k[1], mask[size_t(i)] ? 1.0f : 0.0f, k[2]};
    for (size_t s = 0; s < code.size(); ++s) {
      auto at = [&](int j) { return code[s].second[size_t(j)] < 0 ? 0.0f : r[code[s].second[size_t(j)]]; };
      r[6 + s] = octet::rt::applyPointwise(code[s].first, at(0), at(1), at(2));
    }
    float want = r[11];
    EXPECT_NEAR(y[size_t(i)], want, 1e-6f * std::max(1.0f, std::fabs(want))) << "element " << i;
  }
}
} // namespace

namespace {
/// A Pointwise program over one output shape: each input has its own data, broadcast strides
/// over the output and its storage (bool inputs: 0/1 bytes; bfloat16: the values rounded to it);
/// `misalign` shifts an input by one element. A bfloat16 result is rounded to nearest even.
struct PwCase {
  std::string what;
  std::vector<int64_t> out;
  struct In {
    std::vector<int64_t> strides;
    size_t count;
    dev::PwType type = dev::PwType::F32;
    bool misalign = false;
  };
  std::vector<In> ins;
  std::vector<std::pair<PwOp, std::array<int, 3>>> code;
  dev::PwType outType = dev::PwType::F32;
};

/// Arithmetic only (IEEE-rounded in both backends), then every transcendental op of the program
/// table; layouts: contiguous, row/column/scalar broadcast, bool mask, transposed, misaligned,
/// and sizes off the four-element vectors.
std::vector<PwCase> pointwiseCases() {
  using P = PwOp;
  // Inputs 0 x, 1 bias, 2 col, 3 mask (bool), 4 scalar; instruction k is slot 5 + k.
  std::vector<std::pair<PwOp, std::array<int, 3>>> arith = {
      {P::Mul, {0, 1, -1}}, {P::Add, {5, 2, -1}},  {P::Abs, {0, -1, -1}}, {P::Sqrt, {7, -1, -1}},
      {P::Div, {6, 8, -1}}, {P::Max, {9, 1, -1}},  {P::Min, {10, 2, -1}}, {P::Neg, {11, -1, -1}},
      {P::Relu, {12, -1, -1}}, {P::Recip, {6, -1, -1}}, {P::Sub, {13, 14, -1}}, {P::Where, {3, 15, 4}}};
  std::vector<std::pair<PwOp, std::array<int, 3>>> transc = {
      {P::Mul, {0, 1, -1}}, {P::Add, {5, 2, -1}}, {P::Tanh, {6, -1, -1}}, {P::Sigmoid, {0, -1, -1}},
      {P::Erf, {8, -1, -1}}, {P::Max, {7, 9, -1}}, {P::Exp, {10, -1, -1}}, {P::Log, {11, -1, -1}},
      {P::Pow, {12, 4, -1}}, {P::Where, {3, 13, 6}}};
  using T = dev::PwType;
  auto layout = [](std::vector<int64_t> out, bool transposeX, bool misalign, T x = T::F32, T col = T::F32) {
    int64_t R = out[0], C = out[1];
    std::vector<PwCase::In> in = {
        {transposeX ? std::vector<int64_t>{1, R} : std::vector<int64_t>{C, 1}, size_t(R * C), x, misalign},
        {{0, 1}, size_t(C)}, {{1, 0}, size_t(R), col}, {{C, 1}, size_t(R * C), T::Bool}, {{0, 0}, 1}};
    return in;
  };
  std::vector<PwCase> cases;
  for (auto &[name, code] : {std::pair{"arithmetic", arith}, std::pair{"transcendental", transc}}) {
    cases.push_back({std::string(name) + " [64, 256]", {64, 256}, layout({64, 256}, false, false), code});
    cases.push_back({std::string(name) + " [64, 256] x transposed", {64, 256}, layout({64, 256}, true, false), code});
    cases.push_back({std::string(name) + " [64, 256] x misaligned", {64, 256}, layout({64, 256}, false, true), code});
    cases.push_back({std::string(name) + " [33, 7]", {33, 7}, layout({33, 7}, false, false), code});
    cases.push_back({std::string(name) + " [5, 1003]", {5, 1003}, layout({5, 1003}, false, false), code});
    // BF16 storage (fp8-opt --activation-precision=bf16): x and the column in bfloat16, the
    // result rounded to it; mixed with float32 operands, vectors of 4 and single elements.
    for (auto [shape, transposeX, misalign] : {std::tuple{std::vector<int64_t>{64, 256}, false, false},
                                               std::tuple{std::vector<int64_t>{64, 256}, true, false},
                                               std::tuple{std::vector<int64_t>{64, 256}, false, true},
                                               std::tuple{std::vector<int64_t>{33, 7}, false, false}}) {
      std::string what = std::string(name) + " bf16 [" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) +
                         "]" + (transposeX ? " x transposed" : misalign ? " x misaligned" : "");
      cases.push_back({what, shape, layout(shape, transposeX, misalign, T::BF16, T::BF16), code, T::BF16});
    }
    cases.push_back({std::string(name) + " bf16 in, f32 out [64, 256]", {64, 256},
                     layout({64, 256}, false, false, T::BF16, T::F32), code, T::F32});
  }
  return cases;
}

struct PwRun {
  std::vector<float> interp, jit, cpu;
};

/// Runs a case with the interpreter kernel, the generated kernel and the CPU's applyPointwise.
PwRun runPointwiseCase(const PwCase &c, uint32_t seed) {
  PwRun out;
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 2.0f);
  int64_t n = c.out[0] * c.out[1];
  std::vector<std::vector<float>> host(c.ins.size());
  std::vector<void *> dptr(c.ins.size());
  std::vector<void *> allocs;
  for (size_t j = 0; j < c.ins.size(); ++j) {
    const auto &in = c.ins[j];
    host[j].resize(in.count);
    bool isBool = in.type == dev::PwType::Bool;
    for (size_t i = 0; i < in.count; ++i)
      host[j][i] = isBool ? float(rng() % 3 != 0) : g(rng);
    if (j == 0 && in.count > 8)
      host[j][3] = NAN, host[j][5] = INFINITY, host[j][6] = -0.0f;
    if (in.count == 1 && !isBool)
      host[j][0] = 1.5f; // the scalar: Pow's exponent (a random one amplifies libm's ulps past 1e-4)
    void *p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, in.count * 4 + 64), cudaSuccess);
    allocs.push_back(p);
    char *base = static_cast<char *>(p) + (in.misalign ? dev::pwSize(in.type) : 0);
    if (isBool) {
      std::vector<uint8_t> b(in.count);
      for (size_t i = 0; i < in.count; ++i)
        b[i] = uint8_t(host[j][i] != 0.0f);
      cudaMemcpy(base, b.data(), b.size(), cudaMemcpyHostToDevice);
    } else if (in.type == dev::PwType::BF16) {
      std::vector<uint16_t> b(in.count);
      for (size_t i = 0; i < in.count; ++i) {
        b[i] = floatToBf16(host[j][i]);
        host[j][i] = bf16ToFloat(b[i]); // what the kernel reads, exactly
      }
      cudaMemcpy(base, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
    } else {
      cudaMemcpy(base, host[j].data(), in.count * 4, cudaMemcpyHostToDevice);
    }
    dptr[j] = base;
  }
  float *dout = nullptr;
  EXPECT_EQ(cudaMalloc(&dout, size_t(n) * 4), cudaSuccess);
  const bool bfOut = c.outType == dev::PwType::BF16;
  dev::PwArgs a;
  a.nIn = int(c.ins.size());
  a.nCode = int(c.code.size());
  a.outType = c.outType;
  for (int j = 0; j < a.nIn; ++j) {
    a.in[j] = dptr[size_t(j)];
    a.inType[j] = c.ins[size_t(j)].type;
    for (size_t d = 0; d < c.out.size(); ++d)
      a.inStr[j].s[d] = c.ins[size_t(j)].strides[d];
  }
  for (size_t i = 0; i < c.code.size(); ++i) {
    a.op[i] = dev::ewOf(c.code[i].first);
    for (int j = 0; j < 3; ++j)
      a.arg[i][j] = int8_t(c.code[i].second[size_t(j)] + 1);
  }
  a.out = dout;
  a.shape.rank = int(c.out.size());
  for (size_t d = 0; d < c.out.size(); ++d)
    a.shape.d[d] = c.out[d];
  a.n = n;
  auto download = [&] {
    std::vector<float> y(static_cast<size_t>(n));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (bfOut) {
      std::vector<uint16_t> b(static_cast<size_t>(n));
      cudaMemcpy(b.data(), dout, size_t(n) * 2, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < b.size(); ++i)
        y[i] = bf16ToFloat(b[i]);
    } else {
      cudaMemcpy(y.data(), dout, size_t(n) * 4, cudaMemcpyDeviceToHost);
    }
    cudaMemset(dout, 0xff, size_t(n) * 4);
    return y;
  };
  EXPECT_EQ(dev::pointwise(a, nullptr), "");
  out.interp = download();
  dev::PwJit jit;
  int h = jit.add(a);
  EXPECT_EQ(jit.build(), "") << c.what;
  EXPECT_EQ(jit.launch(h, a, nullptr), "") << c.what;
  out.jit = download();
  out.cpu.resize(size_t(n));
  const size_t nIn = c.ins.size();
  for (int64_t i = 0; i < n; ++i) {
    int64_t i0 = i / c.out[1], i1 = i % c.out[1];
    std::vector<float> r(nIn + c.code.size());
    for (size_t j = 0; j < nIn; ++j)
      r[j] = host[j][size_t(i0 * c.ins[j].strides[0] + i1 * c.ins[j].strides[1])];
    for (size_t k = 0; k < c.code.size(); ++k) {
      auto at = [&](int q) { return c.code[k].second[size_t(q)] < 0 ? 0.0f : r[size_t(c.code[k].second[size_t(q)])]; };
      r[nIn + k] = octet::rt::applyPointwise(c.code[k].first, at(0), at(1), at(2));
    }
    out.cpu[size_t(i)] = bfOut ? bf16ToFloat(floatToBf16(r.back())) : r.back();
  }
  for (void *p : allocs)
    cudaFree(p);
  cudaFree(dout);
  return out;
}

bool sameFloat(float x, float y) { return (std::isnan(x) && std::isnan(y)) || std::memcmp(&x, &y, 4) == 0; }

/// Generated kernels agree with the interpreter and the CPU bit for bit where the program is
/// IEEE-rounded arithmetic (signed zeros, infinities and NaN included). With transcendental
/// functions: within 1e-6 of the interpreter, and 1e-4 of the CPU, whose libm differs from
/// CUDA's by ulps that exp, log and pow with exponents up to ~6 amplify (relative, at least 1).
TEST(CudaKernels, GeneratedPointwiseMatchesTheInterpreterAndTheCpu) {
  REQUIRE_GPU();
  if (std::string why = dev::PwJit::unavailable(); !why.empty())
    GTEST_SKIP() << why;
  uint32_t seed = 11;
  for (const PwCase &c : pointwiseCases()) {
    PwRun r = runPointwiseCase(c, seed++);
    bool exact = c.what.rfind("arithmetic", 0) == 0;
    int bad = 0;
    for (size_t i = 0; i < r.cpu.size() && bad < 5; ++i) {
      float want = r.cpu[i], scale = std::max(1.0f, std::fabs(want));
      bool okJit = exact ? sameFloat(r.jit[i], want)
                         : (sameFloat(r.jit[i], want) || std::fabs(r.jit[i] - want) <= 1e-4f * scale);
      bool okInterp = exact ? sameFloat(r.interp[i], r.jit[i])
                            : (sameFloat(r.interp[i], r.jit[i]) || std::fabs(r.interp[i] - r.jit[i]) <= 1e-6f * scale);
      if (!okJit && !exact && c.outType == dev::PwType::BF16) // libm's ulps may cross a BF16 rounding boundary: one BF16 ulp
        okJit = std::fabs(r.jit[i] - want) <= 0x1p-7f * scale;
      if (!okJit || !okInterp)
        ++bad;
      EXPECT_TRUE(okJit) << c.what << " element " << i << ": generated " << r.jit[i] << ", CPU " << want;
      EXPECT_TRUE(okInterp) << c.what << " element " << i << ": generated " << r.jit[i] << ", interpreter "
                            << r.interp[i];
    }
  }
}

/// The generator's translation unit compiles with NVRTC for Hopper and Ada (no GPU needed), and
/// picks the loads the layouts allow: 16-byte loads for contiguous floats, 4-byte for bool masks,
/// one load for broadcast rows, per-element loads for transposed or misaligned inputs.
TEST(PointwiseJit, GeneratedKernelsCompileWithTheirLayouts) {
  if (std::string why = dev::PwJit::unavailable(); !why.empty())
    GTEST_SKIP() << why;
  std::map<std::string, std::string> sources;
  for (const PwCase &c : pointwiseCases()) {
    if (c.what.rfind("arithmetic", 0) != 0)
      continue;
    dev::PwArgs a;
    a.nIn = int(c.ins.size());
    a.nCode = int(c.code.size());
    for (int j = 0; j < a.nIn; ++j) {
      a.in[j] = reinterpret_cast<const void *>(uintptr_t(0x10000) +
                                               (c.ins[size_t(j)].misalign ? dev::pwSize(c.ins[size_t(j)].type) : 0));
      a.inType[j] = c.ins[size_t(j)].type;
      for (size_t d = 0; d < 2; ++d)
        a.inStr[j].s[d] = c.ins[size_t(j)].strides[d];
    }
    for (size_t i = 0; i < c.code.size(); ++i) {
      a.op[i] = dev::ewOf(c.code[i].first);
      for (int j = 0; j < 3; ++j)
        a.arg[i][j] = int8_t(c.code[i].second[size_t(j)] + 1);
    }
    a.out = reinterpret_cast<float *>(uintptr_t(0x20000));
    a.outType = c.outType;
    a.shape.rank = 2;
    a.shape.d[0] = c.out[0], a.shape.d[1] = c.out[1];
    a.n = c.out[0] * c.out[1];
    dev::PwJit jit;
    EXPECT_EQ(jit.add(a), 0);
    EXPECT_EQ(jit.add(a), 0) << "the same program and layout share one kernel";
    sources[c.what] = jit.source();
    for (int cc : {90, 89}) {
      std::string cubin;
      EXPECT_EQ(dev::PwJit::compile(jit.source(), cc, cubin), "") << c.what << " sm_" << cc;
      EXPECT_GT(cubin.size(), 1000u) << c.what;
    }
  }
  const std::string &vec = sources["arithmetic [64, 256]"];
  EXPECT_NE(vec.find("const float4 v = *reinterpret_cast<const float4 *>(in0_0"), std::string::npos) << vec;
  EXPECT_NE(vec.find("const float4 v = *reinterpret_cast<const float4 *>(in0_1"), std::string::npos) << vec;
  EXPECT_NE(vec.find("const uchar4 v = *reinterpret_cast<const uchar4 *>(in0_3"), std::string::npos) << vec;
  EXPECT_NE(vec.find("const float v = in0_2[o0_2]"), std::string::npos) << vec;
  EXPECT_NE(vec.find("*reinterpret_cast<float4 *>(out0 + i)"), std::string::npos) << vec;
  for (const char *gathered : {"arithmetic [64, 256] x transposed", "arithmetic [64, 256] x misaligned"}) {
    const std::string &src = sources[gathered];
    EXPECT_EQ(src.find("reinterpret_cast<const float4 *>(in0_0"), std::string::npos) << gathered;
    EXPECT_NE(src.find("x0_0[3] = in0_0[o0_0 + "), std::string::npos) << gathered;
  }
  // BF16: 8-byte loads of 4 values widened exactly, a rounded 8-byte store; per element where
  // misaligned by one value.
  const std::string &bf = sources["arithmetic bf16 [64, 256]"];
  EXPECT_NE(bf.find("const ushort4 v = *reinterpret_cast<const ushort4 *>(in0_0"), std::string::npos) << bf;
  EXPECT_NE(bf.find("x0_0[3] = bf16Float(v.w)"), std::string::npos) << bf;
  EXPECT_NE(bf.find("const float v = bf16Float(in0_2[o0_2])"), std::string::npos) << bf;
  EXPECT_NE(bf.find("*reinterpret_cast<ushort4 *>(out0 + i) = make_ushort4(bf16Bits("), std::string::npos) << bf;
  EXPECT_NE(sources["arithmetic bf16 [64, 256] x misaligned"].find("x0_0[3] = bf16Float(in0_0[o0_0 + "),
            std::string::npos);
  EXPECT_NE(sources["arithmetic bf16 [33, 7]"].find("out0[i] = bf16Bits("), std::string::npos);
  {
    // A chain: m' = 0.9 m + g, then p' = p - m' (m' from the first program's registers, not
    // reloaded); one kernel with both stores. A chain whose later program reads the earlier
    // result broadcast is refused.
    dev::PwArgs m, p;
    float *buf = reinterpret_cast<float *>(uintptr_t(0x10000));
    for (dev::PwArgs *a : {&m, &p}) {
      a->shape.rank = 1;
      a->shape.d[0] = a->n = 4096;
      a->nIn = 2;
      a->inStr[0].s[0] = a->inStr[1].s[0] = 1;
    }
    m.in[0] = buf, m.in[1] = buf + 4096, m.out = buf + 8192;
    m.nCode = 2;
    m.op[0] = dev::ewOf(PwOp::Mul), m.arg[0][0] = 1, m.arg[0][1] = 1; // (m * m stands in for 0.9 m)
    m.op[1] = dev::ewOf(PwOp::Add), m.arg[1][0] = 3, m.arg[1][1] = 2;
    p.in[0] = buf + 12288, p.in[1] = m.out, p.out = buf + 16384;
    p.nCode = 1;
    p.op[0] = dev::ewOf(PwOp::Sub), p.arg[0][0] = 1, p.arg[0][1] = 2;
    dev::PwJit jit;
    EXPECT_EQ(jit.addChain({m, p}), 0);
    std::string src = jit.source(), cubin;
    EXPECT_NE(src.find("x1_1[3] = r0_1[3];"), std::string::npos) << src;
    EXPECT_EQ(src.find("(in1_1"), std::string::npos) << "the earlier result is not reloaded";
    EXPECT_NE(src.find("(out0 + i)"), std::string::npos) << src;
    EXPECT_NE(src.find("(out1 + i)"), std::string::npos) << src;
    EXPECT_EQ(dev::PwJit::compile(src, 90, cubin), "");
    dev::PwArgs broadcast = p;
    broadcast.shape.rank = 2, broadcast.shape.d[0] = 64, broadcast.shape.d[1] = 64;
    broadcast.inStr[0].s[0] = 64, broadcast.inStr[0].s[1] = 1;
    broadcast.inStr[1].s[0] = 1, broadcast.inStr[1].s[1] = 0; // m' read as a column
    dev::PwArgs m2 = m;
    m2.shape = broadcast.shape;
    m2.inStr[0].s[0] = m2.inStr[1].s[0] = 64, m2.inStr[0].s[1] = m2.inStr[1].s[1] = 1;
    EXPECT_EQ(jit.addChain({m2, broadcast}), -1);
    // m' kept in registers (only p' reads it): no store of it.
    dev::PwJit kept;
    EXPECT_EQ(kept.addChain({m, p}, {false, true}), 0);
    src = kept.source();
    EXPECT_EQ(src.find("(out0 + i)"), std::string::npos) << src;
    EXPECT_NE(src.find("(out1 + i)"), std::string::npos) << src;
    // A cast chain over [16, 256]: p' goes to the cast-transpose tile (with column sums), not to
    // memory; m' is still written. Shapes the tile cannot take are refused.
    dev::PwJit cast;
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 16, 256, true), 0);
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 8, 512, true), -1) << "rows not a multiple of 16";
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 16, 128, true), -1) << "not the programs' size";
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 16, 256, true, 2, 0), -1) << "a stored second stream";
    EXPECT_EQ(cast.addCastChain({m, p}, {false, true}, 16, 256, true, 1, 0), -1) << "no target for the second stream";
    src = cast.source();
    EXPECT_NE(src.find("castTransposeTile<octet_pw0_src, true, 1, 1>(src, rows, cols, tg, colPartials, slot)"),
              std::string::npos) << src;
    EXPECT_NE(src.find("(out0 + i)"), std::string::npos) << src;
    EXPECT_EQ(src.find("(out1 + i)"), std::string::npos) << src;
    EXPECT_NE(src.find("vals[h * 4 + 3] = r1_0[3];"), std::string::npos) << src;
    // With m' stored in BF16, p' reads it rounded as stored; with p' in BF16 the cast takes it rounded.
    {
      dev::PwArgs mb = m, pb = p;
      mb.outType = pb.inType[1] = pb.outType = dev::PwType::BF16;
      dev::PwJit bfc;
      EXPECT_EQ(bfc.addCastChain({mb, pb}, {true, true}, 16, 256, false), 0);
      std::string b = bfc.source();
      EXPECT_NE(b.find("x1_1[3] = bf16Round(r0_1[3]);"), std::string::npos) << b;
      EXPECT_NE(b.find("vals[h * 4 + 3] = bf16Round(r1_0[3]);"), std::string::npos) << b;
      EXPECT_EQ(dev::PwJit::compile(b, 90, cubin), "");
    }
    // The same chain for the three casts of one pass (an RMSNorm's Q, K and V casts): its own kernel.
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 16, 256, false, 3), 1);
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 16, 256, false, 4), -1) << "more targets than a pass takes";
    src = cast.source();
    EXPECT_NE(src.find("castTransposeTile<octet_pw1_src, false, 3, 1>(src, rows, cols, tg, colPartials, slot)"),
              std::string::npos) << src;
    for (int cc : {90, 89})
      EXPECT_EQ(dev::PwJit::compile(src, cc, cubin), "") << "sm_" << cc;
  }
  EXPECT_EQ(sources["arithmetic [33, 7]"].find("float4"), std::string::npos) << "7 columns: one element per thread";
  {
    // Past 2^31 elements the coordinates are 64-bit (unsigned long long, cast C-style: a
    // functional cast cannot name a two-word type), for a plain program and for a cast chain:
    // y = x + row over [2^21 + 64, 1024].
    dev::PwArgs a;
    a.shape.rank = 2, a.shape.d[0] = (int64_t(1) << 21) + 64, a.shape.d[1] = 1024;
    a.n = a.shape.d[0] * a.shape.d[1];
    a.nIn = 2;
    a.in[0] = reinterpret_cast<const void *>(uintptr_t(0x10000));
    a.in[1] = reinterpret_cast<const void *>(uintptr_t(0x20000));
    a.inStr[0].s[0] = 1024, a.inStr[0].s[1] = 1;
    a.inStr[1].s[0] = 0, a.inStr[1].s[1] = 1;
    a.nCode = 1;
    a.op[0] = dev::ewOf(PwOp::Add), a.arg[0][0] = 1, a.arg[0][1] = 2;
    a.out = reinterpret_cast<float *>(uintptr_t(0x30000));
    dev::PwJit wide, wideCast;
    EXPECT_EQ(wide.add(a), 0);
    EXPECT_EQ(wideCast.addCastChain({a}, {false}, a.shape.d[0], 1024, false), 0);
    for (const dev::PwJit *j : {&wide, &wideCast}) {
      std::string src = j->source(), bin;
      EXPECT_NE(src.find("(unsigned long long)("), std::string::npos) << src;
      EXPECT_EQ(src.find("unsigned long long("), std::string::npos) << src;
      EXPECT_EQ(dev::PwJit::compile(src, 90, bin), "") << src;
    }
  }
  // Broken source reports NVRTC's log instead of failing silently.
  std::string cubin;
  std::string why = dev::PwJit::compile("extern \"C\" __global__ void k() { undefined_name; }", 90, cubin);
  EXPECT_NE(why.find("undefined_name"), std::string::npos) << why;
}
} // namespace

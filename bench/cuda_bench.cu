//===- cuda_bench.cpp - Micro-benchmarks of the CUDA kernels -----------------===//
//
// octet-cuda-bench gemm M N K...   FP8 GEMM (E4M3, fast accumulation, BF16 out; OCTET_BENCH_F32=1:
//                                  FP32 out, OCTET_BENCH_SPLIT=1: split accumulation)
// octet-cuda-bench gemm-rowwise M N K  the same with a scale per row of A and of B (torchao's
//                                  rowwise recipe), each way the executor runs it: cuBLASLt's
//                                  outer-vector mode writing BF16 ("outer_vector"), and the float32
//                                  product scaled and rounded by the epilogue pass ("epilogue_pass")
// octet-cuda-bench cast ROWS COLS  fused cast+amax of a BF16 and an FP32 tensor, and the same
//                                  writing the transposed copy too (cast-transpose)
// octet-cuda-bench castsrc ROWS COLS  cast-transpose from each source the executor fuses into it
//                                  (BF16 tensor, BF16 GELU, float32 LayerNorm; one and three targets;
//                                  with and without the untransposed codes; with column sums). The
//                                  values are uniform in [-R, R), R = OCTET_BENCH_RANGE (default 8;
//                                  1.5 is closer to activations, about N(0, 1))
// octet-cuda-bench copy BYTES      device-to-device copy (the HBM roofline)
// octet-cuda-bench transpose ROWS COLS  byte transpose (an FP8 GEMM operand made K-contiguous)
// octet-cuda-bench attention HEADS T D CAUSAL
//                                  octet::Attention forward and backward: Attention.cu's TF32 and BF16
//                                  kernels, cuDNN's fused SDPA with and without the float32 <-> BF16
//                                  conversions around it;
//                                  model TFLOP/s count 4 T^2 D per head forward and 2.5x that
//                                  backward (the five products of flash attention), halved when causal
// Prints one JSON object per measurement: the median over 50 CUDA-event pairs of
// the mean of 20 back-to-back calls, after 10 warm-ups, inputs rotated over 4
// buffers so repeated runs do not measure the L2 cache.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "octet/runtime/Tensor.h"
#include "../runtime/cuda/CudnnAttention.h"
#include "../runtime/cuda/DeviceKernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace octet::rt;

#define CHECK(x)                                                                                                       \
  do {                                                                                                                 \
    cudaError_t e_ = (x);                                                                                              \
    if (e_ != cudaSuccess) {                                                                                           \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                                                    \
      std::exit(1);                                                                                                    \
    }                                                                                                                  \
  } while (0)

template <typename F> double medianMs(F f) {
  for (int i = 0; i < 10; ++i)
    f(i);
  std::vector<float> t;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const int inner = 20; // back-to-back calls per event pair: launch gaps hide behind queued work
  for (int r = 0; r < 50; ++r) {
    cudaEventRecord(a);
    for (int i = 0; i < inner; ++i)
      f(r * inner + i);
    cudaEventRecord(b);
    CHECK(cudaEventSynchronize(b));
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms / inner);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

__global__ void fill(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    p[i] = uint8_t((h >> 8) & 0x7e) | uint8_t(h & 0x80) ; // finite FP8 codes, small exponents mixed
  }
}

/// Realistic activations: values uniform in [-8, 8) from a hash (no NaN, Inf or subnormals,
/// which would send the IEEE division to its slow path and misstate the speed).
template <typename T> __global__ void fillValues(T *p, size_t n, uint32_t seed, float range = 8.0f) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    p[i] = T(float(h) * (2.0f * range / 4294967296.0f) - range);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: octet-cuda-bench gemm M N K | gemm-rowwise M N K | cast ROWS COLS | castsrc ROWS COLS | copy BYTES | transpose ROWS COLS | attention HEADS T D CAUSAL\n");
    return 2;
  }
  std::string why;
  if (!cuda::available(&why)) {
    std::fprintf(stderr, "octet-cuda-bench: %s\n", why.c_str());
    return 1;
  }
  std::string what = argv[1];
  if ((what == "gemm" || what == "gemm-rowwise") && argc == 5) {
    int64_t M = std::atoll(argv[2]), N = std::atoll(argv[3]), K = std::atoll(argv[4]);
    bool rowwise = what == "gemm-rowwise";
    std::vector<uint8_t *> A(4), B(4);
    for (int i = 0; i < 4; ++i) {
      CHECK(cudaMalloc(&A[i], size_t(M * K)));
      CHECK(cudaMalloc(&B[i], size_t(N * K)));
      fill<<<1024, 256>>>(A[i], size_t(M * K), 17u + i);
      fill<<<1024, 256>>>(B[i], size_t(N * K), 91u + i);
    }
    // Scales, 16-byte aligned each (cuBLASLt's requirement): ones, or one per row of A then of B.
    int64_t nsa = rowwise ? (M + 3) / 4 * 4 : 4, nsb = rowwise ? N : 4;
    float *s, *one;
    void *D, *acc = nullptr;
    CHECK(cudaMalloc(&s, size_t(nsa + nsb) * 4));
    CHECK(cudaMalloc(&one, 16));
    std::vector<float> ones(size_t(nsa + nsb), 1.0f);
    CHECK(cudaMemcpy(s, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(one, ones.data(), 16, cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&D, size_t(M * N) * 4));
    if (rowwise)
      CHECK(cudaMalloc(&acc, size_t(M * N) * 4));
    bool f32 = std::getenv("OCTET_BENCH_F32") != nullptr, split = std::getenv("OCTET_BENCH_SPLIT") != nullptr;
    cuda::GemmDesc g;
    g.M = M, g.N = N, g.K = K, g.dBf16 = !f32, g.fastAccum = !split;
    cuda::Gemm gemm;
    auto measure = [&](const char *kernel, auto call) {
      std::string err;
      int calls = 0;
      double ms = medianMs([&](int i) {
        std::string e = call(i);
        if (!e.empty() && err.empty())
          err = e + " (call " + std::to_string(calls) + ")";
        ++calls;
      });
      if (!err.empty()) {
        std::fprintf(stderr, "octet-cuda-bench: %s: %s\n", kernel, err.c_str());
        return false;
      }
      std::printf("{\"kernel\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"out\": \"%s\", "
                  "\"accumulation\": \"%s\", \"ms\": %.5f, \"tflops\": %.1f}\n",
                  kernel, (long long)M, (long long)N, (long long)K, f32 ? "f32" : "bf16", split ? "split" : "fast", ms,
                  2.0 * M * N * K / ms / 1e9);
      return true;
    };
    auto operands = [&](int i, void *d, const float *sa, const float *sb) {
      cuda::GemmOperands o;
      o.A = A[i % 4], o.B = B[i % 4], o.aScaleInv = sa, o.bScaleInv = sb, o.D = d;
      return o;
    };
    if (!rowwise)
      return measure("fp8_gemm", [&](int i) { return gemm.run(g, operands(i, D, s, s + 4)); }) ? 0 : 1;
    cuda::GemmDesc vec = g, product = g;
    vec.rowScalesA = vec.colScalesB = true;
    product.dBf16 = false;
    bool ok = true;
    if (std::string why = gemm.supports(vec); !why.empty()) {
      std::fprintf(stderr, "octet-cuda-bench: outer-vector scales: %s\n", why.c_str());
      ok = false;
    } else {
      ok = measure("fp8_gemm_rowwise_outer_vector", [&](int i) { return gemm.run(vec, operands(i, D, s, s + nsa)); });
    }
    namespace dev = cuda::dev;
    ok = measure("fp8_gemm_rowwise_epilogue_pass", [&](int i) {
           if (std::string e = gemm.run(product, operands(i, acc, one, one)); !e.empty())
             return e;
           dev::EpilogueArgs ep;
           ep.acc = static_cast<float *>(acc);
           ep.out = D;
           ep.outType = int(f32 ? DType::F32 : DType::BF16);
           ep.M = M;
           ep.N = N;
           ep.aScale = s;
           ep.bScale = s + nsa;
           ep.aRows = ep.bCols = ep.applyScales = true;
           return dev::gemmEpilogue(ep, nullptr);
         }) && ok;
    return ok ? 0 : 1;
  }
  if (what == "cast" && argc == 4) {
    size_t n = size_t(std::atoll(argv[2])) * size_t(std::atoll(argv[3]));
    for (int bf16 = 1; bf16 >= 0; --bf16) {
      size_t inBytes = n * (bf16 ? 2 : 4);
      std::vector<void *> X(4);
      uint32_t seed = 5;
      for (auto &x : X) {
        CHECK(cudaMalloc(&x, inBytes));
        if (bf16)
          fillValues<<<1024, 256>>>(static_cast<__nv_bfloat16 *>(x), n, ++seed);
        else
          fillValues<<<1024, 256>>>(static_cast<float *>(x), n, ++seed);
      }
      uint8_t *q, *qt;
      float *si, *amax;
      CHECK(cudaMalloc(&q, n));
      CHECK(cudaMalloc(&qt, n));
      CHECK(cudaMalloc(&si, 4));
      CHECK(cudaMalloc(&amax, 4));
      float one = 1.0f;
      CHECK(cudaMemcpy(si, &one, 4, cudaMemcpyHostToDevice));
      double ms = medianMs([&](int i) {
        cudaMemsetAsync(amax, 0, 4);
        cuda::castAmax(X[i % 4], bf16 ? cuda::InType::BF16 : cuda::InType::F32, n, si, cuda::Format::E4M3, q, amax);
      });
      double gbs = double(inBytes + n) / ms / 1e6;
      std::printf("{\"kernel\": \"cast_amax\", \"input\": \"%s\", \"elements\": %zu, \"ms\": %.5f, \"GBps\": %.0f}\n",
                  bf16 ? "bf16" : "f32", n, ms, gbs);
      int64_t rows = std::atoll(argv[2]), cols = std::atoll(argv[3]);
      std::string err;
      double tms = medianMs([&](int i) {
        cudaMemsetAsync(amax, 0, 4);
        std::string e = cuda::castAmaxTranspose(X[i % 4], bf16 ? cuda::InType::BF16 : cuda::InType::F32, rows, cols,
                                                si, cuda::Format::E4M3, q, qt, amax);
        if (!e.empty())
          err = e;
      });
      if (!err.empty()) {
        std::fprintf(stderr, "octet-cuda-bench: %s\n", err.c_str());
        return 1;
      }
      std::printf("{\"kernel\": \"cast_amax_transpose\", \"input\": \"%s\", \"elements\": %zu, \"ms\": %.5f, "
                  "\"GBps\": %.0f}\n",
                  bf16 ? "bf16" : "f32", n, tms, double(inBytes + 2 * n) / tms / 1e6);
      for (auto x : X)
        cudaFree(x);
      cudaFree(q);
      cudaFree(qt);
    }
    return 0;
  }
  if (what == "attention" && argc == 6) {
    int64_t heads = std::atoll(argv[2]), T = std::atoll(argv[3]), D = std::atoll(argv[4]);
    bool causal = std::atoi(argv[5]) != 0;
    size_t n = size_t(heads * T * D), rows = size_t(heads * T);
    std::vector<float *> buf(9);
    for (float *&b : buf) {
      CHECK(cudaMalloc(&b, n * 4));
      fillValues<<<1024, 256>>>(b, n, uint32_t(reinterpret_cast<uintptr_t>(b) >> 8));
    }
    float *lse, *delta;
    CHECK(cudaMalloc(&lse, rows * 4));
    CHECK(cudaMalloc(&delta, rows * 4));
    double fwdFlops = 4.0 * double(heads) * double(T) * double(T) * double(D) * (causal ? 0.5 : 1.0);
    auto report = [&](const char *what, double fwd, double bwd) {
      std::printf("{\"kernel\": \"attention\", \"precision\": \"%s\", \"heads\": %lld, \"T\": %lld, \"D\": %lld, "
                  "\"causal\": %s, \"fwd_ms\": %.4f, \"bwd_ms\": %.4f, \"fwd_tflops\": %.1f, \"bwd_tflops\": %.1f}\n",
                  what, (long long)heads, (long long)T, (long long)D, causal ? "true" : "false", fwd, bwd,
                  fwdFlops / fwd / 1e9, 2.5 * fwdFlops / bwd / 1e9);
    };
    for (auto precision : {cuda::dev::AttnPrecision::TF32, cuda::dev::AttnPrecision::BF16}) {
      cuda::dev::AttnArgs a;
      a.q = buf[0], a.k = buf[1], a.v = buf[2], a.y = buf[3], a.lse = lse;
      a.batch = heads, a.tq = a.tk = int(T), a.d = int(D), a.scale = 1.0f / std::sqrt(float(D)), a.causal = causal;
      a.precision = precision;
      a.yIn = buf[3], a.lseIn = lse, a.dy = buf[4], a.dq = buf[5], a.dk = buf[6], a.dv = buf[7], a.delta = delta;
      if (size_t w = cuda::dev::attentionWorkspaceBytes(a, true))
        CHECK(cudaMalloc(&a.work, w));
      std::string err;
      double fwd = medianMs([&](int) {
        if (std::string e = cuda::dev::attentionForward(a); !e.empty() && err.empty())
          err = e;
      });
      double bwd = medianMs([&](int) {
        if (std::string e = cuda::dev::attentionBackward(a); !e.empty() && err.empty())
          err = e;
      });
      if (!err.empty()) {
        std::fprintf(stderr, "octet-cuda-bench: %s\n", err.c_str());
        return 1;
      }
      report(precision == cuda::dev::AttnPrecision::BF16 ? "bf16" : "tf32", fwd, bwd);
    }
    // cuDNN's fused SDPA (BF16), with the float32 <-> BF16 conversions the executor runs around it
    // and without them (the graphs alone, on BF16 operands as PyTorch's SDPA gets them).
    cuda::dev::AttnArgs a;
    a.q = buf[0], a.k = buf[1], a.v = buf[2], a.y = buf[3], a.lse = lse;
    a.batch = heads, a.tq = a.tk = int(T), a.d = int(D), a.scale = 1.0f / std::sqrt(float(D)), a.causal = causal;
    a.precision = cuda::dev::AttnPrecision::BF16;
    a.yIn = buf[3], a.lseIn = lse, a.dy = buf[4], a.dq = buf[5], a.dk = buf[6], a.dv = buf[7];
    std::string why;
    auto fwdGraph = cuda::dev::CudnnAttention::build(a, false, why);
    auto bwdGraph = fwdGraph ? cuda::dev::CudnnAttention::build(a, true, why) : nullptr;
    if (!bwdGraph) {
      std::fprintf(stderr, "octet-cuda-bench: no cuDNN attention: %s\n", why.c_str());
      return 0;
    }
    CHECK(cudaMalloc(&a.work, std::max(fwdGraph->workspaceBytes(), bwdGraph->workspaceBytes())));
    std::string err;
    auto time = [&](const cuda::dev::CudnnAttention &g, bool whole) {
      return medianMs([&](int) {
        if (std::string e = whole ? g.run(a) : g.execute(a); !e.empty() && err.empty())
          err = e;
      });
    };
    CHECK(cudaMemset(a.work, 0, bwdGraph->workspaceBytes())); // the BF16 copies execute() reads
    double fwd = time(*fwdGraph, true), bwd = time(*bwdGraph, true);
    double fwdOnly = time(*fwdGraph, false), bwdOnly = time(*bwdGraph, false);
    if (!err.empty()) {
      std::fprintf(stderr, "octet-cuda-bench: %s\n", err.c_str());
      return 1;
    }
    report("cudnn bf16 + conversions", fwd, bwd);
    report("cudnn bf16", fwdOnly, bwdOnly);
    return 0;
  }
  if (what == "transpose" && argc == 4) {
    int64_t R = std::atoll(argv[2]), C = std::atoll(argv[3]);
    std::vector<uint8_t *> X(4);
    uint8_t *Y;
    for (auto &x : X) {
      CHECK(cudaMalloc(&x, size_t(R * C)));
      fill<<<1024, 256>>>(x, size_t(R * C), 3u);
    }
    CHECK(cudaMalloc(&Y, size_t(R * C)));
    cuda::dev::CopyArgs c; // [R, C] -> [C, R]
    c.elemSize = 1;
    c.n = R * C;
    c.shape.rank = 2;
    c.shape.d[0] = C, c.shape.d[1] = R;
    c.srcStr.s[0] = 1, c.srcStr.s[1] = C;
    c.dstStr.s[0] = R, c.dstStr.s[1] = 1;
    c.dst = Y;
    double ms = medianMs([&](int i) {
      c.src = X[i % 4];
      cuda::dev::stridedCopy(c, nullptr);
    });
    std::printf("{\"kernel\": \"transpose_bytes\", \"rows\": %lld, \"cols\": %lld, \"ms\": %.5f, \"GBps\": %.0f}\n",
                (long long)R, (long long)C, ms, 2.0 * double(R * C) / ms / 1e6);
    return 0;
  }
  if (what == "castsrc" && argc == 4) {
    int64_t rows = std::atoll(argv[2]), cols = std::atoll(argv[3]);
    size_t n = size_t(rows * cols);
    std::vector<void *> Xb(4), Xf(4);
    const char *rv = std::getenv("OCTET_BENCH_RANGE");
    float range = rv ? std::strtof(rv, nullptr) : 8.0f;
    for (int i = 0; i < 4; ++i) {
      CHECK(cudaMalloc(&Xb[i], n * 2));
      CHECK(cudaMalloc(&Xf[i], n * 4));
      fillValues<<<1024, 256>>>(static_cast<__nv_bfloat16 *>(Xb[i]), n, 11u + i, range);
      fillValues<<<1024, 256>>>(static_cast<float *>(Xf[i]), n, 21u + i, range);
    }
    uint8_t *q[3], *qt[3];
    for (int i = 0; i < 3; ++i) {
      CHECK(cudaMalloc(&q[i], n));
      CHECK(cudaMalloc(&qt[i], n));
    }
    float *si, *amax, *gamma, *beta, *partials;
    double *stats;
    CHECK(cudaMalloc(&si, 16));
    CHECK(cudaMalloc(&amax, 16));
    CHECK(cudaMalloc(&gamma, size_t(cols) * 4));
    CHECK(cudaMalloc(&beta, size_t(cols) * 4));
    CHECK(cudaMalloc(&stats, size_t(rows) * 16));
    CHECK(cudaMalloc(&partials, size_t((rows + 63) / 64 * cols) * 4));
    fillValues<<<64, 256>>>(gamma, size_t(cols), 3u);
    fillValues<<<64, 256>>>(beta, size_t(cols), 4u);
    std::vector<double> st(size_t(rows) * 2);
    for (int64_t r = 0; r < rows; ++r)
      st[size_t(2 * r)] = 0.01 * double(r % 7), st[size_t(2 * r + 1)] = 0.25;
    CHECK(cudaMemcpy(stats, st.data(), st.size() * 8, cudaMemcpyHostToDevice));
    // The scales' inverse: 1, or OCTET_BENCH_SCALE_INV (delayed scaling's are any float).
    const char *sv = std::getenv("OCTET_BENCH_SCALE_INV");
    float sis[4] = {1, 1, 1, 1};
    if (sv)
      sis[0] = sis[1] = sis[2] = sis[3] = std::strtof(sv, nullptr);
    CHECK(cudaMemcpy(si, sis, 16, cudaMemcpyHostToDevice));
    struct Case {
      const char *name;
      cuda::CastSource::Kind kind;
      bool bf16, codes, sums;
      int targets;
      bool slot = false; // the blocks meet in an amax slot (the executor's way: no memset per launch)
    };
    const Case cases[] = {{"bf16", cuda::CastSource::Plain, true, true, false, 1},
                          {"bf16 transposed only", cuda::CastSource::Plain, true, false, false, 1},
                          {"bf16 with column sums", cuda::CastSource::Plain, true, true, true, 1},
                          {"f32", cuda::CastSource::Plain, false, true, false, 1},
                          {"gelu(bf16)", cuda::CastSource::Gelu, true, true, false, 1},
                          {"gelu(bf16) transposed only", cuda::CastSource::Gelu, true, false, false, 1},
                          {"layernorm(f32)", cuda::CastSource::LayerNorm, false, true, false, 1},
                          {"layernorm(f32) transposed only", cuda::CastSource::LayerNorm, false, false, false, 1},
                          {"layernorm(f32), 3 targets", cuda::CastSource::LayerNorm, false, true, false, 3},
                          {"bf16, amax slot", cuda::CastSource::Plain, true, true, false, 1, true},
                          {"gelu(bf16), amax slot", cuda::CastSource::Gelu, true, true, false, 1, true}};
    unsigned *slot;
    CHECK(cudaMalloc(&slot, 8));
    CHECK(cudaMemset(slot, 0, 8));
    for (const Case &c : cases) {
      std::string err;
      cuda::CastTarget tg[3];
      for (int i = 0; i < c.targets; ++i)
        tg[i] = {si + i, cuda::Format::E4M3, c.codes ? q[i] : nullptr, qt[i], amax + i};
      double ms = medianMs([&](int i) {
        cuda::CastSource src;
        src.kind = c.kind;
        src.x = c.bf16 ? Xb[i % 4] : Xf[i % 4];
        src.type = c.bf16 ? cuda::InType::BF16 : cuda::InType::F32;
        src.tanhApprox = true;
        if (c.kind == cuda::CastSource::LayerNorm)
          src.stats = stats, src.gamma = gamma, src.beta = beta;
        if (!c.slot)
          cudaMemsetAsync(amax, 0, 16);
        std::string e = cuda::castTransposeMany(src, rows, cols, tg, c.targets, nullptr, c.sums ? partials : nullptr,
                                                c.slot ? slot : nullptr);
        if (!e.empty())
          err = e;
      });
      if (!err.empty()) {
        std::fprintf(stderr, "octet-cuda-bench: %s: %s\n", c.name, err.c_str());
        return 1;
      }
      double bytes = double(n) * ((c.bf16 ? 2 : 4) + c.targets * (c.codes ? 2 : 1));
      std::printf("{\"kernel\": \"cast_transpose\", \"source\": \"%s\", \"rows\": %lld, \"cols\": %lld, "
                  "\"ms\": %.5f, \"GBps\": %.0f}\n",
                  c.name, (long long)rows, (long long)cols, ms, bytes / ms / 1e6);
    }
    return 0;
  }
  if (what == "copy" && argc == 3) {
    size_t bytes = size_t(std::atoll(argv[2]));
    void *a, *b;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    double ms = medianMs([&](int) { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice); });
    std::printf("{\"kernel\": \"d2d_copy\", \"bytes\": %zu, \"ms\": %.5f, \"GBps\": %.0f}\n", bytes, ms,
                2.0 * double(bytes) / ms / 1e6);
    return 0;
  }
  std::fprintf(stderr, "usage: octet-cuda-bench gemm M N K | gemm-rowwise M N K | cast ROWS COLS | castsrc ROWS COLS | copy BYTES | transpose ROWS COLS | attention HEADS T D CAUSAL\n");
  return 2;
}

//===- cuda_bench.cpp - Micro-benchmarks of the CUDA kernels -----------------===//
//
// octet-cuda-bench gemm M N K...   FP8 GEMM (E4M3, fast accumulation, BF16 out)
// octet-cuda-bench cast ROWS COLS  fused cast+amax of a BF16 and an FP32 tensor
// octet-cuda-bench copy BYTES      device-to-device copy (the HBM roofline)
// Prints one JSON object per measurement: the median over 50 CUDA-event pairs of
// the mean of 20 back-to-back calls, after 10 warm-ups, inputs rotated over 4
// buffers so repeated runs do not measure the L2 cache.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
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
template <typename T> __global__ void fillValues(T *p, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    p[i] = T(float(h) * (16.0f / 4294967296.0f) - 8.0f);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: octet-cuda-bench gemm M N K | cast ROWS COLS | copy BYTES\n");
    return 2;
  }
  std::string why;
  if (!cuda::available(&why)) {
    std::fprintf(stderr, "octet-cuda-bench: %s\n", why.c_str());
    return 1;
  }
  std::string what = argv[1];
  if (what == "gemm" && argc == 5) {
    int64_t M = std::atoll(argv[2]), N = std::atoll(argv[3]), K = std::atoll(argv[4]);
    std::vector<uint8_t *> A(4), B(4);
    for (int i = 0; i < 4; ++i) {
      CHECK(cudaMalloc(&A[i], size_t(M * K)));
      CHECK(cudaMalloc(&B[i], size_t(N * K)));
      fill<<<1024, 256>>>(A[i], size_t(M * K), 17u + i);
      fill<<<1024, 256>>>(B[i], size_t(N * K), 91u + i);
    }
    float *s; // two scales, 16-byte aligned each (cuBLASLt's requirement)
    void *D;
    CHECK(cudaMalloc(&s, 32));
    float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(cudaMemcpy(s, ones, 32, cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&D, size_t(M * N) * 4));
    cuda::Gemm gemm;
    std::string err;
    bool f32 = std::getenv("OCTET_BENCH_F32") != nullptr;
    int calls = 0;
    double ms = medianMs([&](int i) {
      std::string e = gemm.run(M, N, K, A[i % 4], cuda::Format::E4M3, B[i % 4], cuda::Format::E4M3, s, s + 4, D, !f32, true);
      if (!e.empty() && err.empty())
        err = e + " (call " + std::to_string(calls) + ")";
      ++calls;
    });
    if (!err.empty()) {
      std::fprintf(stderr, "octet-cuda-bench: %s\n", err.c_str());
      return 1;
    }
    std::printf("{\"kernel\": \"fp8_gemm\", \"M\": %lld, \"N\": %lld, \"K\": %lld, \"ms\": %.5f, \"tflops\": %.1f}\n",
                (long long)M, (long long)N, (long long)K, ms, 2.0 * M * N * K / ms / 1e9);
    return 0;
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
      uint8_t *q;
      float *si, *amax;
      CHECK(cudaMalloc(&q, n));
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
      for (auto x : X)
        cudaFree(x);
      cudaFree(q);
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
  std::fprintf(stderr, "usage: octet-cuda-bench gemm M N K | cast ROWS COLS | copy BYTES\n");
  return 2;
}

//===- Init.cu - Weights drawn on the device (fp8-run --init-params) ------===//
//
// N(0, STD) draws of NormalInit.h's stream, written where the tensor lives: each thread jumps to
// the start of its own stretch of the tensor (XorshiftJump's powers, in device memory) and draws
// it sequentially, in float32, float16 or bfloat16 (rounded to nearest even, as the CPU's castTo).
// The host never holds the tensor: a 6.7B model's weights are drawn in well under a second.
//
//===----------------------------------------------------------------------===//
#include "DeviceKernels.h"

#include "octet/runtime/NormalInit.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace octet::rt::cuda::dev {
namespace {

constexpr int64_t kStretch = 2048; // elements per thread (even: stretches start on a pair)

__global__ void drawNormalKernel(NormalDraw a) {
  int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t lo = k * kStretch;
  if (lo >= a.n)
    return;
  int64_t m = a.n - lo < kStretch ? a.n - lo : kStretch;
  init::drawRange(a.cols, a.key, a.stdev, a.numel, a.first + lo, m, [&](int64_t i, float v) {
    int64_t at = lo + i;
    if (a.dtype == NormalDraw::F32)
      static_cast<float *>(a.dst)[at] = v;
    else if (a.dtype == NormalDraw::F16)
      static_cast<__half *>(a.dst)[at] = __float2half_rn(v);
    else
      static_cast<__nv_bfloat16 *>(a.dst)[at] = __float2bfloat16_rn(v);
  });
}

} // namespace

const uint64_t (*normalJumpTable(std::string *err))[64] {
  static uint64_t(*table)[64] = nullptr;
  if (table)
    return table;
  static const init::XorshiftJump jump;
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, sizeof jump.cols);
  if (e == cudaSuccess)
    e = cudaMemcpy(p, jump.cols, sizeof jump.cols, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    *err = std::string("normal draws' jump table: ") + cudaGetErrorString(e);
    cudaFree(p);
    return nullptr;
  }
  table = static_cast<uint64_t(*)[64]>(p);
  return table;
}

std::string drawNormal(NormalDraw a, cudaStream_t s) {
  if (a.n <= 0)
    return "";
  std::string err;
  if (!(a.cols = normalJumpTable(&err)))
    return err;
  int64_t threads = (a.n + kStretch - 1) / kStretch, block = 128;
  drawNormalKernel<<<unsigned((threads + block - 1) / block), unsigned(block), 0, s>>>(a);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("normal draws: ") + cudaGetErrorString(e);
}

} // namespace octet::rt::cuda::dev

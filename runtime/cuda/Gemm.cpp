//===- Gemm.cpp - FP8 GEMMs through cuBLASLt -------------------------------===//
//
// Row-major D[M,N] = A[M,K] x B[N,K]^T is column-major D^T[N,M] = B x A^T,
// i.e. cuBLASLt's TN case (transa = T on B, transb = N on A) that FP8 tensor
// cores require. Scales are device pointers (A_SCALE on cuBLASLt's A = our
// B, B_SCALE = our A), so delayed-scaling state never visits the host.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace octet::rt::cuda {

namespace {
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

std::string status(cublasStatus_t s, const char *what) {
  return s == CUBLAS_STATUS_SUCCESS ? std::string()
                                    : std::string(what) + ": cuBLASLt status " + std::to_string(int(s));
}
cudaDataType_t fp8Type(Format f) { return f == Format::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }
} // namespace

struct Gemm::Impl {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool, bool, int>; // ..., bias: 0, BF16 1, float32 2
  std::map<Key, Plan> plans;
  std::string error;

  ~Impl() {
    for (auto &[k, p] : plans) {
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.d);
      cublasLtMatmulDescDestroy(p.desc);
    }
    if (workspace)
      cudaFree(workspace);
    if (handle)
      cublasLtDestroy(handle);
  }

  std::string plan(const Key &key, Plan &out) {
    auto [M, N, K, fa, fb, dBf16, fast, bias] = key;
    Plan p;
    cublasOperation_t T = CUBLAS_OP_T, Nop = CUBLAS_OP_N;
    std::string e = status(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    if (!e.empty())
      return e;
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof T);
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &Nop, sizeof Nop);
    int8_t fastAccum = fast ? 1 : 0;
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fastAccum, sizeof fastAccum);
    if (bias) { // a BF16 or float32 bias, added in float32 before D is rounded
      cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      cudaDataType_t bt = bias == 2 ? CUDA_R_32F : CUDA_R_16BF;
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    }
    cudaDataType_t dt = dBf16 ? CUDA_R_16BF : CUDA_R_32F;
    // cuBLASLt's A is our B ([N,K] row-major = K x N column-major, used transposed).
    e = status(cublasLtMatrixLayoutCreate(&p.a, fp8Type(Format(fb)), K, N, K), "layout A");
    if (e.empty())
      e = status(cublasLtMatrixLayoutCreate(&p.b, fp8Type(Format(fa)), K, M, K), "layout B");
    if (e.empty())
      e = status(cublasLtMatrixLayoutCreate(&p.d, dt, N, M, N), "layout D");
    if (!e.empty())
      return e;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    size_t ws = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &h, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0)
      return "no cuBLASLt FP8 algorithm for M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" +
             std::to_string(K) + " (FP8 needs K and N multiples of 16; E5M2 x E5M2 is not supported)";
    p.algo = h.algo;
    out = p;
    return "";
  }
};

Gemm::Gemm() : impl(std::make_unique<Impl>()) {
  if (cublasLtCreate(&impl->handle) != CUBLAS_STATUS_SUCCESS)
    impl->error = "cublasLtCreate failed";
  else if (cudaMalloc(&impl->workspace, kWorkspaceBytes) != cudaSuccess)
    impl->error = "cannot allocate the cuBLASLt workspace";
}

Gemm::~Gemm() = default;

size_t Gemm::workspaceBytes() { return kWorkspaceBytes; }

std::string Gemm::supports(int64_t M, int64_t N, int64_t K, Format fa, Format fb, bool dBf16, bool fastAccum,
                           bool bias, bool biasF32) {
  if (!impl->error.empty())
    return impl->error;
  if (bias && !biasF32 && !dBf16)
    return "a BF16 bias needs a BF16 result";
  if (bias && biasF32 && dBf16)
    return "a float32 bias needs a float32 result";
  Impl::Key key{M, N, K, int(fa), int(fb), dBf16, fastAccum, bias ? (biasF32 ? 2 : 1) : 0};
  if (impl->plans.count(key))
    return "";
  Impl::Plan p;
  std::string e = impl->plan(key, p);
  if (e.empty())
    impl->plans.emplace(key, p);
  return e;
}

std::string Gemm::run(int64_t M, int64_t N, int64_t K, const uint8_t *A, Format fa, const uint8_t *B, Format fb,
                      const float *aScaleInv, const float *bScaleInv, void *D, bool dBf16, bool fastAccum,
                      cudaStream_t stream, const void *bias, bool accumulate, const void *C, bool biasF32) {
  if (!impl->error.empty())
    return impl->error;
  auto misaligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (misaligned(A) || misaligned(B) || misaligned(D) || misaligned(aScaleInv) || misaligned(bScaleInv))
    return "FP8 GEMM operands and scale pointers must be 16-byte aligned (cuBLASLt)";
  if (fa == Format::E5M2 && fb == Format::E5M2)
    return "E5M2 x E5M2 is not supported by FP8 tensor cores; one operand must be E4M3";
  if (bias && (dBf16 == biasF32 || misaligned(bias)))
    return "a bias needs a result of its type (BF16 or float32) and a 16-byte aligned pointer";
  if (C && (!accumulate || misaligned(C)))
    return "C is read with accumulate only, from a 16-byte aligned pointer";
  Impl::Key key{M, N, K, int(fa), int(fb), dBf16, fastAccum, bias ? (biasF32 ? 2 : 1) : 0};
  auto it = impl->plans.find(key);
  if (it == impl->plans.end()) {
    Impl::Plan p;
    std::string e = impl->plan(key, p);
    if (!e.empty())
      return e;
    it = impl->plans.emplace(key, p).first;
  }
  Impl::Plan &p = it->second;
  // Scale pointers are per call (they live in the FP8 state).
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &bScaleInv, sizeof bScaleInv);
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &aScaleInv, sizeof aScaleInv);
  if (bias)
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f; // accumulate: D = C + A x B (C is D unless given)
  return status(cublasLtMatmul(impl->handle, p.desc, &alpha, B, p.a, A, p.b, &beta, C ? C : D, p.d, D, p.d, &p.algo,
                               impl->workspace, kWorkspaceBytes, stream),
                "cublasLtMatmul");
}

} // namespace octet::rt::cuda

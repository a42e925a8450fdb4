//===- Gemm.cpp - FP8 GEMMs through cuBLASLt -------------------------------===//
//
// Row-major D[M,N] = A[M,K] x B[N,K]^T is column-major D^T[N,M] = B x A^T,
// i.e. cuBLASLt's TN case (transa = T on B, transb = N on A) that FP8 tensor
// cores require. Scales are device pointers (A_SCALE on cuBLASLt's A = our
// B, B_SCALE = our A), so delayed-scaling state never visits the host. Vector
// scales use cuBLASLt's outer-vector mode (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
// Hopper): cuBLASLt's A scale then holds its M = our N values, its B scale our M.
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
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, bool, bool, int, bool, bool>;
  static Key keyOf(const GemmDesc &d) {
    return {d.M, d.N, d.K, int(d.fa), int(d.fb), d.dBf16, d.fastAccum, int(d.bias), d.rowScalesA, d.colScalesB};
  }
  std::map<Key, Plan> plans;
  std::string error;

  static void destroy(Plan &p) {
    for (cublasLtMatrixLayout_t l : {p.a, p.b, p.d})
      if (l)
        cublasLtMatrixLayoutDestroy(l);
    if (p.desc)
      cublasLtMatmulDescDestroy(p.desc);
  }

  ~Impl() {
    for (auto &[k, p] : plans)
      destroy(p);
    if (workspace)
      cudaFree(workspace);
    if (handle)
      cublasLtDestroy(handle);
  }

  std::string plan(const GemmDesc &g, Plan &out) {
    auto [M, N, K, fa, fb, dBf16, fast, bias, rowA, colB] = keyOf(g);
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
      cudaDataType_t bt = g.bias == GemmDesc::Bias::F32 ? CUDA_R_32F : CUDA_R_16BF;
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    }
    // Scale modes: cuBLASLt's A is our B (a scale per column of D), its B our A (per row of D).
    for (auto [vector, attr] : {std::pair{colB, CUBLASLT_MATMUL_DESC_A_SCALE_MODE},
                                std::pair{rowA, CUBLASLT_MATMUL_DESC_B_SCALE_MODE}}) {
      if (!vector)
        continue;
      int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      e = status(cublasLtMatmulDescSetAttribute(p.desc, attr, &mode, sizeof mode), "outer-vector scale mode");
      if (!e.empty()) {
        destroy(p);
        return e;
      }
    }
    cudaDataType_t dt = dBf16 ? CUDA_R_16BF : CUDA_R_32F;
    // cuBLASLt's A is our B ([N,K] row-major = K x N column-major, used transposed).
    e = status(cublasLtMatrixLayoutCreate(&p.a, fp8Type(Format(fb)), K, N, K), "layout A");
    if (e.empty())
      e = status(cublasLtMatrixLayoutCreate(&p.b, fp8Type(Format(fa)), K, M, K), "layout B");
    if (e.empty())
      e = status(cublasLtMatrixLayoutCreate(&p.d, dt, N, M, N), "layout D");
    if (!e.empty()) {
      destroy(p);
      return e;
    }
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    size_t ws = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    // The heuristic refuses a vector scale mode whose scale pointer is unset (status 7, "requires a
    // custom pointer"); any aligned device address stands in until run() sets the real ones.
    if (rowA || colB)
      for (auto attr : {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER})
        cublasLtMatmulDescSetAttribute(p.desc, attr, &workspace, sizeof workspace);
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &h, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
      destroy(p);
      return "no cuBLASLt FP8 algorithm for M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" +
             std::to_string(K) + (rowA || colB ? " with vector scales" : "") + " (heuristic status " +
             std::to_string(int(s)) + ", " + std::to_string(found) +
             " found; FP8 needs K and N multiples of 16; E5M2 x E5M2 is not supported)";
    }
    p.algo = h.algo;
    out = p;
    return "";
  }

  /// The cached plan for `d`, made on first use: "" and `out` set, or why there is none.
  std::string planFor(const GemmDesc &d, Plan *&out) {
    if (!error.empty())
      return error;
    if (d.bias == GemmDesc::Bias::BF16 && !d.dBf16)
      return "a BF16 bias needs a BF16 result";
    if (d.bias == GemmDesc::Bias::F32 && d.dBf16)
      return "a float32 bias needs a float32 result";
    Key key = keyOf(d);
    auto it = plans.find(key);
    if (it == plans.end()) {
      Plan p;
      if (std::string e = plan(d, p); !e.empty())
        return e;
      it = plans.emplace(key, p).first;
    }
    out = &it->second;
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

std::string Gemm::supports(const GemmDesc &d) {
  Impl::Plan *p;
  return impl->planFor(d, p);
}

std::string Gemm::run(const GemmDesc &d, const GemmOperands &o, cudaStream_t stream) {
  auto misaligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (misaligned(o.A) || misaligned(o.B) || misaligned(o.D) || misaligned(o.aScaleInv) || misaligned(o.bScaleInv))
    return "FP8 GEMM operands and scale pointers must be 16-byte aligned (cuBLASLt)";
  if (d.fa == Format::E5M2 && d.fb == Format::E5M2)
    return "E5M2 x E5M2 is not supported by FP8 tensor cores; one operand must be E4M3";
  bool bias = d.bias != GemmDesc::Bias::None;
  if (bias != (o.bias != nullptr) || (bias && misaligned(o.bias)))
    return "a bias pointer goes with a GemmDesc bias, 16-byte aligned";
  if (o.C && (!o.accumulate || misaligned(o.C)))
    return "C is read with accumulate only, from a 16-byte aligned pointer";
  Impl::Plan *pp;
  if (std::string e = impl->planFor(d, pp); !e.empty())
    return e;
  Impl::Plan &p = *pp;
  // Scale pointers are per call (they live in the FP8 state).
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &o.bScaleInv, sizeof o.bScaleInv);
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &o.aScaleInv, sizeof o.aScaleInv);
  if (bias)
    cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &o.bias, sizeof o.bias);
  float alpha = 1.0f, beta = o.accumulate ? 1.0f : 0.0f;
  return status(cublasLtMatmul(impl->handle, p.desc, &alpha, o.B, p.a, o.A, p.b, &beta, o.C ? o.C : o.D, p.d, o.D,
                               p.d, &p.algo, impl->workspace, kWorkspaceBytes, stream),
                "cublasLtMatmul");
}

} // namespace octet::rt::cuda

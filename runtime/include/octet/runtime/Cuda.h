//===- Cuda.h - The CUDA backend's kernels (Hopper) ------------*- C++ -*-===//
//
// liboctet_cuda: FP8 kernels for NVIDIA GPUs with FP8 tensor cores (compute
// capability 8.9+, built for sm_90a). Device pointers in, stream-ordered;
// every function returns an empty string on success or a one-line error.
// Built only where the CUDA toolkit is found (OCTET_ENABLE_CUDA).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_CUDA_H
#define OCTET_RUNTIME_CUDA_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

typedef struct CUstream_st *cudaStream_t;

namespace octet::rt::cuda {

enum class Format { E4M3, E5M2 };
enum class InType { F32, BF16, F16 };

/// Whether a usable GPU is present; `why` says what is missing otherwise
/// (no driver, no device, compute capability below 8.9).
bool available(std::string *why = nullptr);

/// q[i] = fp8(x[i] / *scaleInv) (round to nearest even, saturating, as the
/// CPU reference and ONNX QuantizeLinear), and *amax = max(*amax, max|x|)
/// in the same pass over x. `amax` must be zeroed (or hold a running max); or,
/// with `slot` (two unsigned, zero before the first launch and left zero by
/// each), *amax is overwritten with max|x| and needs no zeroing.
std::string castAmax(const void *x, InType t, size_t n, const float *scaleInv, Format f, uint8_t *q, float *amax,
                     cudaStream_t stream = nullptr, unsigned *slot = nullptr);

/// castAmax of x viewed as [rows, cols] that also writes the codes transposed:
/// qt[j * rows + i] = q[i * cols + j] (TransformerEngine's cast-transpose; the
/// layout cuBLASLt's FP8 GEMMs need for the other side of a wgrad or dgrad).
/// Tiles of 64 x 64; rows and cols multiples of 16, x, q and qt 16-byte aligned. With colPartials
/// ([ceil(rows / 64), cols] floats), also each tile's column sums of x (castTransposeTileRows()
/// rows of partials; their sum over rows is x summed over its rows: a bias gradient). `slot` as
/// castAmax's.
std::string castAmaxTranspose(const void *x, InType t, int64_t rows, int64_t cols, const float *scaleInv, Format f,
                              uint8_t *q, uint8_t *qt, float *amax, cudaStream_t stream = nullptr,
                              float *colPartials = nullptr, unsigned *slot = nullptr);
inline int64_t castTransposeTileRows(int64_t rows) { return (rows + 63) / 64; }

/// Where castTransposeMany's values come from, element (r, c) of [rows, cols]:
///   Plain      x (float32 or bfloat16);
///   Gelu       GELU(x + bias[c]) (tanh approximation with tanhApprox; no bias: GELU(x)), as the
///              CUDA backend's Gelu computes it; with writeSum, x + bias is written back over x
///              (float32); with a bfloat16 x (no bias), GELU(x) rounded to bfloat16, as a Gelu
///              that stores BF16 writes it;
///   LayerNorm  LayerNormalization of x's row r (float32, length cols) by gamma and beta (beta may
///              be null) from `stats`, the rows' (mean, 1/std) in double that dev::layerNorm wrote:
///              the same bits as its output.
struct CastSource {
  enum Kind { Plain, Gelu, LayerNorm } kind = Plain;
  const void *x = nullptr;
  InType type = InType::F32;
  const float *bias = nullptr;
  bool writeSum = false, tanhApprox = false;
  const double *stats = nullptr;
  const float *gamma = nullptr, *beta = nullptr;
};
/// One cast of castTransposeMany's values: codes q [rows, cols] and qt [cols, rows] with
/// *scaleInv, and the values' max |v| into *amax (zeroed first, or a running max).
struct CastTarget {
  const float *scaleInv;
  Format format;
  uint8_t *q, *qt;
  float *amax;
};
constexpr int kMaxCastTargets = 3;
/// castAmaxTranspose of the values `src` describes, for n <= kMaxCastTargets targets in one pass
/// (the Q, K and V projections' casts of one LayerNorm output, each with its scale). colPartials
/// (Plain sources only) as castAmaxTranspose's, of the values.
std::string castTransposeMany(const CastSource &src, int64_t rows, int64_t cols, const CastTarget *targets, int n,
                              cudaStream_t stream = nullptr, float *colPartials = nullptr, unsigned *slot = nullptr);

/// The delayed-scaling update of T FP8 tensors in one launch: history [T, L]
/// rolls into newHistory with amax[t] first; scale/scaleInv[t] follow
/// octet::rt::delayedScale (formats[t]: 0 E4M3, 1 E5M2) bit for bit.
std::string delayedScaleAll(int T, int64_t L, const float *history, const float *amax, const float *prevScale,
                            const uint8_t *formats, int margin, bool mostRecent, bool powerOfTwo, float *newHistory,
                            float *scale, float *scaleInv, cudaStream_t stream = nullptr);

/// One tensor's operands for delayedScaleList: its own history, amax, scale
/// and outputs wherever they lie (device pointers).
struct DelayedScaleTensor {
  const float *history, *amax, *prevScale;
  float *newHistory, *scale, *scaleInv;
  bool e5m2;
};
/// delayedScaleAll over a device array of T such tensors (one history length
/// and one margin/algorithm/power-of-two setting): the scaling updates of a
/// step's FP8 tensors in one launch.
std::string delayedScaleList(int T, int64_t L, const DelayedScaleTensor *list, int margin, bool mostRecent,
                             bool powerOfTwo, cudaStream_t stream = nullptr);

/// AdamW's per-step scalars, computed once on the host as octet-optimizer's
/// graph computes them: decay = 1 - lr * weight_decay, stepSize = lr / (1 -
/// beta1^t), bc2Sqrt = sqrt(1 - beta2^t), oneMinusBeta* = 1 - beta*.
struct AdamW {
  float beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, decay, stepSize, bc2Sqrt;
};
/// AdamW over T FP32 tensors (device arrays of device pointers and sizes) in
/// one launch, in place: p, m, v.
std::string adamwAll(int T, float *const *params, const float *const *grads, float *const *m, float *const *v,
                     const int64_t *sizes, const AdamW &c, cudaStream_t stream = nullptr);

/// fp8.adam_step (MS-AMP O2/O3 moments; include/octet/Dialect/FP8/IR/FP8Ops.td) over n elements:
/// one pass for the new moments' amaxes, one for the update, each reading the state once; the
/// CPU reference's float operations in its order (octet::rt Fp8Kernels.cpp), so the bits agree.
/// The results may be the operands' own buffers (an in-place state update). `scratch`: 16 device
/// bytes the launches share.
struct AdamStepArgs {
  int64_t n = 0;
  const void *weight = nullptr; // float16, or float32 without weightF16
  bool weightF16 = true;
  const void *grad = nullptr; // float32, or FP8 codes (gradType) dequantized by gradScaleInv
  int gradType = 0;           // octet::rt::DType as int: F32, F8E4M3FN or F8E5M2
  const float *gradScaleInv = nullptr;
  const uint8_t *expAvg = nullptr; // E4M3 codes
  const float *expAvgScaleInv = nullptr;
  const uint16_t *expAvgSq = nullptr; // float16
  const float *expAvgSqScaleInv = nullptr, *gradScale = nullptr, *decay = nullptr, *stepSize = nullptr,
              *bc2Sqrt = nullptr;
  float beta1 = 0, oneMinusBeta1 = 0, beta2 = 0, oneMinusBeta2 = 0, eps = 0;
  void *newWeight = nullptr;
  uint8_t *newExpAvg = nullptr;
  float *newExpAvgScaleInv = nullptr;
  uint16_t *newExpAvgSq = nullptr;
  float *newExpAvgSqScaleInv = nullptr;
  void *scratch = nullptr;
  const int64_t *roundingStep = nullptr; // set: the FP16 weight rounded stochastically (fp8.stochastic_round)
  int64_t roundingSalt = 0;
};
std::string adamStep(const AdamStepArgs &a, cudaStream_t stream = nullptr);
/// fp8.stochastic_round: out[i] = x[i] rounded to float16 with the bits of (salt, *step, i)
/// (octet/runtime/StochasticRound.h), as the CPU reference rounds it.
std::string stochasticRoundHalf(const float *x, uint16_t *out, int64_t n, const int64_t *step, int64_t salt,
                                cudaStream_t stream = nullptr);

/// What an FP8 GEMM is: the key of cuBLASLt's algorithm choice (one cached plan per distinct
/// description). D[M,N] = (A[M,K] x B[N,K]^T) * aScaleInv * bScaleInv (+ bias[N]), row-major, B
/// as nn.Linear stores weights (the "TN" layout FP8 tensor cores need).
struct GemmDesc {
  int64_t M = 0, N = 0, K = 0;
  Format fa = Format::E4M3, fb = Format::E4M3;
  bool dBf16 = false;    ///< D in bfloat16, else float32
  bool fastAccum = true; ///< TE's fprop mode; off: split accumulation (dgrad, wgrad)
  enum class Bias { None, BF16, F32 } bias = Bias::None; ///< of D's type, added before D is rounded
  /// Vector scales (torchao's rowwise recipes), cuBLASLt's outer-vector mode: A's scale_inv holds
  /// M values (D's row i is multiplied by the i-th), B's holds N (D's column j by the j-th).
  bool rowScalesA = false, colScalesB = false;
};

/// The device pointers of one GEMM call (16-byte aligned, the scale pointers included).
struct GemmOperands {
  const uint8_t *A = nullptr, *B = nullptr;
  const float *aScaleInv = nullptr, *bScaleInv = nullptr;
  void *D = nullptr;
  const void *bias = nullptr; ///< N values, with a GemmDesc bias
  /// D = C + the product (beta = 1), C float32 of D's shape, D itself where C is null.
  bool accumulate = false;
  const void *C = nullptr;
};

/// FP8 GEMM through cuBLASLt (GemmDesc says what it computes). The algorithm comes from
/// cuBLASLt's heuristics, cached per description; one workspace per handle.
class Gemm {
public:
  Gemm();
  ~Gemm();
  std::string run(const GemmDesc &d, const GemmOperands &o, cudaStream_t stream = nullptr);
  /// Whether cuBLASLt has an algorithm for this GEMM (what run() would use; "" or why not).
  std::string supports(const GemmDesc &d);
  /// The device bytes of cuBLASLt's workspace this object holds.
  static size_t workspaceBytes();

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace octet::rt::cuda

#endif

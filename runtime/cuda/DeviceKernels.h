//===- DeviceKernels.h - The CUDA executor's kernels (internal) -*- C++ -*-===//
//
// Launchers for the kernels the CUDA executor (CudaExecutor.cpp) runs for
// plan ops: generic broadcasting elementwise math, strided copies (Transpose,
// Slice, Expand, Concat, Pad, ...), reductions, softmax, LayerNorm, the
// cross-entropy loss, gathers and scatters, and the fp8-dialect ops. Element
// types are octet::rt::DType's codes; shapes are static (from the plan), so
// every argument block is built once at load and launches never touch the
// host (the whole step can be captured in a CUDA graph).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_CUDA_DEVICEKERNELS_H
#define OCTET_RUNTIME_CUDA_DEVICEKERNELS_H

#include "octet/runtime/Attention.h"
#include "octet/runtime/Cuda.h"
#include "octet/runtime/Pointwise.h"

#include "CastTile.h"
#include "EwMath.h"

#include <cstdint>
#include <memory>
#include <string>

typedef struct CUstream_st *cudaStream_t;

namespace octet::rt::cuda::dev {

/// The cast tile's kernel argument for n targets (1 to kMaxCastTargets, codes 16-byte aligned):
/// "" or why not.
std::string tileTargets(const CastTarget *targets, int n, tile::Targets &tg);

/// One piece of a batched download: `bytes` from `src` to byte `dst` of a staging buffer (16-byte
/// aligned offsets).
struct CopyPiece {
  const void *src;
  int64_t dst, bytes;
};
/// Copies each of the n pieces (a table on the device) into `dst`, one launch: "" or why not.
std::string gatherPieces(const CopyPiece *pieces, int n, void *dst, cudaStream_t s);

constexpr int kMaxRank = 8;

/// An index space (row-major) and, per operand, element strides over it.
struct Dims {
  int rank = 0;
  int64_t d[kMaxRank] = {};
};
struct Strides {
  int64_t s[kMaxRank] = {};
};

// Ew, the elementwise op codes: EwMath.h (shared with the generated Pointwise kernels).

/// out[i] = op(in0[...], in1[...], in2[...]) over `shape` (the output's,
/// contiguous); inputs are read through broadcast strides. Arithmetic runs
/// in float for floating inputs and in int64 for integer ones. The launcher
/// merges dimensions that every operand walks contiguously and, below 2^31
/// elements, indexes in 32 bits with multiply-shift division.
struct EwArgs {
  Ew op = Ew::Copy;
  int nIn = 1;
  const void *in[3] = {};
  int inType[3] = {};
  Strides inStr[3];
  bool hasLo = false, hasHi = false; // Clip
  void *out = nullptr;
  int outType = 0;
  bool saturate = true; // Cast to FP8
  Dims shape;
  int64_t n = 0;
};
std::string elementwise(const EwArgs &a, cudaStream_t s);

/// octet::Pointwise (octet/runtime/Pointwise.h): per output element, the inputs (float32,
/// bfloat16 widened exactly, or bool read as 0/1) through broadcast strides, then `nCode`
/// instructions of ewFloat's arithmetic on registers (slot 0: zero, 1..nIn: the inputs, then
/// one per instruction); the last instruction's result is stored (float32, or bfloat16 rounded
/// to nearest even as the CPU reference rounds). Registers live in shared memory.
constexpr int kPwMaxInputs = kPointwiseMaxInputs, kPwMaxOps = kPointwiseMaxOps;
/// The elementwise kernels' code for a program instruction.
inline Ew ewOf(PwOp op) {
  static constexpr Ew ew[] = {Ew::Add,  Ew::Sub,   Ew::Mul,  Ew::Div,     Ew::Pow, Ew::Max, Ew::Min,
                              Ew::Neg,  Ew::Abs,   Ew::Sqrt, Ew::Recip,   Ew::Tanh, Ew::Sigmoid, Ew::Erf,
                              Ew::Exp,  Ew::Log,   Ew::Relu, Ew::Where};
  static_assert(sizeof(ew) / sizeof(ew[0]) == size_t(PwOp::Where) + 1, "one Ew per PwOp");
  return ew[size_t(op)];
}
/// How a Pointwise operand is stored.
enum class PwType : uint8_t { F32, Bool, BF16 };
inline size_t pwSize(PwType t) { return t == PwType::F32 ? 4 : t == PwType::BF16 ? 2 : 1; }
struct PwArgs {
  int nIn = 0, nCode = 0;
  const void *in[kPwMaxInputs] = {};
  PwType inType[kPwMaxInputs] = {};
  // A scalar input that is a constant of the plan: its value, which generated kernels compile in
  // (folded, and equal expressions of two programs of a chain computed once).
  bool known[kPwMaxInputs] = {};
  float value[kPwMaxInputs] = {};
  Strides inStr[kPwMaxInputs];
  Ew op[kPwMaxOps] = {};
  int8_t arg[kPwMaxOps][3] = {}; // register slots
  void *out = nullptr;
  PwType outType = PwType::F32; // F32 or BF16
  Dims shape;
  int64_t n = 0;
};
std::string pointwise(const PwArgs &a, cudaStream_t s);
/// Merges the dimensions every operand of `a` walks contiguously (what pointwise() does first).
void mergePointwiseDims(PwArgs &a);

/// Generated kernels for Pointwise programs (PointwiseJit.cpp): each distinct program, merged
/// shape, broadcast layout and alignment becomes one kernel with all of them as constants (four
/// outputs per thread, 16-byte loads where an input walks them contiguously). A plan's kernels
/// are compiled together in one NVRTC translation unit; NVRTC is opened at run time, and
/// without it build() says why and the caller keeps the interpreter.
class PwJit {
public:
  PwJit();
  ~PwJit();
  PwJit(const PwJit &) = delete;
  PwJit &operator=(const PwJit &) = delete;
  /// Why no kernel can be generated on this machine, or "".
  static std::string unavailable();
  /// Registers `a`'s program (pointers only for their alignment); returns its kernel's handle.
  int add(const PwArgs &a);
  /// Compiles and loads every registered kernel: "" or why not (the NVRTC log on a compile error).
  std::string build();
  bool built() const;
  /// Runs kernel `h` on `a` (the arguments it was added with, or others of the same alignment).
  std::string launch(int h, const PwArgs &a, cudaStream_t s) const;
  /// Registers programs of one output size run in order by one kernel, element by element: an
  /// input that is an earlier program's output (the same pointer) is taken from its registers
  /// and must be read element for element. Returns the handle, or -1 where the programs' index
  /// spaces or that input's layout do not allow it. The caller makes sure no program reads
  /// what another writes except so (the executor's fusePointwiseChains()). `store[p]` false: program
  /// p's result is not written (only later programs of the chain read it); the last is always written.
  /// `amax`: the kernel also takes max |y| of the last program's stored values (BF16 as rounded)
  /// into the float launchChain is given (a producer_amax group's amax).
  int addChain(const std::vector<PwArgs> &programs, const std::vector<bool> &store = {}, bool amax = false);
  /// Registers a chain whose last program's result [rows, cols] is not written but cast to FP8 as
  /// castTransposeMany casts a tensor (CastTile.h: for each of `targets` casts, 1 to
  /// tile::kMaxTargets, codes, transposed codes, amax; with `sums`, the column sums into
  /// colPartials): one pass for the programs and the casts. -1 where the index space does not fit
  /// the tile (rows and cols multiples of 16, 16-byte vectors). launchCastChain's Targets has n ==
  /// targets. With `second` >= 0, program `second` (not stored) gives a second stream of values,
  /// which the last target casts (a GELU recomputed in its gradient's cast pass); launchCastChain's
  /// slot is then two slots (four unsigned).
  int addCastChain(const std::vector<PwArgs> &programs, const std::vector<bool> &store, int64_t rows, int64_t cols,
                   bool sums, int targets = 1, int second = -1);
  std::string launchCastChain(int h, const std::vector<const PwArgs *> &programs, const tile::Targets &tg,
                              float *colPartials, unsigned *slot, cudaStream_t s) const;
  /// Whether addChain would take `programs` (registers nothing).
  static bool canChain(const std::vector<PwArgs> &programs);
  /// `amax` (zeroed here, a NaN made canonical) for a kernel added with one; null otherwise.
  std::string launchChain(int h, const std::vector<const PwArgs *> &programs, cudaStream_t s,
                          float *amax = nullptr) const;
  size_t kernels() const;
  double buildSeconds() const;
  /// The translation unit build() compiles.
  std::string source() const;
  /// Compiles `src` with NVRTC for compute capability `cc` (90 for sm_90) into `cubin`: "" or why not.
  static std::string compile(const std::string &src, int cc, std::string &cubin);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// dst[idx . dstStr] = src[idx . srcStr] over `shape`, elements of `elemSize` bytes.
/// Dimensions are merged as for elementwise; when the source's unit-stride
/// dimension is not the destination's (a transpose), 32 x 32 tiles go through
/// shared memory so that both sides are read and written coalesced.
struct CopyArgs {
  const void *src = nullptr;
  void *dst = nullptr;
  int elemSize = 4;
  Dims shape;
  Strides srcStr, dstStr;
  int64_t n = 0;
};
std::string stridedCopy(const CopyArgs &a, cudaStream_t s);
/// A float32 strided copy that adds bias[k % biasN] to the value at source float index k (a GEMM
/// result's bias, added by the copy that splits it into heads): when canCopyWithBias says its
/// runs allow it (32-bit index math; 16-byte runs keep groups of four in one bias row).
bool canCopyWithBias(const CopyArgs &a, int64_t biasN);
std::string stridedCopyWithBias(const CopyArgs &a, const float *bias, int64_t biasN, cudaStream_t s);
/// Many small device-to-device copies in one launch (a block per copy, 16-byte moves where the
/// pointers and sizes allow): the state updates at the end of a step. `copies` is device memory.
struct SmallCopy {
  const void *src;
  void *dst;
  size_t bytes;
};
std::string smallCopies(const SmallCopy *copies, int n, cudaStream_t s);
/// dst[0..n) = the `elemSize`-byte pattern `value`.
std::string fill(void *dst, int elemSize, uint64_t value, int64_t n, cudaStream_t s);
/// NaN becomes +Inf in place (fp8.all_reduce max: NaN counts as +Inf).
std::string nanToInf(float *x, int64_t n, cudaStream_t s);

/// Reduce `x` (type `type`) over the axes whose `outStr` is 0: out has the
/// kept index space `outShape`, `redShape` is the reduced one; strides are
/// into x. kind: 0 sum, 1 mean, 2 max, 3 min, 4 sum of squares. FP64 accumulation.
struct ReduceArgs {
  const void *x = nullptr;
  int type = 0;
  void *out = nullptr;
  int outType = 0;
  int kind = 0;
  Dims outShape, redShape;
  Strides outStr, redStr;
  int64_t nOut = 0, nRed = 0;
  bool innerContiguous = false; // the reduced elements of one output are contiguous
  bool columns = false;         // float32 [nRed, nOut], nOut % 4 == 0, x 16-byte aligned: column sums
  int chunks = 1;               // the reduced range in this many chunks (a block each when innerContiguous),
  double *work = nullptr;       // partials [chunks, nOut], summed in a fixed order (deterministic)
};
std::string reduce(const ReduceArgs &a, cudaStream_t s);

/// Elements per block of a full reduction over a long range (norms, whole-tensor sums): blocks of
/// 32K float32 (128 KiB) keep loads in flight long enough to pay for the block's final tree.
constexpr int64_t kFullReduceChunk = 32768;

/// Sums of squares of many float32 tensors in two launches (a step's per-parameter gradient
/// norms): block b reduces blocks[b]'s range into partials[b] (a fixed tree, 16-byte loads), then
/// block t adds outs[t].count partials from outs[t].first (a fixed tree) into outs[t].out. The
/// arrays are device memory.
struct SumSquaresBlock {
  const float *x;
  int64_t lo, hi;
};
struct SumSquaresOut {
  int first, count;
  void *out;
  int outType;
};
std::string sumSquaresList(const SumSquaresBlock *blocks, int nBlocks, const SumSquaresOut *outs, int nOuts,
                           double *partials, cudaStream_t s);

/// Softmax / LogSoftmax of x viewed as [outer, n, inner] along n.
std::string softmax(const void *x, int type, void *y, int outType, int64_t outer, int64_t n, int64_t inner, bool log,
                    cudaStream_t s);
/// LayerNormalization over the last n elements of each of `rows` rows; scale
/// and bias (may be null) have n elements; mean/invStd (may be null) one per row.
/// rms: RMSNormalization instead (mean 0: x / sqrt(mean(x^2) + eps) * scale; bias null), the
/// same arithmetic otherwise, and the same everywhere below (stats' mean is 0).
/// stats (16-byte aligned, 2 doubles a row; float32 rows with layerNormStatsFit(n)):
/// also each row's (mean, 1/std) in double, which cuda::castTransposeMany's
/// LayerNorm source applies to give y's bits; y may then be null (not written).
/// amax (the same float32 rows): also max |y| over the whole tensor into *amax (zeroed here; bits,
/// a NaN not made canonical: finishAmax or finishAmaxScale does), y stored or not.
/// add (float32 rows of layerNormStatsFit(n), 16-byte aligned): x is not read; the norm takes the
/// residual Add before it, a + (b + bias[c]) (bias null: a + b), rounded as the elementwise Add and
/// AddBias round it, and writes that sum to add.sum (the Add's output) in the same pass.
struct LnResidualAdd {
  const float *a = nullptr, *b = nullptr, *bias = nullptr;
  float *sum = nullptr;
};
std::string layerNorm(const void *x, int type, const void *scale, int scaleType, const void *bias,
                      int biasType, void *y, int outType, float *mean, float *invStd, int64_t rows,
                      int64_t n, float eps, cudaStream_t s, double *stats = nullptr,
                      float *amax = nullptr, LnResidualAdd add = {}, bool rms = false);
bool layerNormStatsFit(int64_t n);
/// octet::LayerNormalizationGrad over rows: x, dy, dx [rows, n], scale [n]; dxIn [rows, n]
/// (added to dx), dScale and dB [n] may be null. partials: layerNormGradBlocks(rows, n) * 2n
/// floats. x, dy, dxIn and dx are float32 or, where `bf` says so, bfloat16 (computed in float32, dx
/// rounded to nearest even); scale, dScale and dB are float32. With `amax` (rows of
/// layerNormStatsFit(n), the pointers 16-byte aligned), also max |dx| over the stored values into
/// it (zeroed first, a NaN made canonical): a producer_amax group's. rms:
/// octet::RMSNormalizationGrad (mean 0, no mean(g) term; dB unused).
int layerNormGradBlocks(int64_t rows, int64_t n);
struct LnGradTypes {
  bool x = false, dy = false, dxIn = false, dx = false;
};
std::string layerNormGrad(const void *x, const float *scale, const void *dy, const void *dxIn,
                          void *dx, LnGradTypes bf, float *dScale, float *dB, float *partials,
                          int64_t rows, int64_t n, float eps, cudaStream_t s, float *amax = nullptr,
                          bool rms = false);
/// y[i] += bias[i % N] (in place), then g[i] = GELU(y[i]) (tanh approximation or erf), float32,
/// n and N multiples of 4: a GEMM's bias added by the GELU that reads the result first.
std::string biasGelu(float *y, const float *bias, int64_t N, float *g, int64_t n, bool tanhApprox, cudaStream_t s);
/// g = GELU(x) (tanh approximation with tanhApprox) over n contiguous values, float32 or (bf16) BF16
/// on both sides, 16-byte aligned.
/// With `amax`, also max |g| over the stored values into it (fp8.amax's result: zeroed first, a NaN
/// made canonical), the amax of a producer_amax fusion group.
std::string gelu(const void *x, void *g, bool bf16, int64_t n, bool tanhApprox, cudaStream_t s,
                 float *amax = nullptr);
/// An amax (n floats) that kernels wrote as max |x| bits by atomicMax: any NaN becomes the
/// canonical one, as amaxRows leaves it.
std::string finishAmax(float *amax, int64_t n, cudaStream_t s);
/// finishAmax of one per-tensor amax and dynamicScale of it, in one launch (amaxScaled's end).
std::string finishAmaxScale(float *amax, float fmax, float eps, bool pow2, float *scale, float *scaleInv,
                            cudaStream_t s);
/// out[j] = the sum over r < rows of partials[r * stride + j] for j < n, in row order (float32,
/// summed in double): the second half of a column sum taken in per-block partials.
std::string columnTotals(const float *partials, int rows, int64_t stride, int64_t n, float *out, cudaStream_t s);
/// SoftmaxCrossEntropyLoss for scores [N, C, D] (D = 1 for [N, C]; float32, bfloat16 or any float): logp
/// (float32, N*C*D; scratch when the plan does not want it), per-sample loss
/// (reduction none) or the sum/mean into out[0] (summed in a fixed order from
/// `work`: 2*N*D floats). Labels outside [0, C) (not ignored) set *badLabel.
struct XentArgs {
  const void *scores = nullptr;
  int type = 0;
  const int64_t *labels = nullptr;
  int labelType = 0;
  const void *weight = nullptr;
  int weightType = 0;
  int64_t N = 0, C = 0, D = 1;
  bool hasIgnore = false;
  int64_t ignore = 0;
  int reduction = 2; // 0 none, 1 sum, 2 mean
  float *logp = nullptr;
  void *out = nullptr;
  int outType = 0;
  float *work = nullptr;
  int *badLabel = nullptr;
  const float *dy = nullptr; // the gradient: dY (one value, or N*D for reduction none) and
  void *grad = nullptr;      // d(scores), scores' shape, float32 or (gradBf16) bfloat16
  bool gradBf16 = false;
};
std::string softmaxCrossEntropy(const XentArgs &a, cudaStream_t s);
/// octet::SoftmaxCrossEntropyLossGrad into a.grad from a.dy (no class weights; logp unused; work:
/// one double, the count of labels not ignored, for mean with an ignore_index).
std::string softmaxCrossEntropyGrad(const XentArgs &a, cudaStream_t s);

/// Gather along an axis: x viewed as [outer, d, inner], indices (int64/int32) of count n:
/// out[o, j, i] = x[o, idx[j], i]. Out-of-range indices set *bad and read 0.
std::string gather(const void *x, int elemSize, const void *idx, int idxType, int64_t outer, int64_t d, int64_t inner,
                   int64_t n, void *out, int *bad, cudaStream_t s);
/// GatherElements / ScatterElements on contiguous tensors of `rank` dims:
/// index space = indices' shape; `xStr` are the data's strides.
std::string gatherElements(const void *x, int elemSize, const void *idx, int idxType, Dims idxShape, Strides xStr,
                           int axis, int64_t axisDim, int64_t n, void *out, int *bad, cudaStream_t s);
/// Scatter `updates` (type `type`) into `out` (already holding the data):
/// ScatterND when k > 0 (indices [n, k], slice elements each; `dataStr` the
/// data's strides over its first k dims, `dataDims` their sizes), else
/// ScatterElements (idxShape/xStr/axis as gatherElements). reduction: 0 none, 1 add, 2 mul, 3 max, 4 min.
struct ScatterArgs {
  void *out = nullptr;
  int type = 0;
  const void *updates = nullptr;
  const void *idx = nullptr;
  int idxType = 0;
  int reduction = 0;
  int64_t k = 0, nIdx = 0, slice = 1;
  Strides dataStr;
  Dims dataDims;
  Dims idxShape;
  Strides xStr;
  int axis = 0;
  int64_t axisDim = 0, n = 0;
  int64_t outElements = 0; // the data's element count
  int *bad = nullptr;
};
/// Device scratch scatter() needs: sort keys and values, and the sort's own storage.
size_t scatterScratchBytes(const ScatterArgs &a);
/// ScatterND (k > 0) / ScatterElements into `out` (already a copy of the data): the updates of each
/// destination in index order, as the CPU reference (deterministic; duplicates: the last wins
/// without a reduction).
std::string scatter(const ScatterArgs &a, void *scratch, cudaStream_t s);

// --- fp8 dialect ----------------------------------------------------------------
/// q = fp8(x / scaleInv[row]) over rows x inner (rows = 1: one scale).
std::string fp8Cast(const void *x, int type, const float *scaleInv, int64_t rows, int64_t inner, int fmtType,
                    bool saturate, uint8_t *q, cudaStream_t s);
/// x = decode(q) * scaleInv[row].
/// y = x converted over n contiguous values, float32 / BF16 / FP16 to float32 / BF16 / FP16 (an
/// ONNX Cast), or per-tensor FP8 codes dequantized (inType E4M3 or E5M2, with scaleInv): eight
/// values a thread with vector accesses. False (nothing launched) for other types or pointers not
/// 16-byte aligned; else err is the launch's error, if any.
bool convertContiguous(const void *x, int inType, void *y, int outType, int64_t n, const float *scaleInv,
                       cudaStream_t s, std::string &err);
std::string fp8Dequantize(const uint8_t *q, int fmtType, const float *scaleInv, int64_t rows, int64_t inner, void *x,
                          int outType, cudaStream_t s);
/// amax[row] = max |x| over each row of `inner` elements (NaN propagates).
std::string amaxRows(const void *x, int type, int64_t rows, int64_t inner, float *amax, cudaStream_t s);
/// Per-tensor amaxRows followed by dynamicScale of that amax, finished in one launch: the amax
/// (NaN canonical), then scale and scale_inv (an amax_scale group, octet-fuse-amax-scale).
std::string amaxScaled(const void *x, int type, int64_t n, float *amax, float fmax, float eps, bool pow2,
                       float *scale, float *scaleInv, cudaStream_t s);
/// torchao's current scaling: scale = fmax / max(amax, eps) (pow2: rounded down), scaleInv = 1/scale.
std::string dynamicScale(const float *amax, int64_t n, float fmax, float eps, bool pow2, float *scale,
                         float *scaleInv, cudaStream_t s);
/// D = acc * (rowScale[m] | scalar a) * (colScale[n] | scalar b) + bias[n], converted to outType;
/// amax of D into *amax (zeroed here) when not null. acc may alias out when outType is float32.
struct EpilogueArgs {
  const float *acc = nullptr;
  void *out = nullptr;
  int outType = 0;
  int64_t M = 0, N = 0;
  const float *aScale = nullptr, *bScale = nullptr;
  bool aRows = false, bCols = false, applyScales = true;
  const void *bias = nullptr;
  int biasType = 0;
  float *amax = nullptr;
};
std::string gemmEpilogue(const EpilogueArgs &a, cudaStream_t s);

// --- octet::Attention (Attention.cu) -----------------------------------------------
constexpr int kAttentionMaxHeadDim = kCudaAttentionMaxHeadDim;
/// Q, K, V, Y, dY, dQ, dK, dV are [batch, t, d] contiguous (K, V: tk rows), or with `heads` > 0
/// [batch / heads, t, heads * d] (ONNX Attention's 3-D form: head h of row i at i * heads * d +
/// h * d); LSE and delta are [batch, tq] either way. Grouped-query attention (`group` > 1): K, V,
/// dK and dV hold batch / group entries (heads / group heads in place), Q's entry b reading K/V
/// entry b / group. Forward writes y and lse (lse may be null); backward reads yIn, lseIn and dy,
/// uses `delta` (batch * tq floats of scratch) and writes dq, dk, dv. `precision` is the tensor-core
/// operand type (FP32 accumulation either way).
enum class AttnPrecision { TF32, BF16 };
struct AttnArgs {
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  float *y = nullptr, *lse = nullptr;
  const float *yIn = nullptr, *lseIn = nullptr, *dy = nullptr;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr, *delta = nullptr;
  int64_t batch = 0;
  int tq = 0, tk = 0, d = 0;
  int heads = 0;
  int group = 1; // query heads per K/V head
  float scale = 1.0f;
  bool causal = false;
  AttnPrecision precision = AttnPrecision::TF32;
  void *work = nullptr; // BF16: attentionWorkspaceBytes of device memory (the operands' BF16 copies)
  /// BF16 only: per-column float32 biases added to Q, K, V as they are converted (the rows' last
  /// dimension long, heads * d in the 3-D form; null: none), so a projection's bias costs no pass.
  const float *bias[3] = {nullptr, nullptr, nullptr};
  /// cuDNN only: which of q, k, v, y, yIn, dy, dq, dk, dv point at BF16 tensors of the plan
  /// (fp8-opt --activation-precision=bf16), read or written in place without a conversion.
  bool bf16[9] = {};
  cudaStream_t stream = nullptr;
  const uint16_t *qb = nullptr, *kb = nullptr, *vb = nullptr, *dyb = nullptr; // set by the launchers
};
size_t attentionWorkspaceBytes(const AttnArgs &a, bool backward);
std::string attentionForward(const AttnArgs &a);
std::string attentionBackward(const AttnArgs &a);

// --- octet::RotaryEmbedding (Rotary.cu) ---------------------------------------------------
constexpr int kRotaryMaxRank = 8;
/// X and Y [rows, d] (float32, or BF16 where xBf16 / yBf16), d even; cos and sin float32, the row
/// of X's row r at sum_k coord_k(r) * cosStride[k] (sinStride) with r row-major over shape[0..rank)
/// (strides in elements, 0 on broadcast axes). Y = X cos + rotate_half(X) sin, or with `inverse`
/// X cos + rotate_half^T(X sin).
struct RotaryArgs {
  const void *x = nullptr;
  void *y = nullptr;
  const float *cos = nullptr, *sin = nullptr;
  bool xBf16 = false, yBf16 = false, inverse = false;
  int64_t rows = 0, d = 0;
  int rank = 0;
  int64_t shape[kRotaryMaxRank] = {}, cosStride[kRotaryMaxRank] = {}, sinStride[kRotaryMaxRank] = {};
};
std::string rotaryEmbedding(const RotaryArgs &a, cudaStream_t s);

// --- float32 <-> bfloat16 copies of up to kMaxBf16Copies tensors in one launch (Bf16Copy.cu) ---
constexpr int kMaxBf16Copies = 5;
/// dst[j][i] = bf16_rn(src[j][i] + bias[j][i % width[j]]) (bias null: none) for i < n[j].
struct Bf16Pack {
  int count = 0;
  const float *src[kMaxBf16Copies] = {};
  const float *bias[kMaxBf16Copies] = {};
  int64_t width[kMaxBf16Copies] = {};
  uint16_t *dst[kMaxBf16Copies] = {};
  int64_t n[kMaxBf16Copies] = {};
  bool vector[kMaxBf16Copies] = {}; // set by toBf16
};
std::string toBf16(Bf16Pack job, cudaStream_t s);
/// dst[j][i] = float(src[j][i]) for i < n[j] (exact).
struct Bf16Unpack {
  int count = 0;
  const uint16_t *src[kMaxBf16Copies] = {};
  float *dst[kMaxBf16Copies] = {};
  int64_t n[kMaxBf16Copies] = {};
  bool vector[kMaxBf16Copies] = {}; // set by fromBf16
};
std::string fromBf16(Bf16Unpack job, cudaStream_t s);

// --- fp8-run --init-params on the device (Init.cu) ---
/// Elements [first, first + n) of the N(0, stdev) stream `key` (NormalInit.h) of a tensor of
/// `numel` elements (zeros past it), into `dst` of `dtype`.
struct NormalDraw {
  enum Type { F32, F16, BF16 } dtype = F32;
  void *dst = nullptr;
  uint64_t key = 0;
  double stdev = 0;
  int64_t numel = 0, first = 0, n = 0;
  const uint64_t (*cols)[64] = nullptr; // set by drawNormal: the jump table on the device
};
std::string drawNormal(NormalDraw a, cudaStream_t s);

} // namespace octet::rt::cuda::dev

#endif

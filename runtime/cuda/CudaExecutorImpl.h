//===- CudaExecutorImpl.h - The CUDA executor's class and shared helpers -*- C++ -*-===//
//
// Internal to liboctet_cuda. The executor is one class whose definition is split by concern:
//   CudaExecutor.cpp          load and placement, running (eager and graphs), states, check(), the API
//   CompileOps.cpp            op compilation: the dispatcher, elementwise, Pointwise, reductions
//   CompileGemmAttention.cpp  op compilation: MatMul/Gemm (cuBLAS), fp8.gemm (cuBLASLt), attention
//   FusedOps.cpp              the load-time fusions of compiled programs
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_CUDA_CUDAEXECUTORIMPL_H
#define OCTET_RUNTIME_CUDA_CUDAEXECUTORIMPL_H

#include "octet/runtime/CudaExecutor.h"
#include "octet/runtime/InPlace.h"
#include "octet/runtime/Pointwise.h"

#include "../src/Kernels.h"
#include "CudnnAttention.h"
#include "DeviceKernels.h"
#include "octet/runtime/Cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

namespace octet::rt::cuda::detail {

/// Whether bytes [a, a + an) and [b, b + bn) share one.
inline bool bytesOverlap(const void *a, size_t an, const void *b, size_t bn) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + bn && pb < pa + an;
}

inline void cudaCheck(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

/// The cast kernels' source type for a float32, BF16 or FP16 tensor.
inline cuda::InType inTypeOf(DType t) {
  return t == DType::F32 ? cuda::InType::F32 : t == DType::F16 ? cuda::InType::F16 : cuda::InType::BF16;
}
inline bool isFloatType(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }

inline dev::Dims dimsOf(const Shape &s) {
  dev::Dims d;
  if (s.size() > size_t(dev::kMaxRank))
    throw Error("rank " + std::to_string(s.size()) + " exceeds the CUDA backend's limit of 8");
  d.rank = int(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    d.d[i] = s[i];
  return d;
}
inline dev::Strides stridesOf(const std::vector<int64_t> &v) {
  dev::Strides s;
  for (size_t i = 0; i < v.size() && i < size_t(dev::kMaxRank); ++i)
    s.s[i] = v[i];
  return s;
}

using Step = std::function<std::string(cudaStream_t)>;

inline const std::map<std::string, dev::Ew> &ewOps() {
  using dev::Ew;
  static const std::map<std::string, Ew> m = {
      {"Add", Ew::Add},         {"Sub", Ew::Sub},       {"Mul", Ew::Mul},           {"Div", Ew::Div},
      {"Pow", Ew::Pow},         {"Max", Ew::Max},       {"Min", Ew::Min},           {"Equal", Ew::Eq},
      {"Less", Ew::Lt},         {"LessOrEqual", Ew::Le}, {"Greater", Ew::Gt},       {"GreaterOrEqual", Ew::Ge},
      {"And", Ew::And},         {"Or", Ew::Or},         {"Not", Ew::Not},           {"Neg", Ew::Neg},
      {"Abs", Ew::Abs},         {"Sqrt", Ew::Sqrt},     {"Reciprocal", Ew::Recip}, {"Tanh", Ew::Tanh},
      {"Sigmoid", Ew::Sigmoid}, {"Erf", Ew::Erf},       {"Exp", Ew::Exp},           {"Log", Ew::Log},
      {"Sin", Ew::Sin},         {"Cos", Ew::Cos},       {"Floor", Ew::Floor},       {"Ceil", Ew::Ceil},
      {"Relu", Ew::Relu},       {"Gelu", Ew::Gelu},     {"Where", Ew::Where},       {"Clip", Ew::Clip},
      {"Cast", Ew::Copy},       {"CastLike", Ew::Copy}, {"Expand", Ew::Copy}};
  return m;
}

inline int64_t normAxisOf(const PlanOp &op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    throw Error("node '" + op.name + "' (" + op.type + "): axis " + std::to_string(axis) + " is out of range for rank " +
                std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

inline bool has(const PlanOp &op, size_t i) { return i < op.inputs.size() && op.inputs[i] >= 0; }

inline Step copyBytes(void *dst, const void *src, size_t bytes) {
  return [=](cudaStream_t s) -> std::string {
    if (dst == src || bytes == 0)
      return "";
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
    return e == cudaSuccess ? "" : std::string("copy: ") + cudaGetErrorString(e);
  };
}

/// A stridedCopy of bytes src [rows, cols] -> dst [cols, rows] (FP8 codes for a GEMM's other layout).
inline dev::CopyArgs byteTranspose(const void *src, void *dst, int64_t rows, int64_t cols) {
  dev::CopyArgs c;
  c.src = src;
  c.dst = dst;
  c.elemSize = 1;
  c.shape = dimsOf({cols, rows});
  c.srcStr = stridesOf({1, cols});
  c.dstStr = stridesOf({rows, 1});
  c.n = rows * cols;
  return c;
}

inline Format fp8FormatOfType(DType t) { return t == DType::F8E5M2 ? Format::E5M2 : Format::E4M3; }

class CudaExecutor final : public Runner {
public:
  CudaExecutor(Plan plan, CudaOptions o);
  ~CudaExecutor() override;
  const Plan &plan() const override { return plan_; }
  void run(const std::map<std::string, TensorPtr> &inputs, bool updateState, bool lastMicroBatch) override;
  TensorPtr value(int id) const override;
  TensorPtr stateTensor(const std::string &name) const override;
  std::vector<TensorPtr> stateTensors(const std::vector<std::string> &names) const override;
  using Runner::value;
  std::map<std::string, TensorPtr> state() const override;
  void setState(const std::string &name, TensorPtr t) override;
  void drawNormal(const std::string &name, uint64_t key, double stdev, int64_t wholeNumel, int64_t first) override;
  std::string device() const override { return "cuda"; }
  size_t bytes() const { return allocated_; }
  /// Device bytes by what holds them (arena, parameters and state, constants, scratch, ...).
  const std::map<std::string, size_t> &memory() const { return allocatedBy_; }
  const std::map<std::string, int> &fusions() const { return fusions_; }
  int check(const Executor &ref, std::ostream &os);

private:
  struct OpProgram {
    size_t op;
    std::vector<Step> steps;
    std::vector<OpProgram> parts; // a fused run of ops: each op's own program (check() runs these)
  };
  /// An fp8.delayed_scale's operands, for fusing runs of them (fuseDelayedScales()).
  struct DelayedScaleOp {
    cuda::DelayedScaleTensor t;
    int64_t L;
    int margin;
    bool mostRecent, pow2;
  };
  std::map<size_t, DelayedScaleOp> delayedScales_; // by plan op index
  /// A ReduceSumSquare of a whole float32 tensor, for fusing runs of them (the gradient norms).
  struct SumSquaresOp {
    const float *x;
    int64_t n;
    void *out;
    int outType;
  };
  std::map<size_t, SumSquaresOp> sumSquares_; // by plan op index
  /// An fp8.cast_amax on the cast-transpose kernel, and a float32 column sum (ReduceSum over all
  /// dims but the last), for taking the sum in the cast's pass (fuseCastColumnSums()).
  struct CastTransposeOp {
    int x;
    const void *xp;
    cuda::InType it;
    int64_t rows, cols;
    const float *scaleInv;
    cuda::Format f;
    uint8_t *q, *qt;
    float *amax;
    unsigned *slot;
  };
  std::map<size_t, CastTransposeOp> castTransposes_;
  struct ColumnSumOp {
    int x;
    int64_t rows, cols;
    float *out;
  };
  std::map<size_t, ColumnSumOp> columnSums_;
  void fuseCastColumnSums();
  /// A float32 LayerNormalization (or RMSNormalization) that the statistics kernel can serve, and a
  /// GELU (its input, a folded GEMM bias or none, its output), for computing their outputs in the
  /// pass of the FP8 casts that read them (fuseCastSources()).
  struct LayerNormOp {
    const float *x, *gamma, *beta;
    float *mean, *invStd;
    int64_t rows, n;
    float eps;
    int y;
    dev::LnResidualAdd add = {}; // the residual Add it computes x from (fuseResidualNorms())
    bool rms = false;            // an RMSNormalization (mean 0, no bias)
  };
  std::map<size_t, LayerNormOp> layerNorms_;
  /// The plan's residual_norm groups (octet-fuse-residual-norms: a float32 residual Add right
  /// before the LayerNorm of its sum): the norm's pass computes the sum from the Add's operands.
  void fuseResidualNorms();
  /// A per-tensor fp8.amax: what it reads and where it writes (fuseProducerAmax()).
  struct AmaxOp {
    const void *xp;
    int64_t n;
    float *out;
    int type; // dev:: type code of x
  };
  std::map<size_t, AmaxOp> amaxes_;
  /// An octet::LayerNormalizationGrad's operands, for fuseProducerAmax() (dx null: scratch).
  struct LayerNormGradOp {
    const void *x;
    const float *scale;
    const void *dy, *dxIn;
    void *dx;
    float *dScale, *dB;
    dev::LnGradTypes bf;
    char *const *partials; // the scratch that holds the blocks' column partials
    int64_t rows, n;
    float eps;
    bool rms; // an octet::RMSNormalizationGrad
  };
  std::map<size_t, LayerNormGradOp> layerNormGrads_;
  /// Whether bytes [p, p + bytes) share one with an input or output of plan op `op`.
  bool overlapsOperands(const void *p, size_t bytes, size_t op);
  /// The amaxes a cast pass computes, and the scales it made of them (fuseCastSources());
  /// fuseAmaxScale() leaves them alone.
  std::set<size_t> passAmaxes_;
  void fuseProducerAmax();
  /// A per-tensor fp8.dynamic_scale: its amax, setting and results (fuseAmaxScale()).
  struct DynamicScaleOp {
    const float *amax;
    int64_t n;
    float fmax, eps;
    bool pow2;
    float *scale, *scaleInv;
  };
  std::map<size_t, DynamicScaleOp> dynamicScales_;
  void fuseAmaxScale();
  struct GeluOp {
    float *x;
    const float *bias; // folded from the GEMM that writes x (foldGemmBias()): added, and written back
    int64_t N, n;
    bool tanhApprox;
    int y;
    bool bf16 = false; // x and y bfloat16 (no bias)
  };
  std::map<size_t, GeluOp> geluSources_;
  void fuseCastSources();
  /// fuseCastSources()'s passes of several casts of one tensor that no program computes in the
  /// pass ("casts share a read": the Q, K and V projections' casts of an RMSNorm's output), by the
  /// first cast's op: the casts' ops and targets, for fuseCastPointwise().
  struct CastGroup {
    std::set<size_t> ops;
    std::vector<cuda::CastTarget> targets;
  };
  std::map<size_t, CastGroup> castGroups_;
  /// fuseCastSources()'s passes that compute a GELU for its cast where the plan groups the two as
  /// gelu_recompute_cast (octet-fuse-gelu-recompute), by the cast's op: what fuseCastPointwise()
  /// needs to take that cast in the pass of the GELU gradient's cast instead.
  struct RecomputedGelu {
    cuda::CastSource src;
    cuda::CastTarget target;
    int64_t rows, cols;
  };
  std::map<size_t, RecomputedGelu> recomputedGelus_;
  std::map<std::string, int> fusions_; // what fuseCastSources(), fusePointwiseChains() and
                                       // fuseCastPointwise() made, by kind (cuda::fusions())
  /// Whether every reader of value v is one of the plan ops `ops` (through views onto the same
  /// bytes), and v is neither a plan output nor a new state value: then nothing else needs its bytes.
  bool onlyReadBy(int v, const std::set<size_t> &ops);
  std::vector<std::vector<size_t>> readersOf_; // plan op indices reading each value (onlyReadBy)
  /// An fp8.gemm with a float32 bias that could run without it (its launch without the bias), and
  /// the ops that could add it instead: plain float32 Adds and Transposes (foldGemmBias()).
  struct GemmBiasOp {
    Step withoutBias;
    const float *bias;
    int64_t N;
    const void *D;
    int out;
    bool rowwise = false; ///< rowwise scales, which withoutBias applies through cuBLASLt
  };
  std::map<size_t, GemmBiasOp> gemmBias_;
  /// Float32 Adds as they run (AddBias where foldGemmBias() gave one a GEMM's bias; read again by
  /// fuseResidualNorms()), and float32 GELUs.
  std::map<size_t, dev::EwArgs> adds_, gelus_;
  /// A BF16 octet::Attention or AttentionGrad: its launch with biases for Q, K and V, which the
  /// operands' BF16 conversion adds (rows `rowLength[i]` long: Q's, K's, V's).
  using AttnBias = std::array<const float *, 3>;
  struct AttentionOp {
    std::function<Step(AttnBias)> withBias;
    std::array<int64_t, 3> rowLength;
  };
  std::map<size_t, AttentionOp> attentions_;
  std::shared_ptr<const dev::CudnnAttention> cudnnAttention(const dev::AttnArgs &a, bool backward);
  std::map<std::tuple<bool, int64_t, int, int, int, int, int, float, bool, unsigned>,
           std::shared_ptr<const dev::CudnnAttention>>
      cudnnGraphs_;
  std::set<std::string> cudnnNotes_;
  template <class Launch>
  void attentionProgram(const PlanOp &op, const dev::AttnArgs &a, std::array<int64_t, 3> rowLength,
                        std::vector<Step> &out, Launch launch);
  std::map<size_t, dev::CopyArgs> transposes_;
  void foldGemmBias();
  /// Program `at` runs `step` instead of its own launches, which stay as its parts (check() runs
  /// those): a pair of ops whose work moves from one to the other.
  void replaceProgram(size_t at, Step step);
  /// The fusion group of `kind` the plan puts program entry k's op in (its fusion and fusion_group
  /// attributes, written by the compiler's fusion passes), or -1.
  int64_t planGroup(size_t k, const std::string &kind) const {
    const PlanOp &op = plan_.ops[program_[k].op];
    return attrStr(op, "fusion", "") == kind ? attrInt(op, "fusion_group", -1) : -1;
  }
  /// The cast pass the plan puts program entry k's op in (its cast_pass attribute, written by
  /// octet-fuse-cast-sources), or -1.
  int64_t planCastPass(size_t k) const { return attrInt(plan_.ops[program_[k].op], "cast_pass", -1); }
  /// The plan's fusion groups of `kind` whose ops `infos` holds and `same` pairs with the group's
  /// first (none reading another's output) become one program of the step `build` makes from their
  /// infos; check() still runs the members one by one.
  template <class Info, class Same, class Build>
  void fuseRuns(const std::string &kind, const std::map<size_t, Info> &infos, Same same, Build build);
  void fuseDelayedScales();
  void fuseSumSquares();
  std::map<size_t, dev::PwArgs> pointwise_; // generated-kernel Pointwise ops by plan op index
  void fusePointwiseChains();
  /// A fused run of Pointwise programs (fusePointwiseChains()), by its program's op: the programs'
  /// arguments and whether each writes its result.
  struct ChainOp {
    std::vector<dev::PwArgs> args;
    std::vector<bool> store;
  };
  std::map<size_t, ChainOp> chains_;
  /// A cast-transpose whose pass also takes a column sum (fuseCastColumnSums()), by the cast's op:
  /// the partial sums it writes and the ReduceSum op that no longer reads the tensor.
  struct CastSumOp {
    float *partials;
    size_t sumOp;
  };
  std::map<size_t, CastSumOp> castSums_;
  void fuseCastPointwise();
  std::optional<size_t> recomputedGeluBefore(size_t p, const ChainOp &chain, const CastTransposeOp &c,
                                             const std::vector<cuda::CastTarget> &targets);
  static dev::PwArgs geluProgram(const cuda::CastSource &src, const dev::PwArgs &like);
  static bool writesOverInputs(const std::vector<std::pair<const void *, size_t>> &written, const ChainOp &chain);
  /// A step that launches a generated kernel for `args`' programs, or runs `apart` (their own
  /// launches) should the generated kernels not build.
  Step generatedStep(std::vector<dev::PwArgs> args, std::vector<Step> apart,
                     std::function<std::string(const std::vector<const dev::PwArgs *> &, cudaStream_t)> launch);
  /// Whether program k is a view that moves nothing (a Reshape onto the same bytes).
  bool quietView(size_t k);
  Plan plan_;
  CudaOptions opt_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void *blasWorkspace_ = nullptr;
  std::unique_ptr<Gemm> fp8_;
  std::unique_ptr<dev::PwJit> jit_; // null: Pointwise programs run on the interpreter kernel
  /// The operand precision of a fused attention op: its `precision` attribute
  /// (octet-attention-precision); without one (older plans), that pass's auto rule by the recipe.
  dev::AttnPrecision attentionPrecision(const PlanOp &op) const;
  std::vector<void *> ptr_;
  std::vector<TensorPtr> host_;
  std::vector<char> static_;
  std::vector<void *> allocs_;
  /// stateTensors()' batched download, for the last list of names it was given: the pieces' table
  /// on the device, the staging buffer and its pinned host copy.
  struct Sample {
    std::vector<std::string> names;
    std::vector<int> ids; // -1: not a state
    std::vector<int64_t> offsets;
    int pieces = 0; // the states among the names
    int64_t bytes = 0;
    void *table = nullptr, *stage = nullptr, *host = nullptr;
  };
  mutable Sample sample_;
  size_t allocated_ = 0;
  std::map<std::string, size_t> allocatedBy_;
  std::vector<OpProgram> program_;
  // updateStates(): the small state copies, built on first use; [1] every state update (a last
  // micro-batch), [0] those of every micro-batch (gradient accumulation's earlier ones).
  dev::SmallCopy *stateCopies_[2] = {nullptr, nullptr};
  int nStateCopies_[2] = {0, 0};
  bool stateCopiesBuilt_[2] = {false, false};
  int *flags_ = nullptr;
  std::vector<std::string> flagWhat_;
  size_t scratchBytes_ = 0;
  char *scratch_ = nullptr;
  char *arena_ = nullptr; // the memory plan's arena (null: a plan without one)
  float *one_ = nullptr;
  /// The step's CUDA graphs: with and without the state update, each for a last micro-batch (every
  /// op) and for an earlier one (gradient accumulation: without the last micro-batch's ops), each
  /// with and without the ops of the first (firstMicroBatch: what the parameters give).
  cudaGraphExec_t graphs_[8] = {};
  static int graphIndex(bool updateState, bool lastMicroBatch, bool first) {
    return (updateState ? 1 : 0) + (lastMicroBatch ? 0 : 2) + (first ? 4 : 0);
  }
  /// The firstMicroBatch ops' results are those of the current parameters (Executor::keptValid_).
  bool keptValid_ = false;
  /// fp8.all_reduce payloads of a step (type, elements): counted with the communicator per run,
  /// since a CUDA graph replays the collectives without calling it.
  std::vector<std::pair<DType, size_t>> allReduces_;
  std::vector<char> allReducesLast_; // each one's plan op runs in the last micro-batch only
  /// Collectives run on their own stream, in plan order (NCCL's order on every rank): a start
  /// waits for `ready` of its operands on the step's stream and records `done`, which its done op
  /// (or a plain all-reduce right away) makes the step's stream wait for.
  cudaStream_t commStream_ = nullptr;
  std::vector<cudaEvent_t> collReady_, collDone_;
  std::map<int, int> collectiveOf_; // value in flight (a start's result) -> its events
  int newCollective();
  /// A collective op's launches (CompileCollectives.cpp); false for any other op.
  bool compileCollective(const PlanOp &op, std::vector<Step> &out);
  int eagerRuns_[8] = {}; // by graphIndex()
  std::set<int> liveAtEnd_;
  // OCTET_CUDA_PROFILE=1: per op type GPU time (events around each op; no graphs); =2 also the
  // slowest (op type, output shape) groups with their effective bandwidth. The first run is not counted.
  int profile_ = 0;
  std::map<std::string, std::pair<double, int>> profileMs_;
  std::vector<double> opMs_; // per program entry, summed over profiled runs
  int profiledRuns_ = 0, profileCalls_ = 0;

  char *saved_ = nullptr;      // states updated in place, kept across a run without state update
  bool lastRunUpdated_ = true;
  size_t stateBytes(int st) const;
  void saveInPlaceStates();
  void restoreInPlaceStates();
  void updateStates(bool lastMicroBatch);
  void printSlowestOps() const;
  /// cudaMalloc, counted in bytes() and under `what` in memory().
  void *alloc(size_t bytes, const char *what);
  /// Two zeroed unsigned for a one-pass cast's amax (cuda::castAmax's slot): the kernels leave them
  /// zero, so the amax needs no memset before each launch. `streams` slots side by side for a pass
  /// that takes that many amaxes.
  unsigned *amaxSlot(int streams = 1);
  /// Where casts write an amax that no op reads (one float32 for all of them).
  float *discardAmax();
  float *discardAmax_ = nullptr;
  unsigned *slots_ = nullptr;
  size_t slotsLeft_ = 0;
  void *devicePtr(int id);
  const Tensor &hostValue(const PlanOp &op, size_t i);
  Shape shapeOf(int id) const;
  DType typeOf(int id) const { return static_[size_t(id)] ? host_[size_t(id)]->dtype : plan_.values[size_t(id)].dtype; }
  [[noreturn]] void fail(const PlanOp &op, const std::string &msg) const {
    throw Error("node '" + op.name + "' (" + op.type + "): " + msg);
  }
  int flagSlot(const PlanOp &op, const std::string &what) {
    flagWhat_.push_back("node '" + op.name + "' (" + op.type + "): " + what);
    return int(flagWhat_.size() - 1);
  }
  /// Scratch for the op being compiled: where its steps find it when they run (*slot). Ops run one
  /// at a time on one stream, so they share one buffer, except that placeScratch() puts a large
  /// one in arena bytes no buffer holds while that op runs.
  char *const *scratch(size_t bytes) {
    size_t k = compiling_ < plan_.ops.size() ? compiling_ : plan_.ops.size();
    scratchNeed_[k] = std::max(scratchNeed_[k], bytes);
    return &scratchAt_[k];
  }
  static constexpr size_t kScratchWorthPlacing = size_t(1) << 20; // smaller ones share the one buffer
  void placeScratch();
  int64_t arenaGap(size_t k, size_t bytes);
  std::vector<ArenaUse> arenaUses_; // the memory plan's buffers in the arena, by offset (place())
  size_t compiling_ = size_t(-1); // the plan op compile() works on
  std::vector<size_t> scratchNeed_; // per plan op (and one more for work outside compile())
  std::vector<char *> scratchAt_;   // sized once at construction: the steps hold pointers into it
  std::string scratchFor_;          // the op whose scratch the shared buffer is sized for
  /// A copy of value `src` (`bytes` of it) into dst; a constant holding one element repeated (the
  /// zeros an embedding's gradient scatters into) is filled instead, so it is never uploaded.
  Step copyValue(void *dst, int src, size_t bytes);
  void foldStatics();
  void place();
  void compile(size_t k, std::vector<Step> &out);
  void compileElementwise(const PlanOp &op, dev::Ew kind, std::vector<Step> &out);
  /// An octet::Pointwise op, or (with `program`) a float32 ONNX elementwise op as the program of
  /// its one instruction (singleOpProgram()).
  void compilePointwise(const PlanOp &op, std::vector<Step> &out, const PwProgram *program = nullptr);
  bool singleOpProgram(const PlanOp &op, PwProgram &p);
  void compileMatMul(const PlanOp &op, std::vector<Step> &out);
  void compileGemm(const PlanOp &op, std::vector<Step> &out);
  void compileFp8Gemm(const PlanOp &op, std::vector<Step> &out);
  void compileReduce(const PlanOp &op, int kind, std::vector<Step> &out);
  void compileAttention(const PlanOp &op, bool grad, std::vector<Step> &out);
  /// Plan op k if it is a row op (CompileRowOps.cpp: softmax, the norms and their gradients, the
  /// loss and its gradient); false if not.
  bool compileRowOp(size_t k, std::vector<Step> &out);
  void body(bool updateState, bool lastMicroBatch, bool first);
  /// Gradient accumulation: whether program k runs in an optimizer step's last micro-batch only
  /// (its plan op's lastMicroBatch), or in its first only (firstMicroBatch); a fused program's
  /// parts all agree, checked at load.
  std::vector<char> programLast_, programFirst_;
  void markProgramPhases();
  TensorPtr download(int id) const;
  void upload(int id, const Tensor &t);
};

} // namespace octet::rt::cuda::detail

#endif

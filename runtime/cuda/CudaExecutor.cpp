//===- CudaExecutor.cpp - Whole plans on the GPU ----------------------------===//
//
// Load: (1) fold every op whose inputs are all constants on the host with the
// CPU reference kernels (shape arithmetic, masks, index ranges); (2) place
// activations at the plan's arena offsets in one allocation, parameters and
// state in their own; (3) compile each remaining op into launches whose
// arguments (pointers, shapes, strides) are fixed. Run: bind inputs, replay
// the launches (eagerly the first time, then as a captured CUDA graph), copy
// next states over states, and check the device error flags (bad indices,
// labels) once per run.
//
//===----------------------------------------------------------------------===//
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

namespace octet::rt::cuda {
namespace {

void cudaCheck(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

bool isFloatType(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }

dev::Dims dimsOf(const Shape &s) {
  dev::Dims d;
  if (s.size() > size_t(dev::kMaxRank))
    throw Error("rank " + std::to_string(s.size()) + " exceeds the CUDA backend's limit of 8");
  d.rank = int(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    d.d[i] = s[i];
  return d;
}
dev::Strides stridesOf(const std::vector<int64_t> &v) {
  dev::Strides s;
  for (size_t i = 0; i < v.size() && i < size_t(dev::kMaxRank); ++i)
    s.s[i] = v[i];
  return s;
}

int fakeOrRealCC() {
  if (const char *f = std::getenv("OCTET_CUDA_FAKE_CC"))
    return std::atoi(f);
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess)
    return 0;
  return p.major * 10 + p.minor;
}

using Step = std::function<std::string(cudaStream_t)>;

class CudaExecutor final : public Runner {
public:
  CudaExecutor(Plan plan, CudaOptions o);
  ~CudaExecutor() override;
  const Plan &plan() const override { return plan_; }
  void run(const std::map<std::string, TensorPtr> &inputs, bool updateState) override;
  TensorPtr value(int id) const override;
  using Runner::value;
  std::map<std::string, TensorPtr> state() const override;
  void setState(const std::string &name, TensorPtr t) override;
  std::string device() const override { return "cuda"; }
  size_t bytes() const { return allocated_; }
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
  /// A float32 LayerNormalization that the statistics kernel can serve, and a GELU (its input, a
  /// folded GEMM bias or none, its output), for computing their outputs in the pass of the FP8
  /// casts that read them (fuseCastSources()).
  struct LayerNormOp {
    const float *x, *gamma, *beta;
    float *mean, *invStd;
    int64_t rows, n;
    float eps;
    int y;
  };
  std::map<size_t, LayerNormOp> layerNorms_;
  struct GeluOp {
    float *x;
    const float *bias; // folded from the GEMM that writes x (foldGemmBias()): added, and written back
    int64_t N, n;
    bool tanhApprox;
    int y;
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
  };
  std::map<size_t, GemmBiasOp> gemmBias_;
  std::map<size_t, dev::EwArgs> adds_, gelus_;
  /// A BF16 octet::Attention or AttentionGrad: its launch with biases for Q, K and V, which the
  /// operands' BF16 conversion adds (rows `rowLength` long).
  using AttnBias = std::array<const float *, 3>;
  struct AttentionOp {
    std::function<Step(AttnBias)> withBias;
    int64_t rowLength;
  };
  std::map<size_t, AttentionOp> attentions_;
  std::shared_ptr<const dev::CudnnAttention> cudnnAttention(const dev::AttnArgs &a, bool backward);
  std::map<std::tuple<bool, int64_t, int, int, int, int, float, bool>, std::shared_ptr<const dev::CudnnAttention>>
      cudnnGraphs_;
  std::set<std::string> cudnnNotes_;
  template <class Launch>
  void attentionProgram(const PlanOp &op, const dev::AttnArgs &a, int64_t rowLength, std::vector<Step> &out,
                        Launch launch);
  std::map<size_t, dev::CopyArgs> transposes_;
  void foldGemmBias();
  /// Program `at` runs `step` instead of its own launches, which stay as its parts (check() runs
  /// those): a pair of ops whose work moves from one to the other.
  void replaceProgram(size_t at, Step step);
  /// Runs of two or more consecutive programs whose ops `infos` holds and `same` pairs with the
  /// run's first (none reading another's output) become one program of the step `build` makes
  /// from their infos; check() still runs the members one by one.
  template <class Info, class Same, class Build> void fuseRuns(const std::map<size_t, Info> &infos, Same same, Build build);
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
  dev::AttnPrecision attention_ = dev::AttnPrecision::TF32; // CudaOptions::attention, resolved
  std::vector<void *> ptr_;
  std::vector<TensorPtr> host_;
  std::vector<char> static_;
  std::vector<void *> allocs_;
  size_t allocated_ = 0;
  std::vector<OpProgram> program_;
  dev::SmallCopy *stateCopies_ = nullptr; // updateStates(): the small state copies, built on first use
  int nStateCopies_ = 0;
  bool stateCopiesBuilt_ = false;
  int *flags_ = nullptr;
  std::vector<std::string> flagWhat_;
  size_t scratchBytes_ = 0;
  char *scratch_ = nullptr;
  float *one_ = nullptr;
  cudaGraphExec_t graphs_[2] = {nullptr, nullptr};
  int eagerRuns_[2] = {0, 0};
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
  void updateStates();
  void printSlowestOps() const;
  void *alloc(size_t bytes);
  /// Two zeroed unsigned for a one-pass cast's amax (cuda::castAmax's slot): the kernels leave them
  /// zero, so the amax needs no memset before each launch.
  unsigned *amaxSlot();
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
  size_t scratch(size_t bytes) { // scratch is shared: ops run one at a time on one stream
    scratchBytes_ = std::max(scratchBytes_, bytes);
    return 0;
  }
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
  void body(bool updateState);
  TensorPtr download(int id) const;
  void upload(int id, const Tensor &t);
};

void *CudaExecutor::alloc(size_t bytes) {
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 256));
  if (e != cudaSuccess)
    throw Error("CUDA: cannot allocate " + std::to_string(bytes) + " bytes on the GPU (" + cudaGetErrorString(e) +
                "); use a smaller batch or --device cpu");
  allocs_.push_back(p);
  allocated_ += std::max<size_t>(bytes, 256);
  return p;
}

unsigned *CudaExecutor::amaxSlot() {
  if (!slotsLeft_) {
    constexpr size_t kPage = 1024;
    slots_ = static_cast<unsigned *>(alloc(kPage * 2 * sizeof(unsigned)));
    cudaCheck(cudaMemset(slots_, 0, kPage * 2 * sizeof(unsigned)), "amax slots");
    slotsLeft_ = kPage;
  }
  --slotsLeft_;
  unsigned *s = slots_;
  slots_ += 2;
  return s;
}

Shape CudaExecutor::shapeOf(int id) const {
  if (static_[size_t(id)])
    return host_[size_t(id)]->shape;
  const PlanValue &v = plan_.values[size_t(id)];
  if (!v.hasShape)
    throw Error("value '" + v.name + "' has no static shape; the CUDA backend needs static shapes (use --device cpu)");
  return v.shape;
}

void *CudaExecutor::devicePtr(int id) {
  if (id < 0)
    return nullptr;
  if (!ptr_[size_t(id)] && static_[size_t(id)]) {
    const Tensor &t = *host_[size_t(id)];
    void *p = alloc(t.bytes.size());
    cudaCheck(cudaMemcpy(p, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice), "upload constant");
    ptr_[size_t(id)] = p;
  }
  if (!ptr_[size_t(id)])
    throw Error("value '" + plan_.values[size_t(id)].name + "' has no device buffer");
  return ptr_[size_t(id)];
}

const Tensor &CudaExecutor::hostValue(const PlanOp &op, size_t i) {
  int id = op.inputs[i];
  if (!static_[size_t(id)])
    fail(op, "input " + std::to_string(i) + " ('" + plan_.values[size_t(id)].name +
                 "') must be a constant for the CUDA backend (it is computed at run time); use --device cpu");
  return *host_[size_t(id)];
}

CudaExecutor::CudaExecutor(Plan plan, CudaOptions o) : plan_(std::move(plan)), opt_(o) {
  if (const char *p = std::getenv("OCTET_CUDA_PROFILE"))
    profile_ = std::atoi(p);
  if (profile_)
    opt_.graphs = false;
  size_t n = plan_.values.size();
  ptr_.assign(n, nullptr);
  host_.assign(n, nullptr);
  static_.assign(n, 0);
  cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  if (cublasCreate(&blas_) != CUBLAS_STATUS_SUCCESS)
    throw Error("CUDA: cublasCreate failed");
  cublasSetStream(blas_, stream_);
  blasWorkspace_ = alloc(size_t(32) << 20);
  cublasSetWorkspace(blas_, blasWorkspace_, size_t(32) << 20);
  if (!opt_.tf32)
    cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH);
  bool fp8Recipe = !plan_.recipe.empty() && plan_.recipe != "none";
  attention_ = opt_.attention == CudaOptions::Attention::BF16 ||
                       (opt_.attention == CudaOptions::Attention::Auto && fp8Recipe)
                   ? dev::AttnPrecision::BF16
                   : dev::AttnPrecision::TF32;
  fp8_ = std::make_unique<Gemm>();
  one_ = static_cast<float *>(alloc(16));
  float ones[4] = {1, 1, 1, 1};
  cudaCheck(cudaMemcpy(one_, ones, sizeof ones, cudaMemcpyHostToDevice), "upload");
  foldStatics();
  place();
  if (opt_.jit) {
    std::string why = dev::PwJit::unavailable();
    if (why.empty())
      jit_ = std::make_unique<dev::PwJit>();
    else
      std::cerr << "note: Pointwise ops run on the interpreter kernel (slower): " << why
                << " (OCTET_CUDA_JIT=0 silences this)\n";
  }
  for (size_t k = 0; k < plan_.ops.size(); ++k) {
    bool dyn = false;
    for (int id : plan_.ops[k].outputs)
      if (id >= 0 && !static_[size_t(id)])
        dyn = true;
    if (!dyn)
      continue;
    OpProgram p{k, {}, {}};
    compile(k, p.steps);
    program_.push_back(std::move(p));
  }
  if (opt_.foldBias)
    foldGemmBias();
  if (opt_.castSums)
    fuseCastColumnSums();
  if (opt_.castSources)
    fuseCastSources();
  fuseDelayedScales();
  fuseSumSquares();
  if (jit_ && opt_.chains)
    fusePointwiseChains();
  if (jit_ && opt_.castSources)
    fuseCastPointwise();
  if (jit_) {
    std::string why = jit_->build();
    if (!why.empty()) {
      std::cerr << "note: Pointwise ops run on the interpreter kernel (slower): " << why << "\n";
      jit_.reset();
    } else if (std::getenv("OCTET_CUDA_VERBOSE")) {
      std::cerr << "generated " << jit_->kernels() << " Pointwise kernels in " << jit_->buildSeconds() << " s\n";
    }
  }
  if (std::getenv("OCTET_CUDA_VERBOSE") && !fusions_.empty()) {
    std::cerr << "note: fused passes:";
    for (auto &[what, n] : fusions_)
      std::cerr << " " << what << " " << n << ";";
    std::cerr << "\n";
  }
  if (scratchBytes_)
    scratch_ = static_cast<char *>(alloc(scratchBytes_));
  flags_ = static_cast<int *>(alloc(sizeof(int) * std::max<size_t>(flagWhat_.size(), 1)));
  cudaCheck(cudaDeviceSynchronize(), "load"); // every constant upload has landed before the stream runs
  for (int id : plan_.outputs)
    liveAtEnd_.insert(id);
  for (auto &[s, v] : plan_.stateUpdates)
    liveAtEnd_.insert(v);
}

CudaExecutor::~CudaExecutor() {
  cudaStreamSynchronize(stream_);
  if (profile_ && profiledRuns_) {
    std::vector<std::pair<double, std::string>> byTime;
    double total = 0;
    for (auto &[t, v] : profileMs_) {
      byTime.push_back({v.first, t});
      total += v.first;
    }
    std::sort(byTime.rbegin(), byTime.rend());
    std::cerr << "GPU time per op type (mean of " << profiledRuns_ << " runs, " << std::fixed << std::setprecision(3)
              << total / profiledRuns_ << " ms per run):\n";
    for (auto &[ms, t] : byTime)
      std::cerr << "  " << std::left << std::setw(26) << t << std::right << std::setw(10) << ms / profiledRuns_
                << " ms " << std::setw(6) << std::setprecision(1) << 100 * ms / total << "%  x"
                << profileMs_[t].second / profiledRuns_ << "\n"
                << std::setprecision(3);
    if (profile_ >= 2)
      printSlowestOps();
  }
  for (cudaGraphExec_t g : graphs_)
    if (g)
      cudaGraphExecDestroy(g);
  fp8_.reset();
  if (blas_)
    cublasDestroy(blas_);
  for (void *p : allocs_)
    cudaFree(p);
  if (stream_)
    cudaStreamDestroy(stream_);
}

void CudaExecutor::foldStatics() {
  for (auto &[id, t] : plan_.constants)
    if (plan_.constantKinds.at(id) == ConstantKind::Const) {
      static_[size_t(id)] = 1;
      host_[size_t(id)] = t;
    }
  for (const PlanOp &op : plan_.ops) {
    bool allStatic = true;
    for (int id : op.inputs)
      if (id >= 0 && !static_[size_t(id)])
        allStatic = false;
    bool isShape = op.type == "Shape" && op.inputs.size() == 1 && op.inputs[0] >= 0 &&
                   plan_.values[size_t(op.inputs[0])].hasShape;
    if (!allStatic && !isShape)
      continue;
    std::vector<Value> vals(op.inputs.size());
    std::vector<const Value *> ins;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      int id = op.inputs[i];
      if (id < 0) {
        ins.push_back(nullptr);
        continue;
      }
      if (static_[size_t(id)])
        vals[i].tensor = host_[size_t(id)];
      else { // Shape of a run-time value: its static shape is all it reads (no bytes)
        auto t = std::make_shared<Tensor>();
        t->dtype = plan_.values[size_t(id)].dtype;
        t->shape = plan_.values[size_t(id)].shape;
        vals[i].tensor = t;
      }
      ins.push_back(&vals[i]);
    }
    const Kernel *k = lookupKernel(op.type);
    if (!k)
      continue;
    KernelContext ctx(plan_, op, ins);
    (*k)(ctx);
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      int id = op.outputs[i];
      if (id < 0 || ctx.outputs()[i].isSequence || !ctx.outputs()[i].tensor)
        continue;
      static_[size_t(id)] = 1;
      host_[size_t(id)] = ctx.outputs()[i].tensor;
    }
  }
}

void CudaExecutor::place() {
  if (!plan_.buffers.empty()) {
    char *arena = static_cast<char *>(alloc(size_t(plan_.arenaBytes)));
    for (const Plan::Buffer &b : plan_.buffers)
      if (!static_[size_t(b.value)])
        ptr_[size_t(b.value)] = arena + b.offset;
  }
  for (auto &[id, t] : plan_.constants) {
    if (plan_.constantKinds.at(id) == ConstantKind::Const)
      continue;
    ptr_[size_t(id)] = alloc(t->bytes.size());
    cudaCheck(cudaMemcpy(ptr_[size_t(id)], t->bytes.data(), t->bytes.size(), cudaMemcpyHostToDevice), "upload");
  }
  // In-place state updates (docs/PLAN.md): the op computing the new value writes the state.
  for (auto &[st, v] : plan_.stateUpdates)
    if (plan_.inPlace.count(v) && ptr_[size_t(st)])
      ptr_[size_t(v)] = ptr_[size_t(st)];
  // Values the memory plan does not cover (plans without one): their own buffers.
  for (const PlanOp &op : plan_.ops)
    for (int id : op.outputs)
      if (id >= 0 && !static_[size_t(id)] && !ptr_[size_t(id)] && !plan_.values[size_t(id)].isSequence) {
        Shape s = shapeOf(id);
        ptr_[size_t(id)] = alloc(size_t(numElements(s)) * dtypeSize(plan_.values[size_t(id)].dtype));
      }
  for (int id : plan_.inputs)
    if (!ptr_[size_t(id)]) {
      Shape s = shapeOf(id);
      ptr_[size_t(id)] = alloc(size_t(numElements(s)) * dtypeSize(plan_.values[size_t(id)].dtype));
    }
}

//===----------------------------------------------------------------------===//
// Op compilation
//===----------------------------------------------------------------------===//

const std::map<std::string, dev::Ew> &ewOps() {
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

int64_t normAxisOf(const PlanOp &op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    throw Error("node '" + op.name + "' (" + op.type + "): axis " + std::to_string(axis) + " is out of range for rank " +
                std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

int64_t attrInt(const PlanOp &op, const std::string &n, int64_t d) {
  auto it = op.attrs.find(n);
  if (it == op.attrs.end())
    return d;
  return it->second.kind == Attr::Float ? int64_t(it->second.f) : it->second.i;
}
double attrFloat(const PlanOp &op, const std::string &n, double d) {
  auto it = op.attrs.find(n);
  if (it == op.attrs.end())
    return d;
  return it->second.kind == Attr::Int ? double(it->second.i) : it->second.f;
}
std::string attrStr(const PlanOp &op, const std::string &n, const std::string &d) {
  auto it = op.attrs.find(n);
  return it == op.attrs.end() ? d : it->second.s;
}
std::vector<int64_t> attrInts(const PlanOp &op, const std::string &n) {
  auto it = op.attrs.find(n);
  if (it == op.attrs.end())
    return {};
  return it->second.kind == Attr::Int ? std::vector<int64_t>{it->second.i} : it->second.ints;
}

bool has(const PlanOp &op, size_t i) { return i < op.inputs.size() && op.inputs[i] >= 0; }

Step copyBytes(void *dst, const void *src, size_t bytes) {
  return [=](cudaStream_t s) -> std::string {
    if (dst == src || bytes == 0)
      return "";
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
    return e == cudaSuccess ? "" : std::string("copy: ") + cudaGetErrorString(e);
  };
}

void CudaExecutor::compileElementwise(const PlanOp &op, dev::Ew kind, std::vector<Step> &out) {
  using dev::Ew;
  int o = op.outputs[0];
  Shape os = shapeOf(o);
  DType ot = plan_.values[size_t(o)].dtype;
  std::vector<int> ins;
  size_t nIn = op.inputs.size();
  if (op.type == "Expand" || op.type == "Cast" || op.type == "CastLike")
    nIn = 1;
  if (kind == Ew::Clip)
    nIn = 3;
  bool floatOnly = kind >= Ew::Sqrt && kind <= Ew::GeluTanh;
  if (op.type == "Gelu" && attrStr(op, "approximate", "none") == "tanh")
    kind = Ew::GeluTanh;
  if (floatOnly && !isFloatType(typeOf(op.inputs[0])))
    fail(op, std::string("expects a floating-point input, got ") + dtypeName(typeOf(op.inputs[0])));
  auto make = [&](int a, int b, int c, const void *firstOverride, DType firstType, Shape firstShape) {
    dev::EwArgs e;
    e.op = kind;
    e.out = devicePtr(o);
    e.outType = int(ot);
    e.saturate = attrInt(op, "saturate", 1) != 0;
    e.shape = dimsOf(os);
    e.n = numElements(os);
    int ids[3] = {a, b, c};
    e.nIn = kind == Ew::Clip ? 3 : (c >= 0 ? 3 : b >= 0 ? 2 : 1);
    for (int j = 0; j < e.nIn; ++j) {
      Shape s;
      if (j == 0 && firstOverride) {
        e.in[0] = firstOverride;
        e.inType[0] = int(firstType);
        s = firstShape;
      } else if (ids[j] >= 0) {
        e.in[j] = devicePtr(ids[j]);
        e.inType[j] = int(typeOf(ids[j]));
        s = shapeOf(ids[j]);
      } else { // a missing Clip bound
        e.in[j] = one_;
        e.inType[j] = int(DType::F32);
        s = {};
      }
      if (s.size() > os.size())
        fail(op, "input shape " + shapeString(s) + " does not broadcast to " + shapeString(os));
      e.inStr[j] = stridesOf(broadcastStrides(s, os));
    }
    e.hasLo = kind == Ew::Clip && b >= 0;
    e.hasHi = kind == Ew::Clip && c >= 0;
    return e;
  };
  int a = op.inputs[0];
  int b = nIn > 1 && has(op, 1) ? op.inputs[1] : -1;
  int c = nIn > 2 && has(op, 2) ? op.inputs[2] : -1;
  dev::EwArgs first = make(a, b, c, nullptr, DType::F32, {});
  if (kind == Ew::Add && op.inputs.size() == 2 && ot == DType::F32 && typeOf(a) == DType::F32 &&
      typeOf(b) == DType::F32)
    adds_[size_t(&op - plan_.ops.data())] = first;
  if ((kind == Ew::Gelu || kind == Ew::GeluTanh) && ot == DType::F32 && typeOf(a) == DType::F32 &&
      shapeOf(a) == os) {
    gelus_[size_t(&op - plan_.ops.data())] = first;
    geluSources_[size_t(&op - plan_.ops.data())] = {static_cast<float *>(const_cast<void *>(first.in[0])), nullptr,
                                                    0, first.n, kind == Ew::GeluTanh, o};
  }
  out.push_back([first](cudaStream_t s) { return dev::elementwise(first, s); });
  // Variadic Max / Min: fold the rest into the output.
  for (size_t i = 2; (kind == Ew::Max || kind == Ew::Min) && i < op.inputs.size(); ++i) {
    dev::EwArgs more = make(-1, op.inputs[i], -1, devicePtr(o), ot, os);
    out.push_back([more](cudaStream_t s) { return dev::elementwise(more, s); });
  }
}

/// A float32 ONNX elementwise op that a Pointwise instruction computes with the same arithmetic
/// (runtime/include/octet/runtime/Pointwise.h), as a program of that one instruction: it then
/// runs as a generated kernel and joins the Pointwise fusions (fusePointwiseChains(),
/// fuseCastPointwise(): the RMSNorm's gamma * normalized, a Mul the compiler leaves alone because
/// the gamma gradient also reads the normalized tensor). Not Add: foldGemmBias() gives residual
/// Adds a GEMM's bias.
bool CudaExecutor::singleOpProgram(const PlanOp &op, PwProgram &p) {
  const PwOpInfo *info = lookupPointwiseOp(op.type);
  if (!info || info->op == PwOp::Add || int(op.inputs.size()) != info->arity || op.outputs.size() != 1 ||
      op.outputs[0] < 0 || plan_.values[size_t(op.outputs[0])].dtype != DType::F32)
    return false;
  for (int j = 0; j < info->arity; ++j) {
    int id = op.inputs[size_t(j)];
    DType want = info->op == PwOp::Where && j == 0 ? DType::Bool : DType::F32;
    if (id < 0 || typeOf(id) != want || shapeOf(id).size() > shapeOf(op.outputs[0]).size())
      return false;
  }
  p.numInputs = info->arity;
  p.code = {{info->op, {-1, -1, -1}}};
  for (int j = 0; j < info->arity; ++j)
    p.code[0].arg[j] = j;
  return true;
}

void CudaExecutor::compilePointwise(const PlanOp &op, std::vector<Step> &out, const PwProgram *program) {
  PwProgram p;
  try {
    p = program ? *program : parsePointwise(op);
  } catch (const Error &e) {
    fail(op, e.what());
  }
  int o = op.outputs[0];
  Shape os = shapeOf(o);
  if (plan_.values[size_t(o)].dtype != DType::F32)
    fail(op, "the output must be float32");
  dev::PwArgs a;
  a.nIn = p.numInputs;
  a.nCode = int(p.code.size());
  a.out = static_cast<float *>(devicePtr(o));
  a.shape = dimsOf(os);
  a.n = numElements(os);
  for (int j = 0; j < a.nIn; ++j) {
    int id = op.inputs[size_t(j)];
    DType t = typeOf(id);
    if (t != DType::F32 && t != DType::Bool)
      fail(op, "input " + std::to_string(j) + " is " + dtypeName(t) + "; Pointwise reads float32 and bool");
    Shape s = shapeOf(id);
    if (s.size() > os.size())
      fail(op, "input shape " + shapeString(s) + " does not broadcast to " + shapeString(os));
    a.in[j] = devicePtr(id);
    a.inBool[j] = t == DType::Bool;
    a.inStr[j] = stridesOf(broadcastStrides(s, os));
  }
  for (size_t k = 0; k < p.code.size(); ++k) {
    a.op[k] = dev::ewOf(p.code[k].op);
    for (int j = 0; j < 3; ++j)
      a.arg[k][j] = int8_t(p.code[k].arg[j] + 1); // register 0 holds 0 for absent operands
  }
  if (!jit_) {
    out.push_back([a](cudaStream_t s) { return dev::pointwise(a, s); });
    return;
  }
  int h = jit_->add(a);
  out.push_back([this, h, a](cudaStream_t s) { return jit_ ? jit_->launch(h, a, s) : dev::pointwise(a, s); });
  pointwise_[size_t(&op - plan_.ops.data())] = a;
}

void CudaExecutor::compileReduce(const PlanOp &op, int kind, std::vector<Step> &out) {
  int x = op.inputs[0], o = op.outputs[0];
  Shape xs = shapeOf(x);
  std::vector<int64_t> axes = has(op, 1) ? hostValue(op, 1).toInts() : attrInts(op, "axes");
  if (axes.empty() && attrInt(op, "noop_with_empty_axes", 0)) {
    out.push_back(copyBytes(devicePtr(o), devicePtr(x), size_t(numElements(xs)) * dtypeSize(typeOf(x))));
    return;
  }
  int64_t r = int64_t(xs.size());
  std::vector<bool> red(size_t(r), axes.empty());
  for (int64_t a : axes)
    red[size_t(normAxisOf(op, a, r))] = true;
  std::vector<int64_t> st = contiguousStrides(xs);
  Shape outDims, redDims;
  std::vector<int64_t> outStr, redStr;
  int lastKept = -1, firstRed = int(r), prev = -1;
  for (int64_t i = 0; i < r; ++i) {
    if (xs[size_t(i)] == 1)
      continue;
    bool isRed = red[size_t(i)];
    Shape &dims = isRed ? redDims : outDims;
    std::vector<int64_t> &str = isRed ? redStr : outStr;
    if (prev >= 0 && red[size_t(prev)] == isRed) { // adjacent dims of one kind walk as one
      dims.back() *= xs[size_t(i)];
      str.back() = st[size_t(i)];
    } else {
      dims.push_back(xs[size_t(i)]);
      str.push_back(st[size_t(i)]);
    }
    if (isRed)
      firstRed = std::min(firstRed, int(i));
    else
      lastKept = int(i);
    prev = int(i);
  }
  dev::ReduceArgs a;
  a.x = devicePtr(x);
  a.type = int(typeOf(x));
  a.out = devicePtr(o);
  a.outType = int(plan_.values[size_t(o)].dtype);
  a.kind = kind;
  a.outShape = dimsOf(outDims);
  a.redShape = dimsOf(redDims);
  a.outStr = stridesOf(outStr);
  a.redStr = stridesOf(redStr);
  a.nOut = numElements(outDims);
  a.nRed = numElements(redDims);
  a.innerContiguous = lastKept < firstRed && a.nRed >= 64;
  if (a.innerContiguous) {
    // Few outputs over long ranges (norms, full sums): several blocks per output.
    if (a.nOut < 1024 && a.nRed >= dev::kFullReduceChunk)
      a.chunks = int(std::clamp<int64_t>(a.nRed / dev::kFullReduceChunk, 1, std::max<int64_t>(1, 4096 / a.nOut)));
  } else {
    a.columns = a.type == int(DType::F32) && redDims.size() == 1 && outDims.size() == 1 && outStr[0] == 1 &&
                redStr[0] == a.nOut && a.nOut % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
    // Up to 262144 (output, chunk) pairs, chunks of at least 64 rows. Columns: about 64K threads
    // of 8 per chunk and four outputs, each at least 8 rows (few partials per output to combine).
    int64_t chunks = a.columns ? std::min<int64_t>((a.nRed + 63) / 64, std::max<int64_t>(1, 65536 * 4 / 8 / a.nOut))
                               : std::min<int64_t>((a.nRed + 63) / 64,
                                                   std::max<int64_t>(1, 262144 / std::max<int64_t>(a.nOut, 1)));
    a.chunks = int(std::clamp<int64_t>(chunks, 1, 65535));
  }
  if (kind == 0 && a.columns && a.outType == int(DType::F32))
    columnSums_[size_t(&op - plan_.ops.data())] = {x, a.nRed, a.nOut, static_cast<float *>(a.out)};
  if (a.chunks > 1 || !a.innerContiguous)
    scratch(size_t(a.chunks) * size_t(a.nOut) * sizeof(double));
  out.push_back([this, a](cudaStream_t s) mutable {
    a.work = reinterpret_cast<double *>(scratch_);
    return dev::reduce(a, s);
  });
  if (kind == 4 && a.type == int(DType::F32) && a.nOut == 1 && a.innerContiguous) // a whole tensor's norm
    sumSquares_[size_t(&op - plan_.ops.data())] = {static_cast<const float *>(a.x), a.nRed, a.out, a.outType};
}

/// cuBLAS on row-major data: C[M,N] = op(A) op(B), batched.
struct BlasCall {
  bool ta = false, tb = false;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t strideA = 0, strideB = 0, strideC = 0, batch = 1;
  const void *A = nullptr, *B = nullptr;
  void *C = nullptr;
  const void **ptrs = nullptr; // device [3][batch] (A, B, C) when strides do not describe the batch
  cudaDataType_t type = CUDA_R_32F;
  float alpha = 1, beta = 0;
};

std::string runBlas(cublasHandle_t h, const BlasCall &c, bool tf32) {
  cublasComputeType_t ct = c.type == CUDA_R_32F && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasOperation_t opA = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t st;
  if (c.ptrs)
    st = cublasGemmBatchedEx(h, opB, opA, int(c.N), int(c.M), int(c.K), &c.alpha, c.ptrs + c.batch, c.type,
                             int(c.ldb), c.ptrs, c.type, int(c.lda), &c.beta, const_cast<void **>(c.ptrs + 2 * c.batch),
                             c.type, int(c.ldc), int(c.batch), ct, CUBLAS_GEMM_DEFAULT);
  else
    st = cublasGemmStridedBatchedEx(h, opB, opA, int(c.N), int(c.M), int(c.K), &c.alpha, c.B, c.type, int(c.ldb),
                                    c.strideB, c.A, c.type, int(c.lda), c.strideA, &c.beta, c.C, c.type, int(c.ldc),
                                    c.strideC, int(c.batch), ct, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? "" : "cuBLAS GEMM failed (status " + std::to_string(int(st)) + ")";
}

cudaDataType_t blasType(const PlanOp &op, DType t) {
  switch (t) {
  case DType::F32: return CUDA_R_32F;
  case DType::F16: return CUDA_R_16F;
  case DType::BF16: return CUDA_R_16BF;
  default:
    throw Error("node '" + op.name + "' (" + op.type + "): " + dtypeName(t) +
                " GEMMs are not supported (float32, float16, bfloat16)");
  }
}

void CudaExecutor::compileMatMul(const PlanOp &op, std::vector<Step> &out) {
  int a = op.inputs[0], b = op.inputs[1], o = op.outputs[0];
  DType t = typeOf(a);
  if (typeOf(b) != t || plan_.values[size_t(o)].dtype != t)
    fail(op, "operands and result must have one element type");
  Shape as = shapeOf(a), bs = shapeOf(b);
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  if (as.size() < 2 || bs.size() < 2 || as.back() != bs[bs.size() - 2])
    fail(op, "shapes " + shapeString(as) + " and " + shapeString(bs) + " do not multiply");
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  size_t rank = std::max(ab.size(), bb.size());
  Shape batch(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + ab.size() >= rank ? ab[i + ab.size() - rank] : 1;
    int64_t db = i + bb.size() >= rank ? bb[i + bb.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      fail(op, "batch dimensions do not broadcast");
    batch[i] = std::max(da, db);
  }
  BlasCall c;
  c.type = blasType(op, t);
  c.A = devicePtr(a);
  c.B = devicePtr(b);
  c.C = devicePtr(o);
  c.N = N;
  c.K = K;
  c.lda = K;
  c.ldb = N;
  c.ldc = N;
  int64_t nb = numElements(batch);
  if (numElements(bb) == 1) { // B shared by every batch: one GEMM with the batch folded into M
    c.M = M * numElements(ab);
    if (numElements(ab) != nb)
      fail(op, "internal: batch mismatch");
  } else {
    c.M = M;
    c.batch = nb;
    std::vector<int64_t> sa = broadcastStrides(ab, batch), sb = broadcastStrides(bb, batch);
    std::vector<int64_t> offA(static_cast<size_t>(nb)), offB(static_cast<size_t>(nb));
    std::vector<int64_t> bstr = contiguousStrides(batch);
    for (int64_t i = 0; i < nb; ++i) {
      int64_t rem = i, oa = 0, ob = 0;
      for (size_t d = 0; d < rank; ++d) {
        int64_t q = rem / bstr[d];
        rem %= bstr[d];
        oa += q * sa[d];
        ob += q * sb[d];
      }
      offA[size_t(i)] = oa * M * K;
      offB[size_t(i)] = ob * K * N;
    }
    auto arithmetic = [&](const std::vector<int64_t> &v, int64_t &stride) {
      stride = v.size() > 1 ? v[1] - v[0] : 0;
      for (size_t i = 1; i < v.size(); ++i)
        if (v[i] - v[i - 1] != stride)
          return false;
      return true;
    };
    c.strideC = M * N;
    if (!arithmetic(offA, c.strideA) || !arithmetic(offB, c.strideB)) {
      size_t es = dtypeSize(t);
      std::vector<const void *> ptrs(size_t(3 * nb));
      for (int64_t i = 0; i < nb; ++i) {
        ptrs[size_t(i)] = static_cast<const char *>(c.A) + offA[size_t(i)] * int64_t(es);
        ptrs[size_t(nb + i)] = static_cast<const char *>(c.B) + offB[size_t(i)] * int64_t(es);
        ptrs[size_t(2 * nb + i)] = static_cast<char *>(c.C) + i * M * N * int64_t(es);
      }
      void *d = alloc(ptrs.size() * sizeof(void *));
      cudaCheck(cudaMemcpy(d, ptrs.data(), ptrs.size() * sizeof(void *), cudaMemcpyHostToDevice), "upload");
      c.ptrs = static_cast<const void **>(d);
    }
  }
  bool tf32 = opt_.tf32;
  out.push_back([this, c, tf32](cudaStream_t) { return runBlas(blas_, c, tf32); });
}

void CudaExecutor::compileGemm(const PlanOp &op, std::vector<Step> &out) {
  int a = op.inputs[0], b = op.inputs[1], o = op.outputs[0];
  DType t = typeOf(a);
  Shape as = shapeOf(a), bs = shapeOf(b);
  if (as.size() != 2 || bs.size() != 2 || typeOf(b) != t)
    fail(op, "Gemm takes 2-D A and B of one element type");
  BlasCall c;
  c.type = blasType(op, t);
  c.ta = attrInt(op, "transA", 0);
  c.tb = attrInt(op, "transB", 0);
  c.M = c.ta ? as[1] : as[0];
  c.K = c.ta ? as[0] : as[1];
  c.N = c.tb ? bs[0] : bs[1];
  if ((c.tb ? bs[1] : bs[0]) != c.K)
    fail(op, "inner dimensions differ");
  c.lda = as[1];
  c.ldb = bs[1];
  c.ldc = c.N;
  c.A = devicePtr(a);
  c.B = devicePtr(b);
  c.C = devicePtr(o);
  c.alpha = float(attrFloat(op, "alpha", 1.0));
  float beta = float(attrFloat(op, "beta", 1.0));
  if (has(op, 2) && beta != 0.0f) {
    dev::EwArgs e;
    e.op = dev::Ew::Copy;
    e.nIn = 1;
    e.in[0] = devicePtr(op.inputs[2]);
    e.inType[0] = int(typeOf(op.inputs[2]));
    Shape cs = shapeOf(op.inputs[2]), os{c.M, c.N};
    if (cs.size() > 2)
      fail(op, "C does not broadcast to [M, N]");
    e.inStr[0] = stridesOf(broadcastStrides(cs, os));
    e.out = c.C;
    e.outType = int(t);
    e.shape = dimsOf(os);
    e.n = c.M * c.N;
    out.push_back([e](cudaStream_t s) { return dev::elementwise(e, s); });
    c.beta = beta;
  }
  bool tf32 = opt_.tf32;
  out.push_back([this, c, tf32](cudaStream_t) { return runBlas(blas_, c, tf32); });
}

/// A stridedCopy of bytes src [rows, cols] -> dst [cols, rows] (FP8 codes for a GEMM's other layout).
dev::CopyArgs byteTranspose(const void *src, void *dst, int64_t rows, int64_t cols) {
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

Format fp8FormatOfType(DType t) { return t == DType::F8E5M2 ? Format::E5M2 : Format::E4M3; }

void CudaExecutor::compileFp8Gemm(const PlanOp &op, std::vector<Step> &out) {
  if (has(op, 5))
    fail(op, "an FP8 output (d_scale) is not supported");
  int qa = op.inputs[0], qb = op.inputs[1], sa = op.inputs[2], sb = op.inputs[3], o = op.outputs[0];
  DType ta = typeOf(qa), tb = typeOf(qb), ot = plan_.values[size_t(o)].dtype;
  if (!isFp8(ta) || !isFp8(tb))
    fail(op, "GEMM operands must be FP8");
  bool transA = attrInt(op, "transpose_a", 0), transB = attrInt(op, "transpose_b", 0);
  Shape as = shapeOf(qa), bs = shapeOf(qb);
  if (bs.size() != 2 || (transA && as.size() != 2) || as.empty())
    fail(op, "operand ranks are not [.., K] x [K, N]");
  int64_t K = transA ? as[0] : as.back(), M = numElements(as) / K;
  int64_t N = transB ? bs[0] : bs[1], Kb = transB ? bs[1] : bs[0];
  if (K != Kb)
    fail(op, "inner dimensions differ: " + std::to_string(K) + " vs " + std::to_string(Kb));
  int64_t nsa = numElements(shapeOf(sa)), nsb = numElements(shapeOf(sb));
  bool rowA = nsa != 1, colB = nsb != 1;
  if ((rowA && nsa != M) || (colB && nsb != N))
    fail(op, "scale_inv shapes fit neither per tensor nor per row");
  if (ta == DType::F8E5M2 && tb == DType::F8E5M2)
    fail(op, "E5M2 x E5M2 has no FP8 tensor-core GEMM; make one operand E4M3");
  if (K % 16 || N % 16)
    fail(op, "FP8 GEMMs need K and N multiples of 16 (K=" + std::to_string(K) + ", N=" + std::to_string(N) +
                 "); exclude this layer from the recipe");
  bool fast = opt_.fastAccum && attrStr(op, "accumulation", "split") == "fast";
  bool withAmax = op.outputs.size() > 1 && op.outputs[1] >= 0;
  bool hasBias = has(op, 4);
  // Scratch layout: [A as [M,K]] [B as [N,K]] [float32 accumulator [M,N]].
  auto align = [](size_t v) { return (v + 255) / 256 * 256; };
  size_t offA = 0, offB = align(transA ? size_t(M * K) : 0);
  size_t offAcc = offB + align(transB ? 0 : size_t(N * K));
  bool direct = !rowA && !colB && !hasBias && !withAmax && (ot == DType::F32 || ot == DType::BF16);
  bool accInOut = ot == DType::F32;
  size_t need = offAcc + (direct || accInOut ? 0 : align(size_t(M * N) * 4));
  scratch(need);
  const uint8_t *A = static_cast<const uint8_t *>(devicePtr(qa)), *B = static_cast<const uint8_t *>(devicePtr(qb));
  const float *SA = static_cast<const float *>(devicePtr(sa)), *SB = static_cast<const float *>(devicePtr(sb));
  void *D = devicePtr(o);
  const void *bias = hasBias ? devicePtr(op.inputs[4]) : nullptr;
  int biasType = hasBias ? int(typeOf(op.inputs[4])) : 0;
  float *amax = withAmax ? static_cast<float *>(devicePtr(op.outputs[1])) : nullptr;
  Format fa = fp8FormatOfType(ta), fb = fp8FormatOfType(tb);
  if (hasBias && !rowA && !colB && !withAmax && ot == DType::F32 && biasType == int(DType::F32) && !transA && transB &&
      numElements(shapeOf(op.inputs[4])) == N)
    gemmBias_[size_t(&op - plan_.ops.data())] = {
        [=](cudaStream_t s) { return fp8_->run(M, N, K, A, fa, B, fb, SA, SB, D, false, fast, s); },
        static_cast<const float *>(bias), N, D, o};
  out.push_back([=](cudaStream_t s) -> std::string {
    // cuBLASLt's FP8 kernels need both operands K-contiguous ("TN"): transpose the others.
    auto transposed = [&](const uint8_t *src, size_t off, int64_t rows, int64_t cols, std::string &err) {
      err = dev::stridedCopy(byteTranspose(src, scratch_ + off, cols, rows), s); // src [cols, rows] -> [rows, cols]
      return reinterpret_cast<const uint8_t *>(scratch_ + off);
    };
    const uint8_t *a = A, *b = B;
    std::string err;
    if (transA && (a = transposed(A, offA, M, K, err), !err.empty()))
      return err;
    if (!transB && (b = transposed(B, offB, N, K, err), !err.empty()))
      return err;
    if (direct)
      return fp8_->run(M, N, K, a, fa, b, fb, SA, SB, D, ot == DType::BF16, fast, s);
    bool perTensor = !rowA && !colB;
    float *acc = accInOut ? static_cast<float *>(D) : reinterpret_cast<float *>(scratch_ + offAcc);
    if (std::string e = fp8_->run(M, N, K, a, fa, b, fb, perTensor ? SA : one_, perTensor ? SB : one_, acc, false,
                                  fast, s);
        !e.empty())
      return e;
    dev::EpilogueArgs ep;
    ep.acc = acc;
    ep.out = D;
    ep.outType = int(ot);
    ep.M = M;
    ep.N = N;
    ep.aScale = SA;
    ep.bScale = SB;
    ep.aRows = rowA;
    ep.bCols = colB;
    ep.applyScales = !perTensor;
    ep.bias = bias;
    ep.biasType = biasType;
    ep.amax = amax;
    return dev::gemmEpilogue(ep, s);
  });
}

/// octet::Attention (Q, K, V) -> (Y, LSE) and octet::AttentionGrad (Q, K, V, Y, LSE, dY) -> (dQ, dK, dV):
/// the fused kernels of Attention.cu (docs/PLAN.md).
void CudaExecutor::compileAttention(const PlanOp &op, bool grad, std::vector<Step> &out) {
  size_t nIn = grad ? 6 : 3, nOut = grad ? 3 : 2;
  if (op.inputs.size() != nIn || op.outputs.size() != nOut)
    fail(op, "expects " + std::to_string(nIn) + " inputs and " + std::to_string(nOut) + " outputs");
  for (size_t i = 0; i < nIn; ++i)
    if (!has(op, i) || typeOf(op.inputs[i]) != DType::F32)
      fail(op, "input " + std::to_string(i) + " must be a float32 tensor");
  Shape qs = shapeOf(op.inputs[0]), ks = shapeOf(op.inputs[1]), vs = shapeOf(op.inputs[2]);
  size_t r = qs.size();
  int64_t heads = attrInt(op, "q_num_heads", 0); // > 0: ONNX Attention's 3-D form [B, T, heads * d]
  if (heads < 0 || attrInt(op, "kv_num_heads", heads) != heads)
    fail(op, "q_num_heads and kv_num_heads must be equal and positive (grouped-query attention is not supported)");
  if (r < 2 || ks.size() != r || vs != ks || ks.back() != qs.back() ||
      !std::equal(qs.begin(), qs.end() - 2, ks.begin()) || (heads && (r != 3 || qs.back() % heads)))
    fail(op, "Q " + shapeString(qs) + ", K " + shapeString(ks) + " and V " + shapeString(vs) +
                 (heads ? " must be [B, T, heads * d] with " + std::to_string(heads) + " heads"
                        : std::string(" must be [..., T, d] with one batch and one head width")));
  dev::AttnArgs a;
  a.batch = numElements(Shape(qs.begin(), qs.end() - 2)) * std::max<int64_t>(heads, 1);
  a.tq = int(qs[r - 2]);
  a.tk = int(ks[r - 2]);
  a.d = int(qs[r - 1] / std::max<int64_t>(heads, 1));
  a.heads = int(heads);
  if (qs[r - 2] > INT32_MAX || ks[r - 2] > INT32_MAX)
    fail(op, "sequences longer than 2^31 are not supported");
  if (a.d > dev::kAttentionMaxHeadDim)
    fail(op, "heads wider than " + std::to_string(dev::kAttentionMaxHeadDim) +
                 " are not supported by the CUDA kernels; compile with octet-fuse-attention's max-head-dim below "
                 "the head width, or use --device cpu");
  a.scale = float(attrFloat(op, "scale", 1.0));
  a.causal = attrInt(op, "is_causal", 0) != 0;
  a.precision = attention_;
  a.q = static_cast<const float *>(devicePtr(op.inputs[0]));
  a.k = static_cast<const float *>(devicePtr(op.inputs[1]));
  a.v = static_cast<const float *>(devicePtr(op.inputs[2]));
  size_t rowBytes = (size_t(a.batch) * size_t(a.tq) * 4 + 255) / 256 * 256;
  if (!grad) {
    if (op.outputs[0] < 0)
      fail(op, "the output Y is missing");
    a.y = static_cast<float *>(devicePtr(op.outputs[0]));
    a.lse = static_cast<float *>(devicePtr(op.outputs[1]));
    std::shared_ptr<const dev::CudnnAttention> fused = cudnnAttention(a, false);
    size_t workBytes = fused ? fused->workspaceBytes() : dev::attentionWorkspaceBytes(a, false);
    if (workBytes)
      scratch(workBytes);
    attentionProgram(op, a, qs.back(), out, [this, workBytes, fused](dev::AttnArgs a, cudaStream_t s) {
      a.stream = s;
      a.work = workBytes ? scratch_ : nullptr;
      return fused ? fused->run(a) : dev::attentionForward(a);
    });
    return;
  }
  Shape ls = heads ? Shape{qs[0], heads, qs[1]} : Shape(qs.begin(), qs.end() - 1);
  if (shapeOf(op.inputs[3]) != qs || shapeOf(op.inputs[5]) != qs || shapeOf(op.inputs[4]) != ls)
    fail(op, "Y and dY must be " + shapeString(qs) + " and LSE " + shapeString(ls));
  a.yIn = static_cast<const float *>(devicePtr(op.inputs[3]));
  a.lseIn = static_cast<const float *>(devicePtr(op.inputs[4]));
  a.dy = static_cast<const float *>(devicePtr(op.inputs[5]));
  // Scratch: delta, then a place for any gradient the plan does not keep, then the BF16 operands.
  size_t qBytes = (size_t(numElements(qs)) * 4 + 255) / 256 * 256, kBytes = (size_t(numElements(ks)) * 4 + 255) / 256 * 256;
  size_t missing[3] = {};
  size_t need = rowBytes;
  for (int i = 0; i < 3; ++i)
    if (op.outputs[size_t(i)] < 0) {
      missing[i] = need;
      need += i == 0 ? qBytes : kBytes;
    }
  size_t work = need;
  std::shared_ptr<const dev::CudnnAttention> fused = cudnnAttention(a, true);
  need += fused ? fused->workspaceBytes() : dev::attentionWorkspaceBytes(a, true);
  scratch(need);
  float *outs[3] = {static_cast<float *>(devicePtr(op.outputs[0])), static_cast<float *>(devicePtr(op.outputs[1])),
                    static_cast<float *>(devicePtr(op.outputs[2]))};
  attentionProgram(op, a, qs.back(), out, [this, outs, missing, work, fused](dev::AttnArgs a, cudaStream_t s) {
    a.stream = s;
    a.work = scratch_ + work;
    a.delta = reinterpret_cast<float *>(scratch_);
    a.dq = outs[0] ? outs[0] : reinterpret_cast<float *>(scratch_ + missing[0]);
    a.dk = outs[1] ? outs[1] : reinterpret_cast<float *>(scratch_ + missing[1]);
    a.dv = outs[2] ? outs[2] : reinterpret_cast<float *>(scratch_ + missing[2]);
    return fused ? fused->run(a) : dev::attentionBackward(a);
  });
}

/// cuDNN's fused attention for a BF16 octet::Attention or AttentionGrad of a's shape (one graph per
/// shape and direction, shared by the plan's ops), or null where the options, cuDNN or the shape
/// rule it out: then Attention.cu's kernels run it (a note says why, once).
std::shared_ptr<const dev::CudnnAttention> CudaExecutor::cudnnAttention(const dev::AttnArgs &a, bool backward) {
  if (a.precision != dev::AttnPrecision::BF16 || !opt_.cudnnAttention)
    return nullptr;
  auto key = std::make_tuple(backward, a.batch, a.tq, a.tk, a.d, a.heads, a.scale, a.causal);
  auto [it, added] = cudnnGraphs_.try_emplace(key);
  if (!added)
    return it->second;
  std::string why;
  it->second = dev::CudnnAttention::build(a, backward, why);
  if (it->second)
    ++fusions_["attention through cuDNN"];
  else if (cudnnNotes_.insert(why).second)
    std::cerr << "note: attention runs on Octet's own kernels (slower): " << why << "\n";
  return it->second;
}

template <class Launch>
void CudaExecutor::attentionProgram(const PlanOp &op, const dev::AttnArgs &a, int64_t rowLength,
                                    std::vector<Step> &out, Launch launch) {
  std::function<Step(AttnBias)> withBias = [a, launch](AttnBias bias) -> Step {
    dev::AttnArgs b = a;
    std::copy(bias.begin(), bias.end(), b.bias);
    return [b, launch](cudaStream_t s) { return launch(b, s); };
  };
  out.push_back(withBias({}));
  if (a.precision == dev::AttnPrecision::BF16)
    attentions_[size_t(&op - plan_.ops.data())] = {std::move(withBias), rowLength};
}

void CudaExecutor::compile(size_t k, std::vector<Step> &out) {
  const PlanOp &op = plan_.ops[k];
  const std::string &t = op.type;
  for (int id : op.outputs)
    if (id >= 0 && plan_.values[size_t(id)].isSequence)
      fail(op, "sequence values are not supported by the CUDA backend; use --device cpu");
  auto outPtr = [&](size_t i) { return devicePtr(op.outputs[i]); };
  auto outBytes = [&](size_t i) {
    return size_t(numElements(shapeOf(op.outputs[i]))) * dtypeSize(plan_.values[size_t(op.outputs[i])].dtype);
  };
  if (t == "octet::Pointwise") {
    compilePointwise(op, out);
    return;
  }
  if (t == "octet::Attention" || t == "octet::AttentionGrad") {
    compileAttention(op, t == "octet::AttentionGrad", out);
    return;
  }
  if (PwProgram p; jit_ && singleOpProgram(op, p)) {
    compilePointwise(op, out, &p);
    return;
  }
  if (auto it = ewOps().find(t); it != ewOps().end()) {
    if (t == "CastLike" || t == "Cast" || t == "Expand") {
      // Same type and shape: a plain copy.
      int x = op.inputs[0], o = op.outputs[0];
      if (typeOf(x) == plan_.values[size_t(o)].dtype && shapeOf(x) == shapeOf(o)) {
        out.push_back(copyBytes(outPtr(0), devicePtr(x), outBytes(0)));
        return;
      }
    }
    compileElementwise(op, it->second, out);
    return;
  }
  if (t == "Identity" || t == "Reshape" || t == "Squeeze" || t == "Unsqueeze" || t == "Flatten" || t == "Dropout") {
    out.push_back(copyBytes(outPtr(0), devicePtr(op.inputs[0]), outBytes(0)));
    if (t == "Dropout" && op.outputs.size() > 1 && op.outputs[1] >= 0) {
      void *m = outPtr(1);
      int64_t n = numElements(shapeOf(op.outputs[1]));
      out.push_back([m, n](cudaStream_t s) { return dev::fill(m, 1, 1, n, s); });
    }
    return;
  }
  if (t == "Transpose" || t == "Slice") {
    int x = op.inputs[0];
    Shape xs = shapeOf(x), os = shapeOf(op.outputs[0]);
    std::vector<int64_t> st = contiguousStrides(xs), src(xs.size());
    int64_t base = 0;
    if (t == "Transpose") {
      std::vector<int64_t> perm = attrInts(op, "perm");
      if (perm.empty())
        for (int64_t i = int64_t(xs.size()); i-- > 0;)
          perm.push_back(i);
      if (perm.size() != xs.size())
        fail(op, "perm has the wrong length");
      for (size_t i = 0; i < perm.size(); ++i)
        src[i] = st[size_t(perm[i])];
    } else {
      std::vector<int64_t> starts = hostValue(op, 1).toInts(), ends = hostValue(op, 2).toInts(), axes, steps;
      if (has(op, 3))
        axes = hostValue(op, 3).toInts();
      else
        for (size_t i = 0; i < starts.size(); ++i)
          axes.push_back(int64_t(i));
      steps = has(op, 4) ? hostValue(op, 4).toInts() : std::vector<int64_t>(starts.size(), 1);
      src = st;
      for (size_t i = 0; i < starts.size(); ++i) {
        int64_t a = normAxisOf(op, axes[i], int64_t(xs.size())), d = xs[size_t(a)], s = starts[i], k = steps[i];
        if (k == 0)
          fail(op, "step 0");
        if (s < 0)
          s += d;
        s = k > 0 ? std::clamp<int64_t>(s, 0, d) : std::clamp<int64_t>(s, 0, d - 1);
        base += s * st[size_t(a)];
        src[size_t(a)] = st[size_t(a)] * k;
      }
    }
    dev::CopyArgs c;
    size_t es = dtypeSize(typeOf(x));
    c.src = static_cast<const char *>(devicePtr(x)) + base * int64_t(es);
    c.dst = outPtr(0);
    c.elemSize = int(es);
    c.shape = dimsOf(os);
    c.srcStr = stridesOf(src);
    c.dstStr = stridesOf(contiguousStrides(os));
    c.n = numElements(os);
    if (t == "Transpose" && typeOf(x) == DType::F32)
      transposes_[size_t(&op - plan_.ops.data())] = c;
    out.push_back([c](cudaStream_t s) { return dev::stridedCopy(c, s); });
    return;
  }
  if (t == "Concat" || t == "Split") {
    bool concat = t == "Concat";
    int whole = concat ? op.outputs[0] : op.inputs[0];
    Shape ws = shapeOf(whole);
    int64_t axis = normAxisOf(op, attrInt(op, "axis", 0), int64_t(ws.size()));
    std::vector<int64_t> wst = contiguousStrides(ws);
    size_t es = dtypeSize(typeOf(whole));
    int64_t pos = 0;
    const std::vector<int> &parts = concat ? op.inputs : op.outputs;
    for (int id : parts) {
      if (id < 0)
        continue;
      Shape ps = shapeOf(id);
      dev::CopyArgs c;
      c.elemSize = int(es);
      c.shape = dimsOf(ps);
      c.n = numElements(ps);
      char *wp = static_cast<char *>(devicePtr(whole)) + pos * wst[size_t(axis)] * int64_t(es);
      if (concat) {
        c.src = devicePtr(id);
        c.srcStr = stridesOf(contiguousStrides(ps));
        c.dst = wp;
        c.dstStr = stridesOf(wst);
      } else {
        c.src = wp;
        c.srcStr = stridesOf(wst);
        c.dst = devicePtr(id);
        c.dstStr = stridesOf(contiguousStrides(ps));
      }
      pos += ps[size_t(axis)];
      out.push_back([c](cudaStream_t s) { return dev::stridedCopy(c, s); });
    }
    return;
  }
  if (t == "Pad") {
    if (attrStr(op, "mode", "constant") != "constant")
      fail(op, "only mode=constant is supported");
    int x = op.inputs[0];
    Shape xs = shapeOf(x), os = shapeOf(op.outputs[0]);
    std::vector<int64_t> pads = hostValue(op, 1).toInts(), axes;
    if (has(op, 3))
      axes = hostValue(op, 3).toInts();
    else
      for (size_t i = 0; i < xs.size(); ++i)
        axes.push_back(int64_t(i));
    if (pads.size() != 2 * axes.size())
      fail(op, "pads has the wrong length");
    std::vector<int64_t> ost = contiguousStrides(os);
    int64_t base = 0;
    for (size_t i = 0; i < axes.size(); ++i) {
      if (pads[i] < 0 || pads[i + axes.size()] < 0)
        fail(op, "negative pads are not supported by the CUDA backend; use --device cpu");
      base += pads[i] * ost[size_t(normAxisOf(op, axes[i], int64_t(xs.size())))];
    }
    size_t es = dtypeSize(typeOf(x));
    uint64_t fillv = 0;
    if (has(op, 2))
      std::memcpy(&fillv, hostValue(op, 2).bytes.data(), es);
    void *o = outPtr(0);
    int64_t n = numElements(os);
    out.push_back([o, es, fillv, n](cudaStream_t s) { return dev::fill(o, int(es), fillv, n, s); });
    dev::CopyArgs c;
    c.src = devicePtr(x);
    c.dst = static_cast<char *>(o) + base * int64_t(es);
    c.elemSize = int(es);
    c.shape = dimsOf(xs);
    c.srcStr = stridesOf(contiguousStrides(xs));
    c.dstStr = stridesOf(ost);
    c.n = numElements(xs);
    out.push_back([c](cudaStream_t s) { return dev::stridedCopy(c, s); });
    return;
  }
  if (t == "Gather") {
    int x = op.inputs[0], idx = op.inputs[1];
    Shape xs = shapeOf(x);
    int64_t axis = normAxisOf(op, attrInt(op, "axis", 0), int64_t(xs.size()));
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i)
      outer *= xs[size_t(i)];
    for (size_t i = size_t(axis) + 1; i < xs.size(); ++i)
      inner *= xs[i];
    int slot = flagSlot(op, "an index is out of range");
    const void *xp = devicePtr(x), *ip = devicePtr(idx);
    int es = int(dtypeSize(typeOf(x))), it = int(typeOf(idx));
    int64_t d = xs[size_t(axis)], n = numElements(shapeOf(idx));
    void *o = outPtr(0);
    out.push_back([=](cudaStream_t s) { return dev::gather(xp, es, ip, it, outer, d, inner, n, o, flags_ + slot, s); });
    return;
  }
  if (t == "GatherElements" || t == "ScatterElements" || t == "ScatterND") {
    int x = op.inputs[0], idx = op.inputs[1];
    Shape xs = shapeOf(x), is = shapeOf(idx);
    std::vector<int64_t> xst = contiguousStrides(xs);
    int slot = flagSlot(op, "an index is out of range");
    if (t == "GatherElements") {
      int64_t axis = normAxisOf(op, attrInt(op, "axis", 0), int64_t(xs.size()));
      const void *xp = devicePtr(x), *ip = devicePtr(idx);
      int es = int(dtypeSize(typeOf(x))), it = int(typeOf(idx));
      dev::Dims dims = dimsOf(is);
      dev::Strides st = stridesOf(xst);
      int64_t ad = xs[size_t(axis)], n = numElements(is);
      void *o = outPtr(0);
      out.push_back([=](cudaStream_t s) {
        return dev::gatherElements(xp, es, ip, it, dims, st, int(axis), ad, n, o, flags_ + slot, s);
      });
      return;
    }
    std::string red = attrStr(op, "reduction", "none");
    static const std::map<std::string, int> reds = {{"none", 0}, {"add", 1}, {"mul", 2}, {"max", 3}, {"min", 4}};
    if (!reds.count(red))
      fail(op, "reduction '" + red + "' is not supported (none, add, mul, max, min)");
    if (red != "none" && typeOf(x) != DType::F32)
      fail(op, "reductions are implemented for float32 data on the GPU; use --device cpu");
    out.push_back(copyBytes(outPtr(0), devicePtr(x), outBytes(0)));
    dev::ScatterArgs a;
    a.out = outPtr(0);
    a.type = int(typeOf(x));
    a.updates = devicePtr(op.inputs[2]);
    a.idx = devicePtr(idx);
    a.idxType = int(typeOf(idx));
    a.reduction = reds.at(red);
    if (t == "ScatterND") {
      a.k = is.back();
      if (a.k > int64_t(xs.size()) || a.k < 1)
        fail(op, "the last indices dimension must be in [1, data rank]");
      a.nIdx = numElements(is) / a.k;
      a.slice = 1;
      for (size_t i = size_t(a.k); i < xs.size(); ++i)
        a.slice *= xs[i];
      a.dataStr = stridesOf(xst);
      a.dataDims = dimsOf(Shape(xs.begin(), xs.begin() + a.k));
    } else {
      a.axis = int(normAxisOf(op, attrInt(op, "axis", 0), int64_t(xs.size())));
      a.idxShape = dimsOf(is);
      a.xStr = stridesOf(xst);
      a.axisDim = xs[size_t(a.axis)];
      a.n = numElements(is);
    }
    a.outElements = numElements(xs);
    scratch(dev::scatterScratchBytes(a));
    out.push_back([this, a, slot](cudaStream_t s) mutable {
      a.bad = flags_ + slot;
      return dev::scatter(a, scratch_, s);
    });
    return;
  }
  if (t == "Softmax" || t == "LogSoftmax") {
    int x = op.inputs[0];
    Shape xs = shapeOf(x);
    int64_t axis = normAxisOf(op, attrInt(op, "axis", -1), int64_t(xs.size()));
    int64_t outer = 1, inner = 1, n = xs[size_t(axis)];
    for (int64_t i = 0; i < axis; ++i)
      outer *= xs[size_t(i)];
    for (size_t i = size_t(axis) + 1; i < xs.size(); ++i)
      inner *= xs[i];
    const void *xp = devicePtr(x);
    int xt = int(typeOf(x)), ot = int(plan_.values[size_t(op.outputs[0])].dtype);
    void *o = outPtr(0);
    bool log = t == "LogSoftmax";
    out.push_back([=](cudaStream_t s) { return dev::softmax(xp, xt, o, ot, outer, n, inner, log, s); });
    return;
  }
  if (t == "LayerNormalization") {
    int x = op.inputs[0];
    Shape xs = shapeOf(x);
    int64_t axis = normAxisOf(op, attrInt(op, "axis", -1), int64_t(xs.size()));
    int64_t rows = 1, n = 1;
    for (size_t i = 0; i < xs.size(); ++i)
      (int64_t(i) < axis ? rows : n) *= xs[i];
    if (numElements(shapeOf(op.inputs[1])) != n || (has(op, 2) && numElements(shapeOf(op.inputs[2])) != n))
      fail(op, "scale and bias must have the normalized shape's element count");
    for (size_t i = 1; i < 3; ++i)
      if (op.outputs.size() > i && op.outputs[i] >= 0 && plan_.values[size_t(op.outputs[i])].dtype != DType::F32)
        fail(op, "Mean and InvStdDev must be float32");
    const void *xp = devicePtr(x), *sp = devicePtr(op.inputs[1]), *bp = has(op, 2) ? devicePtr(op.inputs[2]) : nullptr;
    int xt = int(typeOf(x)), st = int(typeOf(op.inputs[1])), bt = has(op, 2) ? int(typeOf(op.inputs[2])) : 0;
    int ot = int(plan_.values[size_t(op.outputs[0])].dtype);
    void *y = outPtr(0);
    float *mean = op.outputs.size() > 1 && op.outputs[1] >= 0 ? static_cast<float *>(outPtr(1)) : nullptr;
    float *inv = op.outputs.size() > 2 && op.outputs[2] >= 0 ? static_cast<float *>(outPtr(2)) : nullptr;
    float eps = float(attrFloat(op, "epsilon", 1e-5));
    const int f32 = int(DType::F32);
    if (xt == f32 && st == f32 && (!bp || bt == f32) && ot == f32 && dev::layerNormStatsFit(n) &&
        (reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(sp) | reinterpret_cast<uintptr_t>(bp) |
         reinterpret_cast<uintptr_t>(y)) % 16 == 0)
      layerNorms_[k] = {static_cast<const float *>(xp), static_cast<const float *>(sp), static_cast<const float *>(bp),
                        mean, inv, rows, n, eps, op.outputs[0]};
    out.push_back(
        [=](cudaStream_t s) { return dev::layerNorm(xp, xt, sp, st, bp, bt, y, ot, mean, inv, rows, n, eps, s); });
    return;
  }
  if (t == "octet::LayerNormalizationGrad") {
    // (X, Scale, dY[, dX_in]) -> (dX, dScale, dB), float32 (docs/PLAN.md); scratch: the blocks' column
    // partials, then a place for dX where the plan does not keep it.
    if (op.inputs.size() < 3 || op.inputs.size() > 4 || op.outputs.size() != 3)
      fail(op, "expects inputs (X, Scale, dY[, dX_in]) and outputs (dX, dScale, dB)");
    Shape xs = shapeOf(op.inputs[0]);
    int64_t axis = normAxisOf(op, attrInt(op, "axis", -1), int64_t(xs.size()));
    int64_t rows = 1, n = 1;
    for (size_t i = 0; i < xs.size(); ++i)
      (int64_t(i) < axis ? rows : n) *= xs[i];
    for (int i = 0; i < 3; ++i)
      if (op.inputs[size_t(i)] < 0)
        fail(op, "X, Scale and dY are required");
    for (int id : op.inputs)
      if (id >= 0 && typeOf(id) != DType::F32)
        fail(op, "supports float32 only");
    for (int id : op.outputs)
      if (id >= 0 && plan_.values[size_t(id)].dtype != DType::F32)
        fail(op, "supports float32 only");
    if (shapeOf(op.inputs[2]) != xs || numElements(shapeOf(op.inputs[1])) != n ||
        (has(op, 3) && shapeOf(op.inputs[3]) != xs))
      fail(op, "dY and dX_in must have X's shape " + shapeString(xs) + " and Scale " + std::to_string(n) +
                   " elements");
    for (int i = 1; i < 3; ++i)
      if (op.outputs[size_t(i)] >= 0 && numElements(shapeOf(op.outputs[size_t(i)])) != n)
        fail(op, "dScale and dB must have " + std::to_string(n) + " elements");
    size_t partials = (size_t(dev::layerNormGradBlocks(rows, n)) * 2 * size_t(n) * 4 + 255) / 256 * 256;
    scratch(partials + (op.outputs[0] < 0 ? size_t(rows * n) * 4 : 0));
    const float *x = static_cast<const float *>(devicePtr(op.inputs[0]));
    const float *sc = static_cast<const float *>(devicePtr(op.inputs[1]));
    const float *dy = static_cast<const float *>(devicePtr(op.inputs[2]));
    const float *dxIn = has(op, 3) ? static_cast<const float *>(devicePtr(op.inputs[3])) : nullptr;
    float *outs[3] = {};
    for (int i = 0; i < 3; ++i)
      if (op.outputs[size_t(i)] >= 0)
        outs[i] = static_cast<float *>(outPtr(size_t(i)));
    float eps = float(attrFloat(op, "epsilon", 1e-5));
    out.push_back([this, x, sc, dy, dxIn, outs, partials, rows, n, eps](cudaStream_t s) {
      float *dx = outs[0] ? outs[0] : reinterpret_cast<float *>(scratch_ + partials);
      return dev::layerNormGrad(x, sc, dy, dxIn, dx, outs[1], outs[2], reinterpret_cast<float *>(scratch_), rows, n,
                                eps, s);
    });
    return;
  }
  if (t == "SoftmaxCrossEntropyLoss" || t == "octet::SoftmaxCrossEntropyLossGrad") {
    bool grad = t != "SoftmaxCrossEntropyLoss";
    int sc = op.inputs[0], lab = op.inputs[1];
    Shape ss = shapeOf(sc);
    if (ss.size() < 2)
      fail(op, "scores must be [N, C, ...]");
    dev::XentArgs a;
    a.scores = devicePtr(sc);
    a.type = int(typeOf(sc));
    a.labels = static_cast<const int64_t *>(devicePtr(lab));
    a.labelType = int(typeOf(lab));
    if (has(op, 2) && !grad) {
      a.weight = devicePtr(op.inputs[2]);
      a.weightType = int(typeOf(op.inputs[2]));
    }
    a.N = ss[0];
    a.C = ss[1];
    a.D = numElements(ss) / (a.N * a.C);
    if (numElements(shapeOf(lab)) != a.N * a.D)
      fail(op, "labels do not match the scores");
    a.hasIgnore = op.attrs.count("ignore_index") != 0;
    a.ignore = attrInt(op, "ignore_index", 0);
    std::string r = attrStr(op, "reduction", "mean");
    a.reduction = r == "none" ? 0 : r == "sum" ? 1 : 2;
    if (grad) { // (scores, labels, dY) -> dScores (docs/PLAN.md)
      if (r != "none" && r != "sum" && r != "mean")
        fail(op, "reduction '" + r + "' is not mean, sum or none");
      if (!has(op, 2) || typeOf(sc) != DType::F32 || typeOf(op.inputs[2]) != DType::F32 ||
          plan_.values[size_t(op.outputs[0])].dtype != DType::F32)
        fail(op, "expects float32 scores and dY and gives float32 dScores");
      if (numElements(shapeOf(op.inputs[2])) != (a.reduction == 0 ? a.N * a.D : 1))
        fail(op, "dY has shape " + shapeString(shapeOf(op.inputs[2])) + " for reduction " + r);
      a.dy = static_cast<const float *>(devicePtr(op.inputs[2]));
      a.grad = static_cast<float *>(outPtr(0));
      scratch(sizeof(double));
      int slot = flagSlot(op, "a label is outside [0, C)");
      out.push_back([this, a, slot](cudaStream_t s) mutable {
        a.work = reinterpret_cast<float *>(scratch_);
        a.badLabel = flags_ + slot;
        return dev::softmaxCrossEntropyGrad(a, s);
      });
      return;
    }
    a.out = outPtr(0);
    a.outType = int(plan_.values[size_t(op.outputs[0])].dtype);
    bool wantLogp = op.outputs.size() > 1 && op.outputs[1] >= 0;
    if (wantLogp && plan_.values[size_t(op.outputs[1])].dtype != DType::F32)
      fail(op, "log_prob must be float32");
    float *logp = wantLogp ? static_cast<float *>(outPtr(1)) : nullptr; // else not written at all
    scratch(size_t(2 * a.N * a.D) * 4);
    int slot = flagSlot(op, "a label is outside [0, C)");
    out.push_back([this, a, logp, slot](cudaStream_t s) mutable {
      a.logp = logp;
      a.work = reinterpret_cast<float *>(scratch_);
      a.badLabel = flags_ + slot;
      return dev::softmaxCrossEntropy(a, s);
    });
    return;
  }
  if (t == "ReduceSum" || t == "ReduceMean" || t == "ReduceMax" || t == "ReduceMin" || t == "ReduceSumSquare") {
    compileReduce(op, t == "ReduceSum" ? 0 : t == "ReduceMean" ? 1 : t == "ReduceMax" ? 2 : t == "ReduceMin" ? 3 : 4, out);
    return;
  }
  if (t == "MatMul") {
    compileMatMul(op, out);
    return;
  }
  if (t == "Gemm") {
    compileGemm(op, out);
    return;
  }
  // --- fp8 dialect ---
  if (t == "fp8.gemm") {
    compileFp8Gemm(op, out);
    return;
  }
  if (t == "fp8.cast" || t == "fp8.dequantize") {
    int x = op.inputs[0], sc = op.inputs[1];
    Shape xs = shapeOf(x);
    int64_t rows = numElements(shapeOf(sc)), inner = numElements(xs) / std::max<int64_t>(rows, 1);
    if (rows != 1 && (xs.empty() || numElements(xs) != rows * xs.back()))
      fail(op, "scale is neither per tensor nor per row");
    const void *xp = devicePtr(x);
    const float *sp = static_cast<const float *>(devicePtr(sc));
    int xt = int(typeOf(x)), ot = int(plan_.values[size_t(op.outputs[0])].dtype);
    void *o = outPtr(0);
    if (t == "fp8.cast") {
      if (!isFp8(DType(ot)))
        fail(op, "result must be an FP8 type");
      bool sat = attrInt(op, "saturate", 1) != 0;
      out.push_back([=](cudaStream_t s) {
        return dev::fp8Cast(xp, xt, sp, rows, inner, ot, sat, static_cast<uint8_t *>(o), s);
      });
    } else {
      if (!isFp8(DType(xt)))
        fail(op, "input must be FP8");
      out.push_back([=](cudaStream_t s) {
        return dev::fp8Dequantize(static_cast<const uint8_t *>(xp), xt, sp, rows, inner, o, ot, s);
      });
    }
    return;
  }
  if (t == "fp8.cast_amax") {
    int x = op.inputs[0], sc = op.inputs[1];
    int64_t n = numElements(shapeOf(x));
    if (numElements(shapeOf(sc)) != 1)
      fail(op, "scale_inv must be per tensor");
    DType ot = plan_.values[size_t(op.outputs[0])].dtype, xt = typeOf(x);
    if (!isFp8(ot))
      fail(op, "result must be an FP8 type");
    if (op.outputs.size() < 2 || op.outputs[1] < 0 || plan_.values[size_t(op.outputs[1])].dtype != DType::F32)
      fail(op, "the amax result must be float32");
    const void *xp = devicePtr(x);
    const float *sp = static_cast<const float *>(devicePtr(sc));
    auto *q = static_cast<uint8_t *>(outPtr(0));
    auto *amax = static_cast<float *>(outPtr(1));
    bool sat = attrInt(op, "saturate", 1) != 0;
    auto aligned = [](const void *p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
    bool wide = sat && (xt == DType::F32 || xt == DType::BF16);
    cuda::InType it = xt == DType::F32 ? cuda::InType::F32 : cuda::InType::BF16;
    cuda::Format f = ot == DType::F8E4M3FN ? cuda::Format::E4M3 : cuda::Format::E5M2;
    // The one-pass kernels (CastAmax.cu) meet in a slot of their own and the last block writes the
    // amax, so it needs no memset.
    auto onePass = [&](std::function<std::string(cudaStream_t)> launch) { out.push_back(launch); };
    unsigned *slot = amaxSlot();
    uint8_t *qt = nullptr; // the codes also transposed ([rows, cols] -> [cols, rows]) for a GEMM that reads them so
    Shape xs = shapeOf(x);
    int64_t cols = xs.empty() ? 1 : xs.back(), rows = n / std::max<int64_t>(cols, 1);
    if (op.outputs.size() > 2 && op.outputs[2] >= 0) {
      if (shapeOf(op.outputs[2]) != Shape{cols, rows} || typeOf(op.outputs[2]) != ot)
        fail(op, "the transposed result must be " + shapeString({cols, rows}) + " of the output's type");
      qt = static_cast<uint8_t *>(outPtr(2));
    }
    if (qt && wide && rows % 16 == 0 && cols % 16 == 0 && aligned(xp, 16) && aligned(q, 16) && aligned(qt, 16)) {
      castTransposes_[size_t(&op - plan_.ops.data())] = {x, xp, it, rows, cols, sp, f, q, qt, amax, slot};
      return onePass([=](cudaStream_t s) {
        return cuda::castAmaxTranspose(xp, it, rows, cols, sp, f, q, qt, amax, s, nullptr, slot);
      });
    }
    if (!qt && wide && aligned(xp, 16) && aligned(q, 8))
      return onePass([=](cudaStream_t s) { return cuda::castAmax(xp, it, size_t(n), sp, f, q, amax, s, slot); });
    out.push_back([=](cudaStream_t s) { return dev::amaxRows(xp, int(xt), 1, n, amax, s); });
    out.push_back([=](cudaStream_t s) { return dev::fp8Cast(xp, int(xt), sp, 1, n, int(ot), sat, q, s); });
    if (qt) {
      dev::CopyArgs c = byteTranspose(q, qt, rows, cols);
      out.push_back([c](cudaStream_t s) { return dev::stridedCopy(c, s); });
    }
    return;
  }
  if (t == "fp8.amax") {
    int x = op.inputs[0];
    Shape xs = shapeOf(x);
    bool rowwise = attrInt(op, "rowwise", 0);
    if (rowwise && xs.empty())
      fail(op, "rowwise amax of a scalar");
    int64_t inner = rowwise ? xs.back() : numElements(xs), rows = rowwise ? numElements(xs) / std::max<int64_t>(inner, 1) : 1;
    if (plan_.values[size_t(op.outputs[0])].dtype != DType::F32)
      fail(op, "amax must be float32");
    const void *xp = devicePtr(x);
    int xt = int(typeOf(x));
    auto *o = static_cast<float *>(outPtr(0));
    out.push_back([=](cudaStream_t s) { return dev::amaxRows(xp, xt, rows, inner, o, s); });
    return;
  }
  if (t == "fp8.dynamic_scale") {
    std::string f = attrStr(op, "format", "");
    if (f != "float8e4m3fn" && f != "float8e5m2")
      fail(op, "format must be float8e4m3fn or float8e5m2, got '" + f + "'");
    float fmax = f == "float8e4m3fn" ? 448.0f : 57344.0f;
    auto *a = static_cast<const float *>(devicePtr(op.inputs[0]));
    int64_t n = numElements(shapeOf(op.inputs[0]));
    float eps = float(attrFloat(op, "eps", 1e-12));
    bool pow2 = attrInt(op, "power_of_two", 0);
    auto *sc = static_cast<float *>(outPtr(0)), *si = static_cast<float *>(outPtr(1));
    out.push_back([=](cudaStream_t s) { return dev::dynamicScale(a, n, fmax, eps, pow2, sc, si, s); });
    return;
  }
  if (t == "fp8.delayed_scale") {
    std::string f = attrStr(op, "format", "");
    if (f != "float8e4m3fn" && f != "float8e5m2")
      fail(op, "format must be float8e4m3fn or float8e5m2, got '" + f + "'");
    if (attrInt(op, "interval", 1) > 1)
      fail(op, "amax update intervals above 1 are not supported by the CUDA backend; use --device cpu");
    for (int id : op.outputs)
      if (id < 0)
        fail(op, "every result (history, scale, scale_inv) must be used");
    int64_t L = numElements(shapeOf(op.inputs[0]));
    if (L < 1 || typeOf(op.inputs[0]) != DType::F32)
      fail(op, "history must be a non-empty 1-D float32 tensor");
    auto *fmt = static_cast<uint8_t *>(alloc(1));
    uint8_t fv = f == "float8e5m2";
    cudaCheck(cudaMemcpy(fmt, &fv, 1, cudaMemcpyHostToDevice), "upload");
    auto *h = static_cast<const float *>(devicePtr(op.inputs[0])), *prev = static_cast<const float *>(devicePtr(op.inputs[1])),
         *am = static_cast<const float *>(devicePtr(op.inputs[2]));
    auto *nh = static_cast<float *>(outPtr(0)), *sc = static_cast<float *>(outPtr(1)), *si = static_cast<float *>(outPtr(2));
    int margin = int(attrInt(op, "margin", 0));
    bool mostRecent = attrStr(op, "algo", "max") == "most_recent", pow2 = attrInt(op, "power_of_two", 0);
    out.push_back([=](cudaStream_t s) {
      return delayedScaleAll(1, L, h, am, prev, fmt, margin, mostRecent, pow2, nh, sc, si, s);
    });
    delayedScales_[k] = {{h, am, prev, nh, sc, si, fv != 0}, L, margin, mostRecent, pow2};
    return;
  }
  if (t == "Shape" || t == "ConstantOfShape" || t == "Range" || t == "Trilu")
    fail(op, "needs constant inputs on the CUDA backend (it has run-time ones); use --device cpu");
  fail(op, "op type '" + t + "' is not supported by the CUDA backend; use --device cpu and file an issue");
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

/// Op instances grouped by type and output shape, slowest 30 groups: time per step, count, and the
/// bandwidth their input and output bytes imply.
void CudaExecutor::printSlowestOps() const {
  std::map<std::pair<std::string, std::string>, std::tuple<double, double, int>> groups; // ms, bytes, count
  for (size_t k = 0; k < opMs_.size(); ++k) {
    const PlanOp &op = plan_.ops[program_[k].op];
    double bytes = 0;
    for (const std::vector<int> *ids : {&op.inputs, &op.outputs})
      for (int id : *ids)
        if (id >= 0)
          bytes += double(numElements(shapeOf(id))) * double(dtypeSize(typeOf(id)));
    Shape os = op.outputs.empty() || op.outputs[0] < 0 ? Shape{} : shapeOf(op.outputs[0]);
    auto &[ms, b, count] = groups[{op.type, shapeString(os)}];
    ms += opMs_[k] / profiledRuns_;
    b += bytes;
    ++count;
  }
  std::vector<std::pair<double, std::pair<std::string, std::string>>> order;
  for (auto &[key, v] : groups)
    order.push_back({std::get<0>(v), key});
  std::sort(order.rbegin(), order.rend());
  std::cerr << "slowest (op type, output shape) groups: ms per step, instances, GB/s over inputs + outputs\n";
  for (size_t i = 0; i < order.size() && i < 30; ++i) {
    auto &[ms, bytes, count] = groups[order[i].second];
    std::cerr << "  " << std::fixed << std::setprecision(3) << std::setw(8) << ms << " ms  x" << std::left
              << std::setw(5) << count << std::right << std::setw(6) << std::setprecision(0)
              << bytes / (ms * 1e6) << " GB/s  " << order[i].second.first << " -> " << order[i].second.second
              << "\n";
  }
}

void CudaExecutor::body(bool updateState) {
  if (!updateState)
    saveInPlaceStates();
  if (!flagWhat_.empty())
    cudaCheck(cudaMemsetAsync(flags_, 0, sizeof(int) * flagWhat_.size(), stream_), "flags");
  std::vector<cudaEvent_t> events;
  if (profile_) {
    events.resize(program_.size() + 1);
    for (cudaEvent_t &e : events)
      cudaEventCreate(&e);
    cudaEventRecord(events[0], stream_);
  }
  for (size_t k = 0; k < program_.size(); ++k) {
    const OpProgram &p = program_[k];
    for (const Step &s : p.steps)
      if (std::string e = s(stream_); !e.empty()) {
        const PlanOp &op = plan_.ops[p.op];
        throw Error("node '" + op.name + "' (" + op.type + ") on the GPU: " + e);
      }
    if (profile_)
      cudaEventRecord(events[k + 1], stream_);
  }
  if (profile_ && ++profileCalls_ == 1) { // the first run pays cuBLAS's and the driver's one-time set-up
    cudaEventSynchronize(events.back());
    for (cudaEvent_t &e : events)
      cudaEventDestroy(e);
  } else if (profile_) {
    cudaEventSynchronize(events.back());
    for (size_t k = 0; k < program_.size(); ++k) {
      float ms = 0;
      cudaEventElapsedTime(&ms, events[k], events[k + 1]);
      auto &acc = profileMs_[plan_.ops[program_[k].op].type];
      acc.first += ms;
      acc.second += 1;
      opMs_.resize(program_.size());
      opMs_[k] += ms;
    }
    for (cudaEvent_t &e : events)
      cudaEventDestroy(e);
    ++profiledRuns_;
  }
  if (updateState)
    updateStates();
  else
    restoreInPlaceStates();
}

/// The new values of the states not updated in place move over the old: those up to 64 KiB (the
/// FP8 scaling state: a history, scale and scale_inv per tensor) in one smallCopies launch, larger
/// ones (parameters and moments of plans without in-place updates) as copies of their own.
void CudaExecutor::updateStates() {
  constexpr size_t kSmall = 64 << 10;
  if (!stateCopiesBuilt_) {
    std::vector<dev::SmallCopy> small;
    for (auto &[st, v] : plan_.stateUpdates)
      if (ptr_[size_t(v)] != ptr_[size_t(st)] && stateBytes(st) <= kSmall)
        small.push_back({devicePtr(v), ptr_[size_t(st)], stateBytes(st)});
    if (!small.empty()) {
      stateCopies_ = static_cast<dev::SmallCopy *>(alloc(small.size() * sizeof(dev::SmallCopy)));
      cudaCheck(cudaMemcpy(stateCopies_, small.data(), small.size() * sizeof(dev::SmallCopy), cudaMemcpyHostToDevice),
                "upload");
    }
    nStateCopies_ = int(small.size());
    stateCopiesBuilt_ = true;
  }
  if (std::string e = dev::smallCopies(stateCopies_, nStateCopies_, stream_); !e.empty())
    throw Error("state update on the GPU: " + e);
  for (auto &[st, v] : plan_.stateUpdates)
    if (ptr_[size_t(v)] != ptr_[size_t(st)] && stateBytes(st) > kSmall)
      cudaCheck(cudaMemcpyAsync(ptr_[size_t(st)], devicePtr(v), stateBytes(st), cudaMemcpyDeviceToDevice, stream_),
                "state update");
}

template <class Info, class Same, class Build>
void CudaExecutor::fuseRuns(const std::map<size_t, Info> &infos, Same same, Build build) {
  std::vector<OpProgram> fused;
  for (size_t k = 0; k < program_.size();) {
    auto first = infos.find(program_[k].op);
    size_t end = k + 1;
    std::set<int> made; // the run's outputs: a member that reads one must run after it, not with it
    auto addOutputs = [&](size_t j) {
      for (int id : plan_.ops[program_[j].op].outputs)
        made.insert(id);
    };
    addOutputs(k);
    if (first != infos.end())
      for (; end < program_.size(); ++end) {
        auto next = infos.find(program_[end].op);
        const PlanOp &op = plan_.ops[program_[end].op];
        if (next == infos.end() || !same(first->second, next->second) ||
            std::any_of(op.inputs.begin(), op.inputs.end(), [&](int id) { return made.count(id) != 0; }))
          break;
        addOutputs(end);
      }
    if (end - k < 2) {
      fused.push_back(std::move(program_[k++]));
      continue;
    }
    std::vector<const Info *> run;
    for (size_t j = k; j < end; ++j)
      run.push_back(&infos.at(program_[j].op));
    OpProgram group{program_[k].op, {build(run)}, {}};
    for (size_t j = k; j < end; ++j)
      group.parts.push_back(std::move(program_[j]));
    fused.push_back(std::move(group));
    k = end;
  }
  program_ = std::move(fused);
}

/// Consecutive Pointwise programs over one output size (AdamW's: the first moment, the second,
/// then the parameter from both) become one generated kernel that runs them in order per element,
/// an earlier result passed on in registers instead of reloaded. A program joins the run only
/// where that keeps each thread's reads and writes to its own element: it reads an earlier
/// program's result only element for element (canChain), reads nothing else an earlier program
/// writes, and writes nothing an earlier program reads except, element for element, the same
/// buffer (a state updated in place). A result that only later programs of the run read is not
/// written at all. check() runs the ops as they were.
void CudaExecutor::fusePointwiseChains() {
  // Up to 4 programs over large tensors (AdamW's three); over small ones, where a launch costs more
  // than the bytes, up to 12 (several parameters' AdamW: a layer's norm weights and biases).
  constexpr size_t kMaxChain = 4, kMaxSmallChain = 12;
  constexpr int64_t kSmall = 1 << 16;
  auto range = [&](int id) {
    auto *p = static_cast<const char *>(devicePtr(id));
    return std::make_pair(p, p + size_t(numElements(shapeOf(id))) * dtypeSize(typeOf(id)));
  };
  auto overlap = [](std::pair<const char *, const char *> a, std::pair<const char *, const char *> b) {
    return a.first < b.second && b.first < a.second;
  };
  auto elementwise = [&](const dev::PwArgs &a, int j) { // input j read at the output's index
    int64_t want = 1;
    for (int d = a.shape.rank - 1; d >= 0; --d) {
      if (a.inStr[j].s[d] != want && a.shape.d[d] != 1)
        return false;
      want *= a.shape.d[d];
    }
    return true;
  };
  std::vector<OpProgram> fused;
  for (size_t k = 0; k < program_.size();) {
    std::vector<size_t> run; // program indices
    std::vector<dev::PwArgs> args;
    for (size_t e = k; e < program_.size() &&
                       run.size() < (!args.empty() && args[0].n <= kSmall ? kMaxSmallChain : kMaxChain);
         ++e) {
      auto it = pointwise_.find(program_[e].op);
      if (it == pointwise_.end())
        break;
      const dev::PwArgs &a = it->second;
      const PlanOp &op = plan_.ops[program_[e].op];
      bool ok = run.empty() || (a.n == args[0].n && a.shape.rank == args[0].shape.rank &&
                                std::equal(a.shape.d, a.shape.d + a.shape.rank, args[0].shape.d));
      for (size_t q = 0; ok && q < run.size(); ++q) {
        const PlanOp &prev = plan_.ops[program_[run[q]].op];
        int prevOut = prev.outputs[0];
        for (size_t j = 0; ok && j < op.inputs.size(); ++j) // reads of what an earlier program wrote
          ok = op.inputs[j] == prevOut || !overlap(range(op.inputs[j]), range(prevOut));
        for (size_t j = 0; ok && j < prev.inputs.size(); ++j) { // writes of what an earlier program read
          auto r = range(prev.inputs[j]);
          if (overlap(range(op.outputs[0]), r))
            ok = r == range(op.outputs[0]) && elementwise(args[q], int(j));
        }
        ok = ok && !overlap(range(op.outputs[0]), range(prevOut));
      }
      if (ok) {
        std::vector<dev::PwArgs> tried = args;
        tried.push_back(a);
        ok = dev::PwJit::canChain(tried);
      }
      if (!ok)
        break;
      run.push_back(e);
      args.push_back(a);
    }
    if (run.size() < 2) {
      fused.push_back(std::move(program_[k++]));
      continue;
    }
    // A result only later programs of the run read (the GELU gradient's tanh) stays in registers.
    std::vector<bool> store(run.size(), true);
    std::set<size_t> later;
    for (size_t q = run.size() - 1; q-- > 0;) {
      later.insert(program_[run[q + 1]].op);
      store[q] = !onlyReadBy(plan_.ops[program_[run[q]].op].outputs[0], later);
      fusions_["chain results kept in registers"] += store[q] ? 0 : 1;
    }
    int h = jit_->addChain(args, store);
    chains_[program_[k].op] = {args, store};
    ++fusions_["Pointwise chains"];
    OpProgram group{program_[k].op, {}, {}};
    std::vector<Step> alone; // each program's own launch, should the generated kernels not build
    for (size_t e : run)
      for (const Step &st : program_[e].steps)
        alone.push_back(st);
    group.steps.push_back(generatedStep(args, alone, [this, h](const std::vector<const dev::PwArgs *> &ptrs,
                                                              cudaStream_t s) { return jit_->launchChain(h, ptrs, s); }));
    for (size_t e : run)
      group.parts.push_back(std::move(program_[e]));
    fused.push_back(std::move(group));
    k = run.back() + 1;
  }
  program_ = std::move(fused);
}

/// A Pointwise program, or a chain of them (fusePointwiseChains()), whose result only FP8
/// cast-transposes right after it read (one cast, with the column sum fuseCastColumnSums() put in
/// its pass, or up to three casts of that result that fuseCastSources() put in one pass): one
/// generated kernel computes the result and casts it (PwJit::addCastChain), so the result is
/// never written nor read back (the GELU gradient before the E5M2 cast of c_fc's dY; an RMSNorm's
/// x * 1/rms * gamma before the Q, K and V projections' casts). The arithmetic is the program's and
/// the casts', in their order: the same bits. check() runs the ops as they were.
void CudaExecutor::fuseCastPointwise() {
  auto overlaps = [](const void *a, size_t an, const void *b, size_t bn) {
    auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    return pa < pb + bn && pb < pa + an;
  };
  Step nothing = [](cudaStream_t) { return std::string(); };
  for (size_t k = 0; k < program_.size(); ++k) {
    size_t op = program_[k].op;
    auto ct = castTransposes_.find(op);
    if (ct == castTransposes_.end() || ct->second.it != cuda::InType::F32)
      continue;
    const CastTransposeOp c = ct->second;
    auto sum = castSums_.find(op);
    auto group = castGroups_.find(op);
    std::vector<cuda::CastTarget> targets{{c.scaleInv, c.f, c.q, c.qt, c.amax}};
    std::set<size_t> readers{op};
    if (group != castGroups_.end()) {
      targets = group->second.targets;
      readers = group->second.ops;
    } else if (!program_[k].parts.empty() && sum == castSums_.end()) {
      continue; // a pass of fuseCastSources() that computes its source already
    }
    if (sum != castSums_.end())
      readers.insert(sum->second.sumOp);
    size_t before = k;
    while (before > 0 && quietView(before - 1))
      --before;
    if (before == 0)
      continue;
    size_t p = before - 1, pop = program_[p].op;
    ChainOp chain;
    if (auto ch = chains_.find(pop); ch != chains_.end())
      chain = ch->second;
    else if (auto pw = pointwise_.find(pop); pw != pointwise_.end() && program_[p].parts.empty())
      chain = {{pw->second}, {true}};
    else
      continue;
    const dev::PwArgs &last = chain.args.back();
    size_t lastOp = pop;
    for (size_t q = 1; q < chain.args.size(); ++q)
      lastOp = program_[p].parts[q].op;
    int y = plan_.ops[lastOp].outputs[0];
    if (last.out != c.xp || devicePtr(y) != c.xp || !onlyReadBy(y, readers))
      continue;
    // The pass reads the programs' inputs while it writes the codes: no target may share their
    // bytes (the arena may give a target the bytes of an input that dies here), nor a result
    // still written.
    size_t elems = size_t(c.rows * c.cols);
    std::vector<std::pair<const void *, size_t>> written;
    for (const cuda::CastTarget &t : targets)
      written.insert(written.end(), {{t.q, elems}, {t.qt, elems}, {t.amax, sizeof(float)}});
    if (sum != castSums_.end())
      written.push_back({sum->second.partials, size_t(cuda::castTransposeTileRows(c.rows) * c.cols) * sizeof(float)});
    bool clash = false;
    for (size_t q = 0; q < chain.args.size() && !clash; ++q) {
      const dev::PwArgs &a = chain.args[q];
      for (auto &[w, wn] : written) {
        for (int j = 0; j < a.nIn; ++j) { // the bytes input j spans: its last element's offset, plus one
          int64_t reach = 0;
          for (int d = 0; d < a.shape.rank; ++d)
            reach += (a.shape.d[d] - 1) * std::abs(a.inStr[j].s[d]);
          clash = clash || overlaps(w, wn, a.in[j], size_t(reach + 1) * (a.inBool[j] ? 1 : sizeof(float)));
        }
        if (q + 1 < chain.args.size() && chain.store[q])
          clash = clash || overlaps(w, wn, a.out, size_t(a.n) * sizeof(float));
      }
    }
    cuda::tile::Targets tg;
    if (clash || !dev::tileTargets(targets.data(), int(targets.size()), tg).empty())
      continue;
    int h = jit_->addCastChain(chain.args, chain.store, c.rows, c.cols, sum != castSums_.end(), tg.n);
    if (h < 0)
      continue;
    float *partials = sum != castSums_.end() ? sum->second.partials : nullptr;
    std::vector<Step> apart = program_[p].steps; // should the generated kernels not build
    apart.insert(apart.end(), program_[k].steps.begin(), program_[k].steps.end());
    Step fused = generatedStep(chain.args, apart,
                               [this, h, tg, partials, slot = c.slot](const std::vector<const dev::PwArgs *> &ptrs,
                                                                     cudaStream_t s) {
                                 return jit_->launchCastChain(h, ptrs, tg, partials, slot, s);
                               });
    replaceProgram(p, nothing);
    replaceProgram(k, fused);
    ++fusions_["cast computes Pointwise"];
    if (tg.n > 1)
      ++fusions_["grouped casts compute Pointwise"];
  }
}

Step CudaExecutor::generatedStep(
    std::vector<dev::PwArgs> args, std::vector<Step> apart,
    std::function<std::string(const std::vector<const dev::PwArgs *> &, cudaStream_t)> launch) {
  return [this, args = std::move(args), apart = std::move(apart), launch = std::move(launch)](cudaStream_t s) {
    if (!jit_) {
      for (const Step &st : apart)
        if (std::string e = st(s); !e.empty())
          return e;
      return std::string();
    }
    std::vector<const dev::PwArgs *> ptrs;
    for (const dev::PwArgs &a : args)
      ptrs.push_back(&a);
    return launch(ptrs, s);
  };
}

void CudaExecutor::replaceProgram(size_t at, Step step) {
  OpProgram fused{program_[at].op, {std::move(step)}, {}};
  fused.parts.push_back(std::move(program_[at]));
  program_[at] = std::move(fused);
}

/// An fp8.gemm's bias, added in the GEMM's epilogue, costs a pass over its result (read and
/// write). Where the result (or a Reshape-like view of it) has one reader and that reader is a
/// float32 Add of another tensor of its shape (the residual stream) or a Transpose (the head
/// split), the GEMM runs without the bias and the reader adds it: the Add as x + (y + bias), the
/// copy as it moves each value. Where a GELU reads the result first (the MLP), the GELU adds the
/// bias in place and takes GELU of the sum. Where only BF16 attention reads the result (Q, K and V
/// with the heads in place, through views), both the forward and the gradient add the bias as they
/// convert the operands to BF16. The arithmetic is the same (y + bias rounded, then the rest), so
/// the results are the same bits. check() runs the ops as they were.
void CudaExecutor::foldGemmBias() {
  std::vector<int> readers(plan_.values.size(), 0), reader(plan_.values.size(), -1);
  std::vector<std::vector<size_t>> readersOf(plan_.values.size());
  for (size_t k = 0; k < plan_.ops.size(); ++k)
    for (int id : plan_.ops[k].inputs)
      if (id >= 0) {
        ++readers[size_t(id)];
        reader[size_t(id)] = int(k);
        readersOf[size_t(id)].push_back(k);
      }
  for (int id : plan_.outputs)
    readers[size_t(id)] += 2;
  for (auto &[st, v] : plan_.stateUpdates)
    readers[size_t(v)] += 2;
  std::map<size_t, size_t> programOf;
  for (size_t k = 0; k < program_.size(); ++k)
    programOf[program_[k].op] = k;
  auto only = [&](int v) { return readers[size_t(v)] == 1 ? reader[size_t(v)] : -1; };
  std::vector<int> first(plan_.values.size(), -1); // the first op reading each value
  for (size_t k = plan_.ops.size(); k-- > 0;)
    for (int id : plan_.ops[k].inputs)
      if (id >= 0)
        first[size_t(id)] = int(k);
  // Which operands of BF16 attention programs read v (through views) and nothing else does:
  // (op, operand) pairs, or none.
  auto attentionUses = [&](int v, int64_t N) {
    std::vector<std::pair<size_t, int>> uses;
    for (std::vector<int> open{v}; !open.empty();) {
      int x = open.back();
      open.pop_back();
      if (size_t(readers[size_t(x)]) != readersOf[size_t(x)].size()) // a plan output or a state update
        return decltype(uses)();
      for (size_t r : readersOf[size_t(x)]) {
        const PlanOp &rop = plan_.ops[r];
        if (octet::rt::isView(rop.type) && rop.inputs[0] == x && rop.outputs.size() == 1 && rop.outputs[0] >= 0) {
          open.push_back(rop.outputs[0]);
          continue;
        }
        auto at = attentions_.find(r);
        if (at == attentions_.end() || !programOf.count(r) || at->second.rowLength != N)
          return decltype(uses)();
        for (size_t i = 0; i < rop.inputs.size(); ++i)
          if (rop.inputs[i] == x) {
            if (i >= 3)
              return decltype(uses)();
            uses.push_back({r, int(i)});
          }
      }
    }
    return uses;
  };
  std::map<size_t, AttnBias> attentionBias; // by attention op
  for (auto &[gop, g] : gemmBias_) {
    // Q, K and V projections (their head views) read only by BF16 attention: the operands' BF16
    // conversion adds the bias, forward and backward.
    if (auto uses = attentionUses(g.out, g.N); !uses.empty() && programOf.count(gop)) {
      for (auto [r, i] : uses)
        attentionBias[r][size_t(i)] = g.bias;
      replaceProgram(programOf[gop], g.withoutBias);
      continue;
    }
    // The MLP's GELU reads the result first (the backward reads it again later): it adds the bias
    // in place, as the epilogue would have, and computes GELU of the sum.
    if (int r = first[size_t(g.out)]; r >= 0 && gelus_.count(size_t(r)) && programOf.count(gop) &&
                                      programOf.count(size_t(r))) {
      const dev::EwArgs &e = gelus_.at(size_t(r));
      if (e.in[0] == g.D && e.n % 4 == 0 && g.N % 4 == 0) {
        auto *y = static_cast<float *>(const_cast<void *>(g.D));
        auto *out = static_cast<float *>(e.out);
        const float *bias = g.bias;
        int64_t N = g.N, n = e.n;
        bool tanhApprox = e.op == dev::Ew::GeluTanh;
        Step gelu = [=](cudaStream_t s) { return dev::biasGelu(y, bias, N, out, n, tanhApprox, s); };
        replaceProgram(programOf[gop], g.withoutBias);
        replaceProgram(programOf[size_t(r)], gelu);
        geluSources_[size_t(r)].bias = bias;
        geluSources_[size_t(r)].N = N;
        continue;
      }
    }
    int v = g.out, r = only(v);
    if (r >= 0 && octet::rt::isView(plan_.ops[size_t(r)].type)) { // a Reshape of the result: its reader
      v = plan_.ops[size_t(r)].outputs[0];
      r = only(v);
    }
    auto pg = programOf.find(gop), pr = r >= 0 ? programOf.find(size_t(r)) : programOf.end();
    if (r < 0 || pg == programOf.end() || pr == programOf.end())
      continue;
    const PlanOp &rop = plan_.ops[size_t(r)];
    Step add;
    if (auto a = adds_.find(size_t(r)); a != adds_.end()) {
      int w = rop.inputs[0] == v ? 0 : 1, x = 1 - w;
      Shape os = shapeOf(rop.outputs[0]);
      if (rop.inputs[size_t(x)] == v || shapeOf(v) != os || shapeOf(rop.inputs[size_t(x)]) != os || os.empty() ||
          os.back() != g.N)
        continue;
      dev::EwArgs e = a->second;
      e.op = dev::Ew::AddBias;
      e.nIn = 3;
      const void *in[2] = {e.in[x], e.in[w]};
      dev::Strides str[2] = {e.inStr[x], e.inStr[w]};
      e.in[0] = in[0], e.in[1] = in[1], e.in[2] = g.bias;
      e.inStr[0] = str[0], e.inStr[1] = str[1], e.inStr[2] = stridesOf(broadcastStrides({g.N}, os));
      e.inType[0] = e.inType[1] = e.inType[2] = int(DType::F32);
      add = [e](cudaStream_t s) { return dev::elementwise(e, s); };
    } else if (auto c = transposes_.find(size_t(r)); c != transposes_.end()) {
      dev::CopyArgs ca = c->second;
      if (ca.src != g.D || !dev::canCopyWithBias(ca, g.N))
        continue;
      const float *bias = g.bias;
      int64_t n = g.N;
      add = [ca, bias, n](cudaStream_t s) { return dev::stridedCopyWithBias(ca, bias, n, s); };
    } else {
      continue;
    }
    replaceProgram(pg->second, g.withoutBias);
    replaceProgram(pr->second, add);
  }
  for (auto &[r, bias] : attentionBias)
    replaceProgram(programOf[r], attentions_.at(r).withBias(bias));
}

/// A column sum of a tensor that an earlier fp8.cast_amax on the cast-transpose kernel reads (the
/// bias gradient of a Linear: dY is cast for the dgrad and wgrad GEMMs, then summed over its rows)
/// is taken in the cast's pass: its tiles write column partials to a buffer of their own (the
/// arena's buffers between the two ops belong to other values), and the ReduceSum sums those
/// partials (ceil(rows / 64) of them per column) instead of reading the tensor again. check()
/// runs both ops as they were.
void CudaExecutor::fuseCastColumnSums() {
  std::map<int, size_t> castOf; // value -> the program of the latest cast-transpose of it
  std::set<size_t> taken;
  for (size_t k = 0; k < program_.size(); ++k) {
    size_t op = program_[k].op;
    if (castTransposes_.count(op)) {
      castOf[castTransposes_.at(op).x] = k;
      continue;
    }
    auto r = columnSums_.find(op);
    if (r == columnSums_.end())
      continue;
    auto c = castOf.find(r->second.x);
    if (c == castOf.end() || taken.count(c->second))
      continue;
    const CastTransposeOp ct = castTransposes_.at(program_[c->second].op);
    const ColumnSumOp cs = r->second;
    if (ct.rows != cs.rows || ct.cols != cs.cols)
      continue;
    taken.insert(c->second);
    int tiles = int(cuda::castTransposeTileRows(ct.rows));
    auto *partials = static_cast<float *>(alloc(size_t(tiles) * size_t(ct.cols) * sizeof(float)));
    Step cast = [ct, partials](cudaStream_t s) {
      return cuda::castAmaxTranspose(ct.xp, ct.it, ct.rows, ct.cols, ct.scaleInv, ct.f, ct.q, ct.qt, ct.amax, s,
                                     partials, ct.slot);
    };
    Step sum = [cs, tiles, partials](cudaStream_t s) {
      return dev::columnTotals(partials, tiles, cs.cols, cs.cols, cs.out, s);
    };
    castSums_[program_[c->second].op] = {partials, op};
    replaceProgram(c->second, cast);
    replaceProgram(k, sum);
  }
}

bool CudaExecutor::onlyReadBy(int v, const std::set<size_t> &ops) {
  if (readersOf_.empty()) {
    readersOf_.resize(plan_.values.size());
    for (size_t k = 0; k < plan_.ops.size(); ++k)
      for (int id : plan_.ops[k].inputs)
        if (id >= 0)
          readersOf_[size_t(id)].push_back(k);
  }
  for (std::vector<int> open{v}; !open.empty();) {
    int x = open.back();
    open.pop_back();
    if (std::find(plan_.outputs.begin(), plan_.outputs.end(), x) != plan_.outputs.end() ||
        std::any_of(plan_.stateUpdates.begin(), plan_.stateUpdates.end(), [&](auto &u) { return u.second == x; }))
      return false;
    for (size_t r : readersOf_[size_t(x)]) {
      const PlanOp &rop = plan_.ops[r];
      if (octet::rt::isView(rop.type) && rop.inputs[0] == x && rop.outputs.size() == 1 && rop.outputs[0] >= 0 &&
          devicePtr(rop.outputs[0]) == devicePtr(x))
        open.push_back(rop.outputs[0]);
      else if (!ops.count(r))
        return false;
    }
  }
  return true;
}

bool CudaExecutor::quietView(size_t k) {
  const PlanOp &op = plan_.ops[program_[k].op];
  return octet::rt::isView(op.type) && program_[k].parts.empty() && !op.inputs.empty() && op.inputs[0] >= 0 &&
         !op.outputs.empty() && op.outputs[0] >= 0 && devicePtr(op.inputs[0]) == devicePtr(op.outputs[0]);
}

/// The FP8 casts of one tensor that run one after another (octet-group-casts puts them so; views
/// between them move nothing) become one castTransposeMany pass: the tensor is read once for all of
/// them. Where that tensor is the output of the LayerNormalization or GELU program just before
/// (views aside) and nothing else reads it, the pass computes it instead: the LayerNorm's program
/// writes only its rows' statistics and the casts apply them (the same arithmetic per element),
/// the GELU's program runs nothing and the casts take GELU of its input (adding, and writing back,
/// a GEMM bias that foldGemmBias() gave the GELU). The output itself is never written. check()
/// runs the ops as they were.
void CudaExecutor::fuseCastSources() {
  Step nothing = [](cudaStream_t) { return std::string(); };
  for (size_t k = 0; k < program_.size(); ++k) {
    auto first = castTransposes_.find(program_[k].op);
    if (first == castTransposes_.end() || !program_[k].parts.empty())
      continue;
    const CastTransposeOp &c0 = first->second;
    // The group: this cast and the ones of the same bytes right after it.
    std::vector<size_t> group{k};
    size_t end = k + 1;
    for (; end < program_.size() && group.size() < size_t(cuda::kMaxCastTargets); ++end) {
      if (quietView(end))
        continue;
      auto c = castTransposes_.find(program_[end].op);
      if (c == castTransposes_.end() || !program_[end].parts.empty() || c->second.xp != c0.xp ||
          c->second.it != c0.it || c->second.rows != c0.rows || c->second.cols != c0.cols)
        break;
      group.push_back(end);
    }
    std::set<size_t> castOps;
    for (size_t g : group)
      castOps.insert(program_[g].op);
    // The program that computes the tensor, when it comes right before (views aside).
    size_t before = k;
    while (before > 0 && quietView(before - 1))
      --before;
    cuda::CastSource src;
    src.x = c0.xp;
    src.type = c0.it;
    int producer = -1;
    std::optional<LayerNormOp> norm; // the LayerNorm whose output the pass computes
    if (before > 0) {
      size_t p = before - 1, pop = program_[p].op;
      if (auto ln = layerNorms_.find(pop); ln != layerNorms_.end() && program_[p].parts.empty()) {
        const LayerNormOp l = ln->second;
        if (devicePtr(l.y) == c0.xp && l.n == c0.cols && l.rows * l.n == c0.rows * c0.cols && onlyReadBy(l.y, castOps)) {
          src.kind = cuda::CastSource::LayerNorm;
          src.x = l.x;
          src.gamma = l.gamma;
          src.beta = l.beta;
          norm = l;
          producer = int(p);
        }
      } else if (auto ge = geluSources_.find(pop); ge != geluSources_.end()) {
        const GeluOp g = ge->second;
        bool folded = !program_[p].parts.empty(); // foldGemmBias() gave it the GEMM's bias
        if (folded == (g.bias != nullptr) && devicePtr(g.y) == c0.xp && g.n == c0.rows * c0.cols &&
            (!g.bias || g.N == c0.cols) && c0.it == cuda::InType::F32 && onlyReadBy(g.y, castOps)) {
          src.kind = cuda::CastSource::Gelu;
          src.x = g.x;
          src.bias = g.bias;
          src.writeSum = g.bias != nullptr;
          src.tanhApprox = g.tanhApprox;
          producer = int(p);
        }
      }
    }
    if (group.size() < 2 && producer < 0)
      continue;
    std::vector<cuda::CastTarget> targets;
    for (size_t g : group) {
      const CastTransposeOp &c = castTransposes_.at(program_[g].op);
      targets.push_back({c.scaleInv, c.f, c.q, c.qt, c.amax});
    }
    // The source's bytes are read (and with a folded bias written) in the pass that writes the
    // codes: where the arena gave a target bytes of a source that died at its producer, no fusion.
    const size_t elems = size_t(c0.rows * c0.cols), srcBytes = elems * (c0.it == cuda::InType::F32 ? 4 : 2);
    auto overlaps = [](const void *a, size_t an, const void *b, size_t bn) {
      auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
      return pa < pb + bn && pb < pa + an;
    };
    if (std::any_of(targets.begin(), targets.end(), [&](const cuda::CastTarget &t) {
          return overlaps(t.q, elems, src.x, srcBytes) || overlaps(t.qt, elems, src.x, srcBytes) ||
                 overlaps(t.amax, sizeof(float), src.x, srcBytes);
        }))
      continue;
    Step stats; // the LayerNorm's rows' statistics, which the pass applies
    if (norm) {
      const LayerNormOp l = *norm;
      auto *st = static_cast<double *>(alloc(size_t(l.rows) * 2 * sizeof(double)));
      src.stats = st;
      stats = [l, st](cudaStream_t s) {
        return dev::layerNorm(l.x, int(DType::F32), l.gamma, int(DType::F32), l.beta, int(DType::F32), nullptr,
                              int(DType::F32), l.mean, l.invStd, l.rows, l.n, l.eps, s, st);
      };
    }
    int64_t rows = c0.rows, cols = c0.cols;
    unsigned *slot = c0.slot; // the first cast's: its program no longer runs on its own
    Step cast = [src, targets, stats, rows, cols, slot](cudaStream_t s) {
      if (stats)
        if (std::string e = stats(s); !e.empty())
          return e;
      return cuda::castTransposeMany(src, rows, cols, targets.data(), int(targets.size()), s, nullptr, slot);
    };
    ++fusions_[src.kind == cuda::CastSource::LayerNorm ? "cast computes LayerNorm"
               : src.kind == cuda::CastSource::Gelu    ? "cast computes GELU"
                                                       : "casts share a read"];
    fusions_["casts in fused passes"] += int(group.size());
    if (producer >= 0)
      replaceProgram(size_t(producer), nothing);
    else
      castGroups_[program_[group.front()].op] = {castOps, targets};
    replaceProgram(group.front(), cast);
    for (size_t g = 1; g < group.size(); ++g)
      replaceProgram(group[g], nothing);
    k = group.back();
  }
}

/// Consecutive fp8.delayed_scale programs of one history length and setting (octet-sink-scale-updates
/// puts a step's scaling updates together at its end) become one delayedScaleList launch.
void CudaExecutor::fuseDelayedScales() {
  auto same = [](const DelayedScaleOp &a, const DelayedScaleOp &b) {
    return a.L == b.L && a.margin == b.margin && a.mostRecent == b.mostRecent && a.pow2 == b.pow2;
  };
  fuseRuns(delayedScales_, same, [&](const std::vector<const DelayedScaleOp *> &run) -> Step {
    std::vector<cuda::DelayedScaleTensor> list;
    for (const DelayedScaleOp *d : run)
      list.push_back(d->t);
    auto *dlist = static_cast<cuda::DelayedScaleTensor *>(alloc(list.size() * sizeof(list[0])));
    cudaCheck(cudaMemcpy(dlist, list.data(), list.size() * sizeof(list[0]), cudaMemcpyHostToDevice), "upload");
    const DelayedScaleOp d = *run[0];
    int T = int(list.size());
    return [=](cudaStream_t s) { return cuda::delayedScaleList(T, d.L, dlist, d.margin, d.mostRecent, d.pow2, s); };
  });
}

/// Consecutive whole-tensor ReduceSumSquare programs (the optimizer's per-parameter gradient
/// norms) become one sumSquaresList: every tensor's chunks in one launch, their sums in another.
void CudaExecutor::fuseSumSquares() {
  auto same = [](const SumSquaresOp &, const SumSquaresOp &) { return true; };
  fuseRuns(sumSquares_, same, [&](const std::vector<const SumSquaresOp *> &run) -> Step {
    std::vector<dev::SumSquaresBlock> blocks;
    std::vector<dev::SumSquaresOut> outs;
    for (const SumSquaresOp *r : run) {
      // Chunks as the single-tensor reduction takes them: about kFullReduceChunk elements, starts
      // 16-byte aligned.
      int64_t chunks = std::clamp<int64_t>(r->n / dev::kFullReduceChunk, 1, 4096);
      int64_t per = ((r->n + chunks - 1) / chunks + 3) / 4 * 4;
      outs.push_back({int(blocks.size()), 0, r->out, r->outType});
      for (int64_t lo = 0; lo < r->n; lo += per)
        blocks.push_back({r->x, lo, std::min(r->n, lo + per)});
      outs.back().count = int(blocks.size()) - outs.back().first;
    }
    auto *db = static_cast<dev::SumSquaresBlock *>(alloc(blocks.size() * sizeof(blocks[0])));
    auto *dout = static_cast<dev::SumSquaresOut *>(alloc(outs.size() * sizeof(outs[0])));
    auto *partials = static_cast<double *>(alloc(blocks.size() * sizeof(double)));
    cudaCheck(cudaMemcpy(db, blocks.data(), blocks.size() * sizeof(blocks[0]), cudaMemcpyHostToDevice), "upload");
    cudaCheck(cudaMemcpy(dout, outs.data(), outs.size() * sizeof(outs[0]), cudaMemcpyHostToDevice), "upload");
    int nb = int(blocks.size()), no = int(outs.size());
    return [=](cudaStream_t s) { return dev::sumSquaresList(db, nb, dout, no, partials, s); };
  });
}

size_t CudaExecutor::stateBytes(int st) const {
  return size_t(numElements(plan_.values[size_t(st)].shape)) * dtypeSize(plan_.values[size_t(st)].dtype);
}

// A run that keeps the state (evaluation) saves the states updated in place first and puts them
// back after; the new values are then gone (value() returns null for them).
void CudaExecutor::saveInPlaceStates() {
  if (plan_.inPlace.empty())
    return;
  if (!saved_) {
    size_t total = 0;
    for (auto &[st, v] : plan_.stateUpdates)
      if (ptr_[size_t(v)] == ptr_[size_t(st)])
        total += (stateBytes(st) + 255) / 256 * 256;
    saved_ = static_cast<char *>(alloc(total)); // the first run of a kind is eager, never captured
  }
  size_t off = 0;
  for (auto &[st, v] : plan_.stateUpdates)
    if (ptr_[size_t(v)] == ptr_[size_t(st)]) {
      cudaCheck(cudaMemcpyAsync(saved_ + off, ptr_[size_t(st)], stateBytes(st), cudaMemcpyDeviceToDevice, stream_),
                "saving state");
      off += (stateBytes(st) + 255) / 256 * 256;
    }
}

void CudaExecutor::restoreInPlaceStates() {
  size_t off = 0;
  for (auto &[st, v] : plan_.stateUpdates)
    if (saved_ && ptr_[size_t(v)] == ptr_[size_t(st)]) {
      cudaCheck(cudaMemcpyAsync(ptr_[size_t(st)], saved_ + off, stateBytes(st), cudaMemcpyDeviceToDevice, stream_),
                "restoring state");
      off += (stateBytes(st) + 255) / 256 * 256;
    }
}

void CudaExecutor::run(const std::map<std::string, TensorPtr> &inputs, bool updateState) {
  Executor::checkInputs(plan_, inputs);
  for (int id : plan_.inputs) {
    const Tensor &t = *inputs.at(plan_.values[size_t(id)].name);
    cudaCheck(cudaMemcpyAsync(ptr_[size_t(id)], t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice, stream_),
              "input upload");
  }
  int g = updateState ? 1 : 0;
  lastRunUpdated_ = updateState;
  if (graphs_[g]) {
    cudaCheck(cudaGraphLaunch(graphs_[g], stream_), "graph launch");
  } else if (opt_.graphs && eagerRuns_[g] >= 1) {
    cudaCheck(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "begin capture");
    cudaGraph_t graph = nullptr;
    try {
      body(updateState);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph)
        cudaGraphDestroy(graph);
      throw;
    }
    cudaCheck(cudaStreamEndCapture(stream_, &graph), "end capture");
    cudaError_t e = cudaGraphInstantiate(&graphs_[g], graph, 0);
    cudaGraphDestroy(graph);
    cudaCheck(e, "graph instantiate");
    cudaCheck(cudaGraphLaunch(graphs_[g], stream_), "graph launch");
  } else {
    body(updateState);
    ++eagerRuns_[g];
  }
  std::vector<int> flags(flagWhat_.size());
  if (!flags.empty())
    cudaCheck(cudaMemcpyAsync(flags.data(), flags_, sizeof(int) * flags.size(), cudaMemcpyDeviceToHost, stream_),
              "flags");
  cudaCheck(cudaStreamSynchronize(stream_), "step");
  for (size_t i = 0; i < flags.size(); ++i)
    if (flags[i])
      throw Error(flagWhat_[i]);
}

TensorPtr CudaExecutor::download(int id) const {
  const PlanValue &v = plan_.values[size_t(id)];
  auto t = std::make_shared<Tensor>(v.dtype, v.shape);
  cudaCheck(cudaMemcpyAsync(t->bytes.data(), ptr_[size_t(id)], t->bytes.size(), cudaMemcpyDeviceToHost, stream_),
            "download");
  cudaCheck(cudaStreamSynchronize(stream_), "download");
  return t;
}

void CudaExecutor::upload(int id, const Tensor &t) {
  // On the executor's stream: a plain cudaMemcpy from pageable memory may return before its DMA
  // lands, and the non-blocking stream would not wait for it.
  cudaCheck(cudaMemcpyAsync(ptr_[size_t(id)], t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice, stream_),
            "upload");
  cudaCheck(cudaStreamSynchronize(stream_), "upload");
}

TensorPtr CudaExecutor::value(int id) const {
  if (id < 0 || size_t(id) >= plan_.values.size())
    return nullptr;
  if (static_[size_t(id)])
    return host_[size_t(id)];
  if (plan_.inPlace.count(id) && !lastRunUpdated_)
    return nullptr; // written over its state, which a run without state update put back
  bool held = plan_.constants.count(id) || liveAtEnd_.count(id) ||
              std::find(plan_.inputs.begin(), plan_.inputs.end(), id) != plan_.inputs.end();
  if (!held || !ptr_[size_t(id)] || !plan_.values[size_t(id)].hasShape)
    return nullptr; // an activation whose arena bytes later ops reuse
  return download(id);
}

std::map<std::string, TensorPtr> CudaExecutor::state() const {
  std::map<std::string, TensorPtr> r;
  for (auto &[id, kind] : plan_.constantKinds)
    if (kind == ConstantKind::State)
      r[plan_.values[size_t(id)].name] = download(id);
  return r;
}

void CudaExecutor::setState(const std::string &name, TensorPtr t) {
  upload(Executor::checkState(plan_, name, *t), *t);
}

/// max |a - b| / max |b| for floats; mismatching elements for exact types.
struct Diff {
  double err = 0;
  bool exact = false, ok = true;
};

Diff compareTensors(const Tensor &gpu, const Tensor &ref, double tol, bool normwise) {
  Diff d;
  d.exact = !isFloatType(ref.dtype);
  if (gpu.dtype != ref.dtype || gpu.shape != ref.shape) {
    d.ok = false;
    d.err = INFINITY;
    return d;
  }
  if (d.exact) {
    for (size_t i = 0; i < ref.bytes.size(); ++i)
      if (gpu.bytes[i] != ref.bytes[i])
        d.err += 1;
    d.ok = d.err == 0;
    return d;
  }
  double maxRef = 0, maxErr = 0, sumRef = 0, sumErr = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double a = gpu.getDouble(i), b = ref.getDouble(i);
    if (std::isnan(a) != std::isnan(b) || (std::isinf(b) && a != b)) {
      d.ok = false;
      d.err = INFINITY;
      return d;
    }
    if (std::isnan(b) || std::isinf(b))
      continue;
    maxRef = std::max(maxRef, std::fabs(b));
    maxErr = std::max(maxErr, std::fabs(a - b));
    sumRef += b * b;
    sumErr += (a - b) * (a - b);
  }
  if (normwise) // GEMMs: ||err||_2 / ||ref||_2 (FP8 tensor cores accumulate in limited precision)
    d.err = sumRef > 0 ? std::sqrt(sumErr / sumRef) : std::sqrt(sumErr);
  else
    d.err = maxRef > 0 ? maxErr / maxRef : maxErr;
  d.ok = d.err <= tol;
  return d;
}

int CudaExecutor::check(const Executor &ref, std::ostream &os) {
  struct Row {
    int count = 0, failed = 0;
    double worst = 0;
    bool exact = false, gemm = false;
  };
  std::map<std::string, Row> rows;
  std::vector<std::string> failures;
  std::vector<const OpProgram *> single; // op by op: the parts of fused programs (of programs fused again)
  std::function<void(const OpProgram &)> leaves = [&](const OpProgram &p) {
    if (p.parts.empty())
      single.push_back(&p);
    for (const OpProgram &q : p.parts)
      leaves(q);
  };
  for (const OpProgram &p : program_)
    leaves(p);
  for (const OpProgram *pp : single) {
    const OpProgram &p = *pp;
    const PlanOp &op = plan_.ops[p.op];
    for (int id : op.inputs)
      if (id >= 0 && !static_[size_t(id)]) {
        TensorPtr t = ref.value(id);
        if (!t)
          throw Error("check: the CPU reference has no value '" + plan_.values[size_t(id)].name + "'");
        upload(id, *t);
      }
    if (!flagWhat_.empty())
      cudaCheck(cudaMemset(flags_, 0, sizeof(int) * flagWhat_.size()), "flags");
    for (const Step &s : p.steps)
      if (std::string e = s(stream_); !e.empty())
        throw Error("node '" + op.name + "' (" + op.type + ") on the GPU: " + e);
    cudaCheck(cudaStreamSynchronize(stream_), "check step");
    bool attention = op.type == "octet::Attention" || op.type == "octet::AttentionGrad";
    bool gemm = op.type == "MatMul" || op.type == "Gemm" || op.type == "fp8.gemm" || attention; // tensor cores
    // BF16 operands round to 8 significant bits (unit roundoff 2^-9): products of such inputs are
    // good to a few 1e-3 normwise, against the TF32 kernels' and FP32 GEMMs' 1e-4.
    double tol = attention && attention_ == dev::AttnPrecision::BF16 ? 1e-2 : gemm ? 1e-3 : 1e-5;
    Row &r = rows[op.type];
    ++r.count;
    r.gemm = gemm;
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      int id = op.outputs[i];
      if (id < 0 || static_[size_t(id)])
        continue;
      TensorPtr want = ref.value(id);
      if (!want)
        continue;
      Diff d = compareTensors(*download(id), *want, tol, gemm);
      r.exact = r.exact || d.exact;
      r.worst = std::max(r.worst, d.err);
      if (!d.ok) {
        ++r.failed;
        std::ostringstream m;
        m << "  MISMATCH node '" << op.name << "' (" << op.type << ") output '" << plan_.values[size_t(id)].name
          << "': " << (d.exact ? "differing bytes " : "relative error ") << d.err;
        failures.push_back(m.str());
      }
    }
  }
  int failed = 0;
  os << "op type                    ops  compared as                 worst\n";
  for (auto &[type, r] : rows) {
    os << std::left << std::setw(26) << type << std::right << std::setw(4) << r.count << "  "
       << std::left << std::setw(26)
       << (r.exact ? "bit-exact (bytes differing)" : r.gemm ? "||err||/||ref||" : "max|err|/max|ref|") << std::right
       << std::setw(10) << std::setprecision(3) << r.worst << (r.failed ? "  FAIL" : "  ok") << "\n";
    failed += r.failed;
  }
  for (size_t i = 0; i < failures.size() && i < 20; ++i)
    os << failures[i] << "\n";
  return failed;
}

} // namespace

std::unique_ptr<Runner> makeCudaRunner(Plan plan, CudaOptions o) {
  std::string why;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    throw Error(std::string("--device cuda: no CUDA device (") + (e != cudaSuccess ? cudaGetErrorString(e) : "none") +
                "); use --device cpu");
  int cc = fakeOrRealCC();
  if (cc < 89) {
    for (const PlanOp &op : plan.ops)
      if (op.type.rfind("fp8.", 0) == 0)
        throw Error("--device cuda: the plan uses FP8 (" + op.type + ") and " + deviceName() +
                    " has compute capability " + std::to_string(cc / 10) + "." + std::to_string(cc % 10) +
                    ", below the 8.9 FP8 tensor cores need; compile without --recipe (a high-precision plan) or "
                    "run with --device cpu");
  }
  return std::make_unique<CudaExecutor>(std::move(plan), o);
}

void registerBackend() {
  DeviceBackend b;
  b.name = "cuda";
  b.available = [](std::string *why) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      if (why)
        *why = std::string("no CUDA device (") + (e != cudaSuccess ? cudaGetErrorString(e) : "none") +
               "); use --device cpu";
      return false;
    }
    return true;
  };
  b.check = [](Plan p, const std::map<std::string, TensorPtr> &in, std::ostream &os) {
    CudaOptions o;
    if (const char *at = std::getenv("OCTET_CUDA_ATTENTION"))
      o.attention = parseAttentionPrecision(at);
    return checkAgainstCpu(std::move(p), in, os, o);
  };
  b.bytes = [](const Runner &r) { return deviceBytes(r); };
  b.describe = [] { return deviceName(); };
  b.create = [](Plan p) {
    CudaOptions o;
    if (const char *g = std::getenv("OCTET_CUDA_GRAPHS"))
      o.graphs = std::string(g) != "0";
    if (const char *t = std::getenv("OCTET_CUDA_TF32"))
      o.tf32 = std::string(t) == "1";
    if (const char *j = std::getenv("OCTET_CUDA_JIT"))
      o.jit = std::string(j) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_CHAINS"))
      o.chains = std::string(c) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_CAST_SUMS"))
      o.castSums = std::string(c) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_CAST_SOURCES"))
      o.castSources = std::string(c) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_FAST_ACCUM"))
      o.fastAccum = std::string(c) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_FOLD_BIAS"))
      o.foldBias = std::string(c) != "0";
    if (const char *at = std::getenv("OCTET_CUDA_ATTENTION"))
      o.attention = parseAttentionPrecision(at);
    if (const char *c = std::getenv("OCTET_CUDA_CUDNN"))
      o.cudnnAttention = std::string(c) != "0";
    return makeCudaRunner(std::move(p), o);
  };
  registerDeviceBackend(std::move(b));
}

CudaOptions::Attention parseAttentionPrecision(const std::string &v) {
  if (v == "auto")
    return CudaOptions::Attention::Auto;
  if (v == "tf32")
    return CudaOptions::Attention::TF32;
  if (v == "bf16")
    return CudaOptions::Attention::BF16;
  throw Error("OCTET_CUDA_ATTENTION='" + v + "' is not a precision; use auto, tf32 or bf16");
}

int checkAgainstCpu(Plan plan, const std::map<std::string, TensorPtr> &inputs, std::ostream &os, CudaOptions o) {
  Executor cpu(plan);
  cpu.run(inputs, false);
  o.graphs = false;
  auto gpu = makeCudaRunner(std::move(plan), o);
  return static_cast<CudaExecutor &>(*gpu).check(cpu, os);
}

std::map<std::string, int> fusions(const Runner &r) {
  auto *c = dynamic_cast<const CudaExecutor *>(&r);
  return c ? c->fusions() : std::map<std::string, int>();
}

size_t deviceBytes(const Runner &r) {
  auto *c = dynamic_cast<const CudaExecutor *>(&r);
  return c ? c->bytes() : 0;
}

std::string deviceName() {
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess)
    return "no GPU";
  return p.name;
}

} // namespace octet::rt::cuda

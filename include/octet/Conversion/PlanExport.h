//===- PlanExport.h - MLIR (onnx + fp8 dialects) -> runtime plan ----------===//
//
// Writes the artifact the runtime executes (format: docs/PLAN.md, reader:
// runtime/src/Plan.cpp). The function must hold only onnx-dialect and
// fp8-dialect ops: recognized layers are lowered first (octet-lower-layers).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_CONVERSION_PLANEXPORT_H
#define OCTET_CONVERSION_PLANEXPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>

namespace octet {

/// Plan format version written; runtime/include/octet/runtime/Plan.h reads it.
constexpr unsigned kPlanFormatVersion = 1;

/// Attribute names that connect the IR to the plan.
/// On an onnx.initializer: the tensor is FP8 scaling state (kind "state").
constexpr llvm::StringLiteral kFp8StateAttr = "octet.fp8_state";
/// On a function result: the new value of the named state initializer.
constexpr llvm::StringLiteral kStateUpdateAttr = "octet.state_update";
/// On any op: an array of names for its results (plan values, ONNX names).
constexpr llvm::StringLiteral kResultNamesAttr = "octet.result_names";
/// On an nn.linear a recipe left in high precision: why (first, last, dims, filter, eval).
constexpr llvm::StringLiteral kFp8KeptAttr = "octet.fp8_kept";
/// A kept layer whose GEMMs compute on BF16 operands (octet-fp8-substitute kept-gemm-precision=bf16).
constexpr llvm::StringLiteral kGemmPrecisionAttr = "octet.gemm_precision";
/// On an fp8.linear: the layer whose input quantization (scaling state, cast, codes) it uses,
/// both reading the same tensor (octet-fp8-substitute share-input-scaling).
constexpr llvm::StringLiteral kFp8InputSharedAttr = "octet.fp8_input_shared_with";
/// On the module: the recipe the graph was rewritten for.
constexpr llvm::StringLiteral kRecipeAttr = "octet.recipe";
/// On a function result: the loss octet-autodiff differentiated.
constexpr llvm::StringLiteral kLossAttr = "octet.loss";
/// On a module: the plan trains data-parallel (octet-data-parallel ran).
constexpr llvm::StringLiteral kDataParallelAttr = "octet.data_parallel";
/// On a function result: the trainable parameter (initializer name) it is the gradient of.
constexpr llvm::StringLiteral kGradOfAttr = "octet.grad_of";
/// On a gradient result: the element type the gradient is held in (MS-AMP: FP8).
constexpr llvm::StringLiteral kGradStorageAttr = "octet.grad_storage";
/// On a gradient result: the number of ranks it was reduce-scattered over (octet-data-parallel
/// shard-world-size): the result is this rank's 1-D shard of the flattened, zero-padded gradient.
constexpr llvm::StringLiteral kGradShardsAttr = "octet.grad_shards";
/// On a state initializer holding one rank's shard (MS-AMP O3's sharded FP16 masters, role
/// master_shard; fully sharded parameters, weight_shard): the whole tensor, whose flattened, zero-padded elements every rank slices its own
/// 1/N of at load (the initializer's value is a placeholder of the shard's type), and N.
constexpr llvm::StringLiteral kShardInitAttr = "octet.shard_init";
constexpr llvm::StringLiteral kShardCountAttr = "octet.shards";
/// On an fp8.all_gather of a sharded parameter (octet-optimizer shard-parameters): the gather
/// octet-gather-parameters places before the parameter's readers.
constexpr llvm::StringLiteral kParameterGatherAttr = "octet.parameter_gather";
/// On the module, from octet-gather-parameters: the gathers a step, those repeated for the backward,
/// and how many gathers ahead each is issued (fp8-opt --report prints them).
constexpr llvm::StringLiteral kParameterGathersAttr = "octet.parameter_gathers";
constexpr llvm::StringLiteral kParameterRegathersAttr = "octet.parameter_regathers";
constexpr llvm::StringLiteral kGatherPrefetchAttr = "octet.gather_prefetch";
/// On the module, from octet-fp8-all-gather: the sharded weights gathered as FP8 codes, and the
/// ones an FP8 cast reads that stay in high precision ("name: why").
constexpr llvm::StringLiteral kFp8WeightGathersAttr = "octet.fp8_weight_gathers";
constexpr llvm::StringLiteral kFp8GatherKeptAttr = "octet.fp8_gather_kept";
/// On a state initializer: what it holds (weight, master_weight, master_shard, weight_shard, optimizer, step; FP8
/// scaling state has none).
constexpr llvm::StringLiteral kRoleAttr = "octet.role";
/// On the delayed-scaling state of an FP8 Linear's weight (history, scale, scale_inv): it changes
/// once per optimizer step under gradient accumulation (octet-micro-batch-phases).
constexpr llvm::StringLiteral kFp8WeightScalingAttr = "octet.fp8_weight_scaling";
/// On the module: the optimizer settings of a training step (octet-optimizer).
constexpr llvm::StringLiteral kTrainingAttr = "octet.training";

/// Alignment of buffers in the plan's activation arena (bytes).
constexpr int64_t kPlanArenaAlignment = 256;

/// The op's type as a plan spells it (docs/PLAN.md): the ONNX op type (`Add`), `domain::Type` for
/// another domain (`octet::Pointwise`), or the fp8 op's name (`fp8.gemm`); "" for other ops.
std::string planOpType(mlir::Operation *op);

/// What fills the plan's activation arena at its busiest instant (fp8-opt --report).
struct PlanMemoryFacts {
  int64_t arenaBytes = 0;    ///< the arena the plan asks for
  int64_t livePeakBytes = 0; ///< the most bytes alive at once (a lower bound of any arena)
  std::string peakOp;        ///< the op running then: "NAME (TYPE)", or its index
  int64_t aliveBuffers = 0;  ///< buffers alive then
  std::vector<std::pair<std::string, int64_t>> largest; ///< the largest of them: value name, bytes
};

/// Writes the module's function as a plan. `arenaBytes`, when given, receives
/// the peak activation memory the plan's memory plan needs. With `inPlaceUpdates`,
/// a state's new value is written over the state itself (no arena buffer, no copy
/// at the end of the step) where no op reads the old value after the one that
/// computes the new one, or that op reads it element for element (docs/PLAN.md).
mlir::LogicalResult exportToPlanBytes(mlir::ModuleOp module, std::string &bytes, const std::string &producer,
                                      int64_t *arenaBytes = nullptr, bool inPlaceUpdates = true,
                                      PlanMemoryFacts *memory = nullptr);
/// The same, streamed into `path` one constant at a time (no copy of the weights in memory),
/// atomically: a temporary beside it, fsync, rename.
mlir::LogicalResult exportToPlanFile(mlir::ModuleOp module, const std::string &path, const std::string &producer,
                                     int64_t *arenaBytes = nullptr, bool inPlaceUpdates = true,
                                     PlanMemoryFacts *memory = nullptr);
/// The plan's memory facts alone: what writing it would plan, with no bytes written.
mlir::LogicalResult planMemoryFacts(mlir::ModuleOp module, bool inPlaceUpdates, int64_t &arenaBytes,
                                    PlanMemoryFacts *memory = nullptr);

} // namespace octet

#endif

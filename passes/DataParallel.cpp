//===- DataParallel.cpp - Training across data-parallel ranks -------------===//
//
// octet-data-parallel: between octet-autodiff and octet-optimizer, every
// gradient becomes its average over the run's ranks and the loss the mean
// over ranks (the loss of the combined batch); small gradients share buckets.
// Under MS-AMP O1/O2 an FP8 Linear's weight gradient travels as FP8 codes
// (E4M3 by default) with one scale all ranks agree on (MS-AMP's rule: amax
// all-reduced with max, pre-divided by the world size so the FP8 sum cannot
// overflow).
//
// octet-overlap-collectives: each all-reduce becomes a start after its
// operands and a done before its first reader, so it runs beside the backward.
//
// octet-reduce-amaxes: TransformerEngine's amax reduction. Every amax a
// delayed-scaling update records is all-reduced (max) first, so the scales,
// and with them every rank's FP8 state, stay equal across ranks; the updates
// sunk to the end of the step share one collective.
//
// The world size is not in the plan: fp8.all_reduce and fp8.world_size read
// it at run time, and one rank runs the plan as a single process would.
//
//===----------------------------------------------------------------------===//
#include "octet/Passes/Passes.h"

#include "GradientBuilder.h"
#include "OnnxBuilder.h"
#include "PlanOps.h"
#include "StateUtils.h"
#include "octet/Conversion/PlanExport.h"
#include "octet/Dialect/FP8/IR/FP8.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <map>

namespace octet {
#define GEN_PASS_DEF_DATAPARALLEL
#define GEN_PASS_DEF_REDUCEAMAXES
#define GEN_PASS_DEF_OVERLAPCOLLECTIVES
#define GEN_PASS_DEF_DELAYWEIGHTGRADIENTS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;
namespace fp8 = octet::fp8;

namespace {

/// On the all-reduce start octet-delay-weight-gradients moved ops after: how many GEMMs (--report).
constexpr llvm::StringLiteral kDelayedGemms = "octet.delayed_gemms";

/// The backward's last gradient all-reduce start: a sum or mean of more than one value (not the
/// loss's mean, not an amax's max).
fp8::AllReduceStartOp lastGradientStart(Block &body) {
  fp8::AllReduceStartOp last;
  for (auto s : body.getOps<fp8::AllReduceStartOp>())
    if (s.getReduction() != fp8::Reduction::max && s.getInput().getType().cast<RankedTensorType>().getNumElements() > 1)
      last = s;
  return last;
}

RankedTensorType scalarF32(MLIRContext *ctx) { return RankedTensorType::get({}, Float32Type::get(ctx)); }

Value allReduce(OpBuilder &b, Location loc, Value v, fp8::Reduction r, Value scaleInv = {}) {
  return b.create<fp8::AllReduceOp>(loc, v.getType(), v, scaleInv,
                                    fp8::ReductionAttr::get(b.getContext(), r));
}

/// Right after `v`'s defining op; a function argument's at the end, before `ret`.
void afterDefinition(OpBuilder &b, Value v, Operation *ret) {
  if (Operation *d = v.getDefiningOp())
    b.setInsertionPointAfter(d);
  else
    b.setInsertionPoint(ret);
}

struct DataParallel : octet::impl::DataParallelBase<DataParallel> {
  using DataParallelBase::DataParallelBase;

  /// MS-AMP's FP8 gradient all-reduce: the mean of `g` over ranks, having travelled as FP8 codes
  /// (sharded: reduce-scattered, this rank's shard of the flattened, padded mean), cast with the
  /// scale of `amax`, the maximum of |g| over the ranks.
  Value fp8Average(OpBuilder &b, Location loc, Value g, Type format, Value amax) {
    Value scaleInv = octet::msampScale(b, loc, amax, format).second;
    octet::GradientBuilder gb(b, loc);
    Value n = b.create<fp8::WorldSizeOp>(loc, scalarF32(b.getContext()));
    if (sharded())
      g = octet::flatPadded(b, loc, g, shardWorldSize);
    auto t = g.getType().cast<RankedTensorType>();
    Value q = b.create<fp8::CastOp>(loc, RankedTensorType::get(t.getShape(), format), g, gb.mul(scaleInv, n),
                                    b.getBoolAttr(true));
    if (!sharded()) {
      Value sum = allReduce(b, loc, q, fp8::Reduction::sum, scaleInv);
      return b.create<fp8::DequantizeOp>(loc, t, sum, scaleInv);
    }
    Value sum = reduceScatter(b, loc, q, scaleInv, fp8::Reduction::sum);
    auto st = sum.getType().cast<RankedTensorType>();
    return b.create<fp8::DequantizeOp>(loc, RankedTensorType::get(st.getShape(), b.getF32Type()), sum, scaleInv);
  }

  bool sharded() const { return shardWorldSize > 1; }

  /// This rank's shard of the reduction of the flat, padded `flat` over the ranks.
  Value reduceScatter(OpBuilder &b, Location loc, Value flat, Value scaleInv, fp8::Reduction r) {
    auto t = flat.getType().cast<RankedTensorType>();
    auto shard = RankedTensorType::get({t.getDimSize(0) / shardWorldSize}, t.getElementType());
    return b.create<fp8::ReduceScatterOp>(loc, shard, flat, scaleInv, fp8::ReductionAttr::get(b.getContext(), r),
                                          b.getI64IntegerAttr(shardWorldSize));
  }

  /// Result r's gradient becomes this rank's shard of its mean (reduce-scattered right after it is
  /// complete).
  void averageSharded(func::FuncOp func, unsigned r) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    Value v = ret.getOperand(r);
    OpBuilder b(ret);
    afterDefinition(b, v, ret);
    Value flat = octet::flatPadded(b, v.getLoc(), v, shardWorldSize);
    ret.setOperand(r, reduceScatter(b, v.getLoc(), flat, Value(), fp8::Reduction::avg));
    func.setResultAttr(r, octet::kGradShardsAttr, b.getI64IntegerAttr(shardWorldSize));
  }

  LogicalResult run(func::FuncOp func, Type format) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    llvm::DenseSet<Value> fp8Weights;
    func.walk([&](fp8::LinearOp l) { fp8Weights.insert(octet::linearWeightSource(l)); });
    llvm::StringMap<Value> params;
    for (auto i : body.getOps<ox::InitializerOp>())
      params[i.getName()] = i.getResult();
    OpBuilder b(ret);
    bool any = false;
    SmallVector<unsigned> averaged; // the gradients averaged in float (bucketed below)
    std::vector<std::pair<unsigned, std::string>> scattered; // reduce-scattered, by layer below
    SmallVector<unsigned> fp8Grads;                          // travelling as FP8 codes
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      Value v = ret.getOperand(r);
      auto t = v.getType().dyn_cast<RankedTensorType>();
      if (func.getResultAttr(r, octet::kLossAttr)) {
        if (!t || !t.getElementType().isa<FloatType>())
          return func.emitError() << "octet-data-parallel: the loss (result " << r << ") is not a float tensor";
        afterDefinition(b, v, ret);
        ret.setOperand(r, allReduce(b, v.getLoc(), v, fp8::Reduction::avg));
        continue;
      }
      auto of = func.getResultAttrOfType<StringAttr>(r, octet::kGradOfAttr);
      if (!of)
        continue;
      if (!t || !t.getElementType().isa<Float32Type, Float16Type, BFloat16Type>())
        return func.emitError() << "octet-data-parallel: the gradient of '" << of.getValue() << "' has type "
                                << v.getType() << "; only float16/bfloat16/float32 gradients can be all-reduced";
      any = true;
      Value param = params.lookup(of.getValue());
      if (fp8Gradients && param && fp8Weights.contains(param) && t.getElementType().isF32()) {
        fp8Grads.push_back(r);
      } else if (sharded() && t.getElementType().isF32() &&
                 (t.getNumElements() * 4 >= std::max<int64_t>(bucketBytes, 1) ||
                  (unit == "layer" && !octet::layerOf(of.getValue()).empty()))) {
        // What would go alone (the large matrices), and with unit=layer every parameter of a layer
        // (its biases and norm weights too, sharded with it as FSDP's flat parameter is).
        scattered.push_back({r, of.getValue().str()});
      } else {
        averaged.push_back(r);
      }
    }
    if (!any)
      return func.emitError() << "octet-data-parallel: the function has no gradients; run octet-autodiff first";
    if (!fp8Grads.empty()) {
      // At the end of the backward pass: the amaxes' all-reduce is waited for right away, and
      // would wait behind every collective started before it. One all-reduce (max) of all of
      // them, concatenated (exact: the same scales as one each), then each gradient's cast and sum.
      b.setInsertionPoint(ret);
      Location loc = ret.getLoc();
      auto scalar = scalarF32(b.getContext());
      SmallVector<Value> amaxes;
      for (unsigned r : fp8Grads)
        amaxes.push_back(b.create<fp8::AmaxOp>(loc, scalar, ret.getOperand(r), b.getBoolAttr(false)));
      SmallVector<Value> reduced = octet::maxOverRanks(b, loc, amaxes);
      for (auto [j, r] : llvm::enumerate(fp8Grads)) {
        Value amax = reduced[j];
        Value v = ret.getOperand(r);
        ret.setOperand(r, fp8Average(b, v.getLoc(), v, format, amax));
        func.setResultAttr(r, octet::kGradStorageAttr, TypeAttr::get(format));
        if (sharded())
          func.setResultAttr(r, octet::kGradShardsAttr, b.getI64IntegerAttr(shardWorldSize));
      }
    }
    scatterByLayer(func, scattered);
    averageInBuckets(func, averaged);
    if (sharded()) { // shards change the gradient results' types
      auto ret2 = cast<func::ReturnOp>(body.getTerminator());
      func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(), ret2.getOperandTypes()));
    }
    return success();
  }

  /// The float gradients `results` (result index, parameter) become this rank's shards of their
  /// means: with unit=layer one reduce-scatter for the parameters of each layer (octet::layerOf),
  /// right after the last of them is complete, each gradient laid out as N rows of its shard and
  /// the rows concatenated, so that rank r's slice of the whole is its shard of every member
  /// (FSDP2's copy-in); the others each alone, right after it is complete.
  void scatterByLayer(func::FuncOp func, ArrayRef<std::pair<unsigned, std::string>> results) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    std::vector<std::pair<std::string, SmallVector<unsigned>>> layers;
    for (const auto &[r, name] : results) {
      std::string layer = unit == "layer" ? octet::layerOf(name) : "";
      auto it = llvm::find_if(layers, [&](const auto &l) { return !layer.empty() && l.first == layer; });
      if (it == layers.end())
        layers.push_back({layer, {}}), it = std::prev(layers.end());
      it->second.push_back(r);
    }
    for (auto &[layer, members] : layers) {
      if (members.size() == 1) {
        averageSharded(func, members.front());
        continue;
      }
      Value last = ret.getOperand(members.front());
      for (unsigned r : members) {
        Operation *d = ret.getOperand(r).getDefiningOp(), *l = last.getDefiningOp();
        if (!l || (d && l->isBeforeInBlock(d)))
          last = ret.getOperand(r);
      }
      OpBuilder b(ret);
      afterDefinition(b, last, ret);
      Location loc = last.getLoc();
      octet::OnnxBuilder ox(b, loc);
      const int64_t n = shardWorldSize;
      SmallVector<Value> rows;
      SmallVector<int64_t> lengths;
      int64_t total = 0;
      for (unsigned r : members) {
        Value flat = octet::flatPadded(b, loc, ret.getOperand(r), n);
        int64_t len = flat.getType().cast<RankedTensorType>().getDimSize(0) / n;
        rows.push_back(ox.reshape(flat, {n, len}));
        lengths.push_back(len);
        total += len;
      }
      Value packed = ox.op("Concat", RankedTensorType::get({n, total}, b.getF32Type()), rows, {ox.si64("axis", 1)});
      Value mine = reduceScatter(b, loc, ox.reshape(packed, {n * total}), Value(), fp8::Reduction::avg);
      b.setInsertionPoint(ret);
      int64_t at = 0;
      for (auto [r, len] : llvm::zip(members, lengths)) {
        ret.setOperand(r, ox.op("Slice", RankedTensorType::get({len}, b.getF32Type()),
                                {mine, ox.i64s({at}), ox.i64s({at + len}), ox.i64s({0}), ox.none()}));
        func.setResultAttr(r, octet::kGradShardsAttr, b.getI64IntegerAttr(shardWorldSize));
        at += len;
      }
    }
  }

  /// The float gradients `results` become their average over ranks, each right after it is complete
  /// (octet-overlap-collectives starts it there). Those below `bucket-bytes` share one all-reduce,
  /// in the order they complete, up to `bucket-bytes` a bucket: copied into one flat tensor after its
  /// last member, reduced, and sliced back where the optimizer reads them (at the return). One
  /// collective costs tens of microseconds whatever its size: a GPT's biases and norm weights,
  /// hundreds of them, would otherwise cost more in calls than in bytes.
  void averageInBuckets(func::FuncOp func, ArrayRef<unsigned> results) {
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    auto bytesOf = [](Value v) {
      auto t = v.getType().cast<RankedTensorType>();
      return t.getNumElements() * int64_t(t.getElementType().getIntOrFloatBitWidth() / 8);
    };
    // In the order the gradients are complete (function arguments last).
    SmallVector<unsigned> order(results.begin(), results.end());
    auto defined = [&](unsigned r) { return ret.getOperand(r).getDefiningOp(); };
    std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned c) {
      Operation *x = defined(a), *y = defined(c);
      return x && (!y || (x != y && x->isBeforeInBlock(y)));
    });
    OpBuilder b(ret);
    auto alone = [&](unsigned r) {
      Value v = ret.getOperand(r);
      afterDefinition(b, v, ret);
      ret.setOperand(r, allReduce(b, v.getLoc(), v, fp8::Reduction::avg));
    };
    SmallVector<unsigned> bucket;
    int64_t bucketBytesNow = 0;
    auto flush = [&]() {
      if (bucket.size() == 1)
        alone(bucket[0]);
      if (bucket.size() > 1) {
        Value last = ret.getOperand(bucket.back());
        afterDefinition(b, last, ret);
        Location loc = last.getLoc();
        octet::OnnxBuilder ox(b, loc);
        SmallVector<Value> flat;
        int64_t total = 0;
        for (unsigned r : bucket) {
          int64_t n = ret.getOperand(r).getType().cast<RankedTensorType>().getNumElements();
          flat.push_back(ox.reshape(ret.getOperand(r), {n}));
          total += n;
        }
        auto all = RankedTensorType::get({total}, b.getF32Type());
        Value reduced = allReduce(b, loc, ox.op("Concat", all, flat, {ox.si64("axis", 0)}), fp8::Reduction::avg);
        b.setInsertionPoint(ret);
        int64_t at = 0;
        for (unsigned r : bucket) {
          auto t = ret.getOperand(r).getType().cast<RankedTensorType>();
          int64_t n = t.getNumElements();
          Value piece = ox.op("Slice", RankedTensorType::get({n}, b.getF32Type()),
                              {reduced, ox.i64s({at}), ox.i64s({at + n}), ox.i64s({0}), ox.none()});
          ret.setOperand(r, ox.reshape(piece, t.getShape()));
          at += n;
        }
      }
      bucket.clear();
      bucketBytesNow = 0;
    };
    for (unsigned r : order) {
      Value v = ret.getOperand(r);
      int64_t n = bytesOf(v);
      if (n >= bucketBytes || !v.getType().cast<RankedTensorType>().getElementType().isF32()) {
        alone(r); // a large gradient goes alone; the bucket keeps filling
        continue;
      }
      if (bucketBytesNow + n > bucketBytes)
        flush();
      bucket.push_back(r);
      bucketBytesNow += n;
    }
    flush();
  }

  void runOnOperation() override {
    ModuleOp m = getOperation();
    if (shardWorldSize < 0) {
      m.emitError() << "octet-data-parallel: shard-world-size=" << std::to_string(shardWorldSize) << " is not valid; use 0 (none) or "
                    << "the number of ranks";
      return signalPassFailure();
    }
    if (unit != "layer" && unit != "parameter") {
      m.emitError() << "octet-data-parallel: unit '" << unit << "' is not known; use layer or parameter";
      return signalPassFailure();
    }
    if (fp8Format != "e4m3" && fp8Format != "e5m2") {
      m.emitError() << "octet-data-parallel: fp8-format='" << fp8Format << "' is not valid; use e4m3 or e5m2";
      return signalPassFailure();
    }
    if (numMachines < 0 || (numMachines > 1 && numProcesses % numMachines)) {
      m.emitError() << "octet-data-parallel: num-machines=" << std::to_string(numMachines)
                    << " is not valid with num-processes=" << std::to_string(numProcesses)
                    << "; use 0 or a divisor of num-processes (each machine runs as many)";
      return signalPassFailure();
    }
    if (mainProcessPort < 0 || mainProcessPort > 65535 ||
        mainProcessIp.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:_") !=
            std::string::npos) {
      m.emitError() << "octet-data-parallel: main-process-ip='" << mainProcessIp << "' main-process-port="
                    << std::to_string(mainProcessPort) << " is not a host and port; use a host name or address "
                    << "and a port in 1..65535";
      return signalPassFailure();
    }
    Builder fb(m.getContext());
    Type format = fp8Format == "e4m3" ? Type(fb.getFloat8E4M3FNType()) : Type(fb.getFloat8E5M2Type());
    for (auto f : m.getOps<func::FuncOp>())
      if (!f.isExternal() && failed(run(f, format)))
        return signalPassFailure();
    m->setAttr(octet::kDataParallelAttr, UnitAttr::get(m.getContext()));
    // The plan says so (fp8-run refuses to run it as one of several ranks otherwise), with the number
    // of processes an Accelerate config asked for (fp8-run's default --nproc-per-node).
    SmallVector<std::pair<StringRef, std::string>> keys{{"data_parallel", "true"}};
    if (numProcesses > 0)
      keys.push_back({"num_processes", std::to_string(numProcesses)});
    if (numMachines > 1) // fp8-run's default --nnodes, --master-addr and --master-port
      keys.push_back({"num_machines", std::to_string(numMachines)});
    if (!mainProcessIp.empty())
      keys.push_back({"main_process_ip", mainProcessIp});
    if (mainProcessPort > 0)
      keys.push_back({"main_process_port", std::to_string(mainProcessPort)});
    if (sharded())
      keys.push_back({"shard_world_size", std::to_string(shardWorldSize)});
    octet::setTrainingKeys(m, keys);
  }
};

struct ReduceAmaxes : octet::impl::ReduceAmaxesBase<ReduceAmaxes> {
  void run(func::FuncOp func) {
    Block &body = func.getBody().front();
    Operation *end = body.getTerminator();
    // The updates sunk to the end of the step: the run of delayed_scale ops before the return.
    SmallVector<fp8::DelayedScaleOp> tail;
    for (Operation *op = end->getPrevNode(); op && isa<fp8::DelayedScaleOp>(op); op = op->getPrevNode())
      tail.insert(tail.begin(), cast<fp8::DelayedScaleOp>(op));
    llvm::DenseSet<Operation *> grouped;
    auto scalar = scalarF32(func.getContext());
    auto isScalar = [&](fp8::DelayedScaleOp d) { return d.getNewAmax().getType() == scalar; };
    SmallVector<fp8::DelayedScaleOp> group;
    for (fp8::DelayedScaleOp d : tail)
      if (isScalar(d))
        group.push_back(d);
    if (group.size() > 1) {
      OpBuilder b(group.front());
      SmallVector<Value> amaxes;
      for (fp8::DelayedScaleOp d : group)
        amaxes.push_back(d.getNewAmax());
      SmallVector<Value> reduced = octet::maxOverRanks(b, group.front().getLoc(), amaxes);
      for (auto [i, d] : llvm::enumerate(group)) {
        d.getNewAmaxMutable().assign(reduced[i]);
        grouped.insert(d);
      }
    }
    func.walk([&](fp8::DelayedScaleOp d) {
      if (grouped.contains(d))
        return;
      OpBuilder b(d);
      d.getNewAmaxMutable().assign(allReduce(b, d.getLoc(), d.getNewAmax(), fp8::Reduction::max));
    });
  }

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal())
        run(f);
  }
};

struct OverlapCollectives : octet::impl::OverlapCollectivesBase<OverlapCollectives> {
  /// The first reader of `v` in `block` order (users are in the same block here), or nullptr.
  static Operation *firstReader(Value v) {
    Operation *first = nullptr;
    for (Operation *u : v.getUsers())
      if (!first || u->isBeforeInBlock(first))
        first = u;
    return first;
  }

  /// Where a collective's result is waited for: its first reader, after a dequantize of the reduced
  /// codes (which waits with them) has moved down to its own first reader; nullptr if none.
  static Operation *waitPoint(Value reduced) {
    Operation *reader = firstReader(reduced);
    if (auto dq = dyn_cast_or_null<fp8::DequantizeOp>(reader); dq && dq.getInput() == reduced) {
      if (Operation *next = firstReader(dq.getOutput()); next && next != dq->getNextNode())
        dq->moveBefore(next);
      reader = firstReader(reduced);
    }
    return reader;
  }

  void run(func::FuncOp func) {
    Block &body = func.getBody().front();
    SmallVector<fp8::AllReduceOp> all(body.getOps<fp8::AllReduceOp>());
    for (fp8::AllReduceOp ar : all) {
      Operation *reader = waitPoint(ar.getOutput());
      if (!reader)
        continue;
      // The start: right after the last of its operands' definitions.
      Operation *after = nullptr;
      for (Value o : ar->getOperands())
        if (Operation *d = o.getDefiningOp(); d && (!after || after->isBeforeInBlock(d)))
          after = d;
      OpBuilder b(func.getContext());
      if (after)
        b.setInsertionPointAfter(after);
      else
        b.setInsertionPointToStart(&body);
      if (b.getInsertionPoint() == Block::iterator(reader) ||
          (b.getInsertionPoint() == Block::iterator(ar) && ar->getNextNode() == reader))
        continue; // nothing would run beside it
      auto start = b.create<fp8::AllReduceStartOp>(ar.getLoc(), ar.getType(), ar.getInput(), ar.getScaleInv(),
                                                   ar.getReductionAttr());
      b.setInsertionPoint(reader);
      auto done = b.create<fp8::AllReduceDoneOp>(ar.getLoc(), ar.getType(), start.getOutput());
      if (auto names = ar->getAttr(octet::kResultNamesAttr))
        done->setAttr(octet::kResultNamesAttr, names);
      ar.getOutput().replaceAllUsesWith(done.getOutput());
      ar->erase();
    }
    // A sharded optimizer's reduce-scatter: started over the whole padded gradient in place, waited
    // for where its shard is first read, which fp8.shard then takes from the done; but no later
    // than where the next reduce-scatter starts, so that the whole gradient it reads is freed a
    // layer later (FSDP's): at most two layers' whole gradients are alive at once, not the
    // backward's every one until the optimizer.
    SmallVector<fp8::ReduceScatterOp> scatters(body.getOps<fp8::ReduceScatterOp>());
    for (auto [k, rs] : llvm::enumerate(scatters)) {
      Operation *reader = waitPoint(rs.getOutput());
      if (reader && k + 1 < scatters.size() && scatters[k + 1]->isBeforeInBlock(reader))
        reader = scatters[k + 1];
      if (!reader || rs->getNextNode() == reader)
        continue; // nothing would run beside it
      OpBuilder b(rs);
      auto start = b.create<fp8::ReduceScatterStartOp>(rs.getLoc(), rs.getInput().getType(), rs.getInput(),
                                                       rs.getScaleInv(), rs.getReductionAttr(), rs.getWorldSizeAttr());
      b.setInsertionPoint(reader);
      auto done = b.create<fp8::AllReduceDoneOp>(rs.getLoc(), start.getType(), start.getOutput());
      auto mine = b.create<fp8::ShardOp>(rs.getLoc(), rs.getType(), done.getOutput(), rs.getWorldSizeAttr());
      rs.getOutput().replaceAllUsesWith(mine.getOutput());
      rs->erase();
    }
    // The all-gathers: started where each shard is complete, waited for where the gathered weight
    // is first read, the slice and reshape that cut the padding off moving down with the done.
    // ZeRO-2's updated weights are first read at the step's end; MS-AMP O3's FP8 weights, gathered
    // at the step's start, where the forward pass first reads them (their dequantize moving there).
    SmallVector<fp8::AllGatherOp> gathers(body.getOps<fp8::AllGatherOp>());
    for (fp8::AllGatherOp ag : gathers) {
      SmallVector<Operation *> chain; // single-reader Slice/Reshape after the gather
      Value v = ag.getOutput();
      while (v.hasOneUse() && isa<ox::SliceOp, ox::ReshapeOp>(*v.getUsers().begin()) &&
             v.getUsers().begin()->getOperand(0) == v) {
        chain.push_back(*v.getUsers().begin());
        v = chain.back()->getResult(0);
      }
      Operation *reader = waitPoint(v);
      if (!reader)
        continue;
      for (Operation *c : chain)
        c->moveBefore(reader);
      Operation *first = chain.empty() ? reader : chain.front();
      if (ag->getNextNode() == first)
        continue;
      OpBuilder b(ag);
      auto start = b.create<fp8::AllGatherStartOp>(ag.getLoc(), ag.getType(), ag.getInput(), ag.getWorldSizeAttr());
      b.setInsertionPoint(first);
      auto done = b.create<fp8::AllReduceDoneOp>(ag.getLoc(), ag.getType(), start.getOutput());
      ag.getOutput().replaceAllUsesWith(done.getOutput());
      ag->erase();
    }
  }

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal())
        run(f);
  }
};

struct DelayWeightGradients : octet::impl::DelayWeightGradientsBase<DelayWeightGradients> {
  using DelayWeightGradientsBase::DelayWeightGradientsBase;

  static double bytesOf(Value v) {
    auto t = v.getType().dyn_cast<RankedTensorType>();
    if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
      return 0;
    return double(t.getNumElements()) * double(std::max(1u, t.getElementType().getIntOrFloatBitWidth() / 8));
  }

  /// The pass's estimate of `op`'s time in seconds: a GEMM's FLOPs, other ops' bytes; views and
  /// collectives' starts and waits none.
  double seconds(Operation *op) const {
    if (octet::isViewOp(op) || isa<fp8::AllReduceStartOp, fp8::AllReduceDoneOp, fp8::ReduceScatterStartOp,
                                   fp8::AllGatherStartOp, ox::ConstantOp, ox::InitializerOp>(op))
      return 0;
    auto dims = [](Value v) { return v.getType().cast<RankedTensorType>().getShape(); };
    if (auto g = dyn_cast<fp8::GemmOp>(op)) {
      ArrayRef<int64_t> b = dims(g.getB());
      double k = double(g.getTransposeB() ? b[1] : b[0]);
      double mn = double(g.getD().getType().cast<RankedTensorType>().getNumElements());
      return 2 * k * mn / (gemmTflops * 1e12);
    }
    double bytes = 0;
    for (Value v : op->getOperands())
      bytes += bytesOf(v);
    for (Value v : op->getResults())
      bytes += bytesOf(v);
    return bytes / (hbmGBps * 1e9);
  }

  void run(func::FuncOp func) {
    Block &body = func.getBody().front();
    fp8::AllReduceStartOp last = lastGradientStart(body);
    if (!last)
      return;
    // What the last start needs: moving anything else after it changes no value.
    llvm::DenseSet<Operation *> needed;
    SmallVector<Operation *> work{last};
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp(); d && d->getBlock() == &body && needed.insert(d).second)
          work.push_back(d);
    }
    double budget = bytesOf(last.getInput()) / (linkGBps * 1e9), covered = 0;
    SmallVector<Operation *> moved; // walking back from the start
    for (Operation *op = last->getPrevNode(); op && covered < budget; op = op->getPrevNode()) {
      if (needed.contains(op))
        continue;
      moved.push_back(op);
      covered += seconds(op);
    }
    Operation *after = last;
    for (Operation *op : llvm::reverse(moved)) {
      op->moveAfter(after);
      after = op;
    }
    last->setAttr(kDelayedGemms, OpBuilder(last).getI64IntegerAttr(
                                     llvm::count_if(moved, [](Operation *op) { return isa<fp8::GemmOp>(op); })));
  }

  void runOnOperation() override {
    if (!(linkGBps > 0) || !(gemmTflops > 0) || !(hbmGBps > 0)) {
      getOperation().emitError() << "octet-delay-weight-gradients: link-gbps, gemm-tflops and hbm-gbps must be "
                                    "positive";
      return signalPassFailure();
    }
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal())
        run(f);
  }
};

} // namespace

void octet::reportCollectives(ModuleOp module, llvm::raw_ostream &os) {
  // Payload bytes by element type, as fp8-run's communicator counts them (one rank, one step).
  std::map<std::string, int64_t> bytes;
  int64_t fp8Grads = 0, fp8GradsAsF32 = 0, fp8Weights = 0, count = 0, overlapped = 0, scatters = 0, gathers = 0, parameterGathers = 0;
  module.walk([&](Operation *op) {
    if (!isa<fp8::AllReduceOp, fp8::AllReduceStartOp, fp8::ReduceScatterOp, fp8::ReduceScatterStartOp,
             fp8::AllGatherOp, fp8::AllGatherStartOp>(op))
      return;
    overlapped += isa<fp8::AllReduceStartOp, fp8::ReduceScatterStartOp, fp8::AllGatherStartOp>(op);
    scatters += isa<fp8::ReduceScatterOp, fp8::ReduceScatterStartOp>(op);
    gathers += isa<fp8::AllGatherOp, fp8::AllGatherStartOp>(op);
    parameterGathers += op->hasAttr(octet::kParameterGatherAttr);
    auto t = op->getOperand(0).getType().cast<RankedTensorType>();
    Type e = t.getElementType();
    int64_t b = t.getNumElements() * int64_t(e.getIntOrFloatBitWidth() / 8);
    std::string name;
    llvm::raw_string_ostream(name) << e;
    bytes[name] += b;
    count += isa<fp8::AllReduceOp, fp8::AllReduceStartOp>(op);
    if (e.isa<Float8E4M3FNType, Float8E5M2Type>() && isa<fp8::AllGatherOp, fp8::AllGatherStartOp>(op)) {
      fp8Weights += b;
    } else if (e.isa<Float8E4M3FNType, Float8E5M2Type>()) {
      fp8Grads += b;
      fp8GradsAsF32 += 4 * t.getNumElements();
    }
  });
  os << "data parallel: " << count << " all-reduces";
  if (scatters || gathers) {
    os << ", " << scatters << " reduce-scatters and " << gathers << " all-gathers ("
       << (parameterGathers ? "the sharded parameters'" : "the sharded optimizer's");
    // What octet-gather-parameters decided.
    if (auto again = module->getAttrOfType<IntegerAttr>(octet::kParameterRegathersAttr))
      os << ": each before its readers, " << again.getInt() << " again for the backward";
    if (auto p = module->getAttrOfType<IntegerAttr>(octet::kGatherPrefetchAttr))
      os << ", issued " << p.getInt() << " gather" << (p.getInt() == 1 ? "" : "s") << " ahead";
    os << ")";
  }
  os << " per step (" << overlapped << " overlapping the computation); each rank "
     << (scatters || gathers ? "hands its collectives" : "all-reduces");
  bool first = true;
  for (auto &[type, b] : bytes) {
    os << (first ? " " : " + ") << b << " bytes " << type;
    first = false;
  }
  if (bytes.empty())
    os << " nothing";
  if (fp8Weights) {
    os << " (FP8 weights gathered: " << fp8Weights << " bytes, " << 4 * fp8Weights << " as float32";
    if (auto n = module->getAttrOfType<IntegerAttr>(octet::kFp8WeightGathersAttr)) // octet-fp8-all-gather
      os << "; " << n.getInt() << " weights cast on their shards";
    os << ")";
  }
  // The weights an FP8 cast reads that octet-fp8-all-gather left to be gathered in high precision.
  if (auto kept = module->getAttrOfType<ArrayAttr>(octet::kFp8GatherKeptAttr)) {
    std::map<std::string, std::vector<std::string>> byWhy; // "name: why"
    for (StringRef k : kept.getAsValueRange<StringAttr>()) {
      auto [name, why] = k.split(": ");
      byWhy[why.str()].push_back(name.str());
    }
    os << " (gathered in high precision, then cast:";
    for (auto [i, w] : llvm::enumerate(byWhy))
      os << (i ? ";" : "") << " " << w.second.size() << (w.second.size() == 1 ? " weight" : " weights") << " ("
         << w.second.front() << (w.second.size() > 1 ? ", ..." : "") << "): " << w.first;
    os << ")";
  }
  if (fp8Grads)
    os << " (FP8 gradients: " << fp8Grads << " bytes, " << fp8GradsAsF32 << " as float32: "
       << llvm::format("%.2f", double(fp8GradsAsF32) / double(fp8Grads)) << "x less)";
  // What runs beside the backward's last all-reduce (octet-delay-weight-gradients).
  module.walk([&](fp8::AllReduceStartOp s) {
    if (auto n = s->getAttrOfType<IntegerAttr>(kDelayedGemms)) {
      auto t = s.getInput().getType().cast<RankedTensorType>();
      os << "; the backward's last gradient all-reduce ("
         << t.getNumElements() * int64_t(t.getElementType().getIntOrFloatBitWidth() / 8) << " bytes) starts before "
         << n.getInt() << " weight-gradient GEMMs of the layers after it, which run beside it";
    }
  });
  os << "\n";
  // The state each rank holds: a sharded tensor (a weight, master or moment shard) is 1/N of what
  // a replicated plan holds.
  int64_t worldSize = 0;
  module.walk([&](Operation *op) {
    if (isa<fp8::ReduceScatterOp, fp8::ReduceScatterStartOp, fp8::AllGatherOp, fp8::AllGatherStartOp>(op))
      if (auto w = op->getAttrOfType<IntegerAttr>("world_size"))
        worldSize = w.getInt();
  });
  if (worldSize < 2)
    return;
  int64_t held = 0, replicated = 0, shardedWeights = 0, weights = 0;
  module.walk([&](ox::InitializerOp init) {
    auto t = init.getType().cast<RankedTensorType>();
    if (!init->hasAttr(octet::kFp8StateAttr) || !t.getElementType().isIntOrFloat())
      return;
    int64_t b = t.getNumElements() * int64_t((t.getElementType().getIntOrFloatBitWidth() + 7) / 8);
    auto role = init->getAttrOfType<StringAttr>(octet::kRoleAttr);
    StringRef r = role ? role.getValue() : "";
    bool sharded = r == "optimizer_shard" || r == "weight_shard" || r == "master_shard";
    int64_t whole = sharded ? b * worldSize : b;
    held += b;
    replicated += whole;
    if (r == "weight" || r == "master_weight" || r == "weight_shard" || r == "master_shard") {
      weights += whole;
      shardedWeights += sharded ? whole : 0;
    }
  });
  os << "sharded state: each of the " << worldSize << " ranks holds " << held << " bytes of state, "
     << llvm::format("%.2f", double(held) / double(std::max<int64_t>(replicated, 1)))
     << " of the replicated plan's " << replicated << " (padding included); "
     << llvm::format("%.1f%%", 100.0 * double(shardedWeights) / double(std::max<int64_t>(weights, 1)))
     << " of the weights' bytes sharded\n";
}

//===- ImportChecks.cpp - What fp8-opt refuses right after import ----------===//
//
// The importer turns any ONNX graph into the onnx dialect (round trips need no backend). fp8-opt
// then refuses what no backend runs, before any pass: a default-domain opset newer than the
// importer models; and, where the result is a plan or a training step (Octet's runtime is the
// backend), untyped nodes (`onnx.node`: ops of other domains, or op types the typed table does
// not model) whose op type the runtime has no kernel for. `--allow-custom-ops` lets them through
// for pipelines of an embedding compiler that lower them itself; ONNX and MLIR round trips keep
// every op.
//
//===----------------------------------------------------------------------===//
#include "octet/Tools/ImportChecks.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/runtime/Executor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>

using namespace mlir;
namespace ox = octet::onnx_dialect;

LogicalResult octet::checkImportedModel(ModuleOp module, bool checkOps) {
  if (auto opsets = module->getAttrOfType<DictionaryAttr>(ox::kOpsetImportAttr))
    if (auto v = opsets.getAs<IntegerAttr>("ai.onnx"); v && v.getInt() < 1)
      return emitError(module.getLoc()) << "the model imports ONNX opset " << v.getInt()
                                        << ", which does not exist (opsets start at 1); re-export it with "
                                           "an opset_version the exporter supports (17 to "
                                        << kMaxOnnxOpset << ")";
    else if (v && v.getInt() > kMaxOnnxOpset)
      return emitError(module.getLoc()) << "the model imports ONNX opset " << v.getInt() << ", newer than the "
                                        << kMaxOnnxOpset << " fp8-opt models; re-export it with opset_version="
                                        << kMaxOnnxOpset << " or lower";
  if (!checkOps)
    return success();
  // Inputs with symbolic dimensions (an export with dynamic axes): a plan's shapes are static.
  for (auto f : module.getOps<func::FuncOp>()) {
    std::string dynamic, example;
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto t = f.getArgument(i).getType().dyn_cast<ShapedType>();
      if (!t || (t.hasRank() && t.hasStaticShape()))
        continue;
      auto name = f.getArgAttrOfType<StringAttr>(i, ox::kNameAttr);
      auto params = f.getArgAttrOfType<ArrayAttr>(i, ox::kDimParamsAttr);
      std::string n = name ? name.str() : "#" + std::to_string(i), dims = "[", eg;
      for (int64_t k = 0; t.hasRank() && k < t.getRank(); ++k) {
        std::string p = params && k < int64_t(params.size()) ? params[size_t(k)].cast<StringAttr>().str() : "";
        dims += (k ? ", " : "") + (t.isDynamicDim(k) ? (p.empty() ? "?" : p) : std::to_string(t.getDimSize(k)));
        eg += (k ? "x" : "") + (t.isDynamicDim(k) ? std::string("N") : std::to_string(t.getDimSize(k)));
      }
      dynamic += (dynamic.empty() ? "'" : ", '") + n + "' " + (t.hasRank() ? dims + "]" : "(unranked)");
      example += (example.empty() ? "" : ",") + n + "=" + (t.hasRank() ? eg : "AxB");
    }
    if (!dynamic.empty())
      return emitError(f.getLoc()) << "inputs with symbolic dimensions: " << dynamic
                                   << "; a plan has static shapes: give them with --input-shape " << example;
  }
  static const llvm::StringSet<> runnable = [] {
    llvm::StringSet<> s;
    for (const std::string &name : octet::rt::supportedOpTypes())
      s.insert(name);
    return s;
  }();
  WalkResult r = module.walk([&](ox::GenericNodeOp op) {
    llvm::StringRef type = op.getOpType(), domain = op.getDomain();
    if ((domain.empty() && runnable.contains(type)) || (domain == "octet" && runnable.contains(("octet::" + type).str())))
      return WalkResult::advance();
    if (domain.empty() && type == "Attention") // ONNX's (opset 23): octet-fuse-attention takes it or says why not
      return WalkResult::advance();
    std::string known;
    for (const std::string &name : octet::rt::supportedOpTypes())
      if (name.find_first_of(".:") == std::string::npos) // ONNX op types, not the runtime's (fp8.gemm)
        known += (known.empty() ? "" : " ") + name;
    op.emitError() << "op '" << type << "'" << (domain.empty() ? "" : " of domain '" + domain.str() + "'")
                   << " has no backend that runs it; the ONNX ops Octet runs: " << known
                   << " (--allow-custom-ops imports it for pass pipelines that lower it)";
    return WalkResult::interrupt();
  });
  if (r.wasInterrupted())
    return failure();
  return checkShapes(module);
}

/// Whether the importer's shape inference models `op` (ONNXTypedOps.cpp) from what it has here:
/// the shapes of its inputs, and the values of those after the first where they are constants. Such
/// a node left untyped with an unknown result has attributes or shapes that do not fit.
static bool inferable(ox::GenericNodeOp op) {
  static const llvm::StringSet<> fromShapes = {"Concat", "Gather"};
  static const llvm::StringSet<> fromConstants = {"Expand",     "Reshape",   "Slice",     "Split",   "Pad",
                                                  "ReduceMean", "ReduceSum", "ReduceMax", "Squeeze", "Unsqueeze"};
  llvm::StringRef type = op.getOpType();
  if (!op.getDomain().empty())
    return false;
  if (fromShapes.contains(type))
    return true;
  if (!fromConstants.contains(type))
    return false;
  return llvm::all_of(op->getOperands().drop_front(), [](Value v) {
    return v.getType().isa<NoneType>() || v.getDefiningOp<ox::ConstantOp>();
  });
}

/// Nodes the importer could not type although it models them and their inputs' shapes are known
/// (their attributes or shapes do not fit: an axis past the rank, shapes Expand cannot broadcast,
/// a Slice step of 0), and tensors of more than 2^40 bytes or whose size overflows (ConstantOfShape
/// or Tile of absurd sizes): no backend runs either, and the passes would refuse them later for
/// reasons that do not name the node's fault.
LogicalResult octet::checkShapes(ModuleOp module) {
  WalkResult r = module.walk([&](Operation *op) {
    if (!op->getDialect() || op->getDialect()->getNamespace() != ox::ONNXDialect::getDialectNamespace())
      return WalkResult::advance();
    bool staticIns = llvm::all_of(op->getOperandTypes(), [](Type t) {
      auto rt = t.dyn_cast<RankedTensorType>();
      return t.isa<NoneType>() || (rt && rt.hasStaticShape());
    });
    for (Type t : op->getResultTypes()) {
      auto tt = t.dyn_cast<TensorType>();
      if (!tt)
        continue;
      if (auto rt = tt.dyn_cast<RankedTensorType>(); rt && rt.hasStaticShape()) {
        Type e = rt.getElementType();
        if (!e.isIntOrFloat())
          continue;
        uint64_t bytes = (e.getIntOrFloatBitWidth() + 7) / 8;
        bool over = false;
        for (int64_t d : rt.getShape())
          over |= __builtin_mul_overflow(bytes, uint64_t(d), &bytes);
        if (over || bytes > (uint64_t(1) << 40)) {
          op->emitError() << "its output " << rt << " holds "
                          << (over ? std::string("more than 2^64 bytes") : std::to_string(bytes >> 30) + " GiB")
                          << ", past the 1 TiB any backend could hold; check the shapes that make it";
          return WalkResult::interrupt();
        }
      } else if (staticIns && isa<ox::GenericNodeOp>(op) && inferable(cast<ox::GenericNodeOp>(op))) {
        std::string ins;
        llvm::raw_string_ostream os(ins);
        llvm::interleaveComma(llvm::make_filter_range(op->getOperandTypes(), [](Type t) { return !t.isa<NoneType>(); }),
                              os);
        op->emitError() << "op '" << cast<ox::GenericNodeOp>(op).getOpType()
                        << "': its output's shape does not follow from its inputs (" << os.str()
                        << "): its attributes or input shapes do not fit the ONNX operator's definition";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

std::string octet::parseInputShapes(llvm::ArrayRef<std::string> specs,
                                    std::map<std::string, std::vector<int64_t>> &shapes) {
  for (const std::string &spec : specs) {
    size_t eq = spec.rfind('=');
    std::vector<int64_t> dims;
    bool ok = eq != std::string::npos && eq > 0 && eq + 1 < spec.size();
    for (size_t i = eq + 1; ok && i <= spec.size();) {
      size_t x = std::min(spec.find('x', i), spec.size());
      std::string d = spec.substr(i, x - i);
      ok = !d.empty() && d.size() < 13 && d.find_first_not_of("0123456789") == std::string::npos && std::stoll(d) > 0;
      if (ok)
        dims.push_back(std::stoll(d));
      i = x + 1;
    }
    if (!ok || shapes.count(spec.substr(0, eq)))
      return spec;
    shapes[spec.substr(0, eq)] = dims;
  }
  return "";
}

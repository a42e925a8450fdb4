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

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
namespace ox = octet::onnx_dialect;

LogicalResult octet::checkImportedModel(ModuleOp module, bool checkOps) {
  if (auto opsets = module->getAttrOfType<DictionaryAttr>(ox::kOpsetImportAttr))
    if (auto v = opsets.getAs<IntegerAttr>("ai.onnx"); v && v.getInt() > kMaxOnnxOpset)
      return emitError(module.getLoc()) << "the model imports ONNX opset " << v.getInt() << ", newer than the "
                                        << kMaxOnnxOpset << " fp8-opt models; re-export it with opset_version="
                                        << kMaxOnnxOpset << " or lower";
  if (!checkOps)
    return success();
  static const llvm::StringSet<> runnable = [] {
    llvm::StringSet<> s;
    for (const std::string &name : octet::rt::supportedOpTypes())
      s.insert(name);
    return s;
  }();
  WalkResult r = module.walk([&](ox::GenericNodeOp op) {
    llvm::StringRef type = op.getOpType(), domain = op.getDomain();
    if (domain.empty() && runnable.contains(type))
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
  return failure(r.wasInterrupted());
}

//===- UnmergeParameters.cpp - Parameters the TorchScript exporter merged --===//
//
// octet-unmerge-parameters: the legacy exporter hands one initializer to several layers through
// Identity nodes when their parameters are equal; each Identity's output (named after the layer's
// parameter by the importer, octet.result_names) becomes an initializer of its own again.
//
//===----------------------------------------------------------------------===//
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

namespace octet {
#define GEN_PASS_DEF_UNMERGEPARAMETERS
#include "octet/Passes/Passes.h.inc"
} // namespace octet

using namespace mlir;
namespace ox = octet::onnx_dialect;

namespace {

struct UnmergeParametersPass : octet::impl::UnmergeParametersBase<UnmergeParametersPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      llvm::StringSet<> names;
      SmallVector<ox::InitializerOp> inits;
      for (auto init : func.getBody().getOps<ox::InitializerOp>()) {
        names.insert(init.getName());
        inits.push_back(init);
      }
      for (ox::InitializerOp init : inits) {
        SmallVector<ox::IdentityOp> copies;
        for (Operation *u : init->getUsers())
          if (auto id = dyn_cast<ox::IdentityOp>(u))
            copies.push_back(id);
        int64_t readers = std::distance(init->getUsers().begin(), init->getUsers().end());
        if (copies.empty() || readers < 2)
          continue; // an Identity as the only reader is a copy, not a merge
        for (ox::IdentityOp id : copies) {
          auto given = id->getAttrOfType<ArrayAttr>("octet.result_names");
          auto name = given && given.size() == 1 ? given[0].dyn_cast<StringAttr>() : StringAttr();
          if (!name || name.getValue().empty() || name.getValue().startswith("onnx::") ||
              !names.insert(name.getValue()).second)
            continue; // no parameter's name to give it: octet-autodiff refuses the merge
          OpBuilder b(init);
          b.setInsertionPointAfter(init);
          auto own = cast<ox::InitializerOp>(b.clone(*init)); // the value, and any marks it carries
          own.setNameAttr(name);
          id.getResult().replaceAllUsesWith(own.getResult());
          id.erase();
        }
      }
    });
  }
};

} // namespace

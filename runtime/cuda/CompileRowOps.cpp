//===- CompileRowOps.cpp - The CUDA executor's row ops: softmax, norms, the loss ---===//
//
// Softmax and LogSoftmax, LayerNormalization and RMSNormalization (one row kernel, the RMSNorm's
// with no mean taken out) and their octet gradients, SoftmaxCrossEntropyLoss and its gradient:
// ops that reduce each row and write it back (docs/PLAN.md).
//
//===----------------------------------------------------------------------===//
#include "CudaExecutorImpl.h"

#include <array>

namespace octet::rt::cuda::detail {

bool CudaExecutor::compileRowOp(size_t k, std::vector<Step> &out) {
  const PlanOp &op = plan_.ops[k];
  const std::string &t = op.type;
  auto outPtr = [&](size_t i) { return devicePtr(op.outputs[i]); };
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
    return true;
  }
  if (t == "LayerNormalization" || t == "RMSNormalization") {
    const bool rms = t == "RMSNormalization"; // (X, Scale) -> Y: no mean taken out, no bias
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
    const bool hasB = !rms && has(op, 2);
    const void *xp = devicePtr(x), *sp = devicePtr(op.inputs[1]),
               *bp = hasB ? devicePtr(op.inputs[2]) : nullptr;
    int xt = int(typeOf(x)), st = int(typeOf(op.inputs[1])),
        bt = hasB ? int(typeOf(op.inputs[2])) : 0;
    int ot = int(plan_.values[size_t(op.outputs[0])].dtype);
    void *y = outPtr(0);
    float *mean = !rms && op.outputs.size() > 1 && op.outputs[1] >= 0
                      ? static_cast<float *>(outPtr(1))
                      : nullptr;
    float *inv = !rms && op.outputs.size() > 2 && op.outputs[2] >= 0
                     ? static_cast<float *>(outPtr(2))
                     : nullptr;
    float eps = float(attrFloat(op, "epsilon", 1e-5));
    const int f32 = int(DType::F32);
    if (xt == f32 && st == f32 && (!bp || bt == f32) && ot == f32 && dev::layerNormStatsFit(n) &&
        (reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(sp) | reinterpret_cast<uintptr_t>(bp) |
         reinterpret_cast<uintptr_t>(y)) % 16 == 0)
      layerNorms_[k] = {static_cast<const float *>(xp),
                        static_cast<const float *>(sp),
                        static_cast<const float *>(bp),
                        mean,
                        inv,
                        rows,
                        n,
                        eps,
                        op.outputs[0],
                        {},
                        rms};
    out.push_back([=](cudaStream_t s) {
      return dev::layerNorm(xp, xt, sp, st, bp, bt, y, ot, mean, inv, rows, n, eps, s, nullptr,
                            nullptr, {}, rms);
    });
    return true;
  }
  if (t == "octet::LayerNormalizationGrad" || t == "octet::RMSNormalizationGrad") {
    // (X, Scale, dY[, dX_in]) -> (dX, dScale, dB), float32 (docs/PLAN.md), RMSNormalizationGrad's
    // without dB; scratch: the blocks' column partials, then a place for dX where the plan does not
    // keep it.
    const bool rms = t == "octet::RMSNormalizationGrad";
    if (op.inputs.size() < 3 || op.inputs.size() > 4 || op.outputs.size() != (rms ? 2u : 3u))
      fail(op, rms ? "expects inputs (X, Scale, dY[, dX_in]) and outputs (dX, dScale)"
                   : "expects inputs (X, Scale, dY[, dX_in]) and outputs (dX, dScale, dB)");
    Shape xs = shapeOf(op.inputs[0]);
    int64_t axis = normAxisOf(op, attrInt(op, "axis", -1), int64_t(xs.size()));
    int64_t rows = 1, n = 1;
    for (size_t i = 0; i < xs.size(); ++i)
      (int64_t(i) < axis ? rows : n) *= xs[i];
    for (int i = 0; i < 3; ++i)
      if (op.inputs[size_t(i)] < 0)
        fail(op, "X, Scale and dY are required");
    // X, dY, dX_in and dX may be stored in BF16 (fp8-opt --activation-precision=bf16).
    auto isBf16 = [&](int id, bool allowed, const char *what) {
      if (id < 0)
        return false;
      DType t = typeOf(id);
      if (t != DType::F32 && !(allowed && t == DType::BF16))
        fail(op, std::string(what) + " must be float32" + (allowed ? " or bfloat16" : "") + ", got " + dtypeName(t));
      return t == DType::BF16;
    };
    dev::LnGradTypes bf;
    bf.x = isBf16(op.inputs[0], true, "X");
    isBf16(op.inputs[1], false, "Scale");
    bf.dy = isBf16(op.inputs[2], true, "dY");
    bf.dxIn = has(op, 3) && isBf16(op.inputs[3], true, "dX_in");
    bf.dx = isBf16(op.outputs[0], true, "dX");
    isBf16(op.outputs[1], false, "dScale");
    if (!rms)
      isBf16(op.outputs[2], false, "dB");
    if (shapeOf(op.inputs[2]) != xs || numElements(shapeOf(op.inputs[1])) != n ||
        (has(op, 3) && shapeOf(op.inputs[3]) != xs))
      fail(op, "dY and dX_in must have X's shape " + shapeString(xs) + " and Scale " + std::to_string(n) +
                   " elements");
    for (size_t i = 1; i < op.outputs.size(); ++i)
      if (op.outputs[i] >= 0 && numElements(shapeOf(op.outputs[i])) != n)
        fail(op, std::string(rms ? "dScale" : "dScale and dB") + " must have " + std::to_string(n) +
                     " elements");
    size_t partials = (size_t(dev::layerNormGradBlocks(rows, n)) * 2 * size_t(n) * 4 + 255) / 256 * 256;
    char *const *sp = scratch(partials + (op.outputs[0] < 0 ? size_t(rows * n) * 4 : 0));
    const void *x = devicePtr(op.inputs[0]);
    const float *sc = static_cast<const float *>(devicePtr(op.inputs[1]));
    const void *dy = devicePtr(op.inputs[2]);
    const void *dxIn = has(op, 3) ? devicePtr(op.inputs[3]) : nullptr;
    std::array<void *, 3> outs = {};
    for (size_t i = 0; i < op.outputs.size(); ++i)
      if (op.outputs[i] >= 0)
        outs[i] = outPtr(i);
    float eps = float(attrFloat(op, "epsilon", 1e-5));
    layerNormGrads_[size_t(&op - plan_.ops.data())] = {x,
                                                       sc,
                                                       dy,
                                                       dxIn,
                                                       outs[0],
                                                       static_cast<float *>(outs[1]),
                                                       static_cast<float *>(outs[2]),
                                                       bf,
                                                       sp,
                                                       rows,
                                                       n,
                                                       eps,
                                                       rms};
    out.push_back([x, sc, dy, dxIn, outs, bf, partials, rows, n, eps, sp, rms](cudaStream_t s) {
      void *dx = outs[0] ? outs[0] : static_cast<void *>(*sp + partials);
      return dev::layerNormGrad(x, sc, dy, dxIn, dx, bf, static_cast<float *>(outs[1]),
                                static_cast<float *>(outs[2]), reinterpret_cast<float *>(*sp), rows,
                                n, eps, s, nullptr, rms);
    });
    return true;
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
      DType gt = plan_.values[size_t(op.outputs[0])].dtype;
      if (!has(op, 2) || (typeOf(sc) != DType::F32 && typeOf(sc) != DType::BF16) ||
          typeOf(op.inputs[2]) != DType::F32 || (gt != DType::F32 && gt != DType::BF16))
        fail(op, "expects float32 or bfloat16 scores, float32 dY, and gives float32 or bfloat16 dScores");
      if (numElements(shapeOf(op.inputs[2])) != (a.reduction == 0 ? a.N * a.D : 1))
        fail(op, "dY has shape " + shapeString(shapeOf(op.inputs[2])) + " for reduction " + r);
      a.dy = static_cast<const float *>(devicePtr(op.inputs[2]));
      a.grad = outPtr(0);
      a.gradBf16 = gt == DType::BF16;
      char *const *sp = scratch(sizeof(double));
      int slot = flagSlot(op, "a label is outside [0, C)");
      out.push_back([this, a, slot, sp](cudaStream_t s) mutable {
        a.work = reinterpret_cast<float *>(*sp);
        a.badLabel = flags_ + slot;
        return dev::softmaxCrossEntropyGrad(a, s);
      });
      return true;
    }
    a.out = outPtr(0);
    a.outType = int(plan_.values[size_t(op.outputs[0])].dtype);
    bool wantLogp = op.outputs.size() > 1 && op.outputs[1] >= 0;
    if (wantLogp && plan_.values[size_t(op.outputs[1])].dtype != DType::F32)
      fail(op, "log_prob must be float32");
    float *logp = wantLogp ? static_cast<float *>(outPtr(1)) : nullptr; // else not written at all
    char *const *sp = scratch(size_t(2 * a.N * a.D) * 4);
    int slot = flagSlot(op, "a label is outside [0, C)");
    out.push_back([this, a, logp, slot, sp](cudaStream_t s) mutable {
      a.logp = logp;
      a.work = reinterpret_cast<float *>(*sp);
      a.badLabel = flags_ + slot;
      return dev::softmaxCrossEntropy(a, s);
    });
    return true;
  }
  return false;
}

} // namespace octet::rt::cuda::detail

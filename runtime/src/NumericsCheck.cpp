//===- NumericsCheck.cpp - Where FP8 loses precision, layer by layer -----===//
//
// fp8-run --numerics-check: the plan runs on the CPU reference, which keeps every value of the
// step. Each fp8.gemm is compared with the same GEMM on its operands before their FP8 casts (the
// high-precision tensors the casts read, transposed as the GEMM reads their codes, its bias
// added): the SQNR of its output, and for each operand the share of nonzero values the cast
// flushed to zero (underflow) and the share beyond the format's largest value (saturated). A GEMM
// is named by its layer and role from the names the compiler gives FP8 codes
// (`<layer>.input_fp8`, `.weight_fp8`, `.grad_output_fp8`, `_t` for a transposed copy): the
// forward GEMM (input x weight), the input gradient (grad_output x weight) and the weight
// gradient (grad_output x input).
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/NumericsCheck.h"

#include "octet/runtime/Fp8.h"
#include "octet/runtime/InPlace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <map>
#include <sstream>

namespace octet::rt {

namespace {

/// A 2-D float32 matrix, row-major.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> v;
  float at(int64_t r, int64_t c) const { return v[size_t(r * cols + c)]; }
  Matrix transposed() const {
    Matrix t{cols, rows, std::vector<float>(v.size())};
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        t.v[size_t(c * rows + r)] = v[size_t(r * cols + c)];
    return t;
  }
};

Matrix asMatrix(const Tensor &t, int64_t cols) {
  Tensor f = t.dtype == DType::F32 ? t : t.castTo(DType::F32);
  Matrix m{cols ? f.numel() / cols : 0, cols, std::vector<float>(f.data<float>(), f.data<float>() + f.numel())};
  return m;
}

/// What an FP8 GEMM operand was cast from.
struct Source {
  const PlanOp *cast = nullptr; // fp8.cast or fp8.cast_amax
  bool transposed = false;      // the GEMM reads the cast's transposed copy
  std::string layer, role;      // from the codes' name
};

Source sourceOf(const Plan &p, const std::vector<const PlanOp *> &producer, int id) {
  Source s;
  std::string name = p.values[size_t(id)].name;
  const std::string again = ".recomputed"; // codes cast again for the backward (octet-rematerialize-fp8-casts)
  if (name.size() > again.size() && name.compare(name.size() - again.size(), again.size(), again) == 0)
    name.resize(name.size() - again.size());
  for (const char *role : {"input", "weight", "grad_output"}) {
    for (const char *suffix : {"_fp8", "_fp8_t"}) {
      std::string tail = std::string(".") + role + suffix;
      if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0) {
        s.layer = name.substr(0, name.size() - tail.size());
        s.role = role;
      }
    }
  }
  int v = id;
  for (int hops = 0; hops < 8 && v >= 0 && producer[size_t(v)]; ++hops) {
    const PlanOp *op = producer[size_t(v)];
    if (op->type == "fp8.cast" || op->type == "fp8.cast_amax") {
      s.cast = op;
      s.transposed = op->outputs.size() > 2 && op->outputs[2] == v;
      return s;
    }
    if (!isView(op->type) || op->inputs.empty())
      break;
    v = op->inputs[0];
  }
  return s;
}

struct Operand {
  Source src;
  Matrix hp;            // the high-precision operand, as the GEMM reads its codes (before transpose flags)
  double underflow = 0; // share of nonzero inputs cast to a zero code
  double saturated = 0; // share of inputs beyond the format's largest value after scaling
  bool ok = false;
};

Operand operand(const Runner &ex, const std::vector<const PlanOp *> &producer, int id) {
  const Plan &p = ex.plan();
  Operand o;
  o.src = sourceOf(p, producer, id);
  if (!o.src.cast)
    return o;
  TensorPtr x = ex.value(o.src.cast->inputs[0]), si = ex.value(o.src.cast->inputs[1]);
  TensorPtr q = o.src.cast->outputs[0] >= 0 ? ex.value(o.src.cast->outputs[0]) : nullptr;
  if (!q && o.src.cast->outputs.size() > 2 && o.src.cast->outputs[2] >= 0 && x && !x->shape.empty()) {
    // The plan left the codes out (only the transposed copy is read: a weight whose codes the
    // backward casts again): the copy, [cols, rows], put back in x's order.
    TensorPtr qt = ex.value(o.src.cast->outputs[2]);
    const int64_t cols = x->shape.back(), rows = cols ? x->numel() / cols : 0;
    if (qt && qt->numel() == rows * cols) {
      auto back = std::make_shared<Tensor>(qt->dtype, x->shape);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          back->data<uint8_t>()[r * cols + c] = qt->data<uint8_t>()[c * rows + r];
      q = back;
    }
  }
  if (!x || !si || !q || !isFp8(q->dtype) || si->numel() != 1 || x->shape.empty())
    return o;
  Fp8Format f = fp8FormatOf(q->dtype);
  float s = float(si->getDouble(0)), fmax = fp8Max(f);
  Tensor xf = x->dtype == DType::F32 ? *x : x->castTo(DType::F32);
  int64_t nonzero = 0, flushed = 0, sat = 0, n = xf.numel();
  const float *table = fp8DecodeTable(f);
  for (int64_t i = 0; i < n; ++i) {
    float v = xf.data<float>()[i];
    if (v != 0.0f) {
      ++nonzero;
      flushed += table[q->data<uint8_t>()[i]] == 0.0f;
    }
    sat += std::fabs(v / s) > fmax;
  }
  o.underflow = nonzero ? double(flushed) / double(nonzero) : 0.0;
  o.saturated = n ? double(sat) / double(n) : 0.0;
  // The codes the GEMM reads: the cast's output as 2-D ([rows, last dim]), or its transposed copy.
  const Shape &cs = p.values[size_t(id)].shape;
  o.hp = asMatrix(xf, xf.shape.back());
  if (o.src.transposed)
    o.hp = o.hp.transposed();
  if (cs.size() == 2 && (cs[0] != o.hp.rows || cs[1] != o.hp.cols)) { // a view of the codes as [r, K]
    if (cs[0] * cs[1] != o.hp.rows * o.hp.cols)
      return o;
    o.hp.rows = cs[0];
    o.hp.cols = cs[1];
  }
  o.ok = true;
  return o;
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, share == 0 ? "0" : share < 1e-4 ? "<0.01%%" : "%.2f%%", share * 100);
  return buf;
}

} // namespace

std::vector<GemmNumerics> gemmNumerics(const Runner &ex) {
  const Plan &p = ex.plan();
  std::vector<const PlanOp *> producer(p.values.size(), nullptr);
  for (const PlanOp &op : p.ops)
    for (int id : op.outputs)
      if (id >= 0)
        producer[size_t(id)] = &op;
  std::vector<GemmNumerics> out;
  for (const PlanOp &op : p.ops) {
    if (op.type != "fp8.gemm" || op.inputs.size() < 4 || op.outputs.empty())
      continue;
    Operand a = operand(ex, producer, op.inputs[0]), b = operand(ex, producer, op.inputs[1]);
    TensorPtr d = ex.value(op.outputs[0]);
    GemmNumerics g;
    g.node = op.name;
    g.layer = !a.src.layer.empty() ? a.src.layer : b.src.layer;
    std::string ra = a.src.role, rb = b.src.role;
    g.gemm = ra == "input" && rb == "weight"         ? "forward"
             : ra == "grad_output" && rb == "weight" ? "input grad"
             : (ra == "grad_output" && rb == "input") || (ra == "input" && rb == "grad_output") ? "weight grad"
                                                                                              : ra + " x " + rb;
    g.a = {ra, a.underflow, a.saturated};
    g.b = {rb, b.underflow, b.saturated};
    if (!a.ok || !b.ok || !d) {
      g.sqnrDb = NAN;
      out.push_back(g);
      continue;
    }
    Matrix A = attrInt(op, "transpose_a", 0) ? a.hp.transposed() : a.hp,
           B = attrInt(op, "transpose_b", 0) ? b.hp.transposed() : b.hp;
    Tensor df = d->dtype == DType::F32 ? *d : d->castTo(DType::F32);
    TensorPtr bias = op.inputs.size() > 4 && op.inputs[4] >= 0 ? ex.value(op.inputs[4]) : nullptr;
    // accumulate (input 6): D holds C plus the product; the product alone is compared.
    TensorPtr acc = op.inputs.size() > 6 && op.inputs[6] >= 0 ? ex.value(op.inputs[6]) : nullptr;
    if (A.cols != B.rows || A.rows * B.cols != df.numel() || (bias && bias->numel() != B.cols) ||
        (op.inputs.size() > 6 && op.inputs[6] >= 0 && (!acc || acc->dtype != DType::F32 || acc->numel() != df.numel()))) {
      g.sqnrDb = NAN;
      out.push_back(g);
      continue;
    }
    Tensor bf = bias ? (bias->dtype == DType::F32 ? *bias : bias->castTo(DType::F32)) : Tensor();
    Matrix Bt = B.transposed(); // [N, K]: both operands read along K
    double signal = 0, noise = 0;
    for (int64_t i = 0; i < A.rows; ++i)
      for (int64_t j = 0; j < B.cols; ++j) {
        double r = bias ? double(bf.data<float>()[j]) : 0.0;
        const float *ar = &A.v[size_t(i * A.cols)], *br = &Bt.v[size_t(j * Bt.cols)];
        for (int64_t k = 0; k < A.cols; ++k)
          r += double(ar[k]) * double(br[k]);
        double e = r - double(df.data<float>()[i * B.cols + j]) + (acc ? double(acc->data<float>()[i * B.cols + j]) : 0.0);
        signal += r * r;
        noise += e * e;
      }
    g.sqnrDb = noise > 0 ? 10 * std::log10(signal / noise) : INFINITY;
    out.push_back(g);
  }
  return out;
}

int printNumerics(const Plan &p, const std::vector<GemmNumerics> &gemms, std::ostream &os) {
  os << "numerics check (recipe " << (p.recipe.empty() ? "none" : p.recipe)
     << ", CPU reference): each FP8 GEMM against the same GEMM on its operands before their casts\n";
  if (gemms.empty()) {
    os << "the plan has no FP8 GEMMs\n";
    return 0;
  }
  size_t w = 5;
  for (const GemmNumerics &g : gemms)
    w = std::max(w, (g.layer.empty() ? g.node : g.layer).size());
  os << std::left << std::setw(int(w)) << "layer" << "  " << std::setw(11) << "GEMM" << std::right << std::setw(8)
     << "SQNR dB" << "  operand: underflow / saturated\n";
  const GemmNumerics *worst = nullptr;
  for (const GemmNumerics &g : gemms) {
    std::ostringstream sq;
    if (std::isnan(g.sqnrDb))
      sq << "-";
    else
      sq << std::fixed << std::setprecision(1) << g.sqnrDb;
    os << std::left << std::setw(int(w)) << (g.layer.empty() ? g.node : g.layer) << "  " << std::setw(11) << g.gemm
       << std::right << std::setw(8) << sq.str() << "  " << g.a.role << ": " << percent(g.a.underflow) << " / "
       << percent(g.a.saturated) << ", " << g.b.role << ": " << percent(g.b.underflow) << " / "
       << percent(g.b.saturated) << "\n";
    if (!std::isnan(g.sqnrDb) && (!worst || g.sqnrDb < worst->sqnrDb))
      worst = &g;
  }
  if (worst)
    os << "worst: " << (worst->layer.empty() ? worst->node : worst->layer) << " (" << worst->gemm << ", " << std::fixed
       << std::setprecision(1) << worst->sqnrDb << " dB)\n";
  return 0;
}

} // namespace octet::rt

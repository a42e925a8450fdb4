//===- ShapeKernels.cpp - CPU reference kernels that move data -------------===//
//
// The ONNX ops that only move or select elements (Reshape and its kin, Transpose, Concat, Split,
// Slice, Gather and Scatter, Expand, Pad, Trilu, Range, Shape, ConstantOfShape, Identity):
// no arithmetic, so every element type. The arithmetic ops are in Kernels.cpp.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace octet::rt {
namespace {

Tensor reshapeTo(const Tensor &x, Shape s) {
  Tensor r;
  r.dtype = x.dtype;
  r.shape = std::move(s);
  r.bytes = x.bytes;
  return r;
}

void reshapeKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  std::vector<int64_t> s = c.input(1).toInts();
  bool allowZero = c.attrInt("allowzero", 0);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == 0 && !allowZero) {
      if (i >= x.shape.size())
        c.fail("shape entry 0 copies a dimension the input does not have");
      s[i] = x.shape[i];
    }
    if (s[i] == -1) {
      if (infer >= 0)
        c.fail("more than one -1 in the target shape");
      infer = int64_t(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0)
    s[size_t(infer)] = known ? x.numel() / known : 0;
  if (numElements(s) != x.numel())
    c.fail("cannot reshape " + shapeString(x.shape) + " to " + shapeString(s));
  c.setOutput(0, reshapeTo(x, s));
}

} // namespace

Tensor transpose(const Tensor &x, const std::vector<int64_t> &perm) {
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    out[i] = x.shape[size_t(perm[i])];
  Tensor r(x.dtype, out);
  std::vector<int64_t> xs = contiguousStrides(x.shape), st(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    st[i] = xs[size_t(perm[i])];
  size_t es = dtypeSize(x.dtype);
  forEachBroadcast(out, {st}, [&](int64_t i, const int64_t *off) {
    std::memcpy(r.bytes.data() + i * es, x.bytes.data() + off[0] * es, es);
  });
  return r;
}

namespace {

void transposeKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  std::vector<int64_t> perm = c.attrInts("perm");
  if (perm.empty())
    for (int64_t i = x.rank(); i-- > 0;)
      perm.push_back(i);
  if (int64_t(perm.size()) != x.rank())
    c.fail("perm has the wrong length");
  c.setOutput(0, transpose(x, perm));
}

void concatKernel(KernelContext &c) {
  const Tensor &first = c.input(0);
  int64_t axis = normAxis(c, c.attrInt("axis", 0), first.rank());
  Shape out = first.shape;
  out[size_t(axis)] = 0;
  for (size_t i = 0; i < c.numInputs(); ++i) {
    const Tensor &t = c.input(i);
    if (t.rank() != first.rank() || t.dtype != first.dtype)
      c.fail("inputs differ in rank or type");
    out[size_t(axis)] += t.shape[size_t(axis)];
  }
  Tensor r(first.dtype, out);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= out[size_t(i)];
  size_t es = dtypeSize(first.dtype);
  int64_t rowOut = r.numel() / std::max<int64_t>(outer, 1) * int64_t(es), pos = 0;
  for (size_t i = 0; i < c.numInputs(); ++i) {
    const Tensor &t = c.input(i);
    int64_t row = t.numel() / std::max<int64_t>(outer, 1) * int64_t(es);
    for (int64_t o = 0; row && o < outer; ++o) // an empty input has no storage memcpy may see
      std::memcpy(r.bytes.data() + o * rowOut + pos, t.bytes.data() + o * row, size_t(row));
    pos += row;
  }
  c.setOutput(0, std::move(r));
}

/// Splits x along axis into pieces of the given sizes.
std::vector<TensorPtr> splitTensor(const KernelContext &c, const Tensor &x, int64_t axis,
                                   const std::vector<int64_t> &sizes) {
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      c.fail("split sizes must be >= 0, got " + std::to_string(s));
    total += s;
  }
  if (total != x.shape[size_t(axis)])
    c.fail("split sizes do not add up to the dimension");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.shape[size_t(i)];
  for (int64_t i = axis + 1; i < x.rank(); ++i)
    inner *= x.shape[size_t(i)];
  size_t es = dtypeSize(x.dtype);
  std::vector<TensorPtr> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    Shape sh = x.shape;
    sh[size_t(axis)] = s;
    auto t = std::make_shared<Tensor>(x.dtype, sh);
    for (int64_t o = 0; s * inner > 0 && o < outer; ++o) // an empty piece has no storage memcpy may see
      std::memcpy(t->bytes.data() + size_t(o * s * inner) * es,
                  x.bytes.data() + size_t((o * x.shape[size_t(axis)] + start) * inner) * es, size_t(s * inner) * es);
    out.push_back(t);
    start += s;
  }
  return out;
}

void splitKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  int64_t axis = normAxis(c, c.attrInt("axis", 0), x.rank());
  std::vector<int64_t> sizes;
  if (c.hasInput(1)) {
    sizes = c.input(1).toInts();
  } else {
    int64_t n = c.attrInt("num_outputs", int64_t(c.numOutputs())), d = x.shape[size_t(axis)];
    int64_t chunk = (d + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::min(chunk, d - i * chunk));
  }
  auto parts = splitTensor(c, x, axis, sizes);
  for (size_t i = 0; i < parts.size() && i < c.numOutputs(); ++i)
    c.setOutput(i, parts[i]);
}

void splitToSequenceKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  int64_t axis = normAxis(c, c.attrInt("axis", 0), x.rank());
  int64_t d = x.shape[size_t(axis)];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!c.hasInput(1)) {
    sizes.assign(size_t(d), 1);
    squeeze = !c.attrInt("keepdims", 1);
  } else if (c.input(1).rank() == 0) {
    int64_t chunk = c.input(1).getInt(0);
    if (chunk <= 0)
      c.fail("split must be positive");
    for (int64_t s = 0; s < d; s += chunk)
      sizes.push_back(std::min(chunk, d - s));
  } else {
    sizes = c.input(1).toInts();
  }
  auto parts = splitTensor(c, x, axis, sizes);
  if (squeeze)
    for (auto &p : parts) {
      Shape s = p->shape;
      s.erase(s.begin() + axis);
      p->shape = s;
    }
  c.setOutputSequence(0, parts);
}

void sequenceAtKernel(KernelContext &c) {
  const Value &seq = c.inputValue(0);
  if (!seq.isSequence)
    c.fail("input 0 is not a sequence");
  int64_t n = int64_t(seq.sequence.size()), i = c.input(1).getInt(0);
  if (i < -n || i >= n)
    c.fail("position " + std::to_string(i) + " is outside a sequence of " + std::to_string(n));
  c.setOutput(0, seq.sequence[size_t(i < 0 ? i + n : i)]);
}

void sliceKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  std::vector<int64_t> starts = c.input(1).toInts(), ends = c.input(2).toInts();
  std::vector<int64_t> axes, steps;
  if (c.hasInput(3))
    axes = c.input(3).toInts();
  else
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  steps = c.hasInput(4) ? c.input(4).toInts() : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  size_t r = size_t(x.rank());
  std::vector<int64_t> st(r, 0), step(r, 1);
  Shape out = x.shape;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = normAxis(c, axes[i], x.rank()), d = x.shape[size_t(a)], s = starts[i], e = ends[i], k = steps[i];
    if (k == 0)
      c.fail("step 0");
    if (s < 0)
      s += d;
    if (e < 0)
      e += d;
    if (k > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      out[size_t(a)] = std::max<int64_t>(0, (e - s + k - 1) / k);
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      out[size_t(a)] = std::max<int64_t>(0, (s - e + (-k) - 1) / (-k));
    }
    st[size_t(a)] = s;
    step[size_t(a)] = k;
  }
  Tensor res(x.dtype, out);
  std::vector<int64_t> xs = contiguousStrides(x.shape), strides(r);
  int64_t base = 0;
  for (size_t i = 0; i < r; ++i) {
    strides[i] = xs[i] * step[i];
    base += st[i] * xs[i];
  }
  size_t es = dtypeSize(x.dtype);
  forEachBroadcast(out, {strides}, [&](int64_t i, const int64_t *off) {
    std::memcpy(res.bytes.data() + i * es, x.bytes.data() + (base + off[0]) * es, es);
  });
  c.setOutput(0, std::move(res));
}

void gatherKernel(KernelContext &c) {
  const Tensor &x = c.input(0), &idx = c.input(1);
  int64_t axis = normAxis(c, c.attrInt("axis", 0), x.rank());
  std::vector<int64_t> ind = idx.toInts();
  int64_t d = x.shape[size_t(axis)], outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.shape[size_t(i)];
  for (int64_t i = axis + 1; i < x.rank(); ++i)
    inner *= x.shape[size_t(i)];
  Shape out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  Tensor r(x.dtype, out);
  size_t es = dtypeSize(x.dtype), n = ind.size();
  for (int64_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < n; ++j) {
      int64_t k = ind[j] < 0 ? ind[j] + d : ind[j];
      if (k < 0 || k >= d)
        c.fail("index " + std::to_string(ind[j]) + " is out of range [" + std::to_string(-d) + ", " +
               std::to_string(d) + ")");
      std::memcpy(r.bytes.data() + (size_t(o) * n + j) * size_t(inner) * es,
                  x.bytes.data() + size_t((o * d + k) * inner) * es, size_t(inner) * es);
    }
  c.setOutput(0, std::move(r));
}

/// ScatterND / ScatterElements element update: copy, or reduce into the target.
void scatterUpdate(KernelContext &c, Tensor &r, int64_t dst, const Tensor &u, int64_t src, const std::string &red) {
  if (red == "none") {
    size_t es = dtypeSize(r.dtype);
    std::memcpy(r.bytes.data() + size_t(dst) * es, u.bytes.data() + size_t(src) * es, es);
    return;
  }
  if (r.dtype == DType::F32 && u.dtype == DType::F32) { // float arithmetic, as other runtimes do
    float &a = r.data<float>()[dst];
    float b = u.data<float>()[src];
    if (red == "add")
      a += b;
    else if (red == "mul")
      a *= b;
    else if (red == "max")
      a = std::max(a, b);
    else if (red == "min")
      a = std::min(a, b);
    else
      c.fail("reduction '" + red + "' is not supported (none, add, mul, max, min)");
    return;
  }
  double a = r.getDouble(dst), b = u.getDouble(src);
  double v = red == "add" ? a + b : red == "mul" ? a * b : red == "max" ? std::max(a, b) : red == "min" ? std::min(a, b)
                                                                                                         : NAN;
  if (std::isnan(v) && !std::isnan(a) && !std::isnan(b))
    c.fail("reduction '" + red + "' is not supported (none, add, mul, max, min)");
  Tensor one(DType::F64, {});
  one.data<double>()[0] = v;
  Tensor conv = one.castTo(r.dtype);
  size_t es = dtypeSize(r.dtype);
  std::memcpy(r.bytes.data() + size_t(dst) * es, conv.bytes.data(), es);
}

void scatterNDKernel(KernelContext &c) {
  const Tensor &x = c.input(0), &idx = c.input(1), &upd = c.input(2);
  std::string red = c.attrString("reduction", "none");
  if (idx.rank() < 1)
    c.fail("indices must have rank >= 1");
  int64_t k = idx.shape.back();
  if (k > x.rank())
    c.fail("the last indices dimension exceeds the data rank");
  std::vector<int64_t> ind = idx.toInts();
  int64_t slice = 1;
  for (int64_t i = k; i < x.rank(); ++i)
    slice *= x.shape[size_t(i)];
  int64_t n = int64_t(ind.size()) / std::max<int64_t>(k, 1);
  if (upd.numel() != n * slice)
    c.fail("updates have " + std::to_string(upd.numel()) + " elements, expected " + std::to_string(n * slice));
  Tensor r = x;
  std::vector<int64_t> strides = contiguousStrides(x.shape);
  for (int64_t j = 0; j < n; ++j) {
    int64_t off = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t dim = x.shape[size_t(d)], v = ind[size_t(j * k + d)];
      if (v < 0)
        v += dim;
      if (v < 0 || v >= dim)
        c.fail("index " + std::to_string(ind[size_t(j * k + d)]) + " is out of range for dimension " +
               std::to_string(d) + " of size " + std::to_string(dim));
      off += v * strides[size_t(d)];
    }
    for (int64_t e = 0; e < slice; ++e)
      scatterUpdate(c, r, off + e, upd, j * slice + e, red);
  }
  c.setOutput(0, std::move(r));
}

void scatterElementsKernel(KernelContext &c) {
  const Tensor &x = c.input(0), &idx = c.input(1), &upd = c.input(2);
  std::string red = c.attrString("reduction", "none");
  int64_t axis = normAxis(c, c.attrInt("axis", 0), x.rank());
  if (idx.rank() != x.rank() || idx.shape != upd.shape)
    c.fail("indices and updates must have the data's rank and one shape");
  std::vector<int64_t> ind = idx.toInts();
  std::vector<int64_t> xs = contiguousStrides(x.shape), is = contiguousStrides(idx.shape);
  Tensor r = x;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t rem = i, off = 0;
    for (size_t d = 0; d < idx.shape.size(); ++d) {
      int64_t coord = rem / is[d];
      rem %= is[d];
      if (int64_t(d) == axis) {
        coord = ind[size_t(i)] < 0 ? ind[size_t(i)] + x.shape[d] : ind[size_t(i)];
        if (coord < 0 || coord >= x.shape[d])
          c.fail("index " + std::to_string(ind[size_t(i)]) + " is out of range");
      }
      off += coord * xs[d];
    }
    scatterUpdate(c, r, off, upd, i, red);
  }
  c.setOutput(0, std::move(r));
}

void gatherElementsKernel(KernelContext &c) {
  const Tensor &x = c.input(0), &idx = c.input(1);
  int64_t axis = normAxis(c, c.attrInt("axis", 0), x.rank());
  if (idx.rank() != x.rank())
    c.fail("indices and data differ in rank");
  Tensor r(x.dtype, idx.shape);
  std::vector<int64_t> xs = contiguousStrides(x.shape);
  std::vector<int64_t> st = xs;
  st[size_t(axis)] = 0;
  std::vector<int64_t> ind = idx.toInts();
  size_t es = dtypeSize(x.dtype);
  int64_t d = x.shape[size_t(axis)];
  forEachBroadcast(idx.shape, {st}, [&](int64_t i, const int64_t *off) {
    int64_t k = ind[size_t(i)] < 0 ? ind[size_t(i)] + d : ind[size_t(i)];
    if (k < 0 || k >= d)
      c.fail("index out of range");
    std::memcpy(r.bytes.data() + i * es, x.bytes.data() + (off[0] + k * xs[size_t(axis)]) * es, es);
  });
  c.setOutput(0, std::move(r));
}

void expandKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  Shape out = broadcastShapes(c, {x.shape, c.input(1).toInts()});
  Tensor r(x.dtype, out);
  size_t es = dtypeSize(x.dtype);
  forEachBroadcast(out, {broadcastStrides(x.shape, out)}, [&](int64_t i, const int64_t *off) {
    std::memcpy(r.bytes.data() + i * es, x.bytes.data() + off[0] * es, es);
  });
  c.setOutput(0, std::move(r));
}

void unsqueezeKernel(KernelContext &c, bool squeeze) {
  const Tensor &x = c.input(0);
  std::vector<int64_t> axes = c.hasInput(1) ? c.input(1).toInts() : c.attrInts("axes");
  Shape s = x.shape;
  if (squeeze) {
    int64_t r = x.rank();
    std::vector<bool> drop(size_t(r), false);
    if (axes.empty())
      for (int64_t i = 0; i < r; ++i)
        drop[size_t(i)] = s[size_t(i)] == 1;
    for (int64_t a : axes) {
      a = normAxis(c, a, r);
      if (s[size_t(a)] != 1)
        c.fail("cannot squeeze a dimension of size " + std::to_string(s[size_t(a)]));
      drop[size_t(a)] = true;
    }
    Shape o;
    for (int64_t i = 0; i < r; ++i)
      if (!drop[size_t(i)])
        o.push_back(s[size_t(i)]);
    s = o;
  } else {
    int64_t r = x.rank() + int64_t(axes.size());
    for (int64_t &a : axes)
      a = normAxis(c, a, r);
    std::sort(axes.begin(), axes.end());
    for (int64_t a : axes)
      s.insert(s.begin() + a, 1);
  }
  c.setOutput(0, reshapeTo(x, s));
}

void rangeKernel(KernelContext &c) {
  const Tensor &s = c.input(0), &l = c.input(1), &d = c.input(2);
  double start = s.getDouble(0), limit = l.getDouble(0), delta = d.getDouble(0);
  if (delta == 0)
    c.fail("delta is 0");
  int64_t n = std::max<int64_t>(0, int64_t(std::ceil((limit - start) / delta)));
  Tensor r(s.dtype, {n});
  dispatchNumeric(c, s.dtype, [&](auto tag) {
    using T = decltype(tag);
    T st = s.data<T>()[0], dl = d.data<T>()[0];
    for (int64_t i = 0; i < n; ++i)
      r.data<T>()[i] = T(st + T(i) * dl);
  });
  c.setOutput(0, std::move(r));
}

void padKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  if (c.attrString("mode", "constant") != "constant")
    c.fail("only mode=constant is supported");
  std::vector<int64_t> pads = c.input(1).toInts();
  std::vector<int64_t> axes;
  if (c.hasInput(3))
    axes = c.input(3).toInts();
  else
    for (int64_t i = 0; i < x.rank(); ++i)
      axes.push_back(i);
  if (pads.size() != 2 * axes.size())
    c.fail("pads has the wrong length");
  size_t r = size_t(x.rank());
  std::vector<int64_t> before(r, 0), after(r, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    size_t a = size_t(normAxis(c, axes[i], x.rank()));
    before[a] = pads[i];
    after[a] = pads[i + axes.size()];
  }
  Shape out = x.shape;
  for (size_t i = 0; i < r; ++i)
    out[i] += before[i] + after[i];
  Tensor fill(x.dtype, {});
  if (c.hasInput(2))
    std::memcpy(fill.bytes.data(), c.input(2).bytes.data(), dtypeSize(x.dtype));
  Tensor res(x.dtype, out);
  size_t es = dtypeSize(x.dtype);
  std::vector<int64_t> xs = contiguousStrides(x.shape);
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < res.numel(); ++i) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (size_t d = r; d-- > 0;) {
      int64_t k = rem % out[d] - before[d];
      rem /= out[d];
      if (k < 0 || k >= x.shape[d])
        inside = false;
      else
        off += k * xs[d];
    }
    std::memcpy(res.bytes.data() + i * es, inside ? x.bytes.data() + off * es : fill.bytes.data(), es);
  }
  c.setOutput(0, std::move(res));
}

void triluKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  int64_t k = c.hasInput(1) ? c.input(1).getInt(0) : 0;
  bool upper = c.attrInt("upper", 1);
  if (x.rank() < 2)
    throw Error("Trilu: the input has rank " + std::to_string(x.rank()) + "; it needs 2 or more");
  Tensor r = x;
  int64_t R = x.shape[x.shape.size() - 2], C = x.shape.back();
  size_t es = dtypeSize(x.dtype);
  for (int64_t b = 0; b < x.numel() / std::max<int64_t>(R * C, 1); ++b) // an empty matrix: no elements
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j)
        if (upper ? (j - i < k) : (j - i > k))
          std::memset(r.bytes.data() + size_t((b * R + i) * C + j) * es, 0, es);
  c.setOutput(0, std::move(r));
}

void shapeKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  int64_t r = x.rank(), s = c.attrInt("start", 0), e = c.attrInt("end", r);
  s = std::clamp<int64_t>(s < 0 ? s + r : s, 0, r);
  e = std::clamp<int64_t>(e < 0 ? e + r : e, 0, r);
  Tensor t(DType::I64, {std::max<int64_t>(0, e - s)});
  for (int64_t i = s; i < e; ++i)
    t.data<int64_t>()[i - s] = x.shape[size_t(i)];
  c.setOutput(0, std::move(t));
}

void constantOfShapeKernel(KernelContext &c) {
  Shape s = c.input(0).toInts();
  const Attr *v = c.attr("value");
  Tensor r(v ? v->tensor->dtype : DType::F32, s);
  if (v) {
    size_t es = dtypeSize(r.dtype);
    for (int64_t i = 0; i < r.numel(); ++i)
      std::memcpy(r.bytes.data() + i * es, v->tensor->bytes.data(), es);
  }
  c.setOutput(0, std::move(r));
}

void identityKernel(KernelContext &c) {
  const Value &v = c.inputValue(0);
  if (v.isSequence)
    c.setOutputSequence(0, v.sequence);
  else
    c.setOutput(0, v.tensor);
  if (c.wantsOutput(1)) { // Dropout's mask: everything kept at inference
    Tensor m(DType::Bool, v.tensor->shape);
    std::fill(m.bytes.begin(), m.bytes.end(), 1);
    c.setOutput(1, std::move(m));
  }
}

} // namespace

void registerShapeKernels(std::map<std::string, Kernel> &k) {
  k["Reshape"] = reshapeKernel;
  k["Transpose"] = transposeKernel;
  k["Concat"] = concatKernel;
  k["Split"] = splitKernel;
  k["SplitToSequence"] = splitToSequenceKernel;
  k["SequenceAt"] = sequenceAtKernel;
  k["Slice"] = sliceKernel;
  k["Gather"] = gatherKernel;
  k["GatherElements"] = gatherElementsKernel;
  k["ScatterND"] = scatterNDKernel;
  k["ScatterElements"] = scatterElementsKernel;
  k["Expand"] = expandKernel;
  k["Unsqueeze"] = [](KernelContext &c) { unsqueezeKernel(c, false); };
  k["Squeeze"] = [](KernelContext &c) { unsqueezeKernel(c, true); };
  k["Range"] = rangeKernel;
  k["Pad"] = padKernel;
  k["Trilu"] = triluKernel;
  k["Shape"] = shapeKernel;
  k["ConstantOfShape"] = constantOfShapeKernel;
  k["Identity"] = identityKernel;
  // Dropout: identity at inference (ONNX's default). In training mode with a nonzero ratio it would
  // draw a random mask, which Octet does not: refused rather than trained without the dropout.
  k["Dropout"] = [](KernelContext &c) {
    bool training = c.hasInput(2) && c.input(2).numel() == 1 && c.input(2).getDouble(0) != 0;
    double ratio = c.hasInput(1) && c.input(1).numel() == 1 ? c.input(1).getDouble(0) : 0.5;
    if (training && ratio != 0)
      c.fail("Dropout in training mode (ratio " + std::to_string(ratio) +
             "): Octet draws no dropout masks; export the model in eval mode (model.eval()) or with dropout 0");
    identityKernel(c);
  };
}

} // namespace octet::rt

"""Small ONNX models whose shapes are computed at run time, as exporters write them
(test/Import/fold-shapes.test). Writes into OUTDIR:
  scale.onnx    x * (1 / sqrt(last dim of x)): Shape -> Gather -> CastLike -> Sqrt -> Div
                (the dynamo exporter's scaled_dot_product_attention scale)
  mask.onnx     x + causal mask: Shape -> Slice -> Concat -> Expand -> Trilu -> Equal -> Where
  view.onnx     x viewed as [b, t, 4, 16]: Shape -> Gather -> Unsqueeze -> Concat -> Reshape
  left.onnx     what stays an op: an integer Div that rounds a negative (-7 / 2: truncated or
                floored?), and an Expand of 128 x 128
                values (past the folding limit), whose type is still static
  isnan.onnx    Where(IsNaN(x), 0, x), as scaled_dot_product_attention zeroes fully masked rows
  axis.onnx     Unsqueeze with its axis a scalar constant (value_int), as the dynamo exporter writes it
  castlike.onnx CastLike(x, an FP16 input) and back, CastLike(., x): x rounded to FP16
                (tensor.type_as, as Gemma's export applies it)
  cumsum.onnx   x + positions, the positions CumSum of a mask of ones minus 1 (OPT's learned
                positions), also reversed and exclusive
  index.onnx    rows of a table x [64, 8] picked by positions 0..15 as the exporter writes
                table[idx]: Max(idx) -> Shape -> Expand -> Unsqueeze -> Concat -> GatherND (GPT-J's
                and Falcon's rotary tables)
  legacy.onnx   opset 17 as the TorchScript exporter writes it, no declared shapes: Gather of an
                embedding table, ReduceMean with its axes an attribute, Pad, Slice of a computed
                tensor, Split, Gemm, a Slice with step -1 of a [2, 2] constant (its pad pairs), and
                50 / 3 in int64 (GPT-NeoX's head width: non-negative, so truncated and floored agree)

    shape_models.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def const(name, value):
    return h.make_node("Constant", [], [name], value=nh.from_array(np.array(value), name))


def save(name, nodes, inputs, outputs):
    g = h.make_graph(nodes, name, inputs, outputs)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), os.path.join(out, name + ".onnx"))


x4 = h.make_tensor_value_info("x", T.FLOAT, [2, 4, 16, 8])
save("scale", [
    h.make_node("Shape", ["x"], ["s"]),
    const("last", np.array([-1], np.int64)),
    h.make_node("Gather", ["s", "last"], ["d"], axis=0),
    h.make_node("CastLike", ["d", "x"], ["df"]),
    h.make_node("Sqrt", ["df"], ["r"]),
    const("one", np.array(1.0, np.float32)),
    h.make_node("Div", ["one", "r"], ["scale"]),
    h.make_node("Mul", ["x", "scale"], ["y"]),
], [x4], [h.make_tensor_value_info("y", T.FLOAT, None)])

xs = h.make_tensor_value_info("x", T.FLOAT, [2, 4, 16, 16])
save("mask", [
    h.make_node("Shape", ["x"], ["s"]),
    const("b", np.array([-2], np.int64)), const("e", np.array([-1], np.int64)),
    h.make_node("Slice", ["s", "b", "e"], ["t"]),
    h.make_node("Concat", ["t", "t"], ["tt"], axis=0),
    const("onef", np.array(1.0, np.float32)),
    h.make_node("Expand", ["onef", "tt"], ["ones"]),
    h.make_node("Trilu", ["ones"], ["low"], upper=0),
    const("zero", np.array(0.0, np.float32)),
    h.make_node("Equal", ["low", "zero"], ["above"]),
    const("ninf", np.array(-np.inf, np.float32)),
    h.make_node("Where", ["above", "ninf", "zero"], ["m"]),
    h.make_node("Add", ["x", "m"], ["y"]),
], [xs], [h.make_tensor_value_info("y", T.FLOAT, None)])

x3 = h.make_tensor_value_info("x", T.FLOAT, [2, 16, 64])
save("view", [
    h.make_node("Shape", ["x"], ["s"]),
    const("i0", np.array(0, np.int64)), const("i1", np.array(1, np.int64)), const("ax", np.array([0], np.int64)),
    h.make_node("Gather", ["s", "i0"], ["b"], axis=0), h.make_node("Gather", ["s", "i1"], ["t"], axis=0),
    h.make_node("Unsqueeze", ["b", "ax"], ["b1"]), h.make_node("Unsqueeze", ["t", "ax"], ["t1"]),
    const("rest", np.array([4, 16], np.int64)),
    h.make_node("Concat", ["b1", "t1", "rest"], ["shape"], axis=0),
    h.make_node("Reshape", ["x", "shape"], ["y"]),
], [x3], [h.make_tensor_value_info("y", T.FLOAT, None)])

save("left", [
    const("seven", np.array([-7], np.int64)), const("two", np.array([2], np.int64)),
    h.make_node("Div", ["seven", "two"], ["q"]),
    const("big", np.array([128, 128], np.int64)),
    const("onef", np.array(1.0, np.float32)),
    h.make_node("Expand", ["onef", "big"], ["y"]),
], [], [h.make_tensor_value_info("q", T.INT64, None), h.make_tensor_value_info("y", T.FLOAT, None)])

xn = h.make_tensor_value_info("x", T.FLOAT, [4, 8])
save("isnan", [
    h.make_node("IsNaN", ["x"], ["nan"]),
    const("zero", np.array(0.0, np.float32)),
    h.make_node("Where", ["nan", "zero", "x"], ["y"]),
], [xn], [h.make_tensor_value_info("y", T.FLOAT, [4, 8])])

save("axis", [
    h.make_node("Constant", [], ["two"], value_int=2),
    h.make_node("Unsqueeze", ["x", "two"], ["y"]),
], [xn], [h.make_tensor_value_info("y", T.FLOAT, None)])

x16 = h.make_tensor_value_info("h", T.FLOAT16, [4, 8])
save("castlike", [
    h.make_node("CastLike", ["x", "h"], ["x16"]),
    h.make_node("CastLike", ["x16", "x"], ["y"]),
], [xn, x16], [h.make_tensor_value_info("y", T.FLOAT, [4, 8])])

xc = h.make_tensor_value_info("x", T.FLOAT, [2, 16])
save("cumsum", [
    const("ones", np.ones((2, 16), np.float32)), const("axis", np.array(1, np.int64)),
    h.make_node("CumSum", ["ones", "axis"], ["pos1"]),
    const("onef", np.array(1.0, np.float32)),
    h.make_node("Sub", ["pos1", "onef"], ["pos"]),
    h.make_node("CumSum", ["ones", "axis"], ["back"], reverse=1, exclusive=1),
    h.make_node("Add", ["x", "pos"], ["y0"]),
    h.make_node("Add", ["y0", "back"], ["y"]),
], [xc], [h.make_tensor_value_info("y", T.FLOAT, None)])

xt = h.make_tensor_value_info("x", T.FLOAT, [64, 8])
save("index", [
    const("idx", np.arange(16, dtype=np.int64).reshape(1, 16)),
    h.make_node("Max", ["idx"], ["m"]),
    h.make_node("Shape", ["m"], ["s"]),
    h.make_node("Expand", ["idx", "s"], ["e"]),
    const("last", np.array([-1], np.int64)),
    h.make_node("Unsqueeze", ["e", "last"], ["u"]),
    h.make_node("Concat", ["u"], ["c"], axis=-1),
    h.make_node("GatherND", ["x", "c"], ["y"]),
], [xt], [h.make_tensor_value_info("y", T.FLOAT, None)])

ids = h.make_tensor_value_info("ids", T.INT64, [2, 16])
table = h.make_tensor_value_info("table", T.FLOAT, [256, 8])
g = h.make_graph([
    h.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
    h.make_node("ReduceMean", ["emb"], ["mean"], axes=[-1], keepdims=1),
    const("pads", np.array([0, 0, 0, 1], np.int64)), const("fill", np.array(-100, np.int64)),
    h.make_node("Pad", ["ids", "pads", "fill"], ["padded"]),
    const("s1", np.array([1], np.int64)), const("big", np.array([2**62], np.int64)), const("a1", np.array([1], np.int64)),
    h.make_node("Slice", ["padded", "s1", "big", "a1"], ["shifted"]),
    const("flat", np.array([-1, 8], np.int64)),
    h.make_node("Reshape", ["emb", "flat"], ["rows"]),
    const("halves", np.array([4, 4], np.int64)),
    h.make_node("Split", ["rows", "halves"], ["left", "right"], axis=1),
    const("w", np.arange(12, dtype=np.float32).reshape(4, 3) / 8),
    h.make_node("Gemm", ["left", "w"], ["proj"]),
    const("pairs", np.array([[0, 1], [2, 3]], np.int64)),
    const("m1", np.array([-1], np.int64)), const("mbig", np.array([-(2**62)], np.int64)),
    const("a0", np.array([0], np.int64)),
    h.make_node("Slice", ["pairs", "m1", "mbig", "a0", "m1"], ["rev"]),
    const("fifty", np.array([50], np.int64)), const("three", np.array([3], np.int64)),
    h.make_node("Div", ["fifty", "three"], ["third"]),
], "legacy", [ids, table], [h.make_tensor_value_info(n, t, None) for n, t in
                             (("mean", T.FLOAT), ("shifted", T.INT64), ("proj", T.FLOAT), ("right", T.FLOAT),
                              ("rev", T.INT64), ("third", T.INT64))])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), os.path.join(out, "legacy.onnx"))


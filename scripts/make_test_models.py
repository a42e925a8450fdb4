#!/usr/bin/env python3
"""Writes the small ONNX models the lit tests import, with the onnx helper API.

  make_test_models.py OUTDIR

Good models exercise one importer feature each; bad_* models are malformed on purpose.
Deterministic: the same bytes every run.
"""
import os, sys
import numpy as np
import onnx
from onnx import TensorProto as TP, helper as h, numpy_helper as nh

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(model, name, check=True):
    if check:
        onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name))


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def model(graph, opset=18, extra_opsets=(), **kw):
    ops = [h.make_opsetid("", opset)] + [h.make_opsetid(d, v) for d, v in extra_opsets]
    m = h.make_model(graph, opset_imports=ops, producer_name="octet-tests", **kw)
    m.ir_version = 9 if opset >= 19 else 8
    return m


rng = np.random.default_rng(0)

# Initializers in every storage form: raw_data and the typed fields.
f32 = rng.standard_normal((2, 3)).astype(np.float32)
inits = [
    nh.from_array(f32, "w_raw"),
    h.make_tensor("w_floats", TP.FLOAT, [2, 3], f32.flatten().tolist()),
    h.make_tensor("w_f16", TP.FLOAT16, [2, 3], [0.5, -1.25, 2.0, 1024.0, 0.0, -3.0]),  # int32_data
    h.make_tensor("w_bf16", TP.BFLOAT16, [2, 3], [1.0, 2.0, -1.0, 0.0, 0.5, 3.0]),
    h.make_tensor("w_f64", TP.DOUBLE, [2, 3], f32.astype(np.float64).flatten().tolist()),
    h.make_tensor("w_i64", TP.INT64, [3], [1, -2, 3]),
    h.make_tensor("w_i8", TP.INT8, [3], [-1, 2, -3]),
    h.make_tensor("w_bool", TP.BOOL, [3], [True, False, True]),
    h.make_tensor("w_u64", TP.UINT64, [2], [1, 2**40]),
]
nodes = [
    h.make_node("Add", ["x", "w_raw"], ["a"], name="add_raw"),
    h.make_node("Add", ["a", "w_floats"], ["b"], name="add_floats"),
    h.make_node("Cast", ["w_f16"], ["c16"], to=TP.FLOAT, name="cast_f16"),
    h.make_node("Cast", ["w_bf16"], ["cbf"], to=TP.FLOAT, name="cast_bf16"),
    h.make_node("Cast", ["w_f64"], ["c64"], to=TP.FLOAT, name="cast_f64"),
    h.make_node("Sum", ["b", "c16", "cbf", "c64"], ["y"], name="sum"),
    h.make_node("Cast", ["w_i8"], ["i8_64"], to=TP.INT64, name="cast_i8"),
    h.make_node("Mul", ["w_i64", "i8_64"], ["z"], name="mul_int"),
    h.make_node("Not", ["w_bool"], ["nb"], name="not"),
    h.make_node("Identity", ["w_u64"], ["u"], name="id_u64"),
]
g = h.make_graph(nodes, "tensors", [vi("x", TP.FLOAT, [2, 3])],
                 [vi("y", TP.FLOAT, [2, 3]), vi("z", TP.INT64, [3]), vi("nb", TP.BOOL, [3]),
                  vi("u", TP.UINT64, [2])], inits)
save(model(g), "tensors.onnx")

# Every attribute kind, on a custom-domain node (kept by the generic op).
sub = h.make_graph([h.make_node("Neg", ["s_in"], ["s_out"])], "sub",
                   [vi("s_in", TP.FLOAT, [1])], [vi("s_out", TP.FLOAT, [1])])
sparse = h.make_sparse_tensor(h.make_tensor("sv", TP.FLOAT, [2], [1.5, 2.5]),
                              h.make_tensor("si", TP.INT64, [2], [1, 3]), [4])
custom = h.make_node(
    "Everything", ["x"], ["y"], domain="octet.test", name="all_attrs",
    f=0.5, i=-7, s=b"text", t=nh.from_array(np.arange(3, dtype=np.int32), "t"), g=sub,
    fs=[1.0, 2.5], ss=[b"a", b"b"],
    ts=[nh.from_array(np.ones(2, np.float32), "t1")], gs=[sub, sub],
    sp=sparse, tp=h.make_tensor_type_proto(TP.FLOAT16, [2, "n"]))
# An empty INTS list (make_node cannot infer the type of an empty list).
custom.attribute.append(h.make_attribute("is", [], attr_type=onnx.AttributeProto.INTS))
g = h.make_graph([custom], "attrs", [vi("x", TP.FLOAT, [2])], [vi("y", TP.FLOAT, [2])])
save(model(g, extra_opsets=[("octet.test", 1)]), "attributes.onnx", check=False)

# External data relative to the model.
w = rng.standard_normal((4, 8)).astype(np.float32)
ext = nh.from_array(w, "w_ext")
g = h.make_graph([h.make_node("MatMul", ["x", "w_ext"], ["y"], name="mm")], "ext",
                 [vi("x", TP.FLOAT, [2, 4])], [vi("y", TP.FLOAT, [2, 8])], [ext])
m = model(g)
onnx.save_model(m, os.path.join(out, "external.onnx"), save_as_external_data=True,
                all_tensors_to_one_file=True, location="external.weights", size_threshold=0)
m = onnx.load(os.path.join(out, "external.onnx"), load_external_data=False)
for e in m.graph.initializer[0].external_data:
    if e.key == "location":
        e.value = "missing.weights"
onnx.save(m, os.path.join(out, "bad_missing_external.onnx"))
for e in m.graph.initializer[0].external_data:
    if e.key == "location":
        e.value = "../escape.weights"
onnx.save(m, os.path.join(out, "bad_external_escape.onnx"))

# Model-local functions, one calling another, with an attribute reference.
scale = h.make_function("octet.fn", "Scale", ["X"], ["Y"],
                        [h.make_node("Constant", [], ["a"], value_float=1.0),
                         h.make_node("Mul", ["X", "X"], ["Y"])],
                        [h.make_opsetid("", 18)], attributes=["alpha"])
gelu = h.make_function("octet.fn", "ScaledAct", ["X"], ["Y"],
                       [h.make_node("Scale", ["X"], ["s"], domain="octet.fn"),
                        h.make_node("LeakyRelu", ["s"], ["Y"], alpha=0.0)],
                       [h.make_opsetid("", 18), h.make_opsetid("octet.fn", 1)])
gelu.node[1].attribute[0].ref_attr_name = "slope"
gelu.attribute.append("slope")
g = h.make_graph([h.make_node("ScaledAct", ["x"], ["t"], domain="octet.fn", name="act0", slope=0.1),
                  h.make_node("ScaledAct", ["t"], ["y"], domain="octet.fn", name="act1")],
                 "functions", [vi("x", TP.FLOAT, [3])], [vi("y", TP.FLOAT, [3])])
save(model(g, extra_opsets=[("octet.fn", 1)], functions=[scale, gelu]), "functions.onnx")

# Float8: initializers of both formats, QDQ with saturate (opset 19).
q = h.make_tensor("q_e4m3", TP.FLOAT8E4M3FN, [4], [1.0, -2.0, 448.0, 0.015625])
q5 = h.make_tensor("q_e5m2", TP.FLOAT8E5M2, [4], [1.0, -3.0, 57344.0, 0.5])
g = h.make_graph(
    [h.make_node("QuantizeLinear", ["x", "scale", "zp8"], ["xq"], name="quant", saturate=1),
     h.make_node("DequantizeLinear", ["xq", "scale"], ["xd"], name="dequant"),
     h.make_node("DequantizeLinear", ["q_e4m3", "scale"], ["a"], name="dq_e4m3"),
     h.make_node("Cast", ["q_e5m2"], ["b"], to=TP.FLOAT, name="cast_e5m2"),
     h.make_node("Cast", ["x"], ["c8"], to=TP.FLOAT8E5M2, saturate=0, name="cast_nosat"),
     h.make_node("Cast", ["c8"], ["c"], to=TP.FLOAT, name="cast_back")],
    "float8", [vi("x", TP.FLOAT, [4])],
    [vi("xd", TP.FLOAT, [4]), vi("a", TP.FLOAT, [4]), vi("b", TP.FLOAT, [4]), vi("c", TP.FLOAT, [4])],
    [q, q5, h.make_tensor("scale", TP.FLOAT, [], [0.5]),
     h.make_tensor("zp8", TP.FLOAT8E4M3FN, [], [0.0])])
save(model(g, opset=19), "float8.onnx")

# Symbolic dims, several opsets, nodes out of order, an If with subgraphs
# that capture outer values, optional inputs left empty.
then_g = h.make_graph([h.make_node("Add", ["h", "bias"], ["t_out"])], "then", [],
                      [vi("t_out", TP.FLOAT, ["batch", 4])])
else_g = h.make_graph([h.make_node("Sub", ["h", "bias"], ["e_out"])], "else", [],
                      [vi("e_out", TP.FLOAT, ["batch", 4])])
nodes = [
    h.make_node("If", ["cond"], ["branch"], name="if", then_branch=then_g, else_branch=else_g),
    h.make_node("ReduceMean", ["x", "axes"], ["h"], name="mean", keepdims=0),
    h.make_node("Clip", ["branch", "", "hi"], ["y"], name="clip"),
    h.make_node("Softmax", ["y"], ["p"], name="softmax", axis=-1),
]
g = h.make_graph(nodes, "symbolic", [vi("x", TP.FLOAT, ["batch", 4, "seq"]), vi("cond", TP.BOOL, [])],
                 [vi("p", TP.FLOAT, ["batch", 4])],
                 [h.make_tensor("axes", TP.INT64, [1], [2]), h.make_tensor("bias", TP.FLOAT, [4], [1, 2, 3, 4]),
                  h.make_tensor("hi", TP.FLOAT, [], [2.5])])
save(model(g, opset=18, extra_opsets=[("com.microsoft", 1)]), "symbolic.onnx", check=False)  # unsorted on purpose

# ---- Malformed models -------------------------------------------------------
with open(os.path.join(out, "bad_not_protobuf.onnx"), "wb") as f:
    f.write(b"this is a text file, not an ONNX model\n")
open(os.path.join(out, "bad_empty.onnx"), "wb").close()
full = onnx.load(os.path.join(out, "tensors.onnx")).SerializeToString()
with open(os.path.join(out, "bad_truncated.onnx"), "wb") as f:
    f.write(full[: len(full) // 2])

m = onnx.load(os.path.join(out, "tensors.onnx"))
m.graph.initializer[0].data_type = 99
save(m, "bad_unknown_elem_type.onnx", check=False)
m = onnx.load(os.path.join(out, "tensors.onnx"))
m.graph.initializer[0].data_type = TP.FLOAT8E4M3FNUZ
save(m, "bad_fnuz_elem_type.onnx", check=False)

g = h.make_graph([h.make_node("Relu", ["b"], ["a"], name="relu_a"),
                  h.make_node("Relu", ["a"], ["b"], name="relu_b")],
                 "cycle", [vi("x", TP.FLOAT, [2])], [vi("a", TP.FLOAT, [2])])
save(model(g), "bad_cycle.onnx", check=False)
g = h.make_graph([h.make_node("Relu", ["nowhere"], ["y"], name="relu_dangling")],
                 "dangling", [vi("x", TP.FLOAT, [2])], [vi("y", TP.FLOAT, [2])])
save(model(g), "bad_dangling.onnx", check=False)
g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"], name="mm_bad_k")], "verifier",
                 [vi("x", TP.FLOAT, [2, 3]), vi("w", TP.FLOAT, [4, 5])], [vi("y", TP.FLOAT, [2, 5])])
save(model(g), "bad_verifier.onnx", check=False)
g = h.make_graph([h.make_node("Transpose", ["x"], ["y"], name="transpose_bad_perm", perm=[0, 0])], "perm",
                 [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [3, 2])])
save(model(g), "bad_perm.onnx", check=False)
m = onnx.load(os.path.join(out, "tensors.onnx"))
m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:3]
save(m, "bad_short_data.onnx", check=False)
# Declared sizes no data backs, sizes past 64 bits, negative dims, ops and opsets nothing runs.
def declared(name, dims):  # a float tensor with dims and no data (make_tensor would refuse it)
    t = onnx.TensorProto(name=name, data_type=TP.FLOAT)
    t.dims.extend(dims)
    return t


g = h.make_graph([h.make_node("Add", ["x", "w_huge"], ["y"], name="add_huge")], "huge", [vi("x", TP.FLOAT, [1])],
                 [vi("y", TP.FLOAT, None)], initializer=[declared("w_huge", [1 << 20, 1 << 20])])
save(model(g), "bad_huge_initializer.onnx", check=False)
g = h.make_graph([h.make_node("Add", ["x", "w_wrap"], ["y"], name="add_wrap")], "wrap", [vi("x", TP.FLOAT, [1])],
                 [vi("y", TP.FLOAT, None)], initializer=[declared("w_wrap", [1 << 32, 1 << 32])])
save(model(g), "bad_overflow_initializer.onnx", check=False)
g = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu_wrap")], "wrapdims",
                 [vi("x", TP.FLOAT, [1 << 32, 1 << 32])], [vi("y", TP.FLOAT, None)])
save(model(g), "bad_overflow_input.onnx", check=False)
g = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu_neg")], "negdims",
                 [vi("x", TP.FLOAT, [2, -3])], [vi("y", TP.FLOAT, None)])
save(model(g), "bad_negative_input.onnx", check=False)
g = h.make_graph([h.make_node("Frobnicate", ["x"], ["y"], name="frob")], "unknown", [vi("x", TP.FLOAT, [2])],
                 [vi("y", TP.FLOAT, [2])])
save(model(g), "bad_unknown_op.onnx", check=False)
g = h.make_graph([h.make_node("FusedThing", ["x"], ["y"], name="fused", domain="com.example")], "custom",
                 [vi("x", TP.FLOAT, [2])], [vi("y", TP.FLOAT, [2])])
save(model(g, extra_opsets=[("com.example", 1)]), "bad_custom_domain.onnx", check=False)
# ONNX RMSNormalization (opset 23; onnx 1.17's checker does not know it yet).
g = h.make_graph([h.make_node("RMSNormalization", ["x", "scale"], ["y"], name="rms", axis=-1, epsilon=1e-6)],
                 "rmsnorm", [vi("x", TP.FLOAT, [2, 3, 8])], [vi("y", TP.FLOAT, [2, 3, 8])],
                 [h.make_tensor("scale", TP.FLOAT, [8], [0.5, 1.0, 1.5, 2.0, -1.0, 0.25, 3.0, 1.0])])
save(model(g, opset=23), "rmsnorm23.onnx", check=False)
# Casts to the operand's own type (HF's `.to(input_dtype)` of a float32 model) and to another.
g = h.make_graph([h.make_node("Cast", ["x"], ["s"], to=TP.FLOAT, name="same"),
                  h.make_node("Cast", ["s"], ["y"], to=TP.FLOAT16, name="narrow")],
                 "casts", [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT16, [2, 3])])
save(model(g), "casts.onnx")
g = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu_99")], "opset99", [vi("x", TP.FLOAT, [2])],
                 [vi("y", TP.FLOAT, [2])])
save(model(g, opset=99), "bad_opset99.onnx", check=False)
g = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu_dup")], "dupout", [vi("x", TP.FLOAT, [2])],
                 [vi("y", TP.FLOAT, [2]), vi("y", TP.FLOAT, [2])])
save(model(g), "bad_duplicate_output.onnx", check=False)
print(f"wrote test models to {out}")

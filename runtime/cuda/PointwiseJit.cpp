//===- PointwiseJit.cpp - Generated kernels for octet::Pointwise programs ---===//
//
// The interpreter kernel (DeviceKernels.cu) decodes a Pointwise program per
// element and keeps its registers in shared memory; it reaches about a third
// of HBM bandwidth. Shapes are static in a plan, so each program can instead
// become CUDA C++ with everything fixed: the ops (ewFloat calls on constant
// codes, folded by the compiler), the merged shape and every input's strides
// (division by constants), and the layout of each input relative to the
// output. A thread produces four consecutive outputs with one 16-byte store;
// an input that walks them contiguously is read with one vector load (16 bytes
// of float32, 8 of bfloat16, 4 of bool), one broadcast along them with one load.
// BF16 operands widen exactly and a BF16 result is rounded to nearest even
// (EwMath.h's bf16Bits), where the CPU reference rounds: also a result an
// earlier program of a chain passes on in registers, and the result a cast
// chain casts.
//
// All kernels of a plan go into one translation unit compiled once by NVRTC
// for the device's architecture with --fmad=false (ewFloat's arithmetic
// unchanged, as in the interpreter), loaded with cudaLibraryLoadData and
// launched with cudaLaunchKernel. NVRTC is opened with dlopen, so a machine
// without it still runs plans on the interpreter.
//
//===----------------------------------------------------------------------===//
#include "CastTile.h"
#include "DeviceKernels.h"

#include <cuda_runtime.h>
#include <nvrtc.h>

#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

namespace octet::rt::cuda::dev {
namespace {

const char *kEwMathSource =
#include "EwMathSource.inc"
    ;
const char *kCastTileSource =
#include "CastTileSource.inc"
    ;

/// NVRTC's entry points, from the first library of the toolkit's names that loads.
struct Nvrtc {
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) logSize = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubinSize = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcGetErrorString) error = nullptr;
  std::string why; // empty when loaded

  static const Nvrtc &get() {
    static Nvrtc n = load();
    return n;
  }

private:
  static Nvrtc load() {
    Nvrtc n;
    void *h = nullptr;
    for (const char *name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!h) {
      n.why = "NVRTC (libnvrtc.so.13) is not on the library path";
      return n;
    }
    auto sym = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && n.why.empty())
        n.why = std::string("NVRTC lacks ") + name;
    };
    sym(n.create, "nvrtcCreateProgram");
    sym(n.compile, "nvrtcCompileProgram");
    sym(n.logSize, "nvrtcGetProgramLogSize");
    sym(n.log, "nvrtcGetProgramLog");
    sym(n.cubinSize, "nvrtcGetCUBINSize");
    sym(n.cubin, "nvrtcGetCUBIN");
    sym(n.destroy, "nvrtcDestroyProgram");
    sym(n.error, "nvrtcGetErrorString");
    return n;
  }
};

constexpr int kJitThreads = 256, kVec = 4;
constexpr int64_t kAmaxBlocks = 132 * 8; // an H100's SMs, 8 blocks each

/// How a generated kernel reads input j.
enum class Load { Scalar, Vector, Broadcast, Gather };

/// A float's bits, for keys and literals.
unsigned bitsOf(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// Everything a kernel's text depends on: the program, the merged index space, each input's strides,
/// element type and layout class. Pointers are kernel arguments, so the 24 layers of a model share one.
struct Spec {
  int nIn = 0, nCode = 0, rank = 0, vec = 1;
  bool wide = false; // 64-bit offsets
  int64_t n = 0, dims[kMaxRank] = {}, str[kPwMaxInputs][kMaxRank] = {};
  PwType type[kPwMaxInputs] = {};
  bool known[kPwMaxInputs] = {}; // a scalar constant: compiled in as value
  float value[kPwMaxInputs] = {};
  PwType outType = PwType::F32;
  Load load[kPwMaxInputs] = {};
  int op[kPwMaxOps] = {}, arg[kPwMaxOps][3] = {};

  std::string key() const {
    std::ostringstream k;
    k << nIn << ' ' << nCode << ' ' << rank << ' ' << vec << ' ' << wide << ' ' << n << ' ' << int(outType) << '|';
    for (int d = 0; d < rank; ++d)
      k << dims[d] << ',';
    for (int j = 0; j < nIn; ++j) {
      k << '|' << int(type[j]) << int(load[j]);
      if (known[j])
        k << '=' << bitsOf(value[j]);
      for (int d = 0; d < rank; ++d)
        k << ',' << str[j][d];
    }
    for (int i = 0; i < nCode; ++i)
      k << '|' << op[i] << ',' << arg[i][0] << ',' << arg[i][1] << ',' << arg[i][2];
    return k.str();
  }
};

bool aligned(const void *p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

/// The C type of an operand stored as `t`, and an expression `e` of it as a float.
const char *cType(PwType t) { return t == PwType::F32 ? "float" : t == PwType::BF16 ? "unsigned short" : "unsigned char"; }
/// `e` as a BF16 store rounds it (round), or as it is.
std::string rounded(bool round, const std::string &e) { return round ? "bf16Round(" + e + ")" : e; }
std::string widen(PwType t, const std::string &e) {
  return t == PwType::Bool ? "(" + e + " ? 1.0f : 0.0f)" : t == PwType::BF16 ? "bf16Float(" + e + ")" : e;
}

Spec specOf(const PwArgs &a) {
  Spec s;
  s.nIn = a.nIn;
  s.nCode = a.nCode;
  s.n = a.n;
  s.rank = a.shape.rank;
  for (int d = 0; d < s.rank; ++d)
    s.dims[d] = a.shape.d[d];
  int64_t inner = s.rank ? s.dims[s.rank - 1] : 1;
  s.outType = a.outType;
  s.vec = a.n % kVec == 0 && inner % kVec == 0 && aligned(a.out, kVec * pwSize(a.outType)) ? kVec : 1;
  s.wide = a.n >= (int64_t(1) << 31);
  for (int j = 0; j < a.nIn; ++j) {
    s.type[j] = a.inType[j];
    bool allZero = true, outerAligned = true;
    int64_t reach = 0;
    for (int d = 0; d < s.rank; ++d) {
      s.str[j][d] = a.inStr[j].s[d];
      allZero = allZero && s.str[j][d] == 0;
      if (d + 1 < s.rank)
        outerAligned = outerAligned && s.str[j][d] % kVec == 0;
      reach += (s.dims[d] - 1) * (s.str[j][d] < 0 ? -s.str[j][d] : s.str[j][d]);
    }
    s.wide = s.wide || reach >= (int64_t(1) << 31);
    int64_t innerStr = s.rank ? s.str[j][s.rank - 1] : 0;
    size_t elem = pwSize(a.inType[j]);
    if (allZero) {
      s.load[j] = Load::Scalar;
      s.known[j] = a.known[j];
      s.value[j] = a.value[j];
    }
    else if (s.vec == kVec && innerStr == 1 && outerAligned && aligned(a.in[j], kVec * elem))
      s.load[j] = Load::Vector;
    else if (s.vec == kVec && innerStr == 0)
      s.load[j] = Load::Broadcast;
    else
      s.load[j] = Load::Gather;
  }
  for (int i = 0; i < a.nCode; ++i) {
    s.op[i] = int(a.op[i]);
    for (int k = 0; k < 3; ++k)
      s.arg[i][k] = a.arg[i][k];
  }
  return s;
}

/// Programs of one output shape run by one kernel, in order, each element by one thread: `from[p][j]`
/// is the earlier program whose result program p's input j is (taken from its registers, not
/// reloaded), or -1 for memory. One program alone is a chain of one.
struct Chain {
  std::vector<Spec> parts;
  std::vector<std::vector<int>> from;
  // same[p][j]: the earlier program q and its input k that load the same elements of the same
  // tensor as program p's input j (q * kPwMaxInputs + k, taken from q's registers), or -1.
  std::vector<std::vector<int>> same;
  std::vector<bool> store; // whether program p writes its result (false: later programs use it alone)
  // A cast chain: the last program's result, [rows, cols], goes to the FP8 cast-transpose tile
  // (CastTile.h) of `targets` casts instead of memory; with sums, its column sums too.
  bool cast = false, sums = false;
  int64_t rows = 0, cols = 0;
  int targets = 1;
  int second = -1; // the program whose result the last target casts, or -1 (all cast the last result)
  bool amax = false; // also max |y| of the last program's stored values (a producer_amax group)

  std::string key() const {
    std::string k = cast ? "cast " + std::to_string(targets) + ":" + std::to_string(rows) + "x" +
                               std::to_string(cols) + (sums ? "+" : "") + "~" + std::to_string(second) + "|"
                         : "";
    if (amax)
      k += "amax|";
    for (size_t p = 0; p < parts.size(); ++p) {
      k += parts[p].key() + (store[p] ? "#" : "#-");
      for (int f : from[p])
        k += std::to_string(f) + ",";
      for (int f : same[p])
        k += std::to_string(f) + ";";
      k += "/";
    }
    return k;
  }
};

/// One program of a chain inside the element loop: its offsets, loads (all issued before the
/// arithmetic; inputs an earlier program computed come from its registers), code and store.
void generatePart(std::ostringstream &o, const Spec &s, const std::vector<int> &from, const std::vector<int> &same,
                  const std::vector<Spec> &parts, const std::string &P, const char *OT, int V, bool store) {
  auto last = [&](int q) { return "r" + std::to_string(q) + "_" + std::to_string(parts[size_t(q)].nCode - 1); };
  for (int j = 0; j < s.nIn; ++j) {
    if (s.load[j] == Load::Scalar || from[size_t(j)] >= 0 || same[size_t(j)] >= 0)
      continue;
    o << "    const " << OT << " o" << P << "_" << j << " = 0";
    for (int d = 0; d < s.rank; ++d)
      if (s.str[j][d])
        o << " + (" << OT << ")(c" << d << ") * " << s.str[j][d];
    o << ";\n";
  }
  for (int j = 0; j < s.nIn; ++j) {
    std::string J = P + "_" + std::to_string(j);
    std::string x = "x" + J, in = "in" + J, oj = "o" + J;
    auto conv = [&](const std::string &e) { return widen(s.type[j], e); };
    o << "    float " << x << "[" << V << "];\n";
    if (int q = from[size_t(j)]; q >= 0) { // rounded as program q stores it
      bool round = parts[size_t(q)].outType == PwType::BF16;
      for (int l = 0; l < V; ++l)
        o << "    " << x << "[" << l << "] = " << rounded(round, last(q) + "[" + std::to_string(l) + "]") << ";\n";
      continue;
    }
    if (int q = same[size_t(j)]; q >= 0) { // loaded by an earlier program
      std::string y = "x" + std::to_string(q / kPwMaxInputs) + "_" + std::to_string(q % kPwMaxInputs);
      for (int l = 0; l < V; ++l)
        o << "    " << x << "[" << l << "] = " << y << "[" << l << "];\n";
      continue;
    }
    switch (s.load[j]) {
    case Load::Scalar:
      for (int l = 0; l < V; ++l)
        o << "    " << x << "[" << l << "] = " << x << "s;\n";
      break;
    case Load::Vector:
      if (s.type[j] != PwType::F32) {
        const char *vt = s.type[j] == PwType::Bool ? "uchar4" : "ushort4";
        o << "    { const " << vt << " v = *reinterpret_cast<const " << vt << " *>(" << in << " + " << oj << ");\n";
        for (int l = 0; l < V; ++l)
          o << "      " << x << "[" << l << "] = " << conv("v." + std::string(1, "xyzw"[l])) << ";\n";
      } else {
        o << "    { const float4 v = *reinterpret_cast<const float4 *>(" << in << " + " << oj << ");\n";
        for (int l = 0; l < V; ++l)
          o << "      " << x << "[" << l << "] = v." << "xyzw"[l] << ";\n";
      }
      o << "    }\n";
      break;
    case Load::Broadcast:
      o << "    { const float v = " << conv(in + "[" + oj + "]") << ";\n";
      for (int l = 0; l < V; ++l)
        o << "      " << x << "[" << l << "] = v;\n";
      o << "    }\n";
      break;
    case Load::Gather: {
      int64_t innerStr = s.rank ? s.str[j][s.rank - 1] : 0;
      for (int l = 0; l < V; ++l)
        o << "    " << x << "[" << l << "] = " << conv(in + "[" + oj + " + " + std::to_string(l * innerStr) + "]")
          << ";\n";
      break;
    }
    }
  }
  // Registers: slot 0 is zero, 1..nIn the inputs, then one per instruction.
  auto reg = [&](int slot, int l) -> std::string {
    if (slot == 0)
      return "0.0f";
    if (slot <= s.nIn)
      return "x" + P + "_" + std::to_string(slot - 1) + "[" + std::to_string(l) + "]";
    return "r" + P + "_" + std::to_string(slot - 1 - s.nIn) + "[" + std::to_string(l) + "]";
  };
  for (int i = 0; i < s.nCode; ++i) {
    o << "    float r" << P << "_" << i << "[" << V << "];\n";
    for (int l = 0; l < V; ++l)
      o << "    r" << P << "_" << i << "[" << l << "] = ewFloat(Ew(" << s.op[i] << "), " << reg(s.arg[i][0], l) << ", "
        << reg(s.arg[i][1], l) << ", " << reg(s.arg[i][2], l) << ", false, false);\n";
  }
  std::string r = "r" + P + "_" + std::to_string(s.nCode - 1);
  if (!store)
    return;
  bool bf = s.outType == PwType::BF16;
  auto val = [&](int l) { return bf ? "bf16Bits(" + r + "[" + std::to_string(l) + "])" : r + "[" + std::to_string(l) + "]"; };
  if (V == kVec)
    o << "    *reinterpret_cast<" << (bf ? "ushort4" : "float4") << " *>(out" << P << " + i) = "
      << (bf ? "make_ushort4(" : "make_float4(") << val(0) << ", " << val(1) << ", " << val(2) << ", " << val(3)
      << ");\n";
  else
    o << "    out" << P << "[i] = " << val(0) << ";\n";
}

/// The scalar inputs (one value for every element), loaded once.
void generateScalars(std::ostringstream &o, const Chain &c, const char *indent) {
  for (size_t p = 0; p < c.parts.size(); ++p)
    for (int j = 0; j < c.parts[p].nIn; ++j)
      if (c.parts[p].load[j] == Load::Scalar && c.from[p][size_t(j)] < 0) {
        std::string in = "in" + std::to_string(p) + "_" + std::to_string(j);
        o << indent << "const float x" << p << "_" << j << "s = "
          << (c.parts[p].known[j] ? "__uint_as_float(" + std::to_string(bitsOf(c.parts[p].value[j])) + "u)"
                                  : widen(c.parts[p].type[j], in + "[0]"))
          << ";\n";
      }
}

/// The programs of a chain for the V elements from `i` (defined by the caller): coordinates, then
/// each program (generatePart).
void generateBody(std::ostringstream &o, const Chain &c, const char *IT, const char *OT, int V) {
  const Spec &s = c.parts[0];
  // Coordinates of element i, innermost first; only the dims some input walks are used.
  bool needCoords = false;
  for (size_t p = 0; p < c.parts.size(); ++p)
    for (int j = 0; j < c.parts[p].nIn; ++j)
      needCoords = needCoords || (c.parts[p].load[j] != Load::Scalar && c.from[p][size_t(j)] < 0);
  if (needCoords) {
    o << "    " << IT << " t = i;\n";
    for (int d = s.rank - 1; d >= 0; --d) {
      o << "    const " << IT << " c" << d << " = t % " << s.dims[d] << "u;";
      if (d > 0)
        o << " t /= " << s.dims[d] << "u;";
      o << "\n";
    }
  }
  for (size_t p = 0; p < c.parts.size(); ++p)
    generatePart(o, c.parts[p], c.from[p], c.same[p], c.parts, std::to_string(p), OT, V, c.store[p]);
}

/// Each program's inputs then its output, program after program: kernel parameters (separated by
/// ", ") or struct members (each ending in ";\n").
void generatePointers(std::ostringstream &o, const Chain &c, bool members, bool restrictOut) {
  const char *indent = members ? "  " : "";
  std::vector<std::string> decls;
  for (size_t p = 0; p < c.parts.size(); ++p) {
    for (int j = 0; j < c.parts[p].nIn; ++j)
      decls.push_back(std::string("const ") + cType(c.parts[p].type[j]) + " *__restrict__ in" + std::to_string(p) +
                      "_" + std::to_string(j));
    decls.push_back(std::string(cType(c.parts[p].outType)) + " *" + (restrictOut ? "__restrict__ " : "") + "out" +
                    std::to_string(p));
  }
  for (size_t k = 0; k < decls.size(); ++k)
    o << indent << decls[k] << (members ? ";\n" : k + 1 < decls.size() ? ", " : "");
}

/// The kernel's source: `extern "C" __global__ void NAME(const void *in0_0, ..., float *out0, ...)`,
/// each program's inputs then its output, program after program. A cast chain's kernel instead
/// takes a struct of those pointers, whose load8 computes 8 results of the last program, and runs
/// the cast-transpose tile on them: NAME(NAME_src src, rows, cols, Targets, colPartials, slot).
std::string generate(const Chain &c, const std::string &name) {
  const Spec &s = c.parts[0]; // the index space all parts share
  std::ostringstream o;
  // Unsigned coordinates (division by constants is cheapest), signed offsets; casts are C-style,
  // as a functional cast cannot name a type of two words (unsigned long long).
  const char *IT = s.wide ? "unsigned long long" : "unsigned", *OT = s.wide ? "long long" : "int";
  const int V = s.vec;
  if (c.cast) {
    o << "struct " << name << "_src {\n";
    generatePointers(o, c, true, false);
    o << "  __device__ __forceinline__ void load8(long long r, long long cc, long long cols, float (&vals)[8]"
      << (c.second >= 0 ? ", float (&vals2)[8]" : "") << ") const {\n";
    o << "  using namespace octet::rt::cuda::dev;\n";
    generateScalars(o, c, "  ");
    o << "#pragma unroll\n  for (int h = 0; h < " << 8 / V << "; ++h) {\n";
    o << "    const " << IT << " i = (" << IT << ")(r * cols + cc) + (" << IT << ")(h * " << V << ");\n";
    generateBody(o, c, IT, OT, V);
    std::string last = "r" + std::to_string(c.parts.size() - 1) + "_" + std::to_string(c.parts.back().nCode - 1);
    bool round = c.parts.back().outType == PwType::BF16; // the cast reads what the plan stores
    for (int l = 0; l < V; ++l)
      o << "    vals[h * " << V << " + " << l << "] = " << rounded(round, last + "[" + std::to_string(l) + "]") << ";\n";
    if (c.second >= 0) { // rounded as that program would store its result
      const Spec &p2 = c.parts[size_t(c.second)];
      std::string r2 = "r" + std::to_string(c.second) + "_" + std::to_string(p2.nCode - 1);
      for (int l = 0; l < V; ++l)
        o << "    vals2[h * " << V << " + " << l << "] = "
          << rounded(p2.outType == PwType::BF16, r2 + "[" + std::to_string(l) + "]") << ";\n";
    }
    o << "  }\n  }\n};\n";
    // At least 4 blocks an SM (64 registers): the GELU gradient's pass with the recomputed GELU's
    // cast (two streams, two targets, column sums) takes 78 on ptxas's own choice, 3 blocks.
    o << "extern \"C\" __global__ void __launch_bounds__(" << tile::kThreads << ", 4) " << name << "(" << name
      << "_src src, long long rows, long long cols, octet::rt::cuda::tile::Targets tg, float *colPartials, "
         "unsigned *slot) {\n";
    o << "  octet::rt::cuda::tile::castTransposeTile<" << name << "_src, " << (c.sums ? "true" : "false")
      << ", " << c.targets << ", " << (c.second >= 0 ? 2 : 1) << ">(src, rows, cols, tg, colPartials, slot);\n}\n\n";
    return o.str();
  }
  o << "extern \"C\" __global__ void __launch_bounds__(" << kJitThreads << ") " << name << "(";
  generatePointers(o, c, false, c.parts.size() == 1);
  o << (c.amax ? ", unsigned *amaxBits" : "") << ") {\n";
  o << "  using namespace octet::rt::cuda::dev;\n";
  generateScalars(o, c, "  ");
  if (c.amax)
    o << "  unsigned am = 0;\n";
  o << "  for (" << IT << " g = (" << IT << ")(blockIdx.x) * " << kJitThreads << "u + threadIdx.x; g < " << s.n / V
    << "u; g += (" << IT << ")(gridDim.x) * " << kJitThreads << "u) {\n";
  o << "    const " << IT << " i = g * " << V << ";\n";
  generateBody(o, c, IT, OT, V);
  if (c.amax) { // max |y| of the values as stored (BF16: rounded; NaN bits above Inf's)
    std::string last = "r" + std::to_string(c.parts.size() - 1) + "_" + std::to_string(c.parts.back().nCode - 1);
    bool round = c.parts.back().outType == PwType::BF16;
    for (int l = 0; l < V; ++l)
      o << "    am = max(am, __float_as_uint(fabsf(" << rounded(round, last + "[" + std::to_string(l) + "]")
        << ")));\n";
  }
  o << "  }\n";
  if (c.amax) // the block's max, then one atomicMax a block (launchChain caps the grid)
    o << "  __shared__ unsigned amaxWarp[" << kJitThreads / 32 << "];\n"
      << "  for (int d = 16; d > 0; d /= 2)\n    am = max(am, __shfl_xor_sync(0xffffffffu, am, d));\n"
      << "  if (threadIdx.x % 32 == 0)\n    amaxWarp[threadIdx.x / 32] = am;\n  __syncthreads();\n"
      << "  if (threadIdx.x == 0) {\n    for (int w = 1; w < " << kJitThreads / 32
      << "; ++w)\n      am = max(am, amaxWarp[w]);\n    atomicMax(amaxBits, am);\n  }\n";
  o << "}\n\n";
  return o.str();
}

std::string nvrtcLog(const Nvrtc &nv, nvrtcProgram p) {
  size_t n = 0;
  if (nv.logSize(p, &n) != NVRTC_SUCCESS || n <= 1)
    return "";
  std::string log(n, '\0');
  nv.log(p, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
    log.pop_back();
  return log;
}

} // namespace

struct PwJit::Impl {
  std::vector<Chain> specs;                 // one per distinct kernel
  std::map<std::string, int> byKey;         // Chain::key -> index
  std::vector<cudaKernel_t> kernels;        // after build
  cudaLibrary_t library = nullptr;
  bool built = false;
  double seconds = 0;
};

PwJit::PwJit() : impl_(new Impl) {}
PwJit::~PwJit() {
  if (impl_->library)
    cudaLibraryUnload(impl_->library);
}

std::string PwJit::unavailable() { return Nvrtc::get().why; }

bool makeChain(const std::vector<PwArgs> &programs, Chain &c);

int PwJit::add(const PwArgs &args) { return addChain({args}); }

int PwJit::addChain(const std::vector<PwArgs> &programs, const std::vector<bool> &store, bool amax) {
  Chain c;
  if (!makeChain(programs, c))
    return -1;
  if (!store.empty()) {
    if (store.size() != programs.size() || !store.back())
      return -1; // the last program's result is what the chain is for
    c.store = store;
  }
  c.amax = amax;
  auto [it, fresh] = impl_->byKey.emplace(c.key(), int(impl_->specs.size()));
  if (fresh)
    impl_->specs.push_back(std::move(c));
  return it->second;
}

int PwJit::addCastChain(const std::vector<PwArgs> &programs, const std::vector<bool> &store, int64_t rows,
                        int64_t cols, bool sums, int targets, int second) {
  Chain c;
  if (targets < 1 || targets > tile::kMaxTargets || !makeChain(programs, c) || store.size() != programs.size() ||
      rows % 16 || cols % 16 || rows < 1 ||
      rows * cols != c.parts[0].n || c.parts[0].vec != kVec)
    return -1; // 8 results per load8 from two groups of 4; the tile's shape rules
  if (second >= 0 && (targets < 2 || second + 1 >= int(programs.size()) || store[size_t(second)]))
    return -1; // the second stream: an earlier program, not stored, with a target of its own
  c.store = store;
  c.store.back() = false; // the cast takes the last result
  c.second = second;
  c.cast = true;
  c.sums = sums;
  c.targets = targets;
  c.rows = rows;
  c.cols = cols;
  auto [it, fresh] = impl_->byKey.emplace(c.key(), int(impl_->specs.size()));
  if (fresh)
    impl_->specs.push_back(std::move(c));
  return it->second;
}

bool PwJit::canChain(const std::vector<PwArgs> &programs) {
  Chain c;
  return makeChain(programs, c);
}

bool makeChain(const std::vector<PwArgs> &programs, Chain &c) {
  c.store.assign(programs.size(), true);
  for (const PwArgs &args : programs) {
    PwArgs a = args;
    mergePointwiseDims(a);
    c.parts.push_back(specOf(a));
    const Spec &s = c.parts.back(), &s0 = c.parts[0];
    if (s.n != s0.n || s.rank != s0.rank || s.vec != s0.vec || s.wide != s0.wide ||
        !std::equal(s.dims, s.dims + s.rank, s0.dims))
      return false; // the programs' index spaces merge differently
    std::vector<int> from(size_t(a.nIn), -1), same(size_t(a.nIn), -1);
    for (int j = 0; j < a.nIn; ++j)
      for (size_t q = 0; q + 1 < c.parts.size(); ++q)
        if (a.in[j] == programs[q].out) {
          // An earlier program's result, read element for element: taken from its registers.
          bool same = s.type[j] == programs[q].outType;
          int64_t want = 1;
          for (int d = s.rank - 1; d >= 0; --d) {
            same = same && s.str[j][d] == want;
            want *= s.dims[d];
          }
          if (!same)
            return false;
          from[size_t(j)] = int(q);
        }
    // An input an earlier program loads (no program before this one writes it): the same
    // registers. Equal types, strides and load kinds give equal elements.
    for (int j = 0; j < a.nIn; ++j) {
      if (from[size_t(j)] >= 0 || s.load[j] == Load::Scalar)
        continue;
      for (size_t q = 0; q + 1 < c.parts.size() && same[size_t(j)] < 0; ++q) {
        const Spec &sq = c.parts[q];
        for (int k = 0; k < sq.nIn && same[size_t(j)] < 0; ++k)
          if (programs[q].in[k] == a.in[j] && c.from[q][size_t(k)] < 0 && c.same[q][size_t(k)] < 0 &&
              sq.load[k] == s.load[j] && sq.type[k] == s.type[j] && std::equal(s.str[j], s.str[j] + s.rank, sq.str[k]))
            same[size_t(j)] = int(q) * kPwMaxInputs + k;
      }
    }
    c.from.push_back(std::move(from));
    c.same.push_back(std::move(same));
  }
  return true;
}

size_t PwJit::kernels() const { return impl_->specs.size(); }
bool PwJit::built() const { return impl_->built; }
double PwJit::buildSeconds() const { return impl_->seconds; }

std::string PwJit::source() const {
  std::string src = std::string(kEwMathSource) + "\n" + kCastTileSource + "\n";
  for (size_t k = 0; k < impl_->specs.size(); ++k)
    src += generate(impl_->specs[k], "octet_pw" + std::to_string(k));
  return src;
}

std::string PwJit::compile(const std::string &src, int cc, std::string &cubin) {
  const Nvrtc &nv = Nvrtc::get();
  if (!nv.why.empty())
    return nv.why;
  nvrtcProgram prog = nullptr;
  if (nvrtcResult r = nv.create(&prog, src.c_str(), "octet_pointwise.cu", 0, nullptr, nullptr); r != NVRTC_SUCCESS)
    return std::string("nvrtcCreateProgram: ") + nv.error(r);
  std::string arch = "--gpu-architecture=sm_" + std::to_string(cc);
  const char *opts[] = {arch.c_str(), "--fmad=false", "--std=c++17", "-default-device"};
  std::string why;
  if (nvrtcResult r = nv.compile(prog, 4, opts); r != NVRTC_SUCCESS) {
    why = std::string("NVRTC could not compile the generated Pointwise kernels (") + nv.error(r) +
          "): " + nvrtcLog(nv, prog).substr(0, 2000);
  } else {
    size_t n = 0;
    if (nv.cubinSize(prog, &n) != NVRTC_SUCCESS || n == 0) {
      why = "NVRTC returned no CUBIN";
    } else {
      cubin.resize(n);
      nv.cubin(prog, cubin.data());
    }
  }
  nv.destroy(&prog);
  return why;
}

std::string PwJit::build() {
  if (impl_->built || impl_->specs.empty()) {
    impl_->built = true;
    return "";
  }
  auto t0 = std::chrono::steady_clock::now();
  int dev = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    cudaGetLastError();
    return "no CUDA device";
  }
  std::string cubin;
  std::string why = compile(source(), prop.major * 10 + prop.minor, cubin);
  if (why.empty()) {
    cudaError_t e = cudaLibraryLoadData(&impl_->library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e != cudaSuccess)
      why = std::string("loading the generated Pointwise kernels: ") + cudaGetErrorString(e);
  }
  for (size_t k = 0; why.empty() && k < impl_->specs.size(); ++k) {
    cudaKernel_t kern = nullptr;
    std::string name = "octet_pw" + std::to_string(k);
    if (cudaLibraryGetKernel(&kern, impl_->library, name.c_str()) != cudaSuccess)
      why = "the generated library lacks " + name;
    impl_->kernels.push_back(kern);
  }
  if (!why.empty()) {
    cudaGetLastError();
    return why;
  }
  impl_->built = true;
  impl_->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return "";
}

std::string PwJit::launch(int h, const PwArgs &a, cudaStream_t s) const { return launchChain(h, {&a}, s); }

std::string PwJit::launchCastChain(int h, const std::vector<const PwArgs *> &programs, const tile::Targets &tg,
                                   float *colPartials, unsigned *slot, cudaStream_t s) const {
  const Chain &c = impl_->specs[size_t(h)];
  if (tg.n != c.targets)
    return "generated pointwise cast: " + std::to_string(tg.n) + " targets for a kernel of " + std::to_string(c.targets);
  std::vector<void *> src; // the kernel's first parameter: a struct of the programs' pointers
  for (const PwArgs *a : programs) {
    for (int j = 0; j < a->nIn; ++j)
      src.push_back(const_cast<void *>(a->in[j]));
    src.push_back(a->out);
  }
  long long rows = c.rows, cols = c.cols;
  tile::Targets targets = tg;
  void *args[] = {src.data(), &rows, &cols, &targets, &colPartials, &slot};
  dim3 grid(unsigned((cols + tile::kTile - 1) / tile::kTile),
            unsigned(std::min<int64_t>((rows + tile::kTile - 1) / tile::kTile, 65535))); // more: the tile loops
  cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void *>(impl_->kernels[size_t(h)]), grid,
                                   dim3(tile::kThreads), args, 0, s);
  return e == cudaSuccess ? std::string() : std::string("generated pointwise cast: ") + cudaGetErrorString(e);
}

std::string PwJit::launchChain(int h, const std::vector<const PwArgs *> &programs, cudaStream_t s,
                               float *amax) const {
  const Chain &c = impl_->specs[size_t(h)];
  if (c.amax != (amax != nullptr))
    return "generated pointwise: a kernel " + std::string(c.amax ? "with" : "without") + " an amax launched " +
           (amax ? "with" : "without") + " one";
  if (amax)
    cudaMemsetAsync(amax, 0, sizeof(float), s);
  if (programs.empty() || programs[0]->n == 0)
    return amax ? finishAmax(amax, 1, s) : "";
  const Spec &sp = c.parts[0];
  std::vector<void *> ptrs, args;
  for (const PwArgs *a : programs) {
    for (int j = 0; j < a->nIn; ++j)
      ptrs.push_back(const_cast<void *>(a->in[j]));
    ptrs.push_back(a->out);
  }
  if (amax)
    ptrs.push_back(amax);
  for (void *&p : ptrs)
    args.push_back(&p);
  int64_t groups = sp.n / sp.vec;
  // With an amax, a grid the size of the machine (one atomicMax a block; more would contend).
  int blocks = int(std::min<int64_t>((groups + kJitThreads - 1) / kJitThreads, amax ? kAmaxBlocks : int64_t(1) << 20));
  cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void *>(impl_->kernels[size_t(h)]), dim3(unsigned(blocks)),
                                   dim3(kJitThreads), args.data(), 0, s);
  if (e != cudaSuccess)
    return std::string("generated pointwise: ") + cudaGetErrorString(e);
  return amax ? finishAmax(amax, 1, s) : "";
}

} // namespace octet::rt::cuda::dev

//===- Npz.cpp - NumPy archives through libzip -----------------------------===//
#include "octet/runtime/Npz.h"

#include <zip.h>
#include <zlib.h>

#include <csignal>
#include <cerrno>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <unistd.h>

namespace octet::rt {

uint32_t crc32Of(uint32_t crc, const void *data, size_t n) {
  return uint32_t(crc32_z(crc, static_cast<const Bytef *>(data), z_size_t(n))); // crc32_z: 64-bit lengths
}

namespace {

const char *descrOf(DType t) {
  switch (t) {
  case DType::F32: return "<f4";
  case DType::F64: return "<f8";
  case DType::F16: return "<f2";
  case DType::BF16: return "<u2"; // numpy has no bfloat16: the raw bits
  case DType::I64: return "<i8";
  case DType::I32: return "<i4";
  case DType::I16: return "<i2";
  case DType::I8: return "|i1";
  case DType::Bool: return "|b1";
  default: return "|u1"; // uint8 and FP8 codes
  }
}

DType dtypeOfDescr(const std::string &d) {
  static const std::pair<const char *, DType> table[] = {
      {"f4", DType::F32}, {"f8", DType::F64}, {"f2", DType::F16}, {"i8", DType::I64}, {"i4", DType::I32},
      {"i2", DType::I16}, {"i1", DType::I8},  {"u1", DType::U8},  {"b1", DType::Bool}, {"u2", DType::BF16}};
  if (d.size() != 3 || (d[0] != '<' && d[0] != '|' && d[0] != '='))
    return DType::Invalid;
  for (auto &[s, t] : table)
    if (d.substr(1) == s)
      return t;
  return DType::Invalid;
}

} // namespace

void adoptFp8Codes(Tensor &t, DType want) {
  if (t.dtype == DType::U8 && isFp8(want))
    t.dtype = want;
}

std::string encodeNpy(const Tensor &t) {
  std::string out = npyHeader(t.dtype, t.shape);
  out.append(reinterpret_cast<const char *>(t.bytes.data()), t.bytes.size());
  return out;
}

std::string npyHeader(DType dtype, const Shape &s) {
  std::string shape = "(";
  for (size_t i = 0; i < s.size(); ++i)
    shape += std::to_string(s[i]) + (s.size() == 1 ? "," : i + 1 < s.size() ? ", " : "");
  shape += ")";
  std::string dict = std::string("{'descr': '") + descrOf(dtype) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  uint16_t len = uint16_t(dict.size());
  out.append(reinterpret_cast<const char *>(&len), 2);
  out += dict;
  return out;
}

NpyHeader decodeNpyHeader(const std::string &b, const std::string &what) {
  auto bad = [&](const std::string &m) { return Error(what + ": not a valid .npy array (" + m + ")"); };
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0)
    throw bad("bad magic");
  uint8_t major = uint8_t(b[6]);
  size_t hl, start;
  if (major == 1) {
    uint16_t v;
    std::memcpy(&v, b.data() + 8, 2);
    hl = v;
    start = 10;
  } else {
    uint32_t v;
    if (b.size() < 12)
      throw bad("truncated");
    std::memcpy(&v, b.data() + 8, 4);
    hl = v;
    start = 12;
  }
  if (hl > b.size() - start)
    throw bad("truncated header");
  const std::string h = b.substr(start, hl);
  // The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
  auto after = [&](const std::string &key) {
    size_t p = h.find("'" + key + "'");
    if (p == std::string::npos || (p = h.find(':', p)) == std::string::npos)
      throw bad("no " + key);
    return p + 1;
  };
  size_t q0 = h.find('\'', after("descr")), q1 = q0 == std::string::npos ? q0 : h.find('\'', q0 + 1);
  if (q1 == std::string::npos)
    throw bad("descr is not a quoted string");
  std::string descr = h.substr(q0 + 1, q1 - q0 - 1);
  size_t fo = h.find_first_not_of(' ', after("fortran_order"));
  if (fo != std::string::npos && h.compare(fo, 4, "True") == 0)
    throw bad("Fortran order is not supported");
  size_t s0 = h.find('(', after("shape")), s1 = s0 == std::string::npos ? s0 : h.find(')', s0);
  if (s1 == std::string::npos)
    throw bad("shape is not a tuple");
  Shape shape;
  std::string dims = h.substr(s0 + 1, s1 - s0 - 1);
  for (size_t i = 0; i <= dims.size();) {
    size_t j = std::min(dims.find(',', i), dims.size());
    std::string tok = dims.substr(i, j - i);
    tok.erase(0, tok.find_first_not_of(' '));
    tok.erase(tok.find_last_not_of(' ') + 1);
    if (!tok.empty()) {
      if (tok.size() > 18 || tok.find_first_not_of("0123456789") != std::string::npos)
        throw bad("dimension '" + tok + "' is not a non-negative integer");
      shape.push_back(std::stoll(tok));
    }
    i = j + 1;
  }
  return {descr, shape, start + hl};
}

TensorPtr decodeNpy(const std::string &b, const std::string &what) {
  auto bad = [&](const std::string &m) { return Error(what + ": not a valid .npy array (" + m + ")"); };
  NpyHeader h = decodeNpyHeader(b, what);
  DType t = dtypeOfDescr(h.descr);
  if (t == DType::Invalid)
    throw bad("element type '" + h.descr + "' is not supported");
  int64_t want = checkedBytes(h.shape, dtypeSize(t)); // checked before anything is allocated
  if (want < 0 || uint64_t(b.size() - h.dataOffset) != uint64_t(want))
    throw bad("data size does not match the shape");
  auto tensor = std::make_shared<Tensor>(t, h.shape);
  if (want)
    std::memcpy(tensor->bytes.data(), b.data() + h.dataOffset, size_t(want));
  return tensor;
}

/// Every entry of an open archive (closed on return), each decoded as .npy and given to `visit`
/// in the archive's order, one at a time.
static void readEntries(zip_t *z, const std::string &path, uint64_t archiveBytes, const NpzVisitor &visit) {
  std::unique_ptr<zip_t, int (*)(zip_t *)> guard(z, zip_close);
  zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(z, zip_uint64_t(i), 0, &st) != 0)
      throw Error(path + ": corrupt .npz entry " + std::to_string(i));
    std::string name = st.name;
    // An entry lies inside the archive, and deflate expands at most 1032 times: a larger claimed
    // size is a corrupt (or hostile) archive, refused before the allocation.
    if ((st.valid & ZIP_STAT_SIZE) == 0 || (st.valid & ZIP_STAT_COMP_SIZE) == 0 || st.comp_size > archiveBytes ||
        st.size > st.comp_size * 1032 + 1024)
      throw Error(path + ": entry '" + name + "' claims more bytes than its compressed data can hold");
    zip_file_t *f = zip_fopen_index(z, zip_uint64_t(i), 0);
    if (!f)
      throw Error(path + ": cannot open entry '" + name + "'");
    std::unique_ptr<zip_file_t, int (*)(zip_file_t *)> fguard(f, zip_fclose);
    auto read = [&](void *to, uint64_t n) {
      if (n && zip_fread(f, to, n) != zip_int64_t(n))
        throw Error(path + ": truncated entry '" + name + "'");
    };
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    std::string what = path + ": '" + name + "'";
    // The .npy header first (its length is in bytes 8-11), then the data straight into the tensor.
    std::string head(size_t(std::min<uint64_t>(st.size, 12)), '\0');
    read(head.data(), head.size());
    uint64_t headerEnd = head.size();
    if (head.size() >= 10 && head.compare(0, 6, "\x93NUMPY") == 0) {
      uint32_t hl = uint8_t(head[8]) | uint32_t(uint8_t(head[9])) << 8;
      if (head[6] != 1 && head.size() >= 12)
        hl |= uint32_t(uint8_t(head[10])) << 16 | uint32_t(uint8_t(head[11])) << 24;
      headerEnd = std::min<uint64_t>(st.size, (head[6] == 1 ? 10 : 12) + uint64_t(hl));
    }
    if (headerEnd > head.size()) {
      size_t had = head.size();
      head.resize(size_t(headerEnd));
      read(head.data() + had, headerEnd - had);
    }
    NpyHeader h = decodeNpyHeader(head, what);
    DType t = dtypeOfDescr(h.descr);
    if (t == DType::Invalid)
      throw Error(what + ": not a valid .npy array (element type '" + h.descr + "' is not supported)");
    int64_t want = checkedBytes(h.shape, dtypeSize(t)); // checked before anything is allocated
    if (want < 0 || st.size - h.dataOffset != uint64_t(want))
      throw Error(what + ": not a valid .npy array (data size does not match the shape)");
    auto tensor = std::make_shared<Tensor>(t, h.shape);
    read(tensor->bytes.data(), uint64_t(want));
    fguard.reset();
    visit(name, std::move(tensor));
  }
}

static NpzVisitor collectInto(NamedTensors &out) {
  return [&out](const std::string &name, TensorPtr t) { out.emplace_back(name, std::move(t)); };
}

static std::string zipMessage(zip_error_t *ze) {
  std::string msg = zip_error_strerror(ze);
  zip_error_fini(ze);
  return msg;
}

NamedTensors readNpz(const std::string &path) {
  NamedTensors out;
  forEachNpzEntry(path, collectInto(out));
  return out;
}

void forEachNpzEntry(const std::string &path, const NpzVisitor &visit) {
  int err = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!z) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    throw Error(path + ": cannot read as .npz (" + zipMessage(&ze) + ")");
  }
  std::error_code ec;
  uint64_t bytes = std::filesystem::file_size(path, ec);
  readEntries(z, path, ec ? 0 : bytes, visit);
}

NamedTensors readNpzBytes(const std::string &bytes, const std::string &what) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &ze);
  zip_t *z = src ? zip_open_from_source(src, ZIP_RDONLY, &ze) : nullptr;
  if (!z) {
    if (src)
      zip_source_free(src);
    throw Error(what + ": cannot read as .npz (" + zipMessage(&ze) + ")");
  }
  zip_error_fini(&ze);
  NamedTensors out;
  readEntries(z, what, bytes.size(), collectInto(out));
  return out;
}

static void fsyncAndRename(const std::string &tmp, const std::string &path) {
  int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  // Fault injection for the crash tests: die after the new file is written
  // and before it replaces the old one.
  if (const char *kill = std::getenv("OCTET_TEST_KILL_BEFORE_RENAME"))
    if (*kill && path.find(kill) != std::string::npos)
      ::raise(SIGKILL);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write (" + std::strerror(errno) + ")");
  }
  // Make the rename itself durable.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

/// The temporary beside `path` that this process writes; first removes those that processes no
/// longer alive left there (a run killed mid-write), so they never pile up.
static std::string temporaryFor(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(path), dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::string prefix = p.filename().string() + ".tmp.";
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0)
      continue;
    std::string pid = name.substr(prefix.size());
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9)
      continue;
    pid_t owner = pid_t(std::stol(pid));
    if (owner != ::getpid() && ::kill(owner, 0) != 0 && errno == ESRCH)
      fs::remove(e.path(), ec);
  }
  return path + ".tmp." + std::to_string(::getpid());
}

namespace {
/// One entry's source for libzip, which reads it while zip_close writes the archive: the tensor is
/// fetched when libzip opens the entry and dropped when it closes it.
struct EntrySource {
  const TensorSource *entry;
  std::string header, failure;
  TensorPtr tensor;
  uint64_t at = 0, size = 0;
  zip_error_t error;
};

zip_int64_t entryCallback(void *state, void *data, zip_uint64_t len, zip_source_cmd_t cmd) {
  auto *s = static_cast<EntrySource *>(state);
  switch (cmd) {
  case ZIP_SOURCE_OPEN:
    try {
      s->tensor = s->entry->fetch();
    } catch (const std::exception &e) {
      s->failure = e.what();
    }
    if (!s->tensor || s->tensor->dtype != s->entry->dtype || s->tensor->shape != s->entry->shape) {
      if (s->failure.empty())
        s->failure = "'" + s->entry->name + "' is not the " + dtypeName(s->entry->dtype) + " " +
                     shapeString(s->entry->shape) + " it was announced as";
      zip_error_set(&s->error, ZIP_ER_READ, 0);
      return -1;
    }
    s->at = 0;
    return 0;
  case ZIP_SOURCE_READ: {
    uint64_t n = 0, h = s->header.size();
    auto *out = static_cast<uint8_t *>(data);
    while (n < len && s->at < s->size) {
      uint64_t k;
      if (s->at < h) {
        k = std::min<uint64_t>(len - n, h - s->at);
        std::memcpy(out + n, s->header.data() + s->at, size_t(k));
      } else {
        k = std::min<uint64_t>(len - n, s->size - s->at);
        std::memcpy(out + n, s->tensor->bytes.data() + (s->at - h), size_t(k));
      }
      n += k;
      s->at += k;
    }
    return zip_int64_t(n);
  }
  case ZIP_SOURCE_CLOSE:
    s->tensor.reset();
    return 0;
  case ZIP_SOURCE_STAT: {
    auto *st = static_cast<zip_stat_t *>(data);
    zip_stat_init(st);
    st->size = s->size;
    st->valid |= ZIP_STAT_SIZE;
    return sizeof(zip_stat_t);
  }
  case ZIP_SOURCE_ERROR:
    return zip_error_to_data(&s->error, data, len);
  case ZIP_SOURCE_FREE:
    return 0; // owned by writeNpzStreamed
  case ZIP_SOURCE_SUPPORTS:
    return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                          ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, -1);
  default:
    zip_error_set(&s->error, ZIP_ER_INVAL, 0);
    return -1;
  }
}
} // namespace

void writeNpz(const std::string &path, const NamedTensors &tensors) {
  std::vector<TensorSource> entries;
  entries.reserve(tensors.size());
  for (auto &[name, t] : tensors)
    entries.push_back({name, t->dtype, t->shape, [t = t] { return t; }});
  writeNpzStreamed(path, entries);
}

void writeNpzStreamed(const std::string &path, const std::vector<TensorSource> &entries) {
  std::string tmp = temporaryFor(path);
  int err = 0;
  zip_t *z = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z)
    throw Error(path + ": cannot create the .npz file");
  std::vector<std::unique_ptr<EntrySource>> sources;
  sources.reserve(entries.size());
  auto fail = [&](const std::string &why) {
    zip_discard(z);
    std::remove(tmp.c_str());
    for (auto &s : sources)
      zip_error_fini(&s->error);
    throw Error(path + ": " + why);
  };
  for (const TensorSource &e : entries) {
    auto s = std::make_unique<EntrySource>();
    s->entry = &e;
    s->header = npyHeader(e.dtype, e.shape);
    s->size = s->header.size() + uint64_t(numElements(e.shape)) * dtypeSize(e.dtype);
    zip_error_init(&s->error);
    zip_source_t *src = zip_source_function(z, entryCallback, s.get());
    sources.push_back(std::move(s));
    zip_int64_t idx = src ? zip_file_add(z, (e.name + ".npy").c_str(), src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      if (src)
        zip_source_free(src);
      fail("cannot add '" + e.name + "'");
    }
    zip_set_file_compression(z, zip_uint64_t(idx), ZIP_CM_STORE, 0);
  }
  if (zip_close(z) != 0) {
    for (auto &s : sources)
      if (!s->failure.empty())
        fail("cannot write '" + s->entry->name + "': " + s->failure);
    fail("cannot write the .npz file");
  }
  for (auto &s : sources)
    zip_error_fini(&s->error);
  fsyncAndRename(tmp, path);
}

void writeFileAtomically(const std::string &path, const std::string &bytes) {
  writeFileAtomically(path, [&](const std::function<void(const void *, size_t)> &put) { put(bytes.data(), bytes.size()); });
}

void writeFileAtomically(const std::string &path,
                         const std::function<void(const std::function<void(const void *, size_t)> &put)> &write) {
  std::string tmp = temporaryFor(path);
  FILE *f = std::fopen(tmp.c_str(), "wb");
  auto fail = [&](const std::string &why) {
    if (f)
      std::fclose(f);
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write (" + why + ")");
  };
  if (!f)
    fail(std::strerror(errno));
  try {
    write([&](const void *data, size_t n) {
      if (std::fwrite(data, 1, n, f) != n)
        throw Error(std::strerror(errno));
    });
  } catch (const std::exception &e) {
    fail(e.what());
  }
  if (std::fflush(f) != 0)
    fail(std::strerror(errno));
  ::fsync(fileno(f));
  std::fclose(f);
  fsyncAndRename(tmp, path);
}

} // namespace octet::rt

//===- TrainData.cpp - fp8-run's token files: reading, checking, batching ---===//
#include "TrainData.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace octet::rt {

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

namespace {

/// The ids of `size` bytes at `data` (kept alive by `owner`): the .npy header or the .bin width
/// read, every .npy id checked to be a token id.
TokenData parseTokenBytes(std::shared_ptr<const void> owner, const unsigned char *data, size_t size,
                          const std::string &path, const std::string &dtype) {
  TokenData d;
  d.path = path;
  d.owner = std::move(owner);
  if (endsWith(path, ".npy")) {
    // Token ids as tokenizers and nanoGPT's scripts save them: any little-endian integer type
    // (numpy's uint16 is read as an integer here, not as the BF16 bits Octet's own arrays mean).
    // The header is read from a copy of the first bytes (at most 1 MiB; numpy writes under 1 KiB).
    NpyHeader h = decodeNpyHeader(std::string(reinterpret_cast<const char *>(data), std::min<size_t>(size, 1 << 20)),
                                  path);
    const std::string &dt = h.descr;
    bool little = dt.size() == 3 && (dt[0] == '<' || dt[0] == '|' || dt[0] == '=');
    char kind = dt.size() == 3 ? dt[1] : '?';
    int w = dt.size() == 3 ? dt[2] - '0' : 0;
    bool integer = little && (kind == 'u' || kind == 'i') && (w == 1 || w == 2 || w == 4 || w == 8);
    if (h.shape.size() != 1 || !integer) {
      std::string name = !little ? dt + " (big-endian)"
                         : kind == 'f' ? "float" + std::to_string(8 * w)
                         : kind == 'b' ? std::string("bool")
                                       : dt;
      throw Error(path + ": expected a 1-D integer array of token ids, got " + name + " " + shapeString(h.shape));
    }
    int64_t n = h.shape[0];
    if (n < 0 || h.dataOffset > size || uint64_t(size - h.dataOffset) != uint64_t(n) * uint64_t(w))
      throw Error(path + ": not a valid .npy array (data size does not match the shape)");
    const unsigned char *p = data + h.dataOffset;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t u = 0;
      for (int k = 0; k < w; ++k)
        u |= uint64_t(p[i * w + k]) << (8 * k);
      int64_t v = kind == 'u' ? int64_t(u) : w == 8 ? int64_t(u) : int64_t(u << (64 - 8 * w)) >> (64 - 8 * w);
      if (v < 0 || (kind == 'u' && w == 8 && u > uint64_t(INT64_MAX)) || v > int64_t(UINT32_MAX))
        throw Error(path + ": token " + std::to_string(i) + " is " +
                    (kind == 'u' ? std::to_string(u) : std::to_string(v)) + ", not a token id");
    }
    d.ids = p;
    d.count = size_t(n);
    d.width = w;
    return d;
  }
  size_t w = dtype == "uint16" ? 2 : dtype == "uint32" ? 4 : 0;
  if (!w)
    throw Error("--data-dtype: '" + dtype + "' is not valid; use uint16 or uint32");
  if (size % w)
    throw Error(path + ": " + std::to_string(size) + " bytes is not a whole number of " + dtype +
                " tokens (is --data-dtype right?)");
  d.ids = data;
  d.count = size / w;
  d.width = int(w);
  return d;
}

} // namespace

TokenData readTokens(const std::string &path, const std::string &dtype) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(path + ": cannot read (" + std::strerror(errno) + ")");
  struct stat st {};
  bool statted = ::fstat(fd, &st) == 0;
  if (!statted || !S_ISREG(st.st_mode)) {
    std::string why = statted ? "not a regular file" : std::strerror(errno);
    ::close(fd);
    throw Error(path + ": cannot read (" + why + ")");
  }
  size_t size = size_t(st.st_size);
  std::shared_ptr<const void> owner;
  const unsigned char *data = nullptr;
  if (size) { // read in place: the ranks of a host share the file's pages, none holds a copy
    void *m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      std::string why = std::strerror(errno);
      ::close(fd);
      throw Error(path + ": cannot map (" + why + ")");
    }
    owner = std::shared_ptr<const void>(m, [size](const void *q) { ::munmap(const_cast<void *>(q), size); });
    data = static_cast<const unsigned char *>(m);
  }
  ::close(fd);
  return parseTokenBytes(std::move(owner), data, size, path, dtype);
}

TokenData parseTokens(const std::string &bytes, const std::string &path, const std::string &dtype) {
  auto copy = std::make_shared<const std::string>(bytes);
  return parseTokenBytes(copy, reinterpret_cast<const unsigned char *>(copy->data()), copy->size(), path, dtype);
}

/// The model's vocabulary (indexBound: the rows of the embedding the token input's ids index, or
/// the loss's classes). Every token of `d` must be below it, or the step would stop at that Gather
/// (or, in a plan where nothing checks, read past the table); the file and the first such token are
/// named.
void checkVocabulary(const Plan &p, int tokenInput, const TokenData &d, const std::string &dtype) {
  std::string table;
  int64_t vocab = indexBound(p, tokenInput, &table);
  if (vocab < 0)
    return;
  for (size_t i = 0; i < d.size(); ++i)
    if (int64_t(d[i]) >= vocab)
      throw Error(d.path + ": token " + std::to_string(i) + " is " + std::to_string(d[i]) +
                  ", not below the model's vocabulary of " + std::to_string(vocab) + " (the rows of '" + table +
                  "'); tokenize with the model's tokenizer" +
                  (endsWith(d.path, ".npy") ? "" : " (and check --data-dtype, now " + dtype + ")"));
}

/// splitmix64: the batch positions are a pure function of (seed, step, row),
/// so a resumed run reads exactly the batches the uninterrupted run would.
uint64_t batchMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::string resolveLabels(const Plan &p, const std::string &flag, std::string *why) {
  if (flag == "same" || flag == "shifted") {
    *why = "--labels " + flag;
    return flag;
  }
  if (flag != "auto")
    throw Error("--labels: '" + flag + "' is not valid; use auto, shifted or same");
  auto it = p.training.find("labels");
  auto reason = p.training.find("labels_reason");
  *why = reason == p.training.end() ? "" : reason->second;
  if (it == p.training.end())
    throw Error("--labels auto: the plan does not say how its labels relate to the tokens (compiled by an older "
                "fp8-opt); recompile it, or pass --labels shifted (the model's loss reads the next tokens) or "
                "--labels same (the model shifts its labels itself, as Hugging Face's do)");
  if (it->second == "same" || it->second == "shifted")
    return it->second;
  throw Error("--labels auto: cannot tell how the labels relate to the tokens: " + *why +
              "; pass --labels shifted (the loss reads the next tokens) or --labels same (the model shifts its "
              "labels itself)");
}

} // namespace octet::rt

//===- LargeFileTest.cpp - Plans and checkpoints past 4 GiB --------------===//
//
// A plan and a checkpoint each holding a tensor of 4 GiB + 4 KiB: both load and verify, and one
// byte changed past the first 4 GiB is caught by the checksum (zlib's 32-bit-length crc32 would
// cover only the bytes past 4 GiB, refusing the intact file and missing the change). The
// expected CRCs come from zlib's crc32 fed 1 GiB at a time, not from the code under test.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Npz.h"
#include "octet/runtime/Plan.h"
#include "octet/runtime/Train.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace octet::rt;

namespace {

constexpr int64_t kBig = (int64_t(1) << 32) + 4096;
constexpr int64_t kPast = (int64_t(1) << 32) + 1000; // the byte the tests change

uint32_t chunkedCrc(uint32_t crc, const uint8_t *p, size_t n) {
  while (n) {
    size_t k = std::min(n, size_t(1) << 30);
    crc = uint32_t(crc32(crc, p, uInt(k)));
    p += k;
    n -= k;
  }
  return crc;
}

std::string tempPath(const char *name) {
  return (std::filesystem::temp_directory_path() / (std::string("octet-large-") + std::to_string(getpid()) + name))
      .string();
}

/// A state holder for the checkpoint functions: one uint8 tensor.
class OneState : public Runner {
public:
  explicit OneState(TensorPtr t) : t_(std::move(t)) {
    plan_.values.push_back({"big", DType::U8, false, true, t_->shape});
    plan_.constantKinds[0] = ConstantKind::State; // the checkpoint holds the plan's state
  }
  const Plan &plan() const override { return plan_; }
  void run(const std::map<std::string, TensorPtr> &, bool, bool) override {}
  TensorPtr value(int) const override { return nullptr; }
  std::map<std::string, TensorPtr> state() const override { return {{"big", t_}}; }
  void setState(const std::string &, TensorPtr t) override { t_ = std::move(t); }
  std::string device() const override { return "cpu"; }
  TensorPtr t_;

private:
  Plan plan_;
};

bool enoughDisk() { return std::filesystem::space(std::filesystem::temp_directory_path()).available > (12ull << 30); }

} // namespace

TEST(LargeFile, PlanPast4GiB) {
  if (!enoughDisk())
    GTEST_SKIP() << "needs 12 GiB free in the temporary directory";
  std::string header = R"({"format":"octet-plan","values":[{"name":"big","dtype":"uint8","shape":[)" +
                       std::to_string(kBig) + R"(]}],"inputs":[],"outputs":[0],"constants":[{"value":0,"offset":0,)" +
                       R"("bytes":)" + std::to_string(kBig) + R"(,"kind":"param"}],"ops":[]})";
  std::vector<uint8_t> data(size_t(kBig), 0);
  for (int64_t i = 0; i < kBig; i += 4093)
    data[size_t(i)] = uint8_t(i * 7);
  uint64_t dataOffset = kPlanHeaderBytes + header.size();
  uint32_t crc = chunkedCrc(chunkedCrc(0, reinterpret_cast<const uint8_t *>(header.data()), header.size()),
                            data.data(), data.size());
  uint8_t fixed[kPlanHeaderBytes] = {};
  std::memcpy(fixed, kPlanMagic, 8);
  uint32_t version = kPlanVersion;
  uint64_t sizes[3] = {header.size(), dataOffset, uint64_t(kBig)};
  std::memcpy(fixed + 8, &version, 4);
  std::memcpy(fixed + 16, sizes, 24);
  std::memcpy(fixed + 40, &crc, 4);
  std::string path = tempPath(".plan");
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char *>(fixed), kPlanHeaderBytes);
    f << header;
    f.write(reinterpret_cast<const char *>(data.data()), std::streamsize(data.size()));
    ASSERT_TRUE(f.good());
  }
  std::vector<uint8_t> window(data.begin() + kPast - 64, data.begin() + kPast + 64);
  std::vector<uint8_t>().swap(data); // the loader's copy alone, as fp8-run would hold it
  {
    Plan p = loadPlan(path);
    ASSERT_EQ(p.constants.size(), 1u);
    const Tensor &t = *p.constants.at(0);
    ASSERT_EQ(t.numel(), kBig);
    EXPECT_EQ(std::memcmp(t.bytes.data() + kPast - 64, window.data(), 128), 0);
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(dataOffset + kPast));
    char c = char(window[64] ^ 1);
    f.write(&c, 1);
  }
  try {
    loadPlan(path);
    ADD_FAILURE() << "a byte changed past 4 GiB was not caught";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("corrupt (checksum mismatch)"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(LargeFile, CheckpointPast4GiB) {
  if (!enoughDisk())
    GTEST_SKIP() << "needs 12 GiB free in the temporary directory";
  auto big = std::make_shared<Tensor>(DType::U8, Shape{kBig});
  for (int64_t i = 0; i < kBig; i += 4093)
    big->bytes[size_t(i)] = uint8_t(i * 5 + 1);
  std::string path = tempPath(".npz"), bad = tempPath("-bad.npz");
  OneState r(big);
  writeCheckpoint(path, r, CheckpointMeta{7, 42, "tokens.bin", "te", 1});

  // The checkpoint's CRC covers the name and every byte.
  NamedTensors ts = readNpz(path);
  ASSERT_EQ(ts.size(), 2u);
  TensorPtr meta;
  for (auto &[name, t] : ts)
    if (name == "octet.meta")
      meta = t;
  ASSERT_TRUE(meta);
  std::string json(meta->bytes.begin(), meta->bytes.end());
  uint32_t want = chunkedCrc(chunkedCrc(0, reinterpret_cast<const uint8_t *>("big"), 3), big->bytes.data(),
                             big->bytes.size());
  EXPECT_NE(json.find("\"crc32\":" + std::to_string(want)), std::string::npos) << json;
  ts.clear();

  CheckpointMeta m = loadCheckpoint(path, r); // replaces r's tensor by the one read back
  EXPECT_EQ(m.step, 7);
  ASSERT_NE(r.t_, big);
  ASSERT_EQ(r.t_->numel(), kBig);
  EXPECT_EQ(std::memcmp(r.t_->bytes.data() + kPast - 64, big->bytes.data() + kPast - 64, 128), 0);
  r.t_ = big;

  // The same metadata over a tensor with one byte changed past 4 GiB (the archive itself intact).
  big->bytes[size_t(kPast)] ^= 1;
  writeNpz(bad, {{"big", big}, {"octet.meta", meta}});
  try {
    loadCheckpoint(bad, r);
    ADD_FAILURE() << "a byte changed past 4 GiB was not caught";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
  std::filesystem::remove(bad);
}

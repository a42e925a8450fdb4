//===- TestPlan.h - A plan file written by hand, for the runtime tests -----===//
#ifndef OCTET_TEST_UNIT_TESTPLAN_H
#define OCTET_TEST_UNIT_TESTPLAN_H

#include "octet/runtime/Npz.h"
#include "octet/runtime/Plan.h"

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace octet::rt {

// A plan file written by hand (docs/PLAN.md): a 3 MiB float32 parameter `w` [768, 1024], a 2 MiB
// zero splat state `m` [512, 1024], a small parameter `b` [4], and Identity ops returning w and b.
inline std::string writeTestPlan(const std::string &path, std::vector<float> &w) {
  w.resize(768 * 1024);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = float(i % 1000) * 0.25f - float(i / 1000);
  std::string data(w.size() * 4, '\0');
  std::memcpy(data.data(), w.data(), data.size());
  size_t bAt = data.size(), mAt = bAt + 16;
  float b[4] = {1, 2, 3, 4};
  data.append(reinterpret_cast<const char *>(b), 16);
  data.append(4, '\0'); // m's one element
  std::string header =
      R"({"format": "octet-plan", "version": 1, "producer": "test",)"
      R"( "values": [{"name": "w", "dtype": "float32", "shape": [768, 1024]},)"
      R"( {"name": "b", "dtype": "float32", "shape": [4]},)"
      R"( {"name": "m", "dtype": "float32", "shape": [512, 1024]},)"
      R"( {"name": "w_out", "dtype": "float32", "shape": [768, 1024]},)"
      R"( {"name": "b_out", "dtype": "float32", "shape": [4]}],)"
      R"( "outputs": [3, 4],)"
      R"( "constants": [{"value": 0, "offset": 0, "bytes": )" + std::to_string(bAt) + R"(, "kind": "param"},)"
      R"( {"value": 1, "offset": )" + std::to_string(bAt) + R"(, "bytes": 16, "kind": "param"},)"
      R"( {"value": 2, "offset": )" + std::to_string(mAt) + R"(, "bytes": 4, "kind": "state", "splat": true}],)"
      R"( "ops": [{"type": "Identity", "name": "id_w", "in": [0], "out": [3]},)"
      R"( {"type": "Identity", "name": "id_b", "in": [1], "out": [4]}]})";
  uint64_t dataOffset = (kPlanHeaderBytes + header.size() + kPlanDataAlign - 1) / kPlanDataAlign * kPlanDataAlign;
  std::string file(size_t(dataOffset), '\0');
  std::memcpy(file.data(), kPlanMagic, 8);
  auto put = [&](size_t at, uint64_t v, int n) { std::memcpy(file.data() + at, &v, size_t(n)); };
  put(8, kPlanVersion, 4);
  put(16, header.size(), 8);
  put(24, dataOffset, 8);
  put(32, data.size(), 8);
  uint32_t crc = crc32Of(crc32Of(0, header.data(), header.size()), data.data(), data.size());
  put(40, crc, 4);
  std::memcpy(file.data() + kPlanHeaderBytes, header.data(), header.size());
  file += data;
  std::ofstream(path, std::ios::binary) << file;
  return file;
}

} // namespace octet::rt

#endif

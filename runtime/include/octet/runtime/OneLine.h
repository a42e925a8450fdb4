//===- OneLine.h - An error message as one line ---------------------------===//
//
// Tools print each error as one line. A message that quotes a name or value from a user's file
// (an ONNX node name, a YAML key) may hold newlines or terminal control bytes: oneLine writes
// them as \n, \r, \t and \xNN escapes. Bytes >= 0x80 (UTF-8) pass unchanged. Header-only: the
// compiler and the runtime (which links no LLVM) both use it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace octet {

inline std::string oneLine(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else
      out += char(c);
  }
  return out;
}

} // namespace octet

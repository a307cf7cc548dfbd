// A value from a user as an error line shows it: control characters written out ("\n", "\t",
// "\x01"), so that an error stays one line whatever the value holds.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace roce {

inline std::string shown(std::string_view v) {
  std::string s;
  s.reserve(v.size());
  for (const char ch : v) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      s += "\\n";
    } else if (ch == '\t') {
      s += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      s += buf;
    } else {
      s += ch;
    }
  }
  return s;
}

}  // namespace roce

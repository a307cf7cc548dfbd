// The command-line tools' parse step (CLI11), alike in each: a bad argument is one line on
// stderr, "TOOL: why", and exit status 2 (CLI11_PARSE prints two lines and exits 105-112).
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace roce::apps {

// CLI11's Range lets "nan" through (every comparison with NaN is false): check this first.
inline const CLI::Validator kNotNan(
    [](std::string& s) {
      return std::isnan(std::strtod(s.c_str(), nullptr)) ? "'" + s + "' is not a number"
                                                         : std::string();
    },
    "", "NOT_NAN");

// CLI11 reads unsigned options with strtoull, which takes "-1" for 2^64-1: check this on
// unsigned options that have no Range.
inline const CLI::Validator kNoMinus(
    [](std::string& s) {
      const size_t i = s.find_first_not_of(" \t");
      return i != std::string::npos && s[i] == '-' ? "'" + s + "' is negative" : std::string();
    },
    "", "NO_MINUS");

// Parses the command line. Returns -1 to go on, else the exit status: 0 after --help (printed),
// 2 after a bad argument (said on stderr).
inline int parse_command_line(CLI::App& app, int argc, char** argv, const char* tool) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
    return 2;
  }
  return -1;
}

}  // namespace roce::apps

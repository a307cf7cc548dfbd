#include "apps/perf/transport_select.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

namespace roce::perf {

int exec_sibling(const char* name, char** argv) {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    std::fprintf(stderr, "roce-perf: cannot find my own executable: %s\n", std::strerror(errno));
    return 1;
  }
  self[n] = '\0';
  std::string path(self);
  const size_t slash = path.rfind('/');
  path = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + name;
  execv(path.c_str(), argv);
  std::fprintf(stderr, "roce-perf: cannot run %s: %s\n", path.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace roce::perf

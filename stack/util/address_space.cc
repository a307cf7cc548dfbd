#include "stack/util/address_space.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <string>
#include <string_view>

namespace roce {

namespace {
// A walk over the mappings, which /proc/self/maps lists in address order without overlaps:
// from the range's first byte, each next mapping must start where the last one ended and allow
// the access, until one reaches the range's last byte.
class Walk {
 public:
  enum Verdict { kOpen, kYes, kNo };
  Walk(uintptr_t first, uintptr_t last, bool write) : next_(first), last_(last), write_(write) {}

  // One line: "start-end perms offset dev inode [path]", addresses in hex.
  Verdict line(std::string_view text) {
    const char* end = text.data() + text.size();
    uintptr_t start = 0, stop = 0;  // [start, stop)
    auto r = std::from_chars(text.data(), end, start, 16);
    if (r.ec != std::errc() || r.ptr == end || *r.ptr != '-') return kOpen;
    r = std::from_chars(r.ptr + 1, end, stop, 16);
    if (r.ec != std::errc() || end - r.ptr < 3 || *r.ptr != ' ') return kOpen;
    if (stop <= next_) return kOpen;  // before the range, or what was already covered
    if (start > next_) return kNo;    // a hole
    if (r.ptr[1] != 'r' || (write_ && r.ptr[2] != 'w')) return kNo;
    if (stop - 1 >= last_) return kYes;
    next_ = stop;
    return kOpen;
  }

 private:
  uintptr_t next_;  // the first byte not yet found accessible
  const uintptr_t last_;
  const bool write_;
};
}  // namespace

bool range_accessible(const void* addr, uint64_t len, bool write) {
  if (len == 0) return true;
  const auto first = reinterpret_cast<uintptr_t>(addr);
  if (len - 1 > UINTPTR_MAX - first) return false;  // past the top of the address space
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  Walk walk(first, first + static_cast<uintptr_t>(len - 1), write);
  Walk::Verdict v = Walk::kOpen;
  // The kernel makes at most a page of text per read(), and reading stops once the range is
  // decided: the mappings above it are never formatted.
  char chunk[4096];
  std::string text;  // what was read and not yet parsed
  ssize_t n = 0;
  while (v == Walk::kOpen && (n = read(fd, chunk, sizeof chunk)) > 0) {
    text.append(chunk, static_cast<size_t>(n));
    size_t from = 0;
    for (size_t eol; v == Walk::kOpen && (eol = text.find('\n', from)) != std::string::npos;
         from = eol + 1) {
      v = walk.line(std::string_view(text).substr(from, eol - from));
    }
    text.erase(0, from);
  }
  close(fd);
  if (v == Walk::kOpen) return n < 0;  // the end: beyond the last mapping (a failed read: unknown)
  return v == Walk::kYes;
}

}  // namespace roce

#include "stack/util/pcap_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace roce {

namespace {
constexpr size_t kBufferBytes = 1 << 20;

// How many of the first `done` bytes of `buf` are whole: the `first` bytes (the file header, if
// the buffer starts with it), then whole records, counted in *records.
size_t whole_records(const std::vector<uint8_t>& buf, size_t first, size_t done,
                     uint64_t* records) {
  if (done < first) return 0;
  size_t pos = first;
  while (pos + 16 <= done) {
    uint32_t cap;
    std::memcpy(&cap, buf.data() + pos + 8, sizeof cap);
    if (pos + 16 + cap > done) break;
    pos += 16 + cap;
    ++*records;
  }
  return pos;
}
}  // namespace

bool PcapWriter::open(const std::string& path, std::string* err, uint32_t snaplen) {
  close();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    *err = "cannot create capture file '" + path + "': " + std::strerror(errno);
    return false;
  }
  path_ = path;
  snaplen_ = snaplen;
  frames_ = buffered_frames_ = file_bytes_ = 0;
  error_.clear();
  buf_.clear();
  buf_.reserve(kBufferBytes);
  // Global header: magic, version 2.4, GMT offset 0, accuracy 0, snaplen, LINKTYPE_ETHERNET.
  const uint32_t hdr[6] = {0xA1B2C3D4u, 0x00040002u, 0, 0, snaplen, 1};
  append(hdr, sizeof hdr);
  return true;
}

void PcapWriter::append(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  buf_.insert(buf_.end(), b, b + n);
}

void PcapWriter::write(const uint8_t* frame, uint32_t len, uint64_t time_ns) {
  if (fd_ < 0 || !error_.empty()) return;
  const uint32_t cap = len < snaplen_ ? len : snaplen_;
  if (buf_.size() + 16 + cap > kBufferBytes && !drain()) return;
  const uint32_t rec[4] = {static_cast<uint32_t>(time_ns / 1000000000u),
                           static_cast<uint32_t>(time_ns % 1000000000u / 1000u), cap, len};
  append(rec, sizeof rec);
  append(frame, cap);
  ++frames_;
  ++buffered_frames_;
}

// Writes the buffer out; on failure cuts the file back to the last whole record and ends the
// capture.
bool PcapWriter::drain() {
  size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      // Keep what reached the file up to its last whole record.
      uint64_t kept_frames = 0;
      const size_t keep = whole_records(buf_, file_bytes_ == 0 ? 24 : 0, done, &kept_frames);
      frames_ -= buffered_frames_ - kept_frames;
      error_ = "cannot write '" + path_ + "' after " + std::to_string(frames_) +
               " frames: " + std::strerror(e);
      if (::ftruncate(fd_, static_cast<off_t>(file_bytes_ + keep)) != 0) {
        error_ += " (and cannot cut it back to whole records)";
      }
      buf_.clear();
      buffered_frames_ = 0;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  file_bytes_ += buf_.size();
  buf_.clear();
  buffered_frames_ = 0;
  return true;
}

void PcapWriter::flush() {
  if (fd_ >= 0 && error_.empty()) drain();
}

bool PcapWriter::close() {
  if (fd_ < 0) return error_.empty();
  flush();
  if (::close(fd_) != 0 && error_.empty()) {
    error_ = "cannot write '" + path_ + "': " + std::strerror(errno);
  }
  fd_ = -1;
  return error_.empty();
}

}  // namespace roce

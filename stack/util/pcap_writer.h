// Writes frames to a classic pcap file (microsecond timestamps, Ethernet link type), buffered.
// Used by the engine's capture tap (--pcap / pcap = FILE): one call per frame, on the engine
// thread, only when capture is on.
//
// Only whole records reach the file: the buffer is written out when the next record would not
// fit, on flush() and on close(), so a capture read while it is written, or left by a process
// that was killed, ends on a record boundary. A write that fails (the disk is full) cuts the file
// back to the last whole record and ends the capture: error() says why, frames() how many
// frames the file keeps. The buffer is this object's own (not stdio's), so a fork()ed child that
// exits writes nothing to the parent's file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roce {

class PcapWriter {
 public:
  PcapWriter() = default;
  ~PcapWriter() { close(); }
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // false (and *err) if the file cannot be created.
  bool open(const std::string& path, std::string* err, uint32_t snaplen = 65535);
  void write(const uint8_t* frame, uint32_t len, uint64_t time_ns);
  void flush();
  // Writes what is buffered and closes the file; false if a write failed (see error()).
  bool close();
  // Frames written (or buffered); after a failed write, the frames the file keeps.
  uint64_t frames() const { return frames_; }
  bool is_open() const { return fd_ >= 0; }
  // Empty, or why the capture ended early ("cannot write 'FILE' after N frames: ...").
  const std::string& error() const { return error_; }

 private:
  void append(const void* p, size_t n);
  bool drain();

  int fd_ = -1;
  std::string path_;
  uint32_t snaplen_ = 65535;
  uint64_t frames_ = 0;
  uint64_t buffered_frames_ = 0;  // of frames_, those still in buf_
  uint64_t file_bytes_ = 0;       // bytes in the file: always a record boundary
  std::vector<uint8_t> buf_;
  std::string error_;
};

}  // namespace roce

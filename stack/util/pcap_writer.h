// Writes frames to a classic pcap file (microsecond timestamps, Ethernet link type), buffered.
// Used by the engine's capture tap (--pcap / pcap = FILE): one call per frame, on the engine
// thread, only when capture is on.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

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
  void close();
  uint64_t frames() const { return frames_; }
  bool is_open() const { return f_ != nullptr; }

 private:
  FILE* f_ = nullptr;
  uint32_t snaplen_ = 65535;
  uint64_t frames_ = 0;
};

}  // namespace roce

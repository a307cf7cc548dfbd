// Reads frames from a capture file (pcap or pcapng, any link type libpcap knows) through libpcap.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace roce::apps {

struct CapturedFrame {
  uint64_t index = 0;  // 1-based frame number, as tshark numbers them
  std::span<const uint8_t> bytes;
  uint32_t orig_len = 0;  // length on the wire (bytes.size() is less if the capture was cut)
};

class PcapReader {
 public:
  // Opens `path`; on failure returns nullptr and sets *error.
  static std::unique_ptr<PcapReader> open(const std::string& path, std::string* error);
  ~PcapReader();
  PcapReader(const PcapReader&) = delete;
  PcapReader& operator=(const PcapReader&) = delete;

  // Whether frames are Ethernet (DLT_EN10MB); others cannot hold RoCEv2 as we parse it.
  bool is_ethernet() const;
  int link_type() const;
  // Next frame; false at the end or on a read error (see error()).
  bool next(CapturedFrame& frame);
  const std::string& error() const { return error_; }

 private:
  explicit PcapReader(void* handle) : handle_(handle) {}
  void* handle_;
  uint64_t index_ = 0;
  std::string error_;
};

}  // namespace roce::apps

#include "stack/util/pcap_writer.h"

#include <cerrno>
#include <cstring>

namespace roce {

bool PcapWriter::open(const std::string& path, std::string* err, uint32_t snaplen) {
  close();
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) {
    *err = "cannot create capture file '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  snaplen_ = snaplen;
  // Global header: magic, version 2.4, GMT offset 0, accuracy 0, snaplen, LINKTYPE_ETHERNET.
  const uint32_t hdr[6] = {0xA1B2C3D4u, 0x00040002u, 0, 0, snaplen, 1};
  std::fwrite(hdr, sizeof hdr, 1, f_);
  return true;
}

void PcapWriter::write(const uint8_t* frame, uint32_t len, uint64_t time_ns) {
  if (!f_) return;
  const uint32_t cap = len < snaplen_ ? len : snaplen_;
  const uint32_t rec[4] = {static_cast<uint32_t>(time_ns / 1000000000u),
                           static_cast<uint32_t>(time_ns % 1000000000u / 1000u), cap, len};
  std::fwrite(rec, sizeof rec, 1, f_);
  std::fwrite(frame, cap, 1, f_);
  ++frames_;
}

void PcapWriter::flush() {
  if (f_) std::fflush(f_);
}

void PcapWriter::close() {
  if (f_) std::fclose(f_);
  f_ = nullptr;
}

}  // namespace roce

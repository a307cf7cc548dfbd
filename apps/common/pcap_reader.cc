#include "apps/common/pcap_reader.h"

#include <pcap/pcap.h>

namespace roce::apps {

std::unique_ptr<PcapReader> PcapReader::open(const std::string& path, std::string* error) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_open_offline(path.c_str(), errbuf);
  if (!p) {
    *error = errbuf;
    return nullptr;
  }
  return std::unique_ptr<PcapReader>(new PcapReader(p));
}

PcapReader::~PcapReader() { pcap_close(static_cast<pcap_t*>(handle_)); }

int PcapReader::link_type() const { return pcap_datalink(static_cast<pcap_t*>(handle_)); }
bool PcapReader::is_ethernet() const { return link_type() == DLT_EN10MB; }

bool PcapReader::next(CapturedFrame& frame) {
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  int rc = pcap_next_ex(static_cast<pcap_t*>(handle_), &hdr, &data);
  if (rc == 1) {
    frame.index = ++index_;
    frame.bytes = std::span<const uint8_t>(data, hdr->caplen);
    frame.orig_len = hdr->len;
    return true;
  }
  if (rc == PCAP_ERROR) error_ = pcap_geterr(static_cast<pcap_t*>(handle_));
  return false;
}

}  // namespace roce::apps

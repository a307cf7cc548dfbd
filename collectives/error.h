// The one exception type of the collectives: a message a user can act on. The C API turns it
// into an error code and keeps the message for roce_coll_last_error().
#pragma once

#include <stdexcept>
#include <string>

namespace roce::coll {

enum class ErrorKind {
  kInvalidArgument,  // a caller's mistake (bad count, type, root, rank, environment value)
  kTimeout,          // a rendezvous or a collective waited past its limit
  kPeerFailed,       // a peer died or its QP entered the error state
  kSystem,           // the provider or the OS refused (device, registration, socket)
  kMismatch,         // ranks called different collectives, counts or types
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what, int peer = -1)
      : std::runtime_error(what), kind_(kind), peer_(peer) {}
  ErrorKind kind() const { return kind_; }
  int peer() const { return peer_; }  // the rank at fault, -1 if none

 private:
  ErrorKind kind_;
  int peer_;
};

}  // namespace roce::coll

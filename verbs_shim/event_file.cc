#include "verbs_shim/event_file.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace roce::verbs {

int EventFd::open() {
  int sv[2];
  // Blocking by default, as the kernel's event files are; the application sets O_NONBLOCK on
  // its end if it wants (ibv_get_cq_event(3), ibv_get_async_event(3)).
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return errno;
  app_ = sv[0];
  own_ = sv[1];
  return 0;
}

void EventFd::close() {
  if (app_ >= 0) ::close(app_);
  if (own_ >= 0) ::close(own_);
  app_ = own_ = -1;
}

void EventFd::raise() {
  const char one = 1;
  // One byte in an empty socket: this cannot block or fail for want of room.
  if (send(own_, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
    // Nothing else can fail here.
  }
}

void EventFd::lower() {
  char byte;
  // The byte raise() sent is there (the caller holds the lock both run under): no waiting.
  if (recv(app_, &byte, 1, MSG_DONTWAIT) != 1) {
    // Nothing else can fail here.
  }
}

int EventFd::wait() const {
  char byte;
  const ssize_t n = recv(app_, &byte, 1, MSG_PEEK);
  if (n == 1) return 0;
  return n == 0 ? EIO : errno;  // 0: the shim's end is closed
}

}  // namespace roce::verbs

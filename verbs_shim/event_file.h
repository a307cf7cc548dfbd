// The shim's event files: a completion channel's fd and a context's async_fd. Each is a queue
// of events behind a descriptor that is readable exactly while the queue holds an event, as the
// kernel's uverbs event files are: poll/epoll see it, ibv_get_cq_event / ibv_get_async_event
// block on it unless the application set O_NONBLOCK (then -1 with EAGAIN), and the unread
// events of a destroyed object leave with it, so the descriptor is not left readable with
// nothing to read (a blocking read would then sleep).
//
// The application's descriptor is one end of a socket pair. The shim's end sends one byte when
// the queue becomes non-empty, and the application's end takes it back when the queue becomes
// empty, both under the queue's lock: whenever the lock is free, the byte is there exactly when
// an event is. A reader that finds the queue empty waits with recv(MSG_PEEK), which takes
// nothing and waits as the kernel file's read does (blocking unless O_NONBLOCK; restarted after
// a signal handler installed with SA_RESTART, interrupted with EINTR otherwise). An eventfd
// cannot do this: waiting on it means reading it, which takes its count away from the lock's
// view, or poll(), which every signal interrupts. (Edge-triggered epoll sees an edge when the
// queue becomes non-empty, not one per event: such a reader takes events until EAGAIN.)
#pragma once

#include <deque>
#include <mutex>

namespace roce::verbs {

// The descriptor pair.
class EventFd {
 public:
  EventFd() = default;
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;
  ~EventFd() { close(); }

  int open();  // 0 or an errno
  void close();
  int fd() const { return app_; }  // the application's end
  // Under the owner's lock: make the descriptor readable, or not (it is, before lower()).
  void raise();
  void lower();
  // Waits until the descriptor is readable, as its mode says: 0, or an errno (EAGAIN, EINTR).
  int wait() const;

 private:
  int app_ = -1;
  int own_ = -1;
};

template <typename T>
class EventFile {
 public:
  int open() { return fd_.open(); }
  void close() { fd_.close(); }
  int fd() const { return fd_.fd(); }

  void push(const T& e) {
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(e);
    if (q_.size() == 1) fd_.raise();
  }
  // Takes the oldest event into *out, waiting for one unless the descriptor is O_NONBLOCK;
  // on_take(*out) runs under the queue's lock, on_wait() before each wait. 0, or an errno
  // (EAGAIN, EINTR).
  template <typename OnTake, typename OnWait>
  int take(T* out, OnTake&& on_take, OnWait&& on_wait) {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!q_.empty()) {
          *out = q_.front();
          q_.pop_front();
          if (q_.empty()) fd_.lower();
          on_take(*out);
          return 0;
        }
      }
      // Another reader may take the event this wait saw: then wait again.
      on_wait();
      if (int rc = fd_.wait()) return rc;
    }
  }
  template <typename OnTake>
  int take(T* out, OnTake&& on_take) {
    return take(out, on_take, [] {});
  }
  // Drops the queued events that match (their object is being destroyed).
  template <typename Match>
  void remove_if(Match&& match) {
    std::lock_guard<std::mutex> lock(mu_);
    if (q_.empty()) return;
    std::erase_if(q_, match);
    if (q_.empty()) fd_.lower();
  }

 private:
  std::mutex mu_;
  std::deque<T> q_;
  EventFd fd_;
};

}  // namespace roce::verbs

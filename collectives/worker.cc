#include "collectives/worker.h"

namespace roce::coll {

Worker::~Worker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Work::State> Worker::submit(std::function<void()> task) {
  auto s = std::make_shared<Work::State>();
  s->task = std::move(task);
  {
    std::lock_guard lock(mu_);
    queue_.push_back(s);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_all();
  return s;
}

void Worker::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void Worker::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    auto s = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      s->task();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard l(s->mu);
      s->error = error;
      s->done = true;
      s->task = nullptr;
    }
    s->cv.notify_all();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

bool Work::test() {
  if (!state_) return true;
  std::lock_guard lock(state_->mu);
  if (state_->done && state_->error) std::rethrow_exception(state_->error);
  return state_->done;
}

void Work::wait() {
  if (!state_) return;
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [this] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

}  // namespace roce::coll

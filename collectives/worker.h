// The thread that runs a communicator's asynchronous operations, one after another in the order
// they were started. Started on first use.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "collectives/communicator.h"

namespace roce::coll {

struct Work::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  std::function<void()> task;
};

class Worker {
 public:
  ~Worker();
  std::shared_ptr<Work::State> submit(std::function<void()> task);
  // Returns once every submitted task has finished.
  void drain();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Work::State>> queue_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace roce::coll

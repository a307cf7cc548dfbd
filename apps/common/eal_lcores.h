// EAL's lcores for a tool that runs beside other stack instances on one machine.
#pragma once

#include <sched.h>

#include <string>

#include "stack/device_config.h"

namespace roce::apps {

// EAL pins the thread that starts it to its main lcore's CPU (CPU 0 by default), and the engine
// thread started afterwards inherits that: two instances on one machine would share CPU 0. One
// lcore that may run on every CPU we may run on keeps the scheduler in charge (`cpu = N` still
// pins the engine thread). Nothing changes if the device's `eal` arguments choose lcores.
inline void add_default_lcores(DeviceConfig* cfg) {
  for (const std::string& a : cfg->eal_args) {
    if (a.rfind("--lcores", 0) == 0 || a == "-l" || a == "-c" || a.rfind("-l", 0) == 0) return;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return;
  std::string cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
  }
  if (!cpus.empty()) cfg->eal_args.push_back("--lcores=0@(" + cpus + ")");
}

}  // namespace roce::apps

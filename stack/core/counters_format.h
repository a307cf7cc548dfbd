// Human-readable counters of an engine and its QPs, for tools (roce-perf --counters, the
// device's stats dump). Zero counters are left out so the output shows what happened.
#pragma once

#include <string>

#include "stack/core/engine.h"

namespace roce {

std::string format_engine_counters(const Engine& e);
std::string format_qp_counters(const Qp& q);

}  // namespace roce

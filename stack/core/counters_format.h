// Human-readable counters of an engine and its QPs, for tools (roce-perf --counters, the
// device's stats dump). Zero counters are left out so the output shows what happened.
#pragma once

#include <string>

#include "stack/core/engine.h"
#include "stack/core/runner.h"

namespace roce {

std::string format_engine_counters(const Engine& e);
std::string format_qp_counters(const Qp& q);
std::string format_destroyed_qp_counters(const Engine& e);
// The engine thread's idle behaviour (threaded mode): how often it found work, yielded its core
// (and got it back only late, with work waiting: a thread sharing the core starved it), slept.
std::string format_runner_counters(const RunnerStats& s);
// Inline mode: what the standby driver did (EngineRunner::standby, run by the verbs shim's event
// pump while a CQ is armed on a completion channel); empty if it never ran.
std::string format_standby_counters(const RunnerStats& s);

}  // namespace roce

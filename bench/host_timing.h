#pragma once
// Timing on the host, shared by the CPU benchmarks: a median of calls, the copy bandwidth baseline
// with all of kiln's threads (or one), and the CPU's name.
#include <functional>
#include <string>

namespace kiln::bench {

// Median ms of `reps` timed calls of `fn` after one warm-up call.
double median_ms(const std::function<void()>& fn, int reps);

// Copy GB/s counting bytes read plus bytes written, 512 MiB each way (far larger than the
// caches), split over kiln's pool in 1 MiB chunks (`all_threads`), or one memcpy.
double host_copy_gbps(int reps, bool all_threads);

// The CPU's model name from /proc/cpuinfo ("unknown CPU" where there is none).
std::string cpu_model();

}  // namespace kiln::bench

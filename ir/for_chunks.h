#pragma once
// Host loops over many independent elements split among the host's cores: making and scaling
// the random inputs of a 1.1B-parameter training step took over 200 s on one core of the GPU
// machine, before any timing (bench/NOTES.md, stop 40).
#include <cstdint>
#include <functional>

namespace kiln {

// Calls body(begin, end) over [0, n) in contiguous chunks, on up to hardware_concurrency threads
// when n is large (one call on this thread otherwise); returns when every chunk is done. The
// chunks must be independent (each writes its own elements). An exception of a chunk is
// rethrown here.
void for_chunks(int64_t n, const std::function<void(int64_t begin, int64_t end)>& body);

}  // namespace kiln

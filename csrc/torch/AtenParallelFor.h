// The runtime's ParallelFor on torch's own thread pool.
#ifndef TILE_TORCH_ATENPARALLELFOR_H
#define TILE_TORCH_ATENPARALLELFOR_H

#include <ATen/Parallel.h>

#include <cstdint>
#include <functional>

namespace tile::binding {

/// at::parallel_for, as runtime::ParallelFor takes it: the runtime's CPU work (launches,
/// packing, copies) runs on the threads torch's own ops use.
inline void atenParallelFor(int64_t begin, int64_t end, int64_t grain,
                            const std::function<void(int64_t, int64_t)> &body) {
  at::parallel_for(begin, end, grain, body);
}

} // namespace tile::binding

#endif

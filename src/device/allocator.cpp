#include "outcore/device/allocator.hpp"

#include <fmt/format.h>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace outcore {

RawBlock Allocator::allocate_raw(const AllocationRequest& request) {
    if (request.bytes == 0) throw UsageError("allocate", "a request for 0 bytes");
    if (request.alignment != 0 && !is_power_of_two(request.alignment)) {
        throw UsageError("allocate", fmt::format("alignment {} is not a power of two", request.alignment));
    }
    return do_allocate(request);
}

}  // namespace outcore

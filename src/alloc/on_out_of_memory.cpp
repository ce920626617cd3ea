#include "outcore/alloc/on_out_of_memory.hpp"

#include <utility>

namespace outcore::alloc {

OnOutOfMemory::OnOutOfMemory(Allocator& upstream, OnOutOfMemoryOptions options)
    : upstream_(upstream), callback_(std::move(options.on_out_of_memory)), max_retries_(options.max_retries) {
    if (!callback_) throw UsageError("on-out-of-memory", "the on_out_of_memory callback is empty");
}

RawBlock OnOutOfMemory::do_allocate(const AllocationRequest& request) {
    for (std::uint64_t attempt = 1;; ++attempt) {
        try {
            RawBlock raw = upstream_.allocate_raw(request);
            if (attempt > 1) recovered_.fetch_add(1, std::memory_order_relaxed);
            return raw;
        } catch (const OutOfMemory& error) {
            // attempt - 1 retries are spent; a callback that freed nothing makes a retry
            // pointless, so give up at once rather than spin.
            if (attempt > max_retries_ || !callback_(error, attempt)) {
                given_up_.fetch_add(1, std::memory_order_relaxed);
                throw;
            }
            retries_.fetch_add(1, std::memory_order_relaxed);
        }
    }
}

void OnOutOfMemory::do_deallocate(const RawBlock& block) noexcept { upstream_.deallocate_raw(block); }

}  // namespace outcore::alloc

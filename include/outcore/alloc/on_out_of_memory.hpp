// outcore/alloc/on_out_of_memory.hpp — "resource creation failed: free something,
// try again" as an Allocator over another one.
//
// When upstream throws OutOfMemory, a callback is asked to free memory (evict a
// cache, drop a pool's spare blocks). If it says it freed something, the request is
// retried, up to a bound; otherwise, or past the bound, the last OutOfMemory is
// rethrown unchanged. Out-of-memory never aborts.
//
//   outcore::alloc::OnOutOfMemory retrying(budget, {
//       .on_out_of_memory = [&](const OutOfMemory& e, std::uint64_t attempt) {
//           return store.evict(e.requested_bytes()) > 0;   // true: worth a retry
//       },
//       .max_retries = 3,
//   });
//   outcore::Block b = retrying.allocate({.bytes = 256 * kMiB, .tag = "tile"});
//
// Thread-safe when the callback is: it may run on several allocating threads at
// once, and must not allocate through this same adaptor (it would recurse). The
// upstream is held by reference and must outlive this adaptor, which must outlive
// its Blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "outcore/core/error.hpp"
#include "outcore/device/allocator.hpp"

namespace outcore::alloc {

/// Told the failure and which one it is for this request (1 for the first); returns
/// true if it freed something worth a retry. An exception it throws replaces the
/// OutOfMemory and ends the request.
using OutOfMemoryCallback = std::function<bool(const OutOfMemory& error, std::uint64_t attempt)>;

struct OnOutOfMemoryOptions {
    /// Required.
    OutOfMemoryCallback on_out_of_memory = {};
    /// Retries per request after the first failure. The callback is asked before each
    /// retry, so at most max_retries times per request; 0 makes this a pass-through.
    std::uint64_t max_retries = 3;
};

class OnOutOfMemory final : public Allocator {
public:
    /// Wraps `upstream` (held by reference, must outlive this). Throws UsageError
    /// if the callback is empty.
    OnOutOfMemory(Allocator& upstream, OnOutOfMemoryOptions options);
    ~OnOutOfMemory() override = default;

    /// Retries made so far (each call of upstream after a failure counts one).
    [[nodiscard]] std::uint64_t retry_count() const noexcept {
        return retries_.load(std::memory_order_relaxed);
    }
    /// Requests that failed at least once and then succeeded on a retry.
    [[nodiscard]] std::uint64_t recovered_count() const noexcept {
        return recovered_.load(std::memory_order_relaxed);
    }
    /// Requests that ended in OutOfMemory despite the callback.
    [[nodiscard]] std::uint64_t given_up_count() const noexcept {
        return given_up_.load(std::memory_order_relaxed);
    }
    [[nodiscard]] std::uint64_t max_retries() const noexcept { return max_retries_; }

private:
    RawBlock do_allocate(const AllocationRequest& request) override;
    void do_deallocate(const RawBlock& block) noexcept override;

    Allocator& upstream_;
    const OutOfMemoryCallback callback_;
    const std::uint64_t max_retries_;
    std::atomic<std::uint64_t> retries_{0};
    std::atomic<std::uint64_t> recovered_{0};
    std::atomic<std::uint64_t> given_up_{0};
};

}  // namespace outcore::alloc

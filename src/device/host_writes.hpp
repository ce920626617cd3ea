// host_writes.hpp — host ranges the device will write in work not yet finished
// (private to backends).
//
// A backend that reads host memory on the host when a copy is recorded (the Vulkan
// backend packs short-run uploads into staging on its queue's worker, while the GPU
// reads a direct upload only when the copy runs) must not pack bytes that an earlier
// download is still to write. Waiting for all earlier work before every such pack is
// correct but serialises the pack behind unrelated copies (on the H200 each B chunk of
// the out-of-core GEMM was packed only after the A chunk before it had gone up).
// PendingHostWrites lets the pack wait only where its bytes overlap a download that
// has not finished: a download notes its host range when it is enqueued (in program
// order, on the caller's thread) and holds the returned token until the device has
// written the bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace outcore::detail {

class PendingHostWrites {
public:
    PendingHostWrites();

    /// Notes that the device will write [host, host + bytes); the write is pending
    /// until the last copy of the returned token is released. Thread-safe.
    [[nodiscard]] std::shared_ptr<void> note(const void* host, std::uint64_t bytes);
    /// Whether a pending write overlaps [host, host + bytes). Thread-safe.
    [[nodiscard]] bool overlaps(const void* host, std::uint64_t bytes) const;
    /// Writes pending now (tests).
    [[nodiscard]] std::size_t pending() const;

private:
    struct State {
        mutable std::mutex mutex;
        std::uint64_t next = 0;
        /// Pending writes by id: [first, last) addresses.
        std::unordered_map<std::uint64_t, std::pair<std::uintptr_t, std::uintptr_t>> ranges;
    };
    /// What note() hands out (never null): ends the write when destroyed.
    struct Token {
        Token(std::shared_ptr<State> s, std::uint64_t i) : state(std::move(s)), id(i) {}
        Token(const Token&) = delete;
        Token& operator=(const Token&) = delete;
        ~Token();
        std::shared_ptr<State> state;
        std::uint64_t id;
    };
    /// Shared with the tokens, so a token may outlive the owner of this object.
    std::shared_ptr<State> state_;
};

}  // namespace outcore::detail

// support/op_collector.hpp — an observer that keeps every queue operation reported
// to it (monitor::OpEvent), for tests of traced work.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "outcore/monitor/hooks.hpp"

namespace outcore::test {

class OpCollector final : public monitor::Observer {
public:
    struct Seen {
        monitor::OpKind kind;
        std::string queue;
        std::string name;
        std::uint64_t bytes;
        std::uint64_t device_id;
        std::int64_t begin_ns;
        std::int64_t end_ns;
    };
    void on_op(const monitor::OpEvent& e) noexcept override {
        std::lock_guard lock(mutex_);
        seen_.push_back(
            {e.kind, std::string(e.queue), std::string(e.name), e.bytes, e.device_id, e.begin_ns, e.end_ns});
    }
    [[nodiscard]] std::vector<Seen> seen() {
        std::lock_guard lock(mutex_);
        return seen_;
    }

private:
    std::mutex mutex_;
    std::vector<Seen> seen_;
};

}  // namespace outcore::test

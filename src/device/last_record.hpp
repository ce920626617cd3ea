// device/last_record.hpp — the "most recent record" of an event, shared by the
// backends' Event implementations (private to outcore).
//
//   LastRecord<Signal> records_;
//   std::shared_ptr<Signal> s = records_.arm();     // Queue::record: a new record
//   std::shared_ptr<Signal> w = records_.last();    // Queue::wait: the current one
//
// CUDA's event semantics: a wait targets the record current when the wait is issued;
// each record is a new object, so a later record never moves an earlier wait, even
// when records from several queues complete out of order. Never recorded: null.
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace outcore::detail {

template <typename Record>
class LastRecord {
public:
    /// Makes a new record from `args` and makes it the current one.
    template <typename... Args>
    [[nodiscard]] std::shared_ptr<Record> arm(Args&&... args) {
        auto record = std::make_shared<Record>(std::forward<Args>(args)...);
        std::lock_guard lock(mutex_);
        last_ = record;
        return record;
    }
    /// The current record, or null if never recorded.
    [[nodiscard]] std::shared_ptr<Record> last() const {
        std::lock_guard lock(mutex_);
        return last_;
    }

private:
    mutable std::mutex mutex_;
    std::shared_ptr<Record> last_;
};

}  // namespace outcore::detail

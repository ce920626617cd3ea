// The source registry behind outcore/monitor/snapshot.hpp: one mutex, held while
// sources fill a snapshot, so Source::reset() returns only once its fill is done.
#include "outcore/monitor/snapshot.hpp"

#include <map>
#include <mutex>
#include <utility>

#include "outcore/monitor/hooks.hpp"

namespace outcore::monitor {

namespace {

struct Sources {
    std::mutex mutex;
    std::map<std::uint64_t, FillFunction> fills;
    std::uint64_t next_id = 1;
};

Sources& sources() {
    static Sources s;
    return s;
}

}  // namespace

Source::Source(FillFunction fill) {
    Sources& s = sources();
    std::lock_guard lock(s.mutex);
    id_ = s.next_id++;
    s.fills.emplace(id_, std::move(fill));
}

Source& Source::operator=(Source&& other) noexcept {
    if (this != &other) {
        reset();
        id_ = std::exchange(other.id_, 0);
    }
    return *this;
}

void Source::reset() noexcept {
    if (id_ == 0) return;
    Sources& s = sources();
    FillFunction dead;  // destroyed outside the lock
    {
        std::lock_guard lock(s.mutex);
        auto it = s.fills.find(id_);
        if (it != s.fills.end()) {
            dead = std::move(it->second);
            s.fills.erase(it);
        }
    }
    id_ = 0;
}

Snapshot snapshot() {
    Snapshot out;
    Sources& s = sources();
    {
        std::lock_guard lock(s.mutex);
        for (auto& [id, fill] : s.fills) fill(out);
    }
    out.time_ns = now_ns();
    return out;
}

}  // namespace outcore::monitor

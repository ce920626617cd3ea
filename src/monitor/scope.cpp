// monitor::Scope: an intrusive per-thread stack (each scope points at its parent).
#include "outcore/monitor/scope.hpp"

#include <cstdio>
#include <exception>

#include "outcore/core/error.hpp"

namespace outcore::monitor {
namespace {

thread_local Scope* t_innermost = nullptr;

}  // namespace

Scope::Scope() noexcept : parent_(t_innermost) { t_innermost = this; }

Scope::~Scope() {
    if (t_innermost != this) {
        // Plain stdio, not the logger: this is the last thing the process says.
        std::fputs(
            "outcore: error: [scope] a monitor::Scope ended that is not the innermost open scope of "
            "its thread (ended out of order or on another thread)\n",
            stderr);
        std::terminate();
    }
    // One at a time from the back: a destructor that autoreleases appends to this scope,
    // and what it appends is destroyed next.
    while (!held_.empty()) {
        std::unique_ptr<HolderBase> last = std::move(held_.back());
        held_.pop_back();
        last.reset();
    }
    t_innermost = parent_;
}

Scope* Scope::current() noexcept { return t_innermost; }

Scope& Scope::innermost() {
    if (t_innermost == nullptr) {
        throw UsageError("scope",
                         "autorelease() needs an open monitor::Scope on the calling thread (there is none)");
    }
    return *t_innermost;
}

}  // namespace outcore::monitor

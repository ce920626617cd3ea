// outcore/monitor/scope.hpp — monitor::Scope, the analog of Metal's @autoreleasepool:
// a region of one thread that owns what autorelease() hands it and destroys it all,
// newest first, when it ends.
//
//   for (int i = 0; i < n; ++i) {
//       monitor::Scope scope;                      // one per iteration
//       Block& tile = monitor::autorelease(device.allocate({.bytes = kMiB, .tag = "tile"}));
//       auto& queue = monitor::autorelease(device.create_queue());   // a std::unique_ptr<Queue>
//       queue->upload(src, tile);
//       queue->synchronize();
//   }                                              // queue, then tile, destroyed here
//
// RAII already frees every outcore handle; a Scope is for the handles a loop body does
// not want to name an owner for, and it keeps the memory of a loop flat: what one
// iteration made is gone before the next starts (Device::allocated_bytes() does
// not grow with the iteration count).
//
// Rules:
//   - Each thread has its own stack of open scopes; autorelease() hands the object to
//     the innermost scope of the calling thread. Without an open scope it throws
//     UsageError and the object stays with the caller (nothing leaks silently).
//   - Scopes nest. A Scope is neither copyable nor movable, and cannot be made with
//     new: it lives in a block of code and ends with it, innermost first.
//   - Ending a scope that is not the innermost open scope of the calling thread (one
//     held in a std::optional and reset early, or ended on another thread) is a usage
//     error that a destructor cannot throw: it is logged as "[scope] ..." and the
//     process ends with std::terminate, like destroying a joinable std::thread.
//   - The objects are destroyed in reverse order of autorelease; their destructors must
//     not throw. An object autoreleased while the scope is ending (by a destructor)
//     joins the same scope and is destroyed before the scope closes.
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace outcore::monitor {

class Scope {
public:
    /// Opens a scope: the calling thread's innermost from now until it ends. noexcept.
    Scope() noexcept;
    /// Destroys what the scope holds, newest first, and closes it. noexcept; std::terminate
    /// when this is not the calling thread's innermost scope (see the file comment).
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope(Scope&&) = delete;
    Scope& operator=(Scope&&) = delete;
    static void* operator new(std::size_t) = delete;
    static void* operator new[](std::size_t) = delete;

    /// The calling thread's innermost open scope, or nullptr.
    [[nodiscard]] static Scope* current() noexcept;
    /// The calling thread's innermost open scope. Throws UsageError when it has none.
    [[nodiscard]] static Scope& innermost();
    /// The scope this one is nested in (on the same thread), or nullptr.
    [[nodiscard]] Scope* parent() const noexcept { return parent_; }
    /// Objects held now.
    [[nodiscard]] std::size_t held_count() const noexcept { return held_.size(); }

    /// Moves `object` into this scope and returns a reference to it, valid until the
    /// scope ends. Throws std::bad_alloc, in which case `object` was not moved from.
    /// Prefer monitor::autorelease(), which picks the innermost scope.
    template <class T>
    requires(!std::is_lvalue_reference_v<T> && std::move_constructible<T> &&
             std::is_nothrow_destructible_v<T>) T& hold(T&& object) {
        // Grow first (geometrically), so the push_back below cannot throw.
        if (held_.size() == held_.capacity()) held_.reserve(held_.empty() ? 8 : 2 * held_.size());
        auto holder = std::make_unique<Holder<T>>(std::move(object));
        T& ref = holder->value;
        held_.push_back(std::move(holder));
        return ref;
    }

private:
    struct HolderBase {
        virtual ~HolderBase() = default;
    };
    template <class T>
    struct Holder final : HolderBase {
        explicit Holder(T&& v) : value(std::move(v)) {}
        T value;
    };

    Scope* parent_;
    std::vector<std::unique_ptr<HolderBase>> held_;
};

/// Moves `object` (any movable owning handle: a Block, a std::unique_ptr<Queue>, a swap
/// pin...) into the calling thread's innermost open Scope and returns a reference to it,
/// valid until that scope ends. Pass an rvalue: `autorelease(std::move(block))` or
/// `autorelease(device.allocate(...))`. Throws UsageError when the thread has no open
/// scope and std::bad_alloc; on a throw `object` was not moved from.
template <class T>
requires(!std::is_lvalue_reference_v<T>) T& autorelease(T&& object) {
    return Scope::innermost().hold(std::move(object));
}

}  // namespace outcore::monitor

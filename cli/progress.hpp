// cli/progress.hpp — a progress bar on stderr for runs that take more than about a
// second.
//
//   ProgressBar bar("gemm", /*enabled=*/!quiet);     // also off when stderr is not a tty
//   options.progress = bar.callback();                // called with the fraction done
//   report = ops::gemm(...);
//   bar.finish();                                     // erases the bar
//
// Nothing is drawn during the first second, so short runs print nothing; after that
// the bar redraws at most ten times a second, in place ("\r"), with the elapsed time
// and an estimate of the time left.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

namespace outcore::cli {

class ProgressBar {
public:
    /// `enabled` false (--quiet) or stderr not a terminal: every call does nothing.
    ProgressBar(std::string label, bool enabled);
    /// Erases a bar still on screen.
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    /// Records `fraction` (0..1) done and redraws when due. Never throws; callable from
    /// any thread.
    void update(double fraction) noexcept;
    /// A callback for the ops' progress options; valid while this bar lives.
    [[nodiscard]] std::function<void(double)> callback();
    /// Erases the bar (the summary that follows starts on a clean line).
    void finish() noexcept;
    [[nodiscard]] bool enabled() const noexcept { return enabled_; }

private:
    void draw(double fraction, double elapsed_seconds) noexcept;

    std::string label_;
    bool enabled_ = false;
    std::chrono::steady_clock::time_point start_;
    std::mutex mutex_;
    double last_draw_seconds_ = -1.0;
    std::size_t drawn_chars_ = 0;
    bool finished_ = false;  ///< a late update after finish() draws nothing
};

}  // namespace outcore::cli

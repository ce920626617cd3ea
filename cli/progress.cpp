// cli/progress.cpp — the stderr progress bar (see progress.hpp).
#include "progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace outcore::cli {
namespace {

constexpr double kQuietSeconds = 1.0;   // short runs draw nothing
constexpr double kRedrawSeconds = 0.1;  // at most ten redraws a second
constexpr int kBarWidth = 30;

std::string eta_text(double fraction, double elapsed) {
    if (fraction <= 0.0 || fraction >= 1.0) return "";
    const double left = elapsed * (1.0 - fraction) / fraction;
    if (left < 60.0) return fmt::format(", {:.0f} s left", std::ceil(left));
    return fmt::format(", {:.1f} min left", left / 60.0);
}

}  // namespace

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)),
      enabled_(enabled && ::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { finish(); }

std::function<void(double)> ProgressBar::callback() {
    if (!enabled_) return {};
    return [this](double fraction) { update(fraction); };
}

void ProgressBar::update(double fraction) noexcept {
    if (!enabled_) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < kQuietSeconds) return;
    const std::lock_guard lock(mutex_);
    if (finished_) return;
    if (last_draw_seconds_ >= 0 && elapsed - last_draw_seconds_ < kRedrawSeconds && fraction < 1.0) return;
    last_draw_seconds_ = elapsed;
    draw(fraction, elapsed);
}

void ProgressBar::draw(double fraction, double elapsed_seconds) noexcept {
    try {
        const double f = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0);
        const int filled = static_cast<int>(std::lround(f * kBarWidth));
        std::string line = fmt::format("\r{} [{}{}] {:5.1f}%  {:.1f} s{}", label_,
                                       std::string(static_cast<std::size_t>(filled), '#'),
                                       std::string(static_cast<std::size_t>(kBarWidth - filled), '.'),
                                       f * 100.0, elapsed_seconds, eta_text(f, elapsed_seconds));
        // Pad over a longer previous line instead of relying on terminal escapes.
        const std::size_t visible = line.size() - 1;
        if (visible < drawn_chars_) line.append(drawn_chars_ - visible, ' ');
        drawn_chars_ = std::max(drawn_chars_, visible);
        std::fputs(line.c_str(), stderr);
        std::fflush(stderr);
    } catch (...) {
        // A progress bar is never worth failing a run over.
    }
}

void ProgressBar::finish() noexcept {
    if (!enabled_) return;
    const std::lock_guard lock(mutex_);
    finished_ = true;
    if (drawn_chars_ == 0) return;
    try {
        std::string blank(drawn_chars_ + 2, ' ');
        blank.front() = '\r';
        blank.back() = '\r';
        std::fputs(blank.c_str(), stderr);
        std::fflush(stderr);
    } catch (...) {}
    drawn_chars_ = 0;
}

}  // namespace outcore::cli

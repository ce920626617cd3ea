// tests/unit/monitor/leak_child.cpp — a small program that leak_check_test.cpp runs with
// OUTCORE_LEAK_CHECK set: the check at exit ends the process (std::atexit, std::_Exit),
// so it needs a process of its own. Built as its own target (tests/CMakeLists.txt).
//
//   leak_child clean          allocates and frees, returns 0             -> exit 0, no report
//   leak_child leak           leaves "child.leaked" allocated, returns 0 -> exit 8, report
//   leak_child exit N         leaves it allocated, calls std::exit(N)    -> exit 8, report
//   leak_child end-of-main N  leaves it allocated and returns
//                             leak_check_exit_code(N)                   -> 8 if N is 0, else N;
//                                                                         the report once
//   leak_child late-static    a function-local static made after tracking started holds
//                             a block: destroyed before the check       -> exit 0
//   leak_child early-static   a namespace-scope static (made before main) holds a block:
//                             destroyed after the check                 -> exit 8, report
//
// The device and the blocks left allocated stay reachable from globals, so that
// LeakSanitizer (ASan builds) has nothing to say when the check lets the process go on.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/size.hpp"
#include "outcore/monitor/leak_check.hpp"

// Never freed: see the file comment. External linkage, so the compiler keeps the store
// to g_leaked that nothing in this file reads (LeakSanitizer reads it).
outcore::Device* g_device = nullptr;
outcore::RawBlock g_leaked{};

namespace {

// Constructed before main, so before tracking starts: destroyed after the check.
struct EarlyHolder {
    outcore::Block block;
};
EarlyHolder g_early;

int usage() {
    std::fputs("usage: leak_child clean|leak|exit N|end-of-main N|late-static|early-static\n", stderr);
    return 2;
}

void allocate_and_free() {
    outcore::Block a = g_device->allocate({.bytes = 4 * outcore::kKiB, .tag = "child.freed"});
    outcore::Block b =
        g_device->allocate({.bytes = 1000, .kind = outcore::MemoryKind::HostPinned, .tag = "child.freed"});
}

void leak() { g_leaked = g_device->allocate_raw({.bytes = 3 * outcore::kKiB, .tag = "child.leaked"}); }

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage();
    const std::string_view mode = argv[1];
    const int code = argc > 2 ? std::atoi(argv[2]) : 0;

    // The first Device starts the monitors the environment asks for: OUTCORE_LEAK_CHECK
    // tracks from here on, as in any program using outcore.
    g_device = outcore::cpu::make_cpu_device({.total_memory_bytes = 64 * outcore::kMiB}).release();
    allocate_and_free();

    if (mode == "clean") return 0;
    if (mode == "leak") {
        leak();
        return 0;
    }
    if (mode == "exit") {
        leak();
        std::exit(code);
    }
    if (mode == "end-of-main") {
        leak();
        return outcore::monitor::leak_check_exit_code(code);
    }
    if (mode == "late-static") {
        static outcore::Block late = g_device->allocate({.bytes = 5 * outcore::kKiB, .tag = "child.late"});
        return 0;
    }
    if (mode == "early-static") {
        g_early.block = g_device->allocate({.bytes = 6 * outcore::kKiB, .tag = "child.early"});
        return 0;
    }
    return usage();
}

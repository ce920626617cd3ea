// A user's program against the installed outcore: opens the CPU device, allocates
// device and pinned memory, and checks the device counted exactly what it handed out.
#include <cstdio>
#include <cstring>
#include <exception>
#include <outcore/core/size.hpp>
#include <outcore/device/registry.hpp>

int main() {
    try {
        auto device = outcore::open_device("cpu");
        constexpr std::uint64_t kBytes = outcore::kMiB;
        {
            outcore::Block slot =
                device->allocate({.bytes = kBytes, .kind = outcore::MemoryKind::Device, .tag = "consumer"});
            outcore::Block staging =
                device->allocate({.bytes = 4096, .kind = outcore::MemoryKind::HostPinned, .tag = "consumer"});
            if (slot.bytes() != kBytes || device->allocated_bytes() < kBytes || staging.host() == nullptr) {
                std::fprintf(stderr, "consumer: unexpected allocation state\n");
                return 1;
            }
            std::memset(staging.host(), 0x5a, staging.bytes());
        }
        if (device->allocated_bytes() != 0) {
            std::fprintf(stderr, "consumer: %llu bytes still allocated after free\n",
                         static_cast<unsigned long long>(device->allocated_bytes()));
            return 1;
        }
        std::printf("consumer: %s allocated and freed %s\n", device->info().id().c_str(),
                    outcore::format_size(kBytes).c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "consumer: %s\n", e.what());
        return 1;
    }
}

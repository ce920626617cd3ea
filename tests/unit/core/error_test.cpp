#include "outcore/core/error.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "outcore/core/size.hpp"

namespace outcore {
namespace {

TEST(Errors, OutOfMemoryCarriesItsNumbersAndSaysThem) {
    const OutOfMemory e("heap", "budget exceeded",
                        {.requested_bytes = 3 * kGiB,
                         .tier = Tier::Device,
                         .budget_bytes = 4 * kGiB,
                         .in_use_bytes = 2 * kGiB + kGiB / 2 + kGiB / 4 + kGiB / 20,
                         .largest_free_bytes = kGiB});
    EXPECT_EQ(e.requested_bytes(), 3 * kGiB);
    EXPECT_EQ(e.tier(), Tier::Device);
    EXPECT_EQ(e.budget_bytes(), 4 * kGiB);
    EXPECT_EQ(e.largest_free_bytes(), kGiB);
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[heap] budget exceeded on device: needed 3 GiB, available 1.2 GiB", 0), 0U) << msg;
    EXPECT_NE(msg.find("largest free range 1 GiB"), std::string::npos) << msg;
}

TEST(Errors, ExitCodesFollowTheDocumentedTable) {
    EXPECT_EQ(exit_code_for(UsageError("cli", "x")), ExitCode::Usage);
    EXPECT_EQ(exit_code_for(OutOfMemory("cpu", "x", {})), ExitCode::OutOfMemory);
    EXPECT_EQ(exit_code_for(IoError("swap", "x", EIO, "/tmp/f", "pread")), ExitCode::Io);
    EXPECT_EQ(exit_code_for(CorruptionError("swap", "x")), ExitCode::Corruption);
    EXPECT_EQ(exit_code_for(InternalError("x", "y")), ExitCode::Internal);
    EXPECT_EQ(exit_code_for(BackendError("cuda", "x", 2, "cudaErrorMemoryAllocation")), ExitCode::Internal);
    EXPECT_EQ(exit_code_for(std::runtime_error("x")), ExitCode::Internal);
    EXPECT_EQ(static_cast<int>(ExitCode::Usage), 2);
    EXPECT_EQ(static_cast<int>(ExitCode::OutOfMemory), 3);
    EXPECT_EQ(static_cast<int>(ExitCode::Io), 4);
    EXPECT_EQ(static_cast<int>(ExitCode::Corruption), 5);
}

TEST(Errors, IoAndBackendErrorsKeepTheirNativeDetail) {
    const IoError io("swap", "spill write failed", ENOSPC, "/var/tmp/x", "pwrite");
    EXPECT_EQ(io.errno_value(), ENOSPC);
    EXPECT_EQ(io.path(), "/var/tmp/x");
    EXPECT_NE(std::string(io.what()).find("No space left on device"), std::string::npos) << io.what();
    const BackendError be("cuda", "launch failed", 719, "cudaErrorLaunchFailure");
    EXPECT_EQ(be.native_code(), 719);
    EXPECT_NE(std::string(be.what()).find("cudaErrorLaunchFailure"), std::string::npos);
    EXPECT_EQ(be.detail().substr(0, 13), "launch failed");
}

}  // namespace
}  // namespace outcore

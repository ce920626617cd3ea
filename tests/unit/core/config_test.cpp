#include "outcore/core/config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "outcore/core/error.hpp"

namespace outcore {
namespace {

TEST(Config, DefaultsAreSensible) {
    const Config c;
    EXPECT_EQ(c.device_budget.kind, SizeSpec::Kind::Auto);
    EXPECT_EQ(c.host_budget.kind, SizeSpec::Kind::Auto);
    EXPECT_EQ(c.block_bytes, 16 * kMiB);
    EXPECT_EQ(c.spill_dir, "/var/tmp");
}

TEST(Config, AppliesTheDocumentedExample) {
    Config c;
    c.apply("device_budget=4GiB,host_budget=16GiB,spill_dir=/var/tmp/x,block=16MiB");
    EXPECT_EQ(c.device_budget.bytes, 4 * kGiB);
    EXPECT_EQ(c.host_budget.bytes, 16 * kGiB);
    EXPECT_EQ(c.spill_dir, "/var/tmp/x");
    EXPECT_EQ(c.block_bytes, 16 * kMiB);
    c.apply(" device_budget = 75% , ,block=1MiB");
    EXPECT_DOUBLE_EQ(c.device_budget.fraction, 0.75);
    EXPECT_EQ(c.block_bytes, kMiB);
}

TEST(Config, UnknownKeyListsTheValidOnes) {
    Config c;
    try {
        c.set("device_budgt", "1GiB");
        FAIL() << "accepted an unknown key";
    } catch (const UsageError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("device_budgt"), std::string::npos);
        for (const auto& k : Config::keys()) EXPECT_NE(msg.find(k.name), std::string::npos) << k.name;
    }
}

TEST(Config, BadValuesAreUsageErrors) {
    Config c;
    EXPECT_THROW(c.set("device_budget", "lots"), UsageError);
    EXPECT_THROW(c.set("block", "512KiB"), UsageError);
    EXPECT_THROW(c.set("block", "65MiB"), UsageError);
    EXPECT_THROW(c.set("block", "50%"), UsageError);
    EXPECT_THROW(c.set("spill_dir", ""), UsageError);
    EXPECT_THROW(c.set("cpu_devices", "0"), UsageError);
    EXPECT_THROW(c.set("cpu_devices", "2x"), UsageError);
    EXPECT_THROW(c.apply("device_budget"), UsageError);
    const Config untouched;
    EXPECT_EQ(c.block_bytes, untouched.block_bytes);
}

TEST(Config, EnvironmentIsReadAndErrorsNameIt) {
    ::setenv("OUTCORE_CONF", "device_budget=1GiB,cpu_devices=3", 1);
    const Config c = Config::from_environment();
    EXPECT_EQ(c.device_budget.bytes, kGiB);
    EXPECT_EQ(c.cpu_devices, 3U);
    ::setenv("OUTCORE_CONF", "nonsense=1", 1);
    try {
        (void)Config::from_environment();
        ADD_FAILURE() << "accepted a bad OUTCORE_CONF";
    } catch (const UsageError& e) {
        EXPECT_EQ(e.component(), "OUTCORE_CONF");
    }
    ::unsetenv("OUTCORE_CONF");
}

}  // namespace
}  // namespace outcore

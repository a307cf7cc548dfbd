// The launcher's environment (collectives/launch_env.h), read through a fake EnvLookup: which
// launcher wins, what an argument overrides, and the one-line refusals of what is not valid.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "collectives/error.h"
#include "collectives/launch_env.h"

namespace roce::coll {
namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup fake(Vars vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

LaunchInfo info(const Vars& vars, std::optional<int> rank = {}, std::optional<int> size = {}) {
  return launch_info(rank, size, fake(vars));
}

// The message of the kInvalidArgument error `f` throws, "" if it throws none.
template <typename F>
std::string refusal(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

std::string refusal(const Vars& vars, std::optional<int> rank = {}, std::optional<int> size = {}) {
  return refusal([&] { info(vars, rank, size); });
}

void expect_info(const LaunchInfo& got, int rank, int size, int local, const std::string& source) {
  EXPECT_EQ(got.rank, rank);
  EXPECT_EQ(got.size, size);
  EXPECT_EQ(got.local_rank, local);
  EXPECT_EQ(got.source, source);
}

TEST(LaunchEnv, EveryLauncherIsRead) {
  expect_info(info({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}), 3, 8, 1, "torchrun");
  expect_info(info({{"OMPI_COMM_WORLD_RANK", "5"},
                    {"OMPI_COMM_WORLD_SIZE", "6"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}),
              5, 6, 2, "openmpi");
  expect_info(info({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}}), 0, 2, 0,
              "pmi");
  expect_info(info({{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "3"}}), 7, 16,
              3, "slurm");
}

TEST(LaunchEnv, ALocalRankIsZeroWhenTheLauncherGivesNone) {
  expect_info(info({{"RANK", "2"}, {"WORLD_SIZE", "4"}}), 2, 4, 0, "torchrun");
  expect_info(info({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}), 1, 2, 0, "pmi");
  expect_info(info({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}), 1, 2, 0, "slurm");
}

TEST(LaunchEnv, TheFirstCompleteLauncherWinsInOrder) {
  Vars all = {{"RANK", "1"},
              {"WORLD_SIZE", "2"},
              {"OMPI_COMM_WORLD_RANK", "2"},
              {"OMPI_COMM_WORLD_SIZE", "3"},
              {"PMI_RANK", "3"},
              {"PMI_SIZE", "4"},
              {"SLURM_PROCID", "4"},
              {"SLURM_NTASKS", "5"}};
  expect_info(info(all), 1, 2, 0, "torchrun");
  all.erase("RANK");
  all.erase("WORLD_SIZE");
  expect_info(info(all), 2, 3, 0, "openmpi");
  all.erase("OMPI_COMM_WORLD_RANK");
  all.erase("OMPI_COMM_WORLD_SIZE");
  expect_info(info(all), 3, 4, 0, "pmi");
  all.erase("PMI_RANK");
  all.erase("PMI_SIZE");
  expect_info(info(all), 4, 5, 0, "slurm");
}

// The local rank is the chosen launcher's, not another's that happens to be set.
TEST(LaunchEnv, TheLocalRankComesFromTheChosenLauncher) {
  expect_info(info({{"SLURM_PROCID", "3"},
                    {"SLURM_NTASKS", "4"},
                    {"SLURM_LOCALID", "1"},
                    {"LOCAL_RANK", "9"}}),
              3, 4, 1, "slurm");
}

TEST(LaunchEnv, AHalfSetLauncherIsRefusedNamingTheMissingVariable) {
  EXPECT_EQ(refusal({{"RANK", "1"}}),
            "WORLD_SIZE is not set but RANK='1' is (set by torchrun / env://): set both");
  EXPECT_NE(refusal({{"OMPI_COMM_WORLD_SIZE", "4"}}).find("OMPI_COMM_WORLD_RANK is not set"),
            std::string::npos);
  EXPECT_NE(refusal({{"PMI_RANK", "0"}}).find("PMI_SIZE is not set"), std::string::npos);
  EXPECT_NE(refusal({{"SLURM_NTASKS", "2"}}).find("SLURM_PROCID is not set"), std::string::npos);
  // Even when a later launcher is complete: a stray half set is a mistake to show, not to skip.
  EXPECT_NE(refusal({{"RANK", "1"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}})
                .find("WORLD_SIZE is not set"),
            std::string::npos);
}

TEST(LaunchEnv, NoLauncherAtAllIsRefusedWithWhatToDo) {
  EXPECT_EQ(refusal(Vars{}),
            "no rank given: set RANK and WORLD_SIZE (torchrun), or start under mpirun or srun, or "
            "pass the rank and size explicitly");
  // A local rank alone is not a launch.
  EXPECT_NE(refusal({{"LOCAL_RANK", "0"}}), "");
  EXPECT_NE(refusal(Vars{}, 1, std::nullopt).find("a rank but no size"), std::string::npos);
  EXPECT_NE(refusal(Vars{}, std::nullopt, 2).find("a size but no rank"), std::string::npos);
}

TEST(LaunchEnv, ValuesThatAreNotIntegersAreRefused) {
  EXPECT_EQ(refusal({{"RANK", "x"}, {"WORLD_SIZE", "4"}}),
            "RANK='x': not an integer (set by torchrun / env://)");
  for (const char* v : {"", " 1", "1 ", "1x", "+1", "0x1", "1.0", "one"}) {
    EXPECT_NE(refusal({{"WORLD_SIZE", v}, {"RANK", "0"}}).find("WORLD_SIZE='"), std::string::npos)
        << "'" << v << "'";
  }
  EXPECT_NE(refusal({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "a"}})
                .find("SLURM_LOCALID='a': not an integer (set by srun)"),
            std::string::npos);
  EXPECT_NE(refusal({{"PMI_RANK", "99999999999"}, {"PMI_SIZE", "2"}}).find("PMI_RANK="),
            std::string::npos);
}

TEST(LaunchEnv, ValuesOutOfRangeAreRefused) {
  EXPECT_EQ(refusal({{"RANK", "4"}, {"WORLD_SIZE", "4"}}),
            "RANK=4 is not below WORLD_SIZE=4 (set by torchrun / env://)");
  EXPECT_NE(refusal({{"RANK", "-1"}, {"WORLD_SIZE", "4"}}).find("RANK=-1 must not be negative"),
            std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0 must be at least 1"),
            std::string::npos);
  EXPECT_NE(refusal({{"OMPI_COMM_WORLD_RANK", "0"},
                     {"OMPI_COMM_WORLD_SIZE", "1"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "-2"}})
                .find("OMPI_COMM_WORLD_LOCAL_RANK=-2 must not be negative"),
            std::string::npos);
}

TEST(LaunchEnv, ExplicitRankAndSizeWin) {
  // Even over a launcher whose values are broken: they are not read at all.
  expect_info(info({{"RANK", "x"}, {"WORLD_SIZE", "y"}}, 1, 3), 1, 3, 0, "arguments");
  expect_info(info({}, 0, 1), 0, 1, 0, "arguments");
  expect_info(info({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}, 2, 4), 2, 4, 1,
              "arguments");
  expect_info(info({{"SLURM_LOCALID", "3"}}, 2, 4), 2, 4, 3, "arguments");
  EXPECT_EQ(refusal(Vars{}, 4, 4), "rank 4 is not below size 4");
  EXPECT_EQ(refusal(Vars{}, -1, 4), "rank -1 must not be negative");
  EXPECT_EQ(refusal(Vars{}, 0, 0), "size 0 must be at least 1");
}

TEST(LaunchEnv, OneExplicitValueIsCompletedFromTheLauncher) {
  Vars torchrun = {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}};
  expect_info(info(torchrun, 3, std::nullopt), 3, 4, 1, "torchrun");
  expect_info(info(torchrun, std::nullopt, 2), 1, 2, 1, "torchrun");
  EXPECT_EQ(refusal(torchrun, 4, std::nullopt),
            "rank 4 is not below WORLD_SIZE=4 (set by torchrun / env://)");
  EXPECT_EQ(refusal(torchrun, std::nullopt, 1),
            "RANK=1 is not below size 1 (set by torchrun / env://)");
  // The overridden variable is not read.
  expect_info(info({{"RANK", "bad"}, {"WORLD_SIZE", "4"}}, 0, std::nullopt), 0, 4, 0, "torchrun");
}

TEST(LaunchEnv, MasterAddressDefaultsAsTorchrun) {
  MasterAddress a = master_address(fake({}));
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 29500);
  a = master_address(fake({{"MASTER_ADDR", "node7"}, {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(a.host, "node7");
  EXPECT_EQ(a.port, 1234);
  a = master_address(fake({{"MASTER_ADDR", "fd00::1"}, {"MASTER_PORT", "65535"}}));
  EXPECT_EQ(a.host, "fd00::1");
  EXPECT_EQ(a.port, 65535);
  EXPECT_EQ(master_address(fake({{"MASTER_PORT", "1"}})).port, 1);
}

TEST(LaunchEnv, BadMasterValuesAreRefusedInOneLine) {
  for (const char* v : {"0", "65536", "-1", "", "80x", " 80", "http", "99999999999"}) {
    std::string err = refusal([&] { master_address(fake({{"MASTER_PORT", v}})); });
    EXPECT_EQ(err, "MASTER_PORT='" + std::string(v) + "': not a port number (1 to 65535)");
    EXPECT_EQ(err.find('\n'), std::string::npos);
  }
  EXPECT_NE(refusal([] {
              master_address(fake({{"MASTER_ADDR", ""}}));
            }).find("MASTER_ADDR"),
            std::string::npos);
}

TEST(LaunchEnv, TheProcessEnvironmentIsReadThroughGetenv) {
  EnvLookup env = process_env();
  EXPECT_FALSE(env("ROCE_COLL_TEST_SURELY_UNSET_VARIABLE").has_value());
  ASSERT_NE(std::getenv("PATH"), nullptr);
  EXPECT_EQ(env("PATH"), std::string(std::getenv("PATH")));
}

}  // namespace
}  // namespace roce::coll

// Built against an installed roce_coll through find_package(roce_coll): two ranks as threads
// AllGather through the C++ API; prints "cpp_consumer: ok" and exits 0.
#include <collectives/communicator.h>

#include <cstdio>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 64;
  auto store = std::make_shared<roce::coll::FileStore>(argv[1]);
  int failures = 0;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto comm = roce::coll::Communicator::create(store, r, 2);
        std::vector<int> mine(500, r + 1), all(1000);
        comm->all_gather(mine.data(), all.data(), 500, roce::coll::DataType::kInt32);
        for (int i = 0; i < 1000; ++i) failures += all[i] != i / 500 + 1;
      } catch (const roce::coll::Error& e) {
        std::fprintf(stderr, "cpp_consumer: rank %d: %s\n", r, e.what());
        ++failures;
      }
    });
  }
  for (auto& t : ranks) t.join();
  if (failures) return 1;
  std::printf("cpp_consumer: ok\n");
  return 0;
}

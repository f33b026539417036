// Seeds of ssd_meta_fuzzer: `.meta` files written by a real SsdStore (daemon/ssd_store/ssd_store.h)
// in a scratch directory, with the length of their bucket files, as the harness's sections
// (fuzz/ssd_meta_fuzzer.cc). The values are zeros, which is what the harness's bucket
// files hold: reads of these seeds' objects check out.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "daemon/ssd_store/ssd_bucket.h"
#include "daemon/ssd_store/ssd_store.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/seeds.h"

namespace mooncake {
namespace fuzz {

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string U32(uint64_t v) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  return out;
}

// Writes the batches (key, size) with a store in a fresh directory, forgets `forget`,
// closes it, and returns the sections: the first bucket's length, then each bucket's .meta.
std::string StoreSeed(const std::vector<std::vector<std::pair<std::string, uint64_t>>>& batches,
                      const std::vector<std::string>& forget) {
  const std::string dir = FreshDir() + "/seed";
  std::filesystem::create_directories(dir);
  SsdOptions options;
  options.path = dir;
  options.bucket_size = 1 << 20;
  options.capacity = 64 << 20;
  options.persist_mode = SsdPersistMode::kStrict;
  std::unique_ptr<SsdStore> store;
  std::string error;
  SsdStore::Open(options, [](const std::vector<std::string>&) { return true; }, &store, &error);
  const std::string zeros(2 << 20, '\0');
  for (const auto& batch : batches) {
    std::vector<SsdStore::WriteItem> items(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      items[i].object = SsdObject{batch[i].first, batch[i].second, 7};
      items[i].data = zeros.data();
    }
    store->Write(&items);
  }
  store->Forget(forget);
  store.reset();
  std::string input;
  AppendSection(&input, 0, U32(std::filesystem::file_size(SsdBucket::DataPath(dir, 1))));
  for (uint8_t id = 1; id <= 2; ++id) {
    const std::string meta = SsdBucket::MetaPath(dir, id);
    if (std::filesystem::exists(meta)) AppendSection(&input, id, ReadAll(meta));
  }
  std::filesystem::remove_all(dir);
  return input;
}

}  // namespace

Seeds SsdMetaSeeds() {
  Seeds seeds;
  seeds.emplace_back("seed-one-bucket",
                     StoreSeed({{{"a", 10}, {"bb", 300000}, {"c", 0}}, {{"d", 4096}}}, {"bb"}));
  // The same key in both buckets (bucket 1 fills up at 1 MiB): the later one wins.
  seeds.emplace_back("seed-two-buckets",
                     StoreSeed({{{"k", 700000}}, {{"x", 500000}}, {{"k", 1000}}}, {}));
  std::string torn = StoreSeed({{{"t1", 5000}, {"t2", 6000}}}, {});
  torn.resize(torn.size() - 5);
  seeds.emplace_back("seed-torn", torn);
  return seeds;
}

}  // namespace fuzz
}  // namespace mooncake

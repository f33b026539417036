// For the etcd suites: one real etcd for a whole suite (tests/etcd_process.h), clients of
// it, and polling with a deadline.
#ifndef MOONCAKE_TESTS_ETCD_TEST_UTIL_H_
#define MOONCAKE_TESTS_ETCD_TEST_UTIL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/etcd/etcd_client.h"
#include "tests/cmocka_cpp.h"
#include "tests/etcd_process.h"

namespace mooncake {
namespace testing {

// The suite's etcd, started by the group setup and stopped by its teardown.
inline EtcdProcess*& SuiteEtcd() {
  static EtcdProcess* etcd = nullptr;
  return etcd;
}

inline int StartSuiteEtcd(void**) {
  SuiteEtcd() = new EtcdProcess();
  return SuiteEtcd()->Start() ? 0 : -1;
}

inline int StopSuiteEtcd(void**) {
  delete SuiteEtcd();
  SuiteEtcd() = nullptr;
  return 0;
}

// The default timeout is generous: a put waits for etcd's disk, which a loaded machine
// (other suites, builds) may hold for over a second. Tests of timeouts pass their own.
inline std::unique_ptr<EtcdClient> Client(const std::string& endpoints,
                                          int64_t timeout_ms = 5000) {
  std::unique_ptr<EtcdClient> client;
  assert_int_equal(ErrorCode::OK, EtcdClient::Create(endpoints, timeout_ms, &client));
  return client;
}

inline std::unique_ptr<EtcdClient> SuiteClient(int64_t timeout_ms = 5000) {
  return Client(SuiteEtcd()->endpoint(), timeout_ms);
}

// Polls pred every 10 ms until it holds or timeout_ms passes: whether it held.
inline bool WaitFor(const std::function<bool()>& pred, int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

inline int64_t MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now() - t)
      .count();
}

}  // namespace testing
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_ETCD_TEST_UTIL_H_

// ClientConnection on its own (over a socketpair): the teardown runs exactly once, when the
// client is closed and its last Request is gone, wherever that Request ended (here, in a
// WorkerThreads closure); the in-flight limit; and the staged-id tables (limit, ids unique
// across puts and gets, never reused).
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/service/client_connection.h"
#include "daemon/base/worker_threads.h"
#include "tests/cmocka_cpp.h"

using mooncake::ClientConnection;
using mooncake::StagedGet;
using mooncake::StagedPut;
using mooncake::WorkerThreads;

namespace {

// Counts the teardowns of one client and remembers the thread of the last one.
struct Teardowns {
  std::atomic<int> count{0};
  std::atomic<std::thread::id> thread;
  ClientConnection* client = nullptr;  // the one the callback was given
};

bool Held(const ClientConnection::Request& r) { return static_cast<bool>(r); }

std::shared_ptr<ClientConnection> NewConnection(Teardowns* t) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  close(sv[1]);
  return std::make_shared<ClientConnection>(sv[0], 7, [t](std::shared_ptr<ClientConnection> s) {
    t->client = s.get();
    t->thread = std::this_thread::get_id();
    ++t->count;
  });
}

void test_close_without_requests_tears_down_at_once(void**) {
  Teardowns t;
  std::shared_ptr<ClientConnection> s = NewConnection(&t);
  { ClientConnection::Request r = s->Acquire(); }  // a request that ended before the close
  assert_int_equal(t.count.load(), 0);
  s->Close();
  assert_int_equal(t.count.load(), 1);
  assert_ptr_equal(t.client, s.get());
  s->Close();
  assert_int_equal(t.count.load(), 1);
  assert_false(Held(s->Acquire()));  // closed: nothing counted
  assert_int_equal(t.count.load(), 1);
}

void test_last_request_of_closed_connection_tears_down(void**) {
  Teardowns t;
  std::shared_ptr<ClientConnection> s = NewConnection(&t);
  auto first = std::make_unique<ClientConnection::Request>(s->Acquire());
  ClientConnection::Request second = s->Acquire();
  assert_true(Held(*first));
  assert_true(Held(second));
  assert_ptr_equal(second.connection(), s.get());
  s->Close();
  assert_true(s->closed());
  assert_false(s->Quiet());
  assert_int_equal(t.count.load(), 0);  // requests still use the pool
  first.reset();
  assert_int_equal(t.count.load(), 0);
  {
    ClientConnection::Request moved(std::move(second));
    assert_false(Held(second));  // NOLINT(bugprone-use-after-move): moved-from holds nothing
    assert_int_equal(t.count.load(), 0);
  }
  assert_int_equal(t.count.load(), 1);
  assert_true(s->Quiet());
}

void test_acquire_refuses_over_the_limit(void**) {
  Teardowns t;
  std::shared_ptr<ClientConnection> s = NewConnection(&t);
  {
    ClientConnection::Request a = s->Acquire(2);
    ClientConnection::Request b = s->Acquire(2);
    ClientConnection::Request c = s->Acquire(2);
    assert_true(Held(a) && Held(b));
    assert_false(Held(c));
    assert_false(s->closed());  // how the caller tells "too many" from "closed"
  }
  assert_true(Held(s->Acquire(2)));
  s->Close();
  assert_int_equal(t.count.load(), 1);
}

// A request handed to a worker ends with its closure: the teardown then runs there.
void test_request_ends_on_the_worker_that_ran_it(void**) {
  Teardowns t;
  std::shared_ptr<ClientConnection> s = NewConnection(&t);
  WorkerThreads workers(2);
  std::atomic<bool> go{false};
  ClientConnection::Request request = s->Acquire();
  workers.Submit([request = std::move(request), &go] {
    while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  s->Close();
  assert_int_equal(t.count.load(), 0);
  go = true;
  for (int i = 0; i < 5000 && t.count.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  assert_int_equal(t.count.load(), 1);
  assert_true(t.thread.load() != std::this_thread::get_id());

  // After Stop, a closure is dropped at once: its request still ends.
  Teardowns t2;
  std::shared_ptr<ClientConnection> s2 = NewConnection(&t2);
  workers.Stop();
  ClientConnection::Request late = s2->Acquire();
  s2->Close();
  bool ran = false;
  workers.Submit([late = std::move(late), &ran] { ran = true; });
  assert_false(ran);
  assert_int_equal(t2.count.load(), 1);
}

void test_staged_tables_are_bounded(void**) {
  Teardowns t;
  std::shared_ptr<ClientConnection> s = NewConnection(&t);
  std::set<uint64_t> ids;
  std::vector<uint64_t> put_ids;
  for (size_t i = 0; i < ClientConnection::kMaxStaged; ++i) {
    uint64_t id = s->AddPut(std::make_shared<StagedPut>());
    assert_true(id != 0);
    put_ids.push_back(id);
    ids.insert(id);
  }
  assert_int_equal(s->AddPut(std::make_shared<StagedPut>()), 0);  // full
  // Gets have a limit of their own, and ids unique across both.
  for (size_t i = 0; i < ClientConnection::kMaxStaged; ++i) {
    uint64_t id = s->AddGet(std::make_shared<StagedGet>());
    assert_true(id != 0);
    ids.insert(id);
  }
  assert_int_equal(s->AddGet(std::make_shared<StagedGet>()), 0);
  assert_int_equal(ids.size(), 2 * ClientConnection::kMaxStaged);
  assert_null(s->FindGet(put_ids[0]).get());  // a put's id names no get

  // Taking one frees its slot; the new one gets a fresh id.
  std::shared_ptr<StagedPut> taken = s->TakePut(put_ids[0]);
  assert_non_null(taken.get());
  assert_null(s->FindPut(put_ids[0]).get());
  assert_null(s->TakePut(put_ids[0]).get());
  uint64_t again = s->AddPut(std::make_shared<StagedPut>());
  assert_true(again != 0);
  assert_true(ids.count(again) == 0);
  assert_non_null(s->FindPut(again).get());
  assert_int_equal(s->TakeAllPuts().size(), ClientConnection::kMaxStaged);
  assert_null(s->FindPut(again).get());

  uint64_t get_id = *ids.rbegin();
  assert_non_null(s->FindGet(get_id).get());
  assert_true(s->EraseGet(get_id));
  assert_false(s->EraseGet(get_id));
  assert_true(s->AddGet(std::make_shared<StagedGet>()) != 0);
  s->ClearGets();
  assert_true(s->AddGet(std::make_shared<StagedGet>()) != 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_close_without_requests_tears_down_at_once),
      cmocka_unit_test(test_last_request_of_closed_connection_tears_down),
      cmocka_unit_test(test_acquire_refuses_over_the_limit),
      cmocka_unit_test(test_request_ends_on_the_worker_that_ran_it),
      cmocka_unit_test(test_staged_tables_are_bounded),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}

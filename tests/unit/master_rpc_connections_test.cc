// master/rpc_connections: the budgets of the master's RPC server, driven as the server
// drives them (the acceptor's Add, an I/O thread's Admit and Remove), with the time passed
// by hand: which connection gives way, and that nothing a connection not admitted does
// closes an admitted one.
#include <cstdint>
#include <string>
#include <vector>

#include "master/server/rpc_connections.h"
#include "tests/harness/cmocka_cpp.h"

namespace {

using mooncake::RpcClosure;
using mooncake::RpcConnections;
using Entry = RpcConnections::Entry;
using Victims = std::vector<RpcConnections::Victim>;

RpcConnections::Limits Limits(size_t unadmitted, size_t per_source, size_t admitted) {
  RpcConnections::Limits l;
  l.max_unadmitted = unadmitted;
  l.max_unadmitted_per_source = per_source;
  l.max_admitted = admitted;
  return l;
}

Entry* Add(RpcConnections* t, const std::string& source, bool admitted, int64_t now,
           Victims* victims) {
  victims->clear();
  return t->Add(source, source + ":1", 0, admitted, now, victims);
}

void test_split_and_descriptors(void**) {
  RpcConnections::Limits l = RpcConnections::Split(16384);
  assert_int_equal(l.max_unadmitted, 256);
  assert_int_equal(l.max_unadmitted_per_source, 32);
  assert_int_equal(l.max_admitted, 16384 - 256);
  l = RpcConnections::Split(64);
  assert_int_equal(l.max_unadmitted, 16);
  assert_int_equal(l.max_unadmitted_per_source, 4);
  assert_int_equal(l.max_admitted, 48);
  l = RpcConnections::Split(8);
  assert_int_equal(l.max_unadmitted, 2);
  assert_int_equal(l.max_unadmitted_per_source, 2);
  assert_int_equal(l.max_admitted, 6);
  // A quarter of the descriptors (at least 64) for the rest of the master.
  assert_int_equal(RpcConnections::WithinDescriptors(20000, 0), 15000);
  assert_int_equal(RpcConnections::WithinDescriptors(20000, 1000), 1000);
  assert_int_equal(RpcConnections::WithinDescriptors(256, 0), 192);
  assert_int_equal(RpcConnections::WithinDescriptors(64, 0), 8);
  assert_int_equal(RpcConnections::WithinDescriptors(~uint64_t{0}, 0), (1u << 20) / 4 * 3);
}

// A source over its cap loses its own oldest; the others keep theirs.
void test_a_source_over_its_cap_loses_its_oldest(void**) {
  RpcConnections t(Limits(10, 2, 10));
  Victims v;
  Entry* other = Add(&t, "b", false, 0, &v);
  Entry* a1 = Add(&t, "a", false, 1, &v);
  Add(&t, "a", false, 2, &v);
  assert_true(v.empty());
  Add(&t, "a", false, 3, &v);
  assert_int_equal(v.size(), 1);
  assert_int_equal(v[0].id, a1->id);
  assert_true(v[0].why == RpcClosure::kSourceCap);
  assert_false(v[0].admitted);
  assert_int_equal(t.unadmitted(), 3);
  t.Remove(a1);  // its thread closed it: no change in the counts
  assert_int_equal(t.unadmitted(), 3);
  (void)other;
}

// Past the cap of all sources, the oldest of any source gives way.
void test_past_the_total_the_oldest_gives_way(void**) {
  RpcConnections t(Limits(3, 3, 10));
  Victims v;
  Entry* first = Add(&t, "a", false, 0, &v);
  Add(&t, "b", false, 1, &v);
  Add(&t, "c", false, 2, &v);
  Add(&t, "d", false, 3, &v);
  assert_int_equal(v.size(), 1);
  assert_int_equal(v[0].id, first->id);
  assert_true(v[0].why == RpcClosure::kUnadmittedCap);
  assert_int_equal(t.unadmitted(), 3);
}

// Admission moves a connection to the other budget; past the admitted cap the one idle
// the longest goes, never the one just admitted; connections not admitted never close an
// admitted one.
void test_admitted_connections_make_room_by_idleness(void**) {
  RpcConnections t(Limits(2, 2, 2));
  Victims v;
  Entry* a = Add(&t, "x", true, 0, &v);
  Entry* b = Add(&t, "x", true, 1, &v);
  RpcConnections::Touch(a, 5);  // a was used after b: b is idle the longest
  for (int i = 0; i < 10; ++i) {
    Add(&t, "y", false, 10 + i, &v);
    for (const auto& victim : v) assert_false(victim.admitted);
  }
  assert_int_equal(t.admitted(), 2);
  assert_int_equal(t.unadmitted(), 2);
  Entry* c = Add(&t, "z", false, 20, &v);
  v.clear();
  t.Admit(c, 21, &v);
  assert_int_equal(v.size(), 1);
  assert_int_equal(v[0].id, b->id);
  assert_true(v[0].why == RpcClosure::kAdmittedCap);
  assert_true(v[0].admitted);
  assert_int_equal(t.admitted(), 2);
  // Admitted at connect (no key, this host's user): the same rule.
  Add(&t, "x", true, 30, &v);
  assert_int_equal(v.size(), 1);
  assert_int_equal(v[0].id, a->id);
  (void)c;
}

// A connection chosen as a victim is out of the budgets at once: it is not chosen again,
// and its admission (a race with the thread that closes it) changes nothing.
void test_a_victim_is_chosen_once(void**) {
  RpcConnections t(Limits(1, 1, 4));
  Victims v;
  Entry* old = Add(&t, "a", false, 0, &v);
  Add(&t, "a", false, 1, &v);
  assert_int_equal(v.size(), 1);
  assert_int_equal(v[0].id, old->id);
  v.clear();
  t.Admit(old, 2, &v);
  assert_true(v.empty());
  assert_int_equal(t.admitted(), 0);
  assert_int_equal(t.unadmitted(), 1);
  t.Remove(old);
  assert_int_equal(t.unadmitted(), 1);
}

// Out of descriptors: the oldest not admitted, else the admitted one idle the longest.
void test_pick_any(void**) {
  RpcConnections t(Limits(4, 4, 4));
  RpcConnections::Victim victim;
  assert_false(t.PickAny(RpcClosure::kDescriptors, &victim));
  Victims v;
  Entry* admitted = Add(&t, "a", true, 0, &v);
  Entry* waiting = Add(&t, "b", false, 5, &v);
  assert_true(t.PickAny(RpcClosure::kDescriptors, &victim));
  assert_int_equal(victim.id, waiting->id);
  assert_true(victim.why == RpcClosure::kDescriptors);
  assert_true(t.PickAny(RpcClosure::kDescriptors, &victim));
  assert_int_equal(victim.id, admitted->id);
  assert_false(t.PickAny(RpcClosure::kDescriptors, &victim));
  assert_int_equal(t.admitted() + t.unadmitted(), 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_and_descriptors),
      cmocka_unit_test(test_a_source_over_its_cap_loses_its_oldest),
      cmocka_unit_test(test_past_the_total_the_oldest_gives_way),
      cmocka_unit_test(test_admitted_connections_make_room_by_idleness),
      cmocka_unit_test(test_a_victim_is_chosen_once),
      cmocka_unit_test(test_pick_any),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}

// Tenants' keys: the encoding of common/base/tenant_key.h (no two (tenant, key) pairs share a
// stored key; the default tenant's keys are unchanged), the daemon's scoping of every op's
// keys (daemon/base/tenant_scope.h: every field named "key", and only those), and who may claim
// which tenant (daemon/base/tenant_policy.h, --tenant_uids and --tenant_roaming_uids).
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/base/tenant_key.h"
#include "common/uds/uds_ops.h"
#include "daemon/base/local_access.h"
#include "daemon/base/tenant_policy.h"
#include "daemon/base/tenant_scope.h"
#include "tests/harness/cmocka_cpp.h"

using namespace mooncake;

namespace {

void test_tenant_ids(void**) {
  assert_true(tenant_key::ValidTenant("a"));
  assert_true(tenant_key::ValidTenant("Team-7_prod.eu"));
  assert_true(tenant_key::ValidTenant(std::string(64, 'x')));
  assert_false(tenant_key::ValidTenant(std::string(65, 'x')));
  assert_false(tenant_key::ValidTenant(""));
  for (const char* bad : {"a b", "a/b", "a:b", "a=b", "a,b", "\xc3\xa9t\xc3\xa9", "a\nb"}) {
    assert_false(tenant_key::ValidTenant(bad));
  }
  assert_false(tenant_key::ValidTenant(std::string("a\0b", 3)));
  assert_true(tenant_key::ValidTenantOrDefault(""));
  assert_false(tenant_key::ValidTenantOrDefault("a b"));
}

void test_user_keys(void**) {
  assert_true(tenant_key::ValidUserKey("k"));
  assert_true(tenant_key::ValidUserKey(std::string(MOONCAKE_STORE_MAX_KEY_LEN, 'k')));
  assert_false(tenant_key::ValidUserKey(std::string(MOONCAKE_STORE_MAX_KEY_LEN + 1, 'k')));
  assert_false(tenant_key::ValidUserKey(""));
  assert_false(tenant_key::ValidUserKey(std::string("\0bob\0k", 6)));
  assert_false(tenant_key::ValidUserKey(std::string("k\0", 2)));
}

void test_encoding_round_trips_and_keeps_default_keys(void**) {
  // The default tenant's keys are stored as they are (Mooncake's, and every key from before).
  assert_string_equal(tenant_key::Encode("", "layer/7").c_str(), "layer/7");
  std::string stored = tenant_key::Encode("alice", "layer/7");
  assert_true(stored == std::string("\0alice\0layer/7", 14));
  std::string in_place = "layer/7";
  tenant_key::EncodeInPlace("alice", &in_place);
  assert_true(in_place == stored);
  in_place = "layer/7";
  tenant_key::EncodeInPlace("", &in_place);
  assert_string_equal(in_place.c_str(), "layer/7");

  assert_true(tenant_key::TenantOf(stored) == "alice");
  assert_true(tenant_key::UserKeyOf(stored) == "layer/7");
  assert_true(tenant_key::TenantOf("layer/7").empty());
  assert_true(tenant_key::UserKeyOf("layer/7") == "layer/7");

  // The longest stored key is still valid, one byte more is not.
  std::string longest = tenant_key::Encode(std::string(tenant_key::kMaxTenantLen, 't'),
                                           std::string(MOONCAKE_STORE_MAX_KEY_LEN, 'k'));
  assert_int_equal(longest.size(), tenant_key::kMaxStoredKeyLen);
  assert_true(tenant_key::ValidStoredKey(longest));
  assert_false(tenant_key::ValidStoredKey(longest + "k"));
}

void test_no_two_pairs_share_a_stored_key(void**) {
  // Tenants and keys chosen to collide if the encoding were naive: ids that are prefixes of
  // each other, keys that start with what another tenant's id looks like.
  const std::vector<std::string> tenants = {"", "a", "ab", "b", "a.b", "0"};
  const std::vector<std::string> keys = {"k", "ab", "b", "a", "bk", "\x01", "ak", "a.bk"};
  std::set<std::string> stored;
  for (const std::string& t : tenants) {
    for (const std::string& k : keys) {
      std::string s = tenant_key::Encode(t, k);
      assert_true(stored.insert(s).second);
      assert_true(tenant_key::ValidStoredKey(s));
      assert_true(tenant_key::TenantOf(s) == t);
      assert_true(tenant_key::UserKeyOf(s) == k);
    }
  }
}

void test_stored_keys_the_master_refuses(void**) {
  assert_false(tenant_key::ValidStoredKey(""));
  assert_false(tenant_key::ValidStoredKey(std::string("\0", 1)));
  assert_false(tenant_key::ValidStoredKey(std::string("\0alice", 6)));         // no end
  assert_false(tenant_key::ValidStoredKey(std::string("\0alice\0", 7)));       // no key
  assert_false(tenant_key::ValidStoredKey(std::string("\0\0k", 3)));           // no tenant
  assert_false(tenant_key::ValidStoredKey(std::string("\0a b\0k", 6)));        // bad tenant
  assert_false(tenant_key::ValidStoredKey(std::string("\0alice\0k\0x", 10)));  // NUL in key
  assert_false(tenant_key::ValidStoredKey(std::string("k\0", 2)));
  assert_false(tenant_key::ValidStoredKey(
      tenant_key::Encode("alice", std::string(MOONCAKE_STORE_MAX_KEY_LEN + 1, 'k'))));
}

// ---- the daemon's scoping ----

// Every string field's name in an op's arguments, nested ones too.
struct StringFieldNames {
  std::set<std::string>* names;
  void operator()(const char* name, const std::string&) { names->insert(name); }
  void operator()(const char* name, const std::vector<std::string>&) { names->insert(name); }
  template <class T>
  void operator()(const char* name, const std::vector<T>& list) {
    T sample{};
    (*this)(name, sample);
    (void)list;
  }
  template <class T>
  void operator()(const char*, const T& field) {
    if constexpr (uds::fields_detail::HasFields<T>::value) T::Fields(field, *this);
  }
  template <class T>
  void Spread(const char*, const std::vector<T>&) {}
};

void test_every_key_field_is_named_key(void**) {
  // A field that carries a key under another name would escape the scoping: the only
  // string fields of requests besides "key" are these, none of which is a key.
  std::set<std::string> names;
  StringFieldNames collect{&names};
#define MC_COLLECT_(name, wire, code, args, reply, note) \
  {                                                      \
    const uds::args sample{};                            \
    uds::args::Fields(sample, collect);                  \
  }
  MC_UDS_OPS(MC_COLLECT_)
#undef MC_COLLECT_
  names.erase(uds::kKeyField);
  // segment_name (BATCH_REPLICA_CLEAR), source, target and targets (the copy and move
  // tasks) and name (SET_CLIENT_NAME) name segments, "host:port"; group is a group id, which
  // the master scopes by the tenant of the key that joins it (master/directory/groups.h).
  assert_true(names == (std::set<std::string>{"group", "name \"host:port\"", "pattern",
                                              "preferred \"host:port\"", "segment_name",
                                              "source", "target", "targets"}));
}

void test_scope_keys_of_every_shape(void**) {
  uds::PutArgs put;
  put.key = "k";
  put.config.preferred_segments = {"10.0.0.1:7000"};
  ScopeKeys("alice", &put);
  assert_true(put.key == tenant_key::Encode("alice", "k"));
  assert_true(put.config.preferred_segments[0] == "10.0.0.1:7000");  // not a key

  uds::BatchPutArgs batch;
  batch.entries.resize(3);
  batch.entries[0].key = "a";
  batch.entries[1].key = std::string("\0bob\0a", 6);  // spelling another tenant's key
  batch.entries[2].key = std::string(MOONCAKE_STORE_MAX_KEY_LEN + 1, 'k');
  ScopeKeys("alice", &batch);
  assert_true(batch.entries[0].key == tenant_key::Encode("alice", "a"));
  assert_true(batch.entries[1].key.empty());  // refused (-600) by the handler
  assert_true(batch.entries[2].key.empty());

  uds::BatchGetArgs gets;
  gets.entries.resize(1);
  gets.entries[0].key = "g";
  ScopeKeys("t", &gets);
  assert_true(gets.entries[0].key == tenant_key::Encode("t", "g"));

  uds::BatchRemoveArgs removes;
  removes.keys = {"x", "y"};
  ScopeKeys("t", &removes);
  assert_true(removes.keys[0] == tenant_key::Encode("t", "x"));
  assert_true(removes.keys[1] == tenant_key::Encode("t", "y"));

  uds::RemoveByRegexArgs regex;
  regex.pattern = "^x";
  ScopeKeys("t", &regex);
  assert_string_equal(regex.pattern.c_str(), "^x");  // the master scopes it

  // The default tenant: keys unchanged, but one with a NUL can name nobody's object.
  uds::KeyArgs plain{"k"};
  ScopeKeys("", &plain);
  assert_string_equal(plain.key.c_str(), "k");
  uds::KeyArgs forged{std::string("\0alice\0k", 8)};
  ScopeKeys("", &forged);
  assert_true(forged.key.empty());
}

// ---- who may claim a tenant ----

void test_policy_parse(void**) {
  TenantPolicy p;
  std::string error;
  assert_true(TenantPolicy::Parse("", {}, &p, &error));
  assert_true(p.empty());
  assert_true(TenantPolicy::Parse(" alice = 1000:1001 , bob=1002 ", {1001}, &p, &error));
  assert_string_equal(p.Describe().c_str(),
                      "alice (uids 1000, 1001), bob (uid 1002); uids roaming: 1001");
  for (const char* bad : {"alice", "alice=", "=1000", "alice=x", "alice=1000:", "a b=1",
                          "alice=-1", "alice=4294967295", "alice=1,alice=2", "alice=1,,bob=2"}) {
    assert_false(TenantPolicy::Parse(bad, {}, &p, &error));
    assert_true(error.find("--tenant_uids: ") == 0);
  }
  // A roaming uid must be listed somewhere: one listed nowhere roams already.
  assert_false(TenantPolicy::Parse("alice=1000", {1000, 1005}, &p, &error));
  assert_true(error.find("--tenant_roaming_uids: uid 1005 is listed under no tenant") == 0);
  assert_false(TenantPolicy::Parse("", {0}, &p, &error));
  // Names resolve as --allowed_uids' do.
  std::vector<uid_t> uids;
  assert_true(mooncake::ResolveUids("tenant_roaming_uids", "root, 1007", &uids, &error));
  assert_true(uids == (std::vector<uid_t>{0, 1007}));
  assert_false(mooncake::ResolveUids("tenant_roaming_uids", "no-such-user-x", &uids, &error));
  assert_true(error.find("--tenant_roaming_uids: user no-such-user-x is unknown") == 0);
}

int Code(const mooncake::Result<std::string>& r) { return static_cast<int>(r.code()); }

constexpr int kDenied = static_cast<int>(ErrorCode::PERMISSION_DENIED);

void test_policy_resolve(void**) {
  TenantPolicy p;
  std::string error;
  assert_true(TenantPolicy::Parse("alice=1000:1001,bob=1002,shared=1000", {}, &p, &error));
  // A listed tenant only for its uids.
  assert_true(p.Resolve("alice", 1001).value() == "alice");
  assert_true(p.Resolve("shared", 1000).value() == "shared");
  assert_int_equal(Code(p.Resolve("alice", 1002)), kDenied);
  assert_int_equal(Code(p.Resolve("bob", 0)), kDenied);  // root is not special
  // Naming none: the first tenant listing the uid, else the default tenant.
  assert_true(p.Resolve("", 1000).value() == "alice");
  assert_true(p.Resolve("", 1002).value() == "bob");
  assert_true(p.Resolve("", 65534).value().empty());
  // An unlisted tenant is claimed by uids listed nowhere only: a listed uid is confined to
  // its tenants (its puts would otherwise escape its quota and its eviction share).
  assert_true(p.Resolve("carol", 65534).value() == "carol");
  assert_true(p.Resolve("carol", 0).value() == "carol");
  assert_int_equal(Code(p.Resolve("carol", 1000)), kDenied);
  assert_int_equal(Code(p.Resolve("carol", 1002)), kDenied);
  assert_int_equal(Code(p.Resolve("no way", 1000)), static_cast<int>(ErrorCode::INVALID_PARAMS));
  // Each refusal says which part of the rule, and what to do.
  assert_string_equal(p.Refusal("bob", 1000).c_str(),
                      "uid 1000 may not claim tenant 'bob' (--tenant_uids lists it for other "
                      "uids): name a tenant listed for this uid, or none");
  assert_string_equal(p.Refusal("carol", 1000).c_str(),
                      "uid 1000 may not claim tenant 'carol' (--tenant_uids confines this uid "
                      "to 'alice', 'shared'): name one of those, or none; or list the uid in "
                      "--tenant_roaming_uids to let it claim unlisted tenants");

  // --tenant_roaming_uids: uid 1002 may roam again, as before the rule; its default and
  // the listed tenants of others are unchanged.
  TenantPolicy roaming;
  assert_true(TenantPolicy::Parse("alice=1000:1001,bob=1002", {1002}, &roaming, &error));
  assert_true(roaming.Resolve("carol", 1002).value() == "carol");
  assert_true(roaming.Resolve("", 1002).value() == "bob");
  assert_int_equal(Code(roaming.Resolve("alice", 1002)), kDenied);
  assert_int_equal(Code(roaming.Resolve("carol", 1000)), kDenied);

  TenantPolicy open;
  assert_true(open.Resolve("alice", 1).value() == "alice");
  assert_true(open.Resolve("", 1).value().empty());
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tenant_ids),
      cmocka_unit_test(test_user_keys),
      cmocka_unit_test(test_encoding_round_trips_and_keeps_default_keys),
      cmocka_unit_test(test_no_two_pairs_share_a_stored_key),
      cmocka_unit_test(test_stored_keys_the_master_refuses),
      cmocka_unit_test(test_every_key_field_is_named_key),
      cmocka_unit_test(test_scope_keys_of_every_shape),
      cmocka_unit_test(test_policy_parse),
      cmocka_unit_test(test_policy_resolve),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}

// common/master_link/master_rpcs.h, the one table of the master's calls: every method of the IDL's
// MasterService has a row and every row a method (the IDL read from the source tree; the
// other direction is also checked by the compiler: a row names a member of the generated
// interface and client), the columns agree with each other and with the methods' result
// types, the processor's role rule reads the table, and docs/master.md and the fuzzer's
// dictionary show exactly the table (run with --write to regenerate their sections).
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>

#include "MasterService.h"
#include "common/master_link/master_rpcs.h"
#include "master/server/master_metrics.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/generated_docs.h"

using namespace mooncake;

namespace {

// Every row names a method of the generated interface (the daemon's client checks the
// same of rpc::MasterServiceClient as it compiles).
#define MC_CHECK_METHOD(Method, ...)                                                     \
  static_assert(std::is_member_function_pointer_v<decltype(&rpc::MasterServiceIf::Method)>, \
                #Method " is a method of MasterService");
MC_MASTER_RPCS(MC_CHECK_METHOD)
#undef MC_CHECK_METHOD

std::string ReadSource(const std::string& path) {
  std::ifstream in(std::string(MC_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The methods of `service MasterService { ... }` in the IDL: each is the first word that
// an opening parenthesis follows on its line (comments left out).
std::set<std::string> IdlMethods() {
  const std::string idl = ReadSource("common/master_link/master.thrift");
  size_t begin = idl.find("service MasterService {");
  assert_true(begin != std::string::npos);
  size_t end = idl.find("\n}", begin);
  std::istringstream body(idl.substr(begin, end - begin));
  std::set<std::string> methods;
  const std::regex method(R"(\b([A-Z][A-Za-z0-9]*)\()");
  std::string line;
  std::getline(body, line);  // "service MasterService {"
  while (std::getline(body, line)) {
    line = line.substr(0, line.find("//"));
    std::smatch m;
    if (std::regex_search(line, m, method)) methods.insert(m[1]);
  }
  return methods;
}

void test_every_method_has_a_row_and_every_row_a_method(void**) {
  std::set<std::string> idl = IdlMethods();
  assert_true(idl.size() > 40);  // the parse found the service
  std::set<std::string> rows;
  for (const MasterRpcInfo& rpc : kMasterRpcs) {
    if (!rows.insert(rpc.method).second) fail_msg("%s has two rows", rpc.method);
  }
  for (const std::string& m : idl) {
    if (rows.count(m) == 0) {
      fail_msg("%s is in common/master_link/master.thrift but has no row in "
               "common/master_link/master_rpcs.h",
               m.c_str());
    }
  }
  for (const std::string& r : rows) {
    if (idl.count(r) == 0) {
      fail_msg("%s has a row in common/master_link/master_rpcs.h but no method in "
               "common/master_link/master.thrift",
               r.c_str());
    }
  }
}

// What a batch answers: one result per item.
template <typename T>
struct IsList : std::false_type {};
template <typename T>
struct IsList<std::vector<T>> : std::true_type {};

template <typename Args>
constexpr bool AnswersList() {
  using Result = decltype(std::declval<Args&>().success);
  return IsList<Result>::value || std::is_same_v<Result, rpc::BatchChangeResult>;
}

void test_columns_agree(void**) {
  std::set<std::string> metrics;
  for (const MasterRpcInfo& rpc : kMasterRpcs) {
    // The handshake's calls are answered before admission and not counted; every other
    // call is counted under a name of its own.
    assert_true((rpc.access == RpcAccess::kHandshake) == (rpc.metric == nullptr));
    if (rpc.metric != nullptr && !metrics.insert(rpc.metric).second) {
      fail_msg("two rows count as %s", rpc.metric);
    }
    // A change acknowledged after Sync is a leader's: only a leader's log is synced.
    if (rpc.ack == RpcAck::kAfterSync) assert_true(rpc.access == RpcAccess::kLeader);
    // A change that must not run twice is not a read.
    if (rpc.ack == RpcAck::kAfterSync) assert_true(rpc.repeat != Repeat::kIdempotent);
  }
  // A batch row answers a list (one result per item), and a list answered by a single
  // row is not per item.
#define MC_CHECK_SHAPE(Method, metric, repeat, ack, access, shape)               \
  static_assert(RpcShape::shape != RpcShape::kBatch ||                          \
                    AnswersList<rpc::MasterService_##Method##_result>(),       \
                #Method " is a batch: it answers one result per item");
  MC_MASTER_RPCS(MC_CHECK_SHAPE)
#undef MC_CHECK_SHAPE
  assert_string_equal(MasterMetrics::Name(MasterMetrics::Rpc::kHeartbeat), "ping");
  assert_true(MasterMetrics::IsBatch(MasterMetrics::Rpc::kBatchRemove));
  assert_false(MasterMetrics::IsBatch(MasterMetrics::Rpc::kGetAllSegments));
}

void test_access_of_a_call(void**) {
  assert_true(AccessOf("PutStart") == RpcAccess::kLeader);
  assert_true(AccessOf("GetRole") == RpcAccess::kAnyRole);
  assert_true(AccessOf("FollowLog") == RpcAccess::kReplication);
  assert_true(AccessOf("FetchSnapshot") == RpcAccess::kReplication);
  assert_true(AccessOf("AuthChallenge") == RpcAccess::kHandshake);
  assert_true(AccessOf("Authenticate") == RpcAccess::kHandshake);
  assert_true(AccessOf("NoSuchCall") == RpcAccess::kLeader);  // the processor refuses it
  assert_true(AccessOf("getrole") == RpcAccess::kLeader);     // names are exact
}

// ---- docs/master.md ----

const char* RepeatName(Repeat r) {
  switch (r) {
    case Repeat::kIdempotent: return "yes (a read)";
    case Repeat::kSafe: return "yes";
    case Repeat::kNever: return "**no**";
  }
  return "?";
}

const char* AccessName(RpcAccess a) {
  switch (a) {
    case RpcAccess::kHandshake: return "before admission";
    case RpcAccess::kAnyRole: return "any role";
    case RpcAccess::kReplication: return "any role (a standby's)";
    case RpcAccess::kLeader: return "leader";
  }
  return "?";
}

std::string RpcsTableMarkdown() {
  std::string t =
      "| call | metric | batch | acknowledged after Sync | served by | sent again after "
      "\"may have run\" |\n|---|---|---|---|---|---|\n";
  for (const MasterRpcInfo& rpc : kMasterRpcs) {
    t += std::string("| ") + rpc.method + " | " +
         (rpc.metric != nullptr ? std::string("`") + rpc.metric + "`" : "--") + " | " +
         (rpc.shape == RpcShape::kBatch ? "yes" : "") + " | " +
         (rpc.ack == RpcAck::kAfterSync ? "yes" : "") + " | " + AccessName(rpc.access) + " | " +
         RepeatName(rpc.repeat) + " |\n";
  }
  return t;
}

// The fuzzer's dictionary (fuzz/dict/master_rpc_fuzzer.dict): every method's name. The
// markers sit in comment lines, so the text ends with the end marker's "# ".
std::string FuzzDictNames() {
  std::string t;
  for (const MasterRpcInfo& rpc : kMasterRpcs) t += std::string("\"") + rpc.method + "\"\n";
  return t + "# ";
}

std::vector<testing::GeneratedDoc> Docs() {
  return {{"docs/master.md", {{"master-rpcs", RpcsTableMarkdown()}}},
          {"fuzz/dict/master_rpc_fuzzer.dict", {{"master-rpc-names", FuzzDictNames()}}}};
}

void test_doc_shows_the_table(void**) {
  const std::string problem =
      testing::CheckGeneratedDocs(MC_SOURCE_DIR, Docs(), "build/tests/unit/master_rpcs_test --write");
  if (!problem.empty()) fail_msg("%s", problem.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--write") == 0) {
    return testing::WriteGeneratedDocs(MC_SOURCE_DIR, Docs());
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_method_has_a_row_and_every_row_a_method),
      cmocka_unit_test(test_columns_agree),
      cmocka_unit_test(test_access_of_a_call),
      cmocka_unit_test(test_doc_shows_the_table),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}

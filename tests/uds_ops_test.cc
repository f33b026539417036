// common/uds_ops: every op of the table packs and parses back to the same struct, and its
// parser refuses a missing field, an extra field and a field of the wrong type; a refusal's
// reason travels (cut to its limit, one line) and a success carries none; docs/
// protocol.md shows exactly the table (run with --write to regenerate its sections).
#include <cstring>
#include <string>

#include "common/uds/uds_ops.h"
#include "tests/cmocka_cpp.h"
#include "tests/generated_docs.h"

using namespace mooncake;
using namespace mooncake::uds;

namespace {

// Packs the first `left` fields of a struct; field number `bad` (if any) as a value of
// another msgpack type than the field's.
struct SomeFields {
  Packer& p;
  uint32_t left;
  uint32_t bad = UINT32_MAX;
  uint32_t at = 0;
  template <class F>
  void operator()(const char*, const F& f) {
    if (left == 0) return;
    --left;
    if (at++ != bad) return PackValue(p, f);
    if (std::is_same<F, std::string>::value) {
      p.pack(uint64_t{1});
    } else {
      p.pack(std::string("not this type"));
    }
  }
  template <class F>
  void Spread(const char*, const std::vector<F>& v) {
    for (const F& e : v) (*this)("", e);
  }
};

// Whether a struct's results are spread (any count is its shape).
struct SpreadProbe {
  bool spread = false;
  template <class F>
  void operator()(const char*, const F&) {}
  template <class F>
  void Spread(const char*, const std::vector<F>&) { spread = true; }
};

// The payload of a frame holding s's fields, parsed again.
template <class T>
Message RoundTrip(const T& s, int extra_items, bool drop_last) {
  uint32_t n = FieldCount(s) + extra_items - (drop_last ? 1 : 0);
  FrameBuilder frame(1, 2, n);
  // The fields (all, or all but the last), then the extra items.
  SomeFields some{frame.args(), FieldCount(s) - (drop_last ? 1 : 0)};
  T::Fields(s, some);
  for (int i = 0; i < extra_items; ++i) frame.args().pack(std::string("extra"));
  Message m;
  const char* data = frame.data();
  assert_true(ParseMessage(data + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, &m));
  return m;
}

// A struct whose every string is "s", number 7, flag true, list one entry: no field is
// left at a default a broken codec might also produce.
struct Filler {
  void Fill(std::string* v) { *v = "s"; }
  void Fill(uint64_t* v) { *v = 7; }
  void Fill(int64_t* v) { *v = -7; }
  void Fill(bool* v) { *v = true; }
  void Fill(Flag* v) { v->value = true; }
  template <class T>
  void Fill(std::vector<T>* v) {
    v->resize(1);
    Fill(&(*v)[0]);
  }
  template <class T>
  void Fill(T* s) {
    T::Fields(*s, *this);
  }
  template <class T>
  void operator()(const char*, T& field) { Fill(&field); }
  template <class T>
  void Spread(const char*, std::vector<T>& v) { Fill(&v); }
};

// Packs back what was parsed: equal bytes mean equal structs.
template <class T>
std::string Bytes(const T& s) {
  FrameBuilder frame(1, 2, FieldCount(s));
  PackFields(frame.args(), s);
  return std::string(frame.data(), frame.size());
}

template <class T>
void CheckCodec(const char* op) {
  T full;
  Filler filler;
  filler.Fill(&full);
  Message m = RoundTrip(full, 0, false);
  T back;
  if (!ParseFields(m.args, &back)) fail_msg("%s: a well-formed message did not parse", op);
  if (Bytes(back) != Bytes(full)) fail_msg("%s: did not round-trip", op);
  // Spread results take any count; every other struct wants exactly its fields.
  SpreadProbe probe;
  T::Fields(full, probe);
  if (probe.spread) return;
  Message longer = RoundTrip(full, 1, false);
  if (ParseFields(longer.args, &back)) fail_msg("%s: an extra field was accepted", op);
  if (FieldCount(full) == 0) return;
  Message shorter = RoundTrip(full, 0, true);
  if (ParseFields(shorter.args, &back)) fail_msg("%s: a missing field was accepted", op);
}

template <class T>
void CheckWrongType(const char* op) {
  T full;
  Filler filler;
  filler.Fill(&full);
  uint32_t n = FieldCount(full);
  if (n == 0) return;
  // Each field in turn replaced by a value of another msgpack type.
  for (uint32_t bad = 0; bad < n; ++bad) {
    FrameBuilder frame(1, 2, n);
    SomeFields replace{frame.args(), n, bad};
    T::Fields(full, replace);
    Message m;
    const char* data = frame.data();
    assert_true(ParseMessage(data + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, &m));
    T back;
    if (ParseFields(m.args, &back)) {
      fail_msg("%s: field %u of the wrong type was accepted", op, bad);
    }
  }
}

void test_every_op_round_trips_and_refuses_bad_shapes(void**) {
  CheckCodec<HelloArgs>("HELLO args");
  CheckCodec<HelloReply>("HELLO reply");
  CheckWrongType<HelloArgs>("HELLO args");
#define CHECK_OP_(name, wire, code, args, reply, note) \
  CheckCodec<args>(wire " args");                      \
  CheckCodec<reply>(wire " reply");                    \
  CheckWrongType<args>(wire " args");
  MC_UDS_OPS(CHECK_OP_)
#undef CHECK_OP_
}

void test_flags_accept_zero_and_one_only(void**) {
  for (int64_t value : {0, 1, 2, -1}) {
    FrameBuilder frame(1, 2, 1);
    frame.args().pack(value);
    Message m;
    const char* data = frame.data();
    assert_true(ParseMessage(data + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, &m));
    RemoveAllArgs args;
    bool ok = ParseFields(m.args, &args);
    assert_int_equal(ok, value == 0 || value == 1);
    if (ok) assert_int_equal(args.force.value, value == 1);
  }
}

void test_batches_over_the_limit_are_refused(void**) {
  BatchExistArgs args;
  args.keys.assign(kMaxBatch + 1, "k");
  FrameBuilder frame(1, 2, FieldCount(args));
  PackFields(frame.args(), args);
  Message m;
  const char* data = frame.data();
  // Refused while decoding already: no array of a frame may exceed kMaxBatch items.
  assert_false(ParseMessage(data + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, &m));
  BatchExistArgs back;
  args.keys.pop_back();
  FrameBuilder fits(1, 2, FieldCount(args));
  PackFields(fits.args(), args);
  data = fits.data();
  assert_true(ParseMessage(data + kFrameHeaderBytes, fits.size() - kFrameHeaderBytes, &m));
  assert_true(ParseFields(m.args, &back));
  assert_int_equal(back.keys.size(), kMaxBatch);
}

void test_op_codes(void**) {
  assert_false(IsRequestOp(static_cast<int64_t>(Op::kHello)));
  assert_true(IsRequestOp(static_cast<int64_t>(Op::kGet)));
  assert_false(IsRequestOp(0));
  assert_false(IsRequestOp(99));
  std::vector<OpDoc> ops = DescribeOps();
  for (size_t i = 1; i < ops.size(); ++i) {
    assert_true(IsRequestOp(ops[i].code));
    for (size_t j = 0; j < i; ++j) assert_int_not_equal(ops[i].code, ops[j].code);
  }
}

// ---- docs/protocol.md ----

// The sections of the doc the table generates, as they should read.
std::vector<testing::GeneratedDoc> Docs() {
  return {{"docs/protocol.md",
           {{"handshake", HandshakeTableMarkdown()}, {"operations", OpsTableMarkdown()}}}};
}

void test_doc_shows_the_table(void**) {
  const std::string problem =
      testing::CheckGeneratedDocs(MC_SOURCE_DIR, Docs(), "build/tests/uds_ops_test --write");
  if (!problem.empty()) fail_msg("%s", problem.c_str());
}

}  // namespace

// The message a reply frame becomes on the other side.
Message Parsed(ReplyFrame& frame) {
  Message m;
  const char* bytes = frame.data();
  assert_true(ParseMessage(bytes + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, &m));
  return m;
}

void test_refusals_carry_a_reason(void**) {
  ReplyFrame refused(7, ErrorCode::INVALID_PARAMS, NoReply(), "key is empty");
  Message m = Parsed(refused);
  assert_int_equal(m.head, -600);
  assert_int_equal(m.args.size(), 1);
  assert_string_equal(ReasonOf(m).c_str(), "key is empty");

  // No reason given: empty results, as before reasons existed.
  ReplyFrame bare(8, ErrorCode::INVALID_PARAMS, NoReply());
  m = Parsed(bare);
  assert_int_equal(m.args.size(), 0);
  assert_string_equal(ReasonOf(m).c_str(), "");

  // A success carries its results, never a reason.
  ReplyFrame ok(9, ErrorCode::OK, HostnameReply{"127.0.0.1:1"}, "ignored");
  m = Parsed(ok);
  assert_int_equal(m.args.size(), 1);
  assert_string_equal(ReasonOf(m).c_str(), "");

  // Cut to kMaxReasonBytes, never inside a UTF-8 sequence; a newline cannot split the log
  // line it ends up in.
  std::string long_reason = "line one\nline two ";
  while (long_reason.size() < 2 * kMaxReasonBytes) long_reason += "\xc3\xa9";  // U+00E9
  ReplyFrame clipped(10, ErrorCode::RESOURCE_LIMIT_EXCEEDED, NoReply(), long_reason);
  std::string reason = ReasonOf(Parsed(clipped));
  assert_true(reason.size() <= kMaxReasonBytes && reason.size() >= kMaxReasonBytes - 1);
  assert_true(reason.rfind("line one line two ", 0) == 0);
  assert_int_equal(static_cast<unsigned char>(reason.back()), 0xa9);  // a whole character
}

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--write") == 0) {
    return testing::WriteGeneratedDocs(MC_SOURCE_DIR, Docs());
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_op_round_trips_and_refuses_bad_shapes),
      cmocka_unit_test(test_flags_accept_zero_and_one_only),
      cmocka_unit_test(test_batches_over_the_limit_are_refused),
      cmocka_unit_test(test_op_codes),
      cmocka_unit_test(test_doc_shows_the_table),
      cmocka_unit_test(test_refusals_carry_a_reason),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}

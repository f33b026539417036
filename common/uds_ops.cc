#include "common/uds/uds_ops.h"

namespace mooncake {
namespace uds {

bool IsRequestOp(int64_t head) {
  switch (head) {
#define MC_UDS_OP_CASE_(name, wire, code, args, reply, note) case code:
    MC_UDS_OPS(MC_UDS_OP_CASE_)
#undef MC_UDS_OP_CASE_
    case static_cast<int64_t>(Op::kPoolFence):
      return true;
    default:
      return false;
  }
}

namespace {

// reason cut to at most kMaxReasonBytes, not inside a UTF-8 sequence.
std::string_view ClipReason(std::string_view reason) {
  if (reason.size() <= kMaxReasonBytes) return reason;
  size_t n = kMaxReasonBytes;
  while (n > 0 && (static_cast<unsigned char>(reason[n]) & 0xC0) == 0x80) --n;
  return reason.substr(0, n);
}

}  // namespace

void ReplyFrame::PackReason(std::string_view reason) {
  std::string_view clipped = ClipReason(reason);
  args().pack_str(static_cast<uint32_t>(clipped.size()));
  args().pack_str_body(clipped.data(), static_cast<uint32_t>(clipped.size()));
}

std::string ReasonOf(const Message& reply) {
  if (reply.head == 0 || reply.args.size() != 1) return "";
  ArgReader results = reply.args;
  std::string reason = results.Str();
  if (!results.ok()) return "";
  reason = std::string(ClipReason(reason));
  for (char& c : reason) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return reason;
}

std::vector<OpDoc> DescribeOps() {
  std::vector<OpDoc> ops;
  ops.push_back({"HELLO", static_cast<uint32_t>(Op::kHello), DescribeFields<HelloArgs>(),
                 DescribeFields<HelloReply>(), ""});
  ops.push_back({"POOL_FENCE", static_cast<uint32_t>(Op::kPoolFence), DescribeFields<NoArgs>(),
                 DescribeFields<NoReply>(), ""});
#define MC_UDS_OP_DOC_(name, wire, code, args, reply, note) \
  ops.push_back({wire, code, DescribeFields<args>(), DescribeFields<reply>(), note});
  MC_UDS_OPS(MC_UDS_OP_DOC_)
#undef MC_UDS_OP_DOC_
  return ops;
}

namespace {

std::string Row(const OpDoc& op, bool with_note) {
  std::string row = "| `" + op.name + "` = " + std::to_string(op.code) + " | `" + op.args +
                    "` | `" + op.results + "` |";
  if (with_note) row += (op.note.empty() ? "" : " " + op.note + " |");
  if (with_note && op.note.empty()) row += " |";
  return row + "\n";
}

// HELLO and POOL_FENCE lead DescribeOps.
constexpr size_t kConnectionOps = 2;

}  // namespace

std::string HandshakeTableMarkdown() {
  std::string table = "| op | args | results |\n|---|---|---|\n";
  std::vector<OpDoc> ops = DescribeOps();
  for (size_t i = 0; i < kConnectionOps; ++i) table += Row(ops[i], false);
  return table;
}

std::string OpsTableMarkdown() {
  std::string table = "| op | args | results | notes |\n|---|---|---|---|\n";
  std::vector<OpDoc> ops = DescribeOps();
  for (size_t i = kConnectionOps; i < ops.size(); ++i) table += Row(ops[i], true);
  table += "\n`config` is `" + DescribeFields<WireConfig>() + "`.\n";
  return table;
}

}  // namespace uds
}  // namespace mooncake

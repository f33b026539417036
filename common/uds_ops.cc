#include "common/uds_ops.h"

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

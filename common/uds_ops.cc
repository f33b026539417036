#include "common/uds_ops.h"

namespace mooncake {
namespace uds {

bool IsRequestOp(int64_t head) {
  switch (head) {
#define MC_UDS_OP_CASE_(name, wire, code, args, reply, note) case code:
    MC_UDS_OPS(MC_UDS_OP_CASE_)
#undef MC_UDS_OP_CASE_
    return true;
    default:
      return false;
  }
}

std::vector<OpDoc> DescribeOps() {
  std::vector<OpDoc> ops;
  ops.push_back({"HELLO", static_cast<uint32_t>(Op::kHello), DescribeFields<HelloArgs>(),
                 DescribeFields<HelloReply>(), ""});
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

}  // namespace

std::string HandshakeTableMarkdown() {
  return "| op | args | results |\n|---|---|---|\n" + Row(DescribeOps()[0], false);
}

std::string OpsTableMarkdown() {
  std::string table = "| op | args | results | notes |\n|---|---|---|---|\n";
  std::vector<OpDoc> ops = DescribeOps();
  for (size_t i = 1; i < ops.size(); ++i) table += Row(ops[i], true);
  table += "\n`config` is `" + DescribeFields<WireConfig>() + "`.\n";
  return table;
}

}  // namespace uds
}  // namespace mooncake

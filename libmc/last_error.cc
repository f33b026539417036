#include "libmc/last_error.h"

#include <memory>
#include <utility>
#include <vector>

namespace mooncake {
namespace client {

namespace {

// What the call running on this thread said so far.
struct CallState {
  ErrorCode code = ErrorCode::OK;
  std::string why;
  Blame blame = Blame::kOther;
  bool entry_noted = false;
  std::string entry;
  bool entry_blames_arguments = false;
};

// One handle's message on this thread. On the heap, so that the text a caller holds stays
// where it is while other handles' slots come and go.
struct Slot {
  uint64_t serial = 0;
  std::unique_ptr<std::string> message;
};

thread_local CallState t_call;
// Most recently failed last. Empty on a thread whose calls all succeed: a success then
// costs one look at an empty vector.
thread_local std::vector<Slot> t_slots;

Slot* Find(uint64_t serial) {
  for (Slot& slot : t_slots) {
    if (slot.serial == serial) return &slot;
  }
  return nullptr;
}

}  // namespace

void BeginCall() {
  t_call.code = ErrorCode::OK;
  t_call.why.clear();
  t_call.blame = Blame::kOther;
  if (t_call.entry_noted) {
    t_call.entry_noted = false;
    t_call.entry.clear();
  }
}

void Explain(ErrorCode code, std::string why, Blame blame) {
  t_call.code = code;
  t_call.why = std::move(why);
  t_call.blame = blame;
}

ErrorCode Refused(ErrorCode code, std::string why) {
  Explain(code, std::move(why), Blame::kArgument);
  return code;
}

ErrorCode ExplainedCode() { return t_call.code; }

const std::string* Explained(ErrorCode code) {
  if (code == ErrorCode::OK || t_call.code != code || t_call.why.empty()) return nullptr;
  return &t_call.why;
}

bool BlamesArguments(ErrorCode code) {
  return Explained(code) != nullptr && t_call.blame == Blame::kArgument;
}

void NoteEntry(size_t index, int code) {
  if (t_call.entry_noted) return;
  ErrorCode c = FromWire(code);
  t_call.entry_noted = true;
  t_call.entry = "entry " + std::to_string(index) + ": " + MessageFor(c);
  t_call.entry_blames_arguments = BlamesArguments(c);
}

const std::string* NotedEntry() { return t_call.entry_noted ? &t_call.entry : nullptr; }

bool NotedEntryBlamesArguments() { return t_call.entry_noted && t_call.entry_blames_arguments; }

std::string MessageFor(ErrorCode code) {
  if (const std::string* why = Explained(code)) return *why;
  return std::string(ErrorText(ToInt(code))) + " (" + std::to_string(ToInt(code)) + ")";
}

void RecordMessage(uint64_t serial, const std::string& message) {
  Slot* slot = Find(serial);
  if (message.empty()) {
    if (slot != nullptr) slot->message->clear();  // the text stays where it is, now ""
    return;
  }
  if (slot == nullptr) {
    if (t_slots.size() >= kHandlesPerThread) t_slots.erase(t_slots.begin());
    t_slots.push_back({serial, std::make_unique<std::string>()});
    slot = &t_slots.back();
  }
  *slot->message = message;
}

const char* LastMessage(uint64_t serial) {
  Slot* slot = Find(serial);
  return slot != nullptr ? slot->message->c_str() : "";
}

}  // namespace client
}  // namespace mooncake

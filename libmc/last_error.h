// Why a call of the C ABI failed: the text mooncake_store_errmsg() returns, after SQLite's
// sqlite3_errmsg, kept per handle and per thread.
//
// While a call runs, the layer that knows why it fails says so with Explain(code, why):
// the argument checks (api_checks.h), the connection (a dial's errno, a timeout, the
// daemon's reason from its reply: common/uds/uds_ops.h, "reasons"), the store client. When the
// call returns, the C ABI (c_api.cc) takes the text said for the code it returns -- else
// the code's description -- as the message of (its handle, the calling thread), and a call
// that succeeds clears it. A reason said for another code than the one returned (a failure
// an outer layer recovered from, or turned into another code) is dropped, so a message
// never explains a failure it does not belong to. Later Explain calls replace earlier
// ones: the last layer to speak is the one whose code comes back.
//
// Batch calls return 0 while some entries fail: NoteEntry keeps the first entry the
// library refused itself ("entry 3: key is empty"), which the call's message then is.
//
// Thread roles: all state is the calling thread's own (thread_local), so nothing here
// takes a lock and no thread sees another's messages. A thread keeps messages for at most
// kHandlesPerThread handles; a failure on one more forgets the handle whose message it
// kept longest, which then reads "".
#ifndef MOONCAKE_LIBMC_LAST_ERROR_H_
#define MOONCAKE_LIBMC_LAST_ERROR_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/base/error_code.h"

namespace mooncake {
namespace client {

// Whose fault a failure is. kArgument: the caller's arguments (or using a handle in the
// wrong state); the C ABI logs those at most once a second per handle. kOther: anything
// else (the daemon, the cluster, the machine).
enum class Blame { kOther, kArgument };

// Starts a call on this thread: forgets what was explained and noted before.
void BeginCall();

// Says why the call is failing with code (not OK); replaces what was said before.
void Explain(ErrorCode code, std::string why, Blame blame = Blame::kOther);

// The code of what was said last in this call (OK when nothing was): for calls that
// return no code (mooncake_store_alloc).
ErrorCode ExplainedCode();

// Explain(code, why, Blame::kArgument), returning code: a refusal of the caller's doing.
ErrorCode Refused(ErrorCode code, std::string why);

// What was said for code in this call: nullptr when nothing was (or for another code).
const std::string* Explained(ErrorCode code);
// Whether what was said for code blames the arguments.
bool BlamesArguments(ErrorCode code);

// A batch call's entry index failed with code before anything was sent: the first such
// entry is kept, with what was said for code (else code's description).
void NoteEntry(size_t index, int code);
// The first noted entry, "entry 3: key is empty"; nullptr when none was noted.
const std::string* NotedEntry();
bool NotedEntryBlamesArguments();

// The message of a failed call, as errmsg shows it: what was said for code, else the
// code's description and number ("object not found (-704)").
std::string MessageFor(ErrorCode code);

// Sets the message of handle serial on this thread ("" after a success). Serial 0 stands
// for calls made without a handle (a NULL one, parse_size).
void RecordMessage(uint64_t serial, const std::string& message);
// The message of handle serial on this thread: "" when none. Valid until this thread's
// next call of the library on that handle (or with more than kHandlesPerThread handles
// failing on the thread meanwhile).
const char* LastMessage(uint64_t serial);

constexpr size_t kHandlesPerThread = 64;

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_LAST_ERROR_H_

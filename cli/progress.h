// The progress line of put and get on stderr: "put KEY  42% 420.0 MiB / 1.0 GiB  310.2 MiB/s",
// redrawn in place at most ten times a second, then a last line with the total and rate.
//
// A put or get of the store is one request of the C ABI, which reports nothing until it
// returns; so the line counts the bytes moved between the file (or stdin, stdout) and
// memory, and shows "storing" or "fetching" while the request runs.
//
// Shown when the transfer is over kMinBytes and stderr is a terminal, or with --progress;
// otherwise every call is a no-op. One thread uses a ProgressLine.
#ifndef MOONCAKE_CLI_PROGRESS_H_
#define MOONCAKE_CLI_PROGRESS_H_

#include <cstdint>
#include <string>

namespace mooncake {
namespace cli {

class ProgressLine {
 public:
  // Transfers below this are quiet: a line that flashes by tells nothing.
  static constexpr uint64_t kMinBytes = 4ull << 20;

  // label: "put KEY"; total 0 when not known yet (stdin).
  ProgressLine(std::string label, uint64_t total, bool forced);
  ~ProgressLine();  // ends the line if Finish was not called
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // done bytes of total moved so far.
  void Update(uint64_t done);
  // The request to the store for bytes is running: "storing", "fetching".
  void Phase(const std::string& what, uint64_t bytes);
  // The last line: bytes and the overall rate (nothing when the line was never shown).
  void Finish(uint64_t bytes);

 private:
  bool Visible(uint64_t bytes) const;
  void Draw(const std::string& text);

  std::string label_;
  uint64_t total_;
  bool forced_;
  bool tty_;
  bool shown_ = false;
  bool finished_ = false;
  int64_t start_ns_;
  int64_t last_draw_ns_ = 0;
  size_t last_width_ = 0;
};

}  // namespace cli
}  // namespace mooncake

#endif  // MOONCAKE_CLI_PROGRESS_H_

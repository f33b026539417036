#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

#include "cli/output.h"
#include "common/base/metrics.h"

namespace mooncake {
namespace cli {
namespace {

constexpr int64_t kRedrawNs = 100 * 1000 * 1000;

std::string Rate(uint64_t bytes, int64_t ns) {
  if (ns <= 0) return "-";
  return HumanSize(
             static_cast<uint64_t>(static_cast<double>(bytes) * 1e9 / static_cast<double>(ns))) +
         "/s";
}

}  // namespace

ProgressLine::ProgressLine(std::string label, uint64_t total, bool forced)
    : label_(std::move(label)),
      total_(total),
      forced_(forced),
      tty_(isatty(STDERR_FILENO) == 1),
      start_ns_(MonotonicNanos()) {}

ProgressLine::~ProgressLine() {
  if (shown_ && !finished_ && tty_) std::fputc('\n', stderr);
}

bool ProgressLine::Visible(uint64_t bytes) const {
  return (forced_ || tty_) && (total_ > kMinBytes || bytes > kMinBytes);
}

void ProgressLine::Draw(const std::string& text) {
  // On a terminal the line is redrawn in place; into a file (--progress) each draw is a
  // line of its own, so that a log shows the steps.
  if (tty_) {
    std::string padded = text;
    if (padded.size() < last_width_) padded += std::string(last_width_ - padded.size(), ' ');
    std::fprintf(stderr, "\r%s", padded.c_str());
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
  last_width_ = text.size();
  shown_ = true;
}

void ProgressLine::Update(uint64_t done) {
  if (!Visible(done)) return;
  int64_t now = MonotonicNanos();
  if (shown_ && now - last_draw_ns_ < kRedrawNs && done != total_) return;
  last_draw_ns_ = now;
  std::string text = label_ + "  ";
  if (total_ > 0) {
    text +=
        std::to_string(done * 100 / total_) + "% " + HumanSize(done) + " / " + HumanSize(total_);
  } else {
    text += HumanSize(done);
  }
  Draw(text + "  " + Rate(done, now - start_ns_));
}

void ProgressLine::Phase(const std::string& what, uint64_t bytes) {
  total_ = bytes;
  if (!Visible(bytes)) return;
  Draw(label_ + "  " + what + " " + HumanSize(total_) + " ...");
}

void ProgressLine::Finish(uint64_t bytes) {
  total_ = bytes;
  if (!Visible(bytes) || finished_) return;
  int64_t ns = MonotonicNanos() - start_ns_;
  Draw(label_ + "  " + HumanSize(bytes) + " in " + HumanMillis(ns / 1000000) + "  " +
       Rate(bytes, ns));
  if (tty_) std::fputc('\n', stderr);
  finished_ = true;
}

}  // namespace cli
}  // namespace mooncake

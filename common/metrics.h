// Metrics in Prometheus' text exposition format (version 0.0.4), for the admin HTTP
// endpoints of the master and the daemon (docs/operations.md).
//
// A MetricsRegistry owns counters, gauges and histograms, registered once at start by name,
// help text and constant labels; samples sharing a name form one family (one # HELP and
// # TYPE line). Updating a metric is a relaxed atomic add, lock-free, cheap enough for the
// request path. Figures that live elsewhere (a table's size, a pool's use) are not copied
// into gauges: a collector, called at every Render(), writes them from their source through
// a MetricsWriter.
//
// Naming follows Prometheus' rules (base units: seconds and bytes; counters end in _total),
// which `promtool check metrics` enforces in tests; where Mooncake has the same metric, its
// name is used.
//
// Thread roles: Add* and AddCollector before the registry is shared (at start); updates from
// any thread; Render from any thread (the admin HTTP thread), concurrently with updates --
// a scrape sees each value at some moment of the render, not one instant for all.
#ifndef MOONCAKE_COMMON_METRICS_H_
#define MOONCAKE_COMMON_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/base/monotonic_clock.h"

namespace mooncake {

// Constant labels of one sample: {{"op", "put"}, {"tier", "memory"}}. Values are escaped
// on output; names must match [a-zA-Z_][a-zA-Z0-9_]*.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t n) { value_.fetch_add(n, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Cumulative buckets with fixed upper bounds, plus _sum and _count. Observations are in
// the metric's base unit (seconds for latencies).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Observes the seconds elapsed since start_ns (a MonotonicNanos() reading).
  void ObserveSince(int64_t start_ns);

  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Observations <= upper_bounds()[i] (cumulative), i < upper_bounds().size(); count() for +Inf.
  uint64_t cumulative(size_t i) const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bound, not cumulative
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_bits_{0};  // a double's bits: updated by compare-and-swap
};

// Latency buckets for store operations, in seconds: 10 µs to 10 s.
std::vector<double> LatencyBuckets();

// Writes whole families for a collector. Each Family() call starts one (its # HELP and
// # TYPE lines); the Sample calls that follow belong to it. A name must be written once per
// render, by one collector, and not also registered.
//
// detailed(): whether this render is for a caller who may see series that name what the
// admin port protects (a segment's address, a tenant's id); collectors leave those out
// otherwise (docs/operations.md, "Metrics").
class MetricsWriter {
 public:
  explicit MetricsWriter(std::string* out, bool detailed = true)
      : out_(out), detailed_(detailed) {}
  bool detailed() const { return detailed_; }
  // type: "counter", "gauge" or "untyped".
  void Family(const std::string& name, const char* type, const std::string& help);
  void Sample(double value, const MetricLabels& labels = {});
  // A histogram family's samples (_bucket, _sum, _count) with labels.
  void HistogramSamples(const Histogram& h, const MetricLabels& labels = {});

 private:
  void Line(const std::string& name, const MetricLabels& labels, const char* extra_label,
            const std::string& extra_value, double value);
  std::string* out_;
  const bool detailed_;
  std::string family_;
};

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // The returned pointers live as long as the registry. A name registered again must have
  // the same type and help and different labels (another sample of the family). Names
  // and label names that break Prometheus' rules abort: they are the program's, not input.
  Counter* AddCounter(const std::string& name, const std::string& help,
                      const MetricLabels& labels = {});
  Gauge* AddGauge(const std::string& name, const std::string& help,
                  const MetricLabels& labels = {});
  Histogram* AddHistogram(const std::string& name, const std::string& help,
                          std::vector<double> upper_bounds, const MetricLabels& labels = {});
  // Called at every Render(), after the registered metrics, in the order added.
  void AddCollector(std::function<void(MetricsWriter*)> collect);

  // The exposition text (Content-Type: text/plain; version=0.0.4); detailed: see
  // MetricsWriter::detailed().
  std::string Render(bool detailed = true) const;

 private:
  struct Child {
    MetricLabels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    const char* type;
    std::string help;
    std::vector<Child> children;
  };
  Child* AddChild(const std::string& name, const char* type, const std::string& help,
                  const MetricLabels& labels);

  std::map<std::string, Family> families_;  // by name: a stable, sorted output
  std::vector<std::function<void(MetricsWriter*)>> collectors_;
};

// True for a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*).
bool ValidMetricName(const std::string& name);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_METRICS_H_

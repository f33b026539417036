#include "common/base/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mooncake {
namespace {

bool ValidLabelName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return name.rfind("__", 0) != 0;  // reserved for Prometheus itself
}

// Exposition format: a label value escapes backslash, double quote and line feed.
void AppendEscaped(std::string* out, const std::string& value) {
  for (char c : value) {
    if (c == '\\') {
      *out += "\\\\";
    } else if (c == '"') {
      *out += "\\\"";
    } else if (c == '\n') {
      *out += "\\n";
    } else {
      *out += c;
    }
  }
}

// HELP text escapes backslash and line feed only.
void AppendHelp(std::string* out, const std::string& help) {
  for (char c : help) {
    if (c == '\\') {
      *out += "\\\\";
    } else if (c == '\n') {
      *out += "\\n";
    } else {
      *out += c;
    }
  }
}

void AppendNumber(std::string* out, double v) {
  if (std::isnan(v)) {
    *out += "NaN";
  } else if (std::isinf(v)) {
    *out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
    *out += buf;
  } else {
    // The shortest of %.15g and %.17g that reads back as v: 1e-05, not 1.0000000000000001e-05.
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.15g", v);
    if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof(buf), "%.17g", v);
    *out += buf;
  }
}

[[noreturn]] void BadName(const char* what, const std::string& name) {
  std::fprintf(stderr, "metrics: invalid %s \"%s\"\n", what, name.c_str());
  std::abort();
}

}  // namespace

bool ValidMetricName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::vector<double> LatencyBuckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
          0.005,   0.01,     0.025,   0.05,   0.1,     0.25,   0.5,   1,
          2.5,     5,        10};
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(new std::atomic<uint64_t>[bounds_.size()]) {
  for (size_t i = 0; i < bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (value <= bounds_[i]) {
      buckets_[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  count_.fetch_add(1, std::memory_order_relaxed);
  uint64_t old_bits = sum_bits_.load(std::memory_order_relaxed);
  for (;;) {
    double sum;
    std::memcpy(&sum, &old_bits, sizeof(sum));
    sum += value;
    uint64_t new_bits;
    std::memcpy(&new_bits, &sum, sizeof(sum));
    if (sum_bits_.compare_exchange_weak(old_bits, new_bits, std::memory_order_relaxed)) break;
  }
}

void Histogram::ObserveSince(int64_t start_ns) {
  Observe(static_cast<double>(MonotonicNanos() - start_ns) / 1e9);
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t total = 0;
  for (size_t b = 0; b <= i && b < bounds_.size(); ++b) {
    total += buckets_[b].load(std::memory_order_relaxed);
  }
  return total;
}

double Histogram::sum() const {
  uint64_t bits = sum_bits_.load(std::memory_order_relaxed);
  double sum;
  std::memcpy(&sum, &bits, sizeof(sum));
  return sum;
}

void MetricsWriter::Family(const std::string& name, const char* type, const std::string& help) {
  if (!ValidMetricName(name)) BadName("metric name", name);
  family_ = name;
  *out_ += "# HELP " + name + " ";
  AppendHelp(out_, help);
  *out_ += "\n# TYPE " + name + " " + type + "\n";
}

void MetricsWriter::Line(const std::string& name, const MetricLabels& labels,
                         const char* extra_label, const std::string& extra_value,
                         double value) {
  *out_ += name;
  if (!labels.empty() || extra_label != nullptr) {
    *out_ += '{';
    bool first = true;
    for (const auto& [label, label_value] : labels) {
      if (!ValidLabelName(label)) BadName("label name", label);
      if (!first) *out_ += ',';
      first = false;
      *out_ += label + "=\"";
      AppendEscaped(out_, label_value);
      *out_ += '"';
    }
    if (extra_label != nullptr) {
      if (!first) *out_ += ',';
      *out_ += std::string(extra_label) + "=\"" + extra_value + "\"";
    }
    *out_ += '}';
  }
  *out_ += ' ';
  AppendNumber(out_, value);
  *out_ += '\n';
}

void MetricsWriter::Sample(double value, const MetricLabels& labels) {
  Line(family_, labels, nullptr, "", value);
}

void MetricsWriter::HistogramSamples(const Histogram& h, const MetricLabels& labels) {
  const auto& bounds = h.upper_bounds();
  uint64_t running = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    running = h.cumulative(i);
    std::string le;
    AppendNumber(&le, bounds[i]);
    Line(family_ + "_bucket", labels, "le", le, static_cast<double>(running));
  }
  // Read count after the buckets: a concurrent observation may show in count and not yet
  // in a bucket, never the other way round, so +Inf stays >= every bucket.
  uint64_t count = h.count();
  if (count < running) count = running;
  Line(family_ + "_bucket", labels, "le", "+Inf", static_cast<double>(count));
  Line(family_ + "_sum", labels, nullptr, "", h.sum());
  Line(family_ + "_count", labels, nullptr, "", static_cast<double>(count));
}

MetricsRegistry::Child* MetricsRegistry::AddChild(const std::string& name, const char* type,
                                                  const std::string& help,
                                                  const MetricLabels& labels) {
  if (!ValidMetricName(name)) BadName("metric name", name);
  for (const auto& label : labels) {
    if (!ValidLabelName(label.first)) BadName("label name", label.first);
  }
  auto [it, inserted] = families_.try_emplace(name, Family{type, help, {}});
  Family& family = it->second;
  if (!inserted) {
    if (std::strcmp(family.type, type) != 0) BadName("metric re-registered as another type", name);
    for (const Child& child : family.children) {
      if (child.labels == labels) BadName("metric registered twice with the same labels", name);
    }
  }
  family.children.push_back(Child{labels, nullptr, nullptr, nullptr});
  return &family.children.back();
}

Counter* MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                     const MetricLabels& labels) {
  Child* child = AddChild(name, "counter", help, labels);
  child->counter = std::make_unique<Counter>();
  return child->counter.get();
}

Gauge* MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                 const MetricLabels& labels) {
  Child* child = AddChild(name, "gauge", help, labels);
  child->gauge = std::make_unique<Gauge>();
  return child->gauge.get();
}

Histogram* MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                         std::vector<double> upper_bounds,
                                         const MetricLabels& labels) {
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    if (i > 0 && !(upper_bounds[i] > upper_bounds[i - 1])) {
      BadName("histogram with unsorted buckets", name);
    }
  }
  Child* child = AddChild(name, "histogram", help, labels);
  child->histogram = std::make_unique<Histogram>(std::move(upper_bounds));
  return child->histogram.get();
}

void MetricsRegistry::AddCollector(std::function<void(MetricsWriter*)> collect) {
  collectors_.push_back(std::move(collect));
}

std::string MetricsRegistry::Render(bool detailed) const {
  std::string out;
  out.reserve(16384);
  MetricsWriter writer(&out, detailed);
  for (const auto& [name, family] : families_) {
    writer.Family(name, family.type, family.help);
    for (const Child& child : family.children) {
      if (child.counter) {
        writer.Sample(static_cast<double>(child.counter->value()), child.labels);
      } else if (child.gauge) {
        writer.Sample(static_cast<double>(child.gauge->value()), child.labels);
      } else {
        writer.HistogramSamples(*child.histogram, child.labels);
      }
    }
  }
  for (const auto& collect : collectors_) collect(&writer);
  return out;
}

}  // namespace mooncake

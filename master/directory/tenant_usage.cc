#include "master/directory/tenant_usage.h"

#include <algorithm>

#include "common/base/tenant_key.h"
#include "common/base/text.h"
#include "common/base/units.h"

namespace mooncake {

bool TenantUsage::ParseQuotas(const std::string& text, Quotas* out, std::string* error) {
  Quotas quotas;
  if (Trim(text).empty()) {  // "" sets none
    *out = std::move(quotas);
    return true;
  }
  for (const std::string& item : SplitList(text, ',')) {
    size_t eq = item.find('=');
    std::string tenant = Trim(item.substr(0, eq));
    uint64_t bytes = 0;
    if (eq == std::string::npos || !tenant_key::ValidTenant(tenant) ||
        !ParseSize(Trim(item.substr(eq + 1)), &bytes) || bytes == 0) {
      *error = "'" + item + "' is not tenant=size with a tenant id of 1..64 characters of "
               "[A-Za-z0-9_.-] and a size above 0 (\"1GB\", \"512MB\")";
      return false;
    }
    if (!quotas.emplace(tenant, bytes).second) {
      *error = "tenant '" + tenant + "' is named twice";
      return false;
    }
  }
  if (quotas.size() > kMaxQuotas) {
    *error = "more than " + std::to_string(kMaxQuotas) + " tenants";
    return false;
  }
  *out = std::move(quotas);
  return true;
}

TenantUsage::TenantUsage(const Quotas& quotas) {
  for (const auto& [tenant, bytes] : quotas) {
    if (quota_entries_.size() == kMaxQuotas) break;  // ParseQuotas refuses more
    auto entry = std::make_unique<Entry>();
    entry->quota = bytes;
    quota_entries_.push_back(entry.get());
    quota_slots_.emplace(tenant, static_cast<uint16_t>(quota_entries_.size()));
    named_.emplace(tenant, std::move(entry));
  }
}

template <class Fn>
auto TenantUsage::WithEntry(std::string_view tenant, Fn fn) {
  if (tenant.empty()) return fn(default_);
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = named_.find(tenant);
    if (it != named_.end()) return fn(*it->second);
  }
  absl::WriterMutexLock lock(&mu_);  // a tenant's first object
  auto it = named_.find(tenant);
  if (it == named_.end()) it = named_.emplace(std::string(tenant), std::make_unique<Entry>()).first;
  return fn(*it->second);
}

bool TenantUsage::Charge(Entry& entry, uint64_t bytes) {
  if (entry.quota == 0) {
    entry.bytes.fetch_add(static_cast<int64_t>(bytes));
    return true;
  }
  int64_t used = entry.bytes.load();
  for (;;) {
    // A put that would not fit even alone is refused as well.
    if (used < 0 || bytes > entry.quota || static_cast<uint64_t>(used) > entry.quota - bytes) {
      entry.refused.fetch_add(1);
      return false;
    }
    if (entry.bytes.compare_exchange_weak(used, used + static_cast<int64_t>(bytes))) return true;
  }
}

bool TenantUsage::TryCharge(std::string_view key, uint64_t bytes) {
  return WithEntry(tenant_key::TenantOf(key), [bytes](Entry& e) { return Charge(e, bytes); });
}

void TenantUsage::Add(std::string_view key, int64_t objects, int64_t bytes) {
  if (objects == 0 && bytes == 0) return;  // e.g. a reservation that got all it asked for
  WithEntry(tenant_key::TenantOf(key), [objects, bytes](Entry& e) {
    if (objects != 0) e.objects.fetch_add(objects);
    if (bytes != 0) e.bytes.fetch_add(bytes);
  });
}

void TenantUsage::ClearUsage() {
  absl::WriterMutexLock lock(&mu_);
  default_.objects = 0;
  default_.bytes = 0;
  for (auto& [tenant, entry] : named_) {
    entry->objects = 0;
    entry->bytes = 0;
  }
}

void TenantUsage::Prune() {
  absl::WriterMutexLock lock(&mu_);
  for (auto it = named_.begin(); it != named_.end();) {
    const Entry& e = *it->second;
    bool idle = e.quota == 0 && e.objects.load() == 0 && e.bytes.load() == 0;
    it = idle ? named_.erase(it) : std::next(it);
  }
}

uint16_t TenantUsage::QuotaSlot(std::string_view key) const {
  if (quota_slots_.empty() || key.empty() || key[0] != '\0') return 0;  // no quota here
  auto it = quota_slots_.find(tenant_key::TenantOf(key));
  return it == quota_slots_.end() ? 0 : it->second;
}

uint64_t TenantUsage::ExposedBytes() const {
  int64_t sum = std::max<int64_t>(0, default_.bytes.load());
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [tenant, entry] : named_) {
    int64_t bytes = std::max<int64_t>(0, entry->bytes.load());
    if (entry->quota == 0 || bytes > static_cast<int64_t>(entry->quota)) sum += bytes;
  }
  return static_cast<uint64_t>(sum);
}

rpc::TenantStats TenantUsage::Describe(const std::string& tenant, const Entry& entry) {
  rpc::TenantStats stats;
  stats.tenant = tenant;
  stats.objects = entry.objects.load();
  stats.bytes = entry.bytes.load();
  stats.quota_bytes = static_cast<int64_t>(entry.quota);
  stats.refused_puts = entry.refused.load();
  return stats;
}

std::vector<rpc::TenantStats> TenantUsage::Stats() const {
  std::vector<rpc::TenantStats> out;
  if (default_.objects.load() != 0 || default_.bytes.load() != 0) {
    out.push_back(Describe("", default_));
  }
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [tenant, entry] : named_) out.push_back(Describe(tenant, *entry));
  return out;
}

}  // namespace mooncake

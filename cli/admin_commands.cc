#include "cli/admin_commands.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <unordered_set>

#include "cli/exit_codes.h"
#include "cli/http_client.h"
#include "cli/output.h"
#include "common/auth/cluster_key.h"
#include "mooncake_store.h"

namespace mooncake {
namespace cli {
namespace {

using nlohmann::json;

// Every admin command starts here: with an etcd --master no admin URL follows from it.
bool HaveAdminUrl(const GlobalOptions& g) {
  if (!g.admin_url.empty()) return true;
  PrintError("give --admin_url (or MOONCAKE_MASTER_ADMIN_URL), the master's admin HTTP: --master " +
             g.master + " names no host");
  return false;
}

// The line for an endpoint that did not answer: what was tried, why, and the fix.
std::string Unreachable(const std::string& who, const std::string& url, const std::string& error,
                        const std::string& flag, const std::string& env) {
  return "cannot reach " + who + " at " + url + ": " + error + " (is it running? " + flag + " or " +
         env + " name another)";
}

// The admin token from --admin_token_file, else --cluster_key_file, into *token ("" when
// neither is given). false with *error when the file cannot be used.
bool LoadToken(const GlobalOptions& g, std::string* token, std::string* error) {
  token->clear();
  const bool own = !g.admin_token_file.empty();
  const std::string& path = own ? g.admin_token_file : g.cluster_key_file;
  if (path.empty()) return true;
  std::string why;
  Result<ClusterKey> key = ClusterKey::Load(path, &why);
  if (!key.ok()) {
    *error = std::string(own ? "--admin_token_file: " : "--cluster_key_file: ") + why;
    return false;
  }
  *token = key.value().AdminTokens().front();
  return true;
}

// Gives http the admin token. kExitOk, or (having said why) the exit code.
int Authorize(const GlobalOptions& g, HttpClient* http) {
  std::string token;
  std::string error;
  if (!LoadToken(g, &token, &error)) {
    PrintError(error);
    return kExitError;
  }
  http->SetBearer(token);
  return kExitOk;
}

// What to do about a refusal of the admin HTTP (401: no or a wrong token; 403: a master
// without a key, asked by another uid); "" for another status.
std::string RefusalHint(const GlobalOptions& g, long status) {
  if (status == 401) {
    return g.cluster_key_file.empty() && g.admin_token_file.empty()
               ? " (give --cluster_key_file or --admin_token_file, or set "
                 "MOONCAKE_CLUSTER_KEY_FILE or MOONCAKE_ADMIN_TOKEN_FILE)"
               : " (the key file given is not the master's: check --cluster_key_file and "
                 "--admin_token_file)";
  }
  if (status == 403) {
    return " (run as the master's user, or start the master with --admin_token_file and "
           "give this command the same file)";
  }
  return "";
}

std::string MasterUnreachable(const GlobalOptions& g, const std::string& error) {
  return Unreachable("the master's admin HTTP", g.admin_url, error, "--admin_url",
                     "MOONCAKE_MASTER_ADMIN_URL");
}

// GETs the admin URL's path and parses its JSON into *out. kExitOk for a 2xx JSON answer;
// otherwise prints why (naming what was asked) and returns the exit code.
int FetchJson(HttpClient* http, const GlobalOptions& g, const std::string& path,
              const std::string& what, json* out) {
  HttpResponse response;
  std::string error;
  if (!http->Get(g.admin_url + path, &response, &error)) {
    PrintError(MasterUnreachable(g, error));
    return kExitUnreachable;
  }
  json body = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (response.status >= 200 && response.status < 300 && !body.is_discarded()) {
    *out = std::move(body);
    return kExitOk;
  }
  if (body.is_object() && body.contains("error_code") && body["error_code"].is_number_integer()) {
    int code = body["error_code"].get<int>();
    std::string message = body.value("error_message", std::string());
    if (code == MOONCAKE_STORE_OBJECT_NOT_FOUND) {
      PrintError(what + ": no such key");
      return kExitMissing;
    }
    PrintError(what + ": " + CodeText(code) + (message.empty() ? "" : ": " + message) +
               RefusalHint(g, response.status));
    *out = std::move(body);
    return kExitError;
  }
  std::string hint = RefusalHint(g, response.status);
  if (hint.empty() && body.is_discarded()) {
    hint = " (the answer is not JSON: is it the master's admin HTTP?)";
  }
  PrintError(what + ": HTTP " + std::to_string(response.status) + " from " + g.admin_url + path +
             hint);
  return kExitError;
}

std::string TenantParameter(HttpClient* http, const GlobalOptions& g) {
  return g.tenant.empty() ? "" : "&tenant=" + http->Escape(g.tenant);
}

std::string QueryKeyPath(HttpClient* http, const GlobalOptions& g, const std::string& key) {
  return "/query_key?key=" + http->Escape(key) + TenantParameter(http, g);
}

// j[name] as text, "-" when absent or null.
std::string Field(const json& j, const char* name) {
  if (!j.is_object() || !j.contains(name) || j[name].is_null()) return "-";
  return JsonText(j[name]);
}

uint64_t Bytes(const json& j, const char* name) {
  if (!j.is_object() || !j.contains(name) || !j[name].is_number()) return 0;
  return j[name].get<uint64_t>();
}

// "1.5 s left" or "none".
std::string Remaining(const json& j, const char* name) {
  if (!j.is_object() || !j.contains(name) || !j[name].is_number()) return "-";
  int64_t ms = j[name].get<int64_t>();
  return ms > 0 ? HumanMillis(ms) + " left" : "none";
}

// j[name], a percentage, as "12.5".
std::string Percent(const json& j, const char* name) {
  if (!j.is_object() || !j.contains(name) || !j[name].is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", j[name].get<double>());
  return buf;
}

bool IsByteCount(const std::string& name) {
  const std::string suffix = "bytes";
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The stats tree as "a.b.c: value" lines, byte counts in human units as well. The items of
// a list are named by their "tenant" field when they have one ("tenants.alice.objects";
// the default tenant is "(default)"), else by their index.
void Flatten(const json& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>* lines) {
  auto child = [&](const std::string& name) { return prefix.empty() ? name : prefix + "." + name; };
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) Flatten(it.value(), child(it.key()), lines);
    return;
  }
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      std::string name = std::to_string(i);
      if (j[i].is_object() && j[i].contains("tenant") && j[i]["tenant"].is_string()) {
        name = j[i]["tenant"].get<std::string>();
        if (name.empty()) name = "(default)";
        json rest = j[i];
        rest.erase("tenant");
        Flatten(rest, child(name), lines);
      } else {
        Flatten(j[i], child(name), lines);
      }
    }
    return;
  }
  std::string value = JsonText(j);
  if (IsByteCount(prefix) &&
      (j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0))) {
    value += " (" + HumanSize(j.get<uint64_t>()) + ")";
  }
  lines->emplace_back(prefix, value);
}

}  // namespace

KeyDescription DescribeKey(const GlobalOptions& g, const std::string& key) {
  KeyDescription d;
  if (g.admin_url.empty()) {
    d.error = "no admin URL (--admin_url or MOONCAKE_MASTER_ADMIN_URL)";
    return d;
  }
  HttpClient http;
  HttpResponse response;
  std::string error;
  std::string token;
  if (!LoadToken(g, &token, &error)) {
    d.error = error;
    return d;
  }
  http.SetBearer(token);
  std::string url = g.admin_url + QueryKeyPath(&http, g, key);
  if (!http.Get(url, &response, &error)) {
    d.error = url + ": " + error;
    return d;
  }
  json body = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (response.status == 200 && body.is_object()) {
    d.outcome = KeyDescription::kFound;
    d.body = std::move(body);
  } else if (body.is_object() && body.value("error_code", 0) == MOONCAKE_STORE_OBJECT_NOT_FOUND) {
    d.outcome = KeyDescription::kMissing;
  } else {
    d.error = url + ": HTTP " + std::to_string(response.status) + RefusalHint(g, response.status);
  }
  return d;
}

int RunStat(const Invocation& inv) {
  if (!HaveAdminUrl(inv.global)) return kExitUsage;
  HttpClient http;
  if (int rc = Authorize(inv.global, &http); rc != kExitOk) return rc;
  const std::string& key = inv.args[0];
  json j;
  int rc = FetchJson(&http, inv.global, QueryKeyPath(&http, inv.global, key), "stat " + key, &j);
  if (rc != kExitOk) return rc;
  if (inv.global.json) {
    PrintJson(j);
    return kExitOk;
  }
  const json& replicas =
      j.contains("replicas") && j["replicas"].is_array() ? j["replicas"] : json::array();
  std::vector<std::pair<std::string, std::string>> fields = {
      {"key", Field(j, "key")},
      {"size", HumanSize(Bytes(j, "size")) + " (" + Field(j, "size") + " bytes)"},
      {"replicas", std::to_string(replicas.size())},
      {"lease", Remaining(j, "lease_remaining_ms")},
      {"soft pin", j.value("soft_pinned", false) ? "yes, " + Remaining(j, "soft_pin_remaining_ms")
                                                 : std::string("no")},
  };
  if (j.contains("hard_pinned")) {
    fields.emplace_back("hard pin", j.value("hard_pinned", false) ? "yes" : "no");
  }
  fields.emplace_back("checksum", Field(j, "checksum") == "-" ? "none" : Field(j, "checksum"));
  // Mooncake's object groups: shown for an object in one.
  const std::string group = j.contains("group_id") && j["group_id"].is_string()
                                ? j["group_id"].get<std::string>()
                                : std::string();
  if (!group.empty()) fields.emplace_back("group", group);
  PrintFields(std::cout, fields);
  if (!replicas.empty()) {
    std::cout << "\n";
    Table table({"ID", "TIER", "STATUS", "SEGMENT", "OFFSET", "SIZE", "ENDPOINT"});
    for (const auto& r : replicas) {
      table.AddRow({Field(r, "replica_id"), Field(r, "kind"), Field(r, "status"),
                    Field(r, "segment_name"), Field(r, "offset"), HumanSize(Bytes(r, "size")),
                    Field(r, "endpoint")});
    }
    table.Print(std::cout);
  }
  return kExitOk;
}

int RunList(const Invocation& inv) {
  if (!HaveAdminUrl(inv.global)) return kExitUsage;
  HttpClient http;
  if (int rc = Authorize(inv.global, &http); rc != kExitOk) return rc;
  uint64_t limit = inv.Count("limit", kDefaultListLimit);
  std::string regex = inv.Text("regex");
  std::string base = "/get_all_keys?format=json" +
                     (regex.empty() ? "" : "&regex=" + http.Escape(regex)) +
                     TenantParameter(&http, inv.global);
  // Paging is weakly consistent: a table resize may repeat a key, which is listed once.
  std::unordered_set<std::string> seen;
  json keys = json::array();
  std::string cursor;
  bool more = false;
  do {
    uint64_t want = kListPageKeys;
    if (limit > 0 && limit - seen.size() < want) want = limit - seen.size();
    json page;
    int rc = FetchJson(&http, inv.global,
                       base + "&limit=" + std::to_string(want) +
                           (cursor.empty() ? "" : "&cursor=" + http.Escape(cursor)),
                       "ls", &page);
    if (rc != kExitOk) return rc == kExitMissing ? kExitError : rc;
    if (!page.contains("keys") || !page["keys"].is_array()) {
      PrintError("ls: the master's answer has no \"keys\" list");
      return kExitError;
    }
    for (const auto& k : page["keys"]) {
      if (!k.is_string() || (limit > 0 && seen.size() >= limit)) continue;
      std::string name = k.get<std::string>();
      if (!seen.insert(name).second) continue;
      if (inv.global.json) {
        keys.push_back(name);
      } else {
        std::cout << name << "\n";
      }
    }
    more = page.contains("next_cursor") && page["next_cursor"].is_string() &&
           !page["next_cursor"].get<std::string>().empty();
    cursor = more ? page["next_cursor"].get<std::string>() : "";
  } while (more && (limit == 0 || seen.size() < limit));
  if (inv.global.json) {
    PrintJson({{"keys", keys}, {"truncated", more}});
  } else if (more && isatty(STDERR_FILENO)) {
    std::cerr << "(more keys: --limit " << limit << " reached; --limit 0 lists all)\n";
  }
  return kExitOk;
}

int RunSegments(const Invocation& inv) {
  if (!HaveAdminUrl(inv.global)) return kExitUsage;
  HttpClient http;
  if (int rc = Authorize(inv.global, &http); rc != kExitOk) return rc;
  json j;
  int rc = FetchJson(&http, inv.global, "/get_segments_detail", "segments", &j);
  if (rc != kExitOk) return rc;
  if (inv.global.json) {
    PrintJson(j);
    return kExitOk;
  }
  Table table({"NAME", "ID", "KIND", "SIZE", "USED", "USE%", "STATUS", "LENT", "ENDPOINT"});
  if (j.contains("segments") && j["segments"].is_array()) {
    for (const auto& s : j["segments"]) {
      table.AddRow({Field(s, "segment_name"), Field(s, "segment_id"), Field(s, "kind"),
                    HumanSize(Bytes(s, "size_bytes")), HumanSize(Bytes(s, "used_bytes")),
                    Percent(s, "usage_percent"), Field(s, "status"),
                    s.value("lent_by_client", false) ? "yes" : "no", Field(s, "te_endpoint")});
    }
  }
  table.Print(std::cout);
  return kExitOk;
}

int RunStats(const Invocation& inv) {
  if (!HaveAdminUrl(inv.global)) return kExitUsage;
  HttpClient http;
  if (int rc = Authorize(inv.global, &http); rc != kExitOk) return rc;
  json j;
  int rc = FetchJson(&http, inv.global, "/stats", "stats", &j);
  if (rc != kExitOk) return rc;
  if (inv.global.json) {
    PrintJson(j);
    return kExitOk;
  }
  std::vector<std::pair<std::string, std::string>> lines;
  Flatten(j, "", &lines);
  PrintFields(std::cout, lines);
  return kExitOk;
}

int RunHealth(const Invocation& inv) {
  if (!HaveAdminUrl(inv.global)) return kExitUsage;
  HttpClient http;  // /health is open: no token needed, and no key file to fail on
  struct Endpoint {
    std::string name;
    std::string url;
    std::string unreachable_as;  // who, in the line for an endpoint that did not answer
    std::string flag;
    std::string env;
  };
  std::vector<Endpoint> endpoints = {{"master", inv.global.admin_url, "the master's admin HTTP",
                                      "--admin_url", "MOONCAKE_MASTER_ADMIN_URL"}};
  if (!inv.global.daemon_admin_url.empty()) {
    endpoints.push_back({"daemon", inv.global.daemon_admin_url, "the daemon's admin HTTP",
                         "--daemon_admin_url", "MOONCAKE_DAEMON_ADMIN_URL"});
  }
  int worst = kExitOk;
  json all = json::object();
  for (const auto& e : endpoints) {
    HttpResponse response;
    std::string error;
    if (!http.Get(e.url + "/health", &response, &error)) {
      PrintError(Unreachable(e.unreachable_as, e.url, error, e.flag, e.env));
      all[e.name] = {{"status", "unreachable"}, {"error", error}};
      worst = kExitUnreachable;
      continue;
    }
    // A daemon that lost its master answers 503 with a body that still says why.
    json body = json::parse(response.body, nullptr, false);
    std::string status = body.is_object() ? body.value("status", std::string("?")) : "?";
    bool ok = response.status == 200 && status == "ok";
    if (!ok && worst == kExitOk) worst = kExitError;
    all[e.name] =
        body.is_discarded() ? json{{"status", "?"}, {"http_status", response.status}} : body;
    if (inv.global.json) continue;
    std::string line = e.name + " " + e.url + ": " + status;
    if (e.name == "master" && body.is_object()) {
      line += ", " + Field(body, "role") + ", term " + Field(body, "term") +
              (body.value("service_ready", true) ? "" : ", service not ready");
    } else if (body.is_object()) {
      line += std::string(", master ") +
              (body.value("master_connected", false) ? "connected" : "NOT connected") +
              ", daemon " + Field(body, "daemon_id") + ", " + Field(body, "clients") + " clients";
    }
    if (!ok) line += " (HTTP " + std::to_string(response.status) + ")";
    std::cout << line << "\n";
  }
  if (inv.global.json) PrintJson(all);
  return worst;
}

int RunSnapshotStatus(const Invocation& inv) {
  if (!HaveAdminUrl(inv.global)) return kExitUsage;
  HttpClient http;
  if (int rc = Authorize(inv.global, &http); rc != kExitOk) return rc;
  json j;
  int rc = FetchJson(&http, inv.global, "/snapshot", "snapshot status", &j);
  if (rc != kExitOk) return rc;
  if (inv.global.json) {
    PrintJson(j);
    return kExitOk;
  }
  if (!j.value("enabled", true)) {
    std::cout << "snapshots are off (the master's --enable_snapshot)\n";
    return kExitOk;
  }
  PrintFields(std::cout, {{"snapshot", Field(j, "name")},
                          {"running", j.value("running", false) ? "yes" : "no"},
                          {"sequence", Field(j, "sequence")},
                          {"objects", Field(j, "objects")},
                          {"bytes", HumanSize(Bytes(j, "bytes"))},
                          {"duration", j.contains("duration_ms") && j["duration_ms"].is_number()
                                           ? HumanMillis(j["duration_ms"].get<int64_t>())
                                           : "-"},
                          {"error", Field(j, "error") == "" ? "none" : Field(j, "error")}});
  return kExitOk;
}

int RunAdminToken(const Invocation& inv) {
  const GlobalOptions& g = inv.global;
  if (g.admin_token_file.empty() && g.cluster_key_file.empty()) {
    PrintError("admin-token needs --cluster_key_file or --admin_token_file (or "
               "MOONCAKE_CLUSTER_KEY_FILE or MOONCAKE_ADMIN_TOKEN_FILE)");
    return kExitUsage;
  }
  std::string token;
  std::string error;
  if (!LoadToken(g, &token, &error)) {
    PrintError(error);
    return kExitError;
  }
  if (g.json) {
    PrintJson({{"token", token}});
  } else {
    std::cout << token << "\n";
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace mooncake

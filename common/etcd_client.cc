#include "common/etcd/etcd_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/base/log_throttle.h"
#include "common/base/logging.h"
#include "common/base/text.h"

namespace mooncake {

namespace {

using Json = nlohmann::json;

// An answer is read whole; nothing the masters ask for comes near this, so more is not etcd
// (or not an answer to us) and is refused rather than buffered.
constexpr size_t kMaxAnswerBytes = 16 << 20;

// An answer that does not have the shape etcd gives: thrown inside this file only, by the
// decoding helpers, and turned into INTERNAL_ERROR (with one log line) by the call.
struct BadAnswer : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr char kBase64Digits[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += kBase64Digits[(v >> shift) & 63];
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += kBase64Digits[(v >> 18) & 63];
    out += kBase64Digits[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += kBase64Digits[(v >> 18) & 63];
    out += kBase64Digits[(v >> 12) & 63];
    out += kBase64Digits[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;  // the URL-safe alphabet too, in case
  if (c == '/' || c == '_') return 63;
  return -1;
}

// Strict but for padding, which may be absent.
std::string Base64Decode(const std::string& in) {
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  size_t end = in.size();
  while (end > 0 && in[end - 1] == '=') --end;
  if (in.size() - end > 2) throw BadAnswer("bad base64 padding");
  for (size_t i = 0; i < end; ++i) {
    int v = Base64Value(in[i]);
    if (v < 0) throw BadAnswer("bad base64 digit");
    bits = (bits << 6) | uint32_t(v);
    if (++count == 4) {
      out += char((bits >> 16) & 0xff);
      out += char((bits >> 8) & 0xff);
      out += char(bits & 0xff);
      bits = 0;
      count = 0;
    }
  }
  if (count == 1) throw BadAnswer("truncated base64");
  if (count == 2) out += char((bits >> 4) & 0xff);
  if (count == 3) {
    out += char((bits >> 10) & 0xff);
    out += char((bits >> 2) & 0xff);
  }
  return out;
}

const Json& Object(const Json& j, const char* what) {
  if (!j.is_object()) throw BadAnswer(std::string(what) + " is not an object");
  return j;
}

// The gateway writes int64 as JSON strings and leaves out fields that are 0.
int64_t Int64Field(const Json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) throw BadAnswer(std::string(name) + " is not an integer");
  const std::string& s = it->get_ref<const std::string&>();
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size()) throw BadAnswer(std::string(name) + " is not an integer");
  return v;
}

bool BoolField(const Json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return false;
  if (!it->is_boolean()) throw BadAnswer(std::string(name) + " is not a boolean");
  return it->get<bool>();
}

// A base64 field decoded; absent means empty (etcd leaves out an empty value).
std::string BytesField(const Json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return "";
  if (!it->is_string()) throw BadAnswer(std::string(name) + " is not a string");
  return Base64Decode(it->get_ref<const std::string&>());
}

const Json& ArrayField(const Json& obj, const char* name) {
  static const Json kEmpty = Json::array();
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return kEmpty;
  if (!it->is_array()) throw BadAnswer(std::string(name) + " is not an array");
  return *it;
}

EtcdClient::KeyValue DecodeKeyValue(const Json& kv) {
  Object(kv, "kv");
  EtcdClient::KeyValue out;
  out.key = BytesField(kv, "key");
  if (out.key.empty()) throw BadAnswer("kv without a key");
  out.value = BytesField(kv, "value");
  out.create_revision = Int64Field(kv, "create_revision");
  out.mod_revision = Int64Field(kv, "mod_revision");
  out.lease = Int64Field(kv, "lease");
  return out;
}

// The first key of a range answer, *found false when it has none.
void DecodeFirstKey(const Json& range, EtcdClient::KeyValue* out, bool* found) {
  const Json& kvs = ArrayField(Object(range, "range answer"), "kvs");
  *found = !kvs.empty();
  if (*found) *out = DecodeKeyValue(kvs[0]);
}

// The end of the range of every key that starts with prefix: the prefix with its last
// byte that is not 0xff incremented (etcd's own rule); "\0" (every key) when there is none.
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (uint8_t(end.back()) < 0xff) {
      end.back() = char(uint8_t(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

// host:port with a host of [A-Za-z0-9.-] or a bracketed IPv6 address, port 1..65535;
// "http://" in front is taken off. "" when malformed.
std::string NormalizeEndpoint(std::string item) {
  static const std::string kHttp = "http://";
  if (item.compare(0, kHttp.size(), kHttp) == 0) item.erase(0, kHttp.size());
  if (!item.empty() && item.back() == '/') item.pop_back();
  size_t colon = item.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) return "";
  std::string host = item.substr(0, colon), port = item.substr(colon + 1);
  if (port.size() > 5) return "";
  for (char c : port) {
    if (c < '0' || c > '9') return "";
  }
  int port_number = std::stoi(port);
  if (port_number < 1 || port_number > 65535) return "";
  if (host.front() == '[') {
    if (host.back() != ']' || host.size() < 3) return "";
    for (size_t i = 1; i + 1 < host.size(); ++i) {
      char c = host[i];
      if (!(isxdigit(uint8_t(c)) || c == ':' || c == '.')) return "";
    }
  } else {
    for (char c : host) {
      if (!(isalnum(uint8_t(c)) || c == '.' || c == '-')) return "";
    }
  }
  return item;
}

size_t AppendAnswer(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  size_t bytes = size * count;
  if (body->size() + bytes > kMaxAnswerBytes) return 0;  // curl then fails the transfer
  body->append(data, bytes);
  return bytes;
}

// What etcd said when it refused: the gateway's {"error": "...", "message": "..."} (or
// the stream form {"error": {"message": ...}}), else the start of the body.
std::string RefusalText(const Json& body, const std::string& raw) {
  if (body.is_object()) {
    for (const char* name : {"message", "error"}) {
      auto it = body.find(name);
      if (it == body.end()) continue;
      if (it->is_string()) return it->get<std::string>();
      if (it->is_object() && it->contains("message") && (*it)["message"].is_string()) {
        return (*it)["message"].get<std::string>();
      }
    }
  }
  return raw.substr(0, 200);
}

std::once_flag curl_init_once;

}  // namespace

struct EtcdClient::Impl {
  std::vector<std::string> endpoints;  // "host:port"
  int64_t timeout_ms = 0;
  std::atomic<size_t> preferred{0};  // the endpoint that answered last
  LogThrottle unreachable_log;       // an outage fails every call: one line a second

  // An HTTP answer that parsed as JSON. A stream answer (keepalive) is its first line.
  struct Answer {
    long status = 0;
    Json body;
    std::string raw;
    std::string endpoint;
  };

  // POSTs request to path on each endpoint in turn, starting with the preferred one, until
  // one answers other than 5xx. OK with *answer (any status but 5xx; the caller judges it);
  // RPC_TIMEOUT / RPC_FAIL when none answered (the last failure decides which);
  // INTERNAL_ERROR, logged, when an answer is not JSON.
  ErrorCode Post(const char* path, const Json& request, Answer* answer) {
    const std::string payload = request.dump();
    const size_t n = endpoints.size();
    const size_t first = preferred.load(std::memory_order_relaxed) % n;
    ErrorCode failure = ErrorCode::RPC_FAIL;
    std::string why;
    for (size_t attempt = 0; attempt < n; ++attempt) {
      const size_t index = (first + attempt) % n;
      std::string raw;
      long status = 0;
      CURLcode rc = PostOnce(endpoints[index], path, payload, &raw, &status);
      if (rc == CURLE_WRITE_ERROR) {
        MC_LOG_WARN("etcd %s%s: answer larger than %zu bytes, refused",
                    endpoints[index].c_str(), path, kMaxAnswerBytes);
        return ErrorCode::INTERNAL_ERROR;
      }
      if (rc != CURLE_OK) {
        failure = rc == CURLE_OPERATION_TIMEDOUT ? ErrorCode::RPC_TIMEOUT : ErrorCode::RPC_FAIL;
        why = endpoints[index] + ": " + curl_easy_strerror(rc);
        continue;
      }
      if (status >= 500) {  // e.g. a member without quorum: another may do better
        failure = ErrorCode::RPC_FAIL;
        why = endpoints[index] + ": HTTP " + std::to_string(status) + " " + raw.substr(0, 200);
        continue;
      }
      preferred.store(index, std::memory_order_relaxed);
      // A stream (keepalive) answers one JSON object a line; we send one request, so the
      // first line is our answer.
      size_t line_end = raw.find('\n');
      std::string first_line = line_end == std::string::npos ? raw : raw.substr(0, line_end);
      answer->body = Json::parse(first_line, nullptr, /*allow_exceptions=*/false);
      answer->status = status;
      answer->endpoint = endpoints[index];
      answer->raw = std::move(raw);
      if (answer->body.is_discarded()) {
        MC_LOG_WARN("etcd %s%s: answer is not JSON (HTTP %ld): %.200s",
                    answer->endpoint.c_str(), path, status, answer->raw.c_str());
        return ErrorCode::INTERNAL_ERROR;
      }
      return ErrorCode::OK;
    }
    if (unreachable_log.Due()) MC_LOG_WARN("etcd %s: no endpoint answered (%s)", path, why.c_str());
    return failure;
  }

  CURLcode PostOnce(const std::string& endpoint, const char* path, const std::string& payload,
                    std::string* raw, long* status) {
    CURL* curl = curl_easy_init();
    if (curl == nullptr) return CURLE_FAILED_INIT;
    std::string url = "http://" + endpoint + path;
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(curl, CURLOPT_PROXY, "");  // never an http_proxy of the environment
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, long(timeout_ms));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, long(timeout_ms));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, long(payload.size()));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendAnswer);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, raw);
    CURLcode rc = curl_easy_perform(curl);
    if (rc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return rc;
  }

  // Post, then decode with fn(body) when etcd answered 200 without an error; a refusal or
  // an answer of the wrong shape is INTERNAL_ERROR with one log line. not_found (may be
  // null) is set instead of failing when etcd refused because something does not exist.
  template <typename Decode>
  ErrorCode Call(const char* path, const Json& request, Decode fn, bool* not_found = nullptr) {
    Answer answer;
    ErrorCode rc = Post(path, request, &answer);
    if (rc != ErrorCode::OK) return rc;
    bool refused = answer.status != 200 || (answer.body.is_object() && answer.body.contains("error"));
    if (refused) {
      std::string text = RefusalText(answer.body, answer.raw);
      if (not_found != nullptr && (answer.status == 404 || text.find("not found") != std::string::npos)) {
        *not_found = true;
        return ErrorCode::OK;
      }
      MC_LOG_WARN("etcd %s%s refused (HTTP %ld): %s", answer.endpoint.c_str(), path,
                  answer.status, text.c_str());
      return ErrorCode::INTERNAL_ERROR;
    }
    try {
      fn(Object(answer.body, "answer"));
    } catch (const std::exception& e) {  // BadAnswer, or nlohmann's own type errors
      MC_LOG_WARN("etcd %s%s: unexpected answer (%s): %.200s", answer.endpoint.c_str(), path,
                  e.what(), answer.raw.c_str());
      return ErrorCode::INTERNAL_ERROR;
    }
    return ErrorCode::OK;
  }
};

ErrorCode EtcdClient::Create(const std::string& endpoints, int64_t timeout_ms,
                             std::unique_ptr<EtcdClient>* out) {
  if (timeout_ms <= 0) return ErrorCode::INVALID_PARAMS;
  std::vector<std::string> list;
  std::string commas = endpoints;  // Mooncake separates them by ';'
  std::replace(commas.begin(), commas.end(), ';', ',');
  for (const std::string& item : SplitList(commas, ',')) {
    std::string endpoint = NormalizeEndpoint(item);
    if (endpoint.empty()) {
      MC_LOG_ERROR("etcd endpoint '%s' is not host:port (in '%s')", item.c_str(),
                   endpoints.c_str());
      return ErrorCode::INVALID_PARAMS;
    }
    list.push_back(endpoint);
  }
  std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<EtcdClient> client(new EtcdClient());
  client->impl_ = std::make_unique<Impl>();
  client->impl_->endpoints = std::move(list);
  client->impl_->timeout_ms = timeout_ms;
  *out = std::move(client);
  return ErrorCode::OK;
}

EtcdClient::~EtcdClient() = default;

ErrorCode EtcdClient::Get(const std::string& key, KeyValue* out, bool* found) {
  Json request = {{"key", Base64Encode(key)}};
  return impl_->Call("/v3/kv/range", request,
                     [&](const Json& body) { DecodeFirstKey(body, out, found); });
}

ErrorCode EtcdClient::GetPrefix(const std::string& prefix, std::vector<KeyValue>* out) {
  Json request = {{"key", Base64Encode(prefix)}, {"range_end", Base64Encode(PrefixEnd(prefix))}};
  return impl_->Call("/v3/kv/range", request, [&](const Json& body) {
    std::vector<KeyValue> kvs;
    for (const Json& kv : ArrayField(body, "kvs")) kvs.push_back(DecodeKeyValue(kv));
    *out = std::move(kvs);
  });
}

ErrorCode EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  Json request = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease != 0) request["lease"] = std::to_string(lease);
  return impl_->Call("/v3/kv/put", request, [](const Json&) {});
}

ErrorCode EtcdClient::CreateIfAbsent(const std::string& key, const std::string& value,
                                     int64_t lease, bool* created, KeyValue* current) {
  const std::string k = Base64Encode(key);
  Json put = {{"key", k}, {"value", Base64Encode(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  Json range = {{"request_range", {{"key", k}}}};
  // Either way the last response reads the key as it is after the transaction.
  Json request = {
      {"compare", Json::array({{{"key", k},
                                {"target", "CREATE"},
                                {"result", "EQUAL"},
                                {"create_revision", "0"}}})},
      {"success", Json::array({{{"request_put", put}}, range})},
      {"failure", Json::array({range})}};
  return impl_->Call("/v3/kv/txn", request, [&](const Json& body) {
    bool succeeded = BoolField(body, "succeeded");
    const Json& responses = ArrayField(body, "responses");
    if (responses.empty()) throw BadAnswer("txn without responses");
    const Json& last = Object(responses.back(), "txn response");
    if (!last.contains("response_range")) throw BadAnswer("txn without its range");
    bool found = false;
    DecodeFirstKey(last["response_range"], current, &found);
    if (!found) throw BadAnswer("txn range found no key");  // the put is not visible?
    // A retry on the next endpoint after a timeout may find our own first attempt.
    *created = succeeded || (lease != 0 && current->lease == lease && current->value == value);
  });
}

ErrorCode EtcdClient::PutIfHeld(const std::string& guard, int64_t guard_revision,
                                const std::string& key, const std::string& value, bool* done) {
  Json request = {
      {"compare", Json::array({{{"key", Base64Encode(guard)},
                                {"target", "CREATE"},
                                {"result", "EQUAL"},
                                {"create_revision", std::to_string(guard_revision)}}})},
      {"success", Json::array({{{"request_put",
                                 {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}}}}})}};
  return impl_->Call("/v3/kv/txn", request,
                     [&](const Json& body) { *done = BoolField(body, "succeeded"); });
}

ErrorCode EtcdClient::DeleteIfHeld(const std::string& key, int64_t revision, bool* done) {
  const std::string k = Base64Encode(key);
  Json request = {{"compare", Json::array({{{"key", k},
                                            {"target", "CREATE"},
                                            {"result", "EQUAL"},
                                            {"create_revision", std::to_string(revision)}}})},
                  {"success", Json::array({{{"request_delete_range", {{"key", k}}}}})}};
  return impl_->Call("/v3/kv/txn", request,
                     [&](const Json& body) { *done = BoolField(body, "succeeded"); });
}

ErrorCode EtcdClient::GrantLease(int64_t ttl_seconds, int64_t* id) {
  if (ttl_seconds <= 0) return ErrorCode::INVALID_PARAMS;
  Json request = {{"TTL", std::to_string(ttl_seconds)}, {"ID", "0"}};
  return impl_->Call("/v3/lease/grant", request, [&](const Json& body) {
    *id = Int64Field(body, "ID");
    if (*id == 0) throw BadAnswer("grant without a lease ID");
  });
}

ErrorCode EtcdClient::KeepAlive(int64_t id, int64_t* ttl_seconds) {
  Json request = {{"ID", std::to_string(id)}};
  bool not_found = false;
  ErrorCode rc = impl_->Call(
      "/v3/lease/keepalive", request,
      [&](const Json& body) {
        // A stream answers {"result": {...}}; TTL left out (0) when the lease is gone.
        auto it = body.find("result");
        if (it == body.end()) throw BadAnswer("keepalive without a result");
        *ttl_seconds = Int64Field(Object(*it, "result"), "TTL");
      },
      &not_found);
  if (rc == ErrorCode::OK && not_found) *ttl_seconds = 0;
  return rc;
}

ErrorCode EtcdClient::RevokeLease(int64_t id) {
  Json request = {{"ID", std::to_string(id)}};
  bool not_found = false;  // already gone: what a revoke wants
  return impl_->Call("/v3/lease/revoke", request, [](const Json&) {}, &not_found);
}

}  // namespace mooncake

#include "common/admin/admin_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>
#include <event2/thread.h>
#include <event2/util.h>

#include <openssl/crypto.h>
#include <strings.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "common/auth/cluster_key.h"
#include "common/base/error_code.h"
#include "common/base/logging.h"
#include "common/auth/peer_owner.h"

namespace mooncake {
namespace {

// libevent's locking must be on before any base exists for event_base_loopbreak to be
// safe from another thread (the destructor's).
void UseThreadSafeLibevent() {
  static std::once_flag once;
  std::call_once(once, [] { evthread_use_pthreads(); });
}

std::string JsonEscaped(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// The token of an "Authorization: Bearer <token>" header value; false when it names
// another scheme. The scheme is case-insensitive (RFC 7235), blanks around the token are
// not part of it.
bool BearerToken(const char* header, std::string* token) {
  static const char kScheme[] = "bearer";
  const size_t n = sizeof(kScheme) - 1;
  if (strncasecmp(header, kScheme, n) != 0 || (header[n] != ' ' && header[n] != '\t')) {
    return false;
  }
  const char* begin = header + n;
  while (*begin == ' ' || *begin == '\t') ++begin;
  const char* end = begin + std::strlen(begin);
  while (end > begin && (end[-1] == ' ' || end[-1] == '\t')) --end;
  token->assign(begin, end);
  return true;
}

// Whether presented is one of tokens. Every token is compared, each over its whole length,
// so the time taken says neither which one matched nor how much of one did.
bool TokenAccepted(const std::vector<std::string>& tokens, const std::string& presented) {
  bool match = false;
  for (const std::string& token : tokens) {
    std::string candidate = presented;
    candidate.resize(token.size(), '\0');
    bool same = CRYPTO_memcmp(candidate.data(), token.data(), token.size()) == 0;
    match |= same && presented.size() == token.size();
  }
  return match;
}

// The numeric address (no port) of fd's peer, "" when it cannot be had.
std::string PeerAddress(int fd) {
  sockaddr_storage peer{};
  socklen_t length = sizeof(peer);
  if (fd < 0 || getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {0};
  const void* ip = peer.ss_family == AF_INET6
                       ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&peer)->sin6_addr)
                       : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&peer)->sin_addr);
  if (inet_ntop(peer.ss_family, ip, text, sizeof(text)) == nullptr) return "";
  return text;
}

// The tail of a throttled line: how many like it were not logged since the last one.
std::string NotLogged(uint64_t passed_over, const char* what) {
  if (passed_over == 0) return "";
  return " (and " + std::to_string(passed_over) + " " + what + " not logged)";
}

const char* MethodName(evhttp_cmd_type type) {
  switch (type) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_POST: return "POST";
    default: return "";
  }
}

}  // namespace

std::string HttpRequest::Param(const std::string& name, const std::string& fallback) const {
  auto it = query.find(name);
  return it == query.end() ? fallback : it->second;
}

void SetHttpError(HttpResponse* response, int status, int code, const std::string& message) {
  response->status = status;
  response->content_type = "application/json";
  response->body = "{\"success\":false,\"error_code\":" + std::to_string(code) +
                   ",\"error_message\":\"" + JsonEscaped(message) + "\"}\n";
}

AdminHttpServer::AdminHttpServer(std::string component) : component_(std::move(component)) {}

AdminHttpServer::~AdminHttpServer() {
  if (base_ != nullptr) {
    event_base_loopbreak(base_);
    if (thread_.joinable()) thread_.join();
  }
  if (http_ != nullptr) evhttp_free(http_);  // its connections' close callbacks release theirs
  while (!connections_.empty()) Release(connections_.begin()->second.get());
  if (base_ != nullptr) event_base_free(base_);
}

// The connection's fd is not set yet (evhttp sets it once this returns): its admission is
// made active, so that it runs in this turn of the loop, before any of its bytes are read.
bufferevent* AdminHttpServer::NewConnection(event_base* base, void* self) {
  auto* server = static_cast<AdminHttpServer*>(self);
  bufferevent* bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
  if (bev == nullptr) return nullptr;
  bufferevent_incref(bev);
  auto connection = std::make_unique<Connection>();
  connection->server = server;
  connection->bev = bev;
  connection->serial = server->next_serial_++;
  connection->timer = evtimer_new(base, &AdminHttpServer::OnTimer, connection.get());
  event_active(connection->timer, EV_TIMEOUT, 1);
  server->connections_[bev] = std::move(connection);
  return bev;
}

void AdminHttpServer::OnTimer(int, short, void* arg) {
  auto* connection = static_cast<Connection*>(arg);
  if (!connection->counted) {
    connection->server->Admit(connection);
    return;
  }
  connection->server->Evict(connection);  // its deadline
}

void AdminHttpServer::Admit(Connection* connection) {
  const int fd = bufferevent_getfd(connection->bev);
  connection->counted = true;
  connection->address = PeerAddress(fd);
  // Without tokens, who the peer is, asked now: its socket is certainly established (a
  // client that sends its request and then shuts its side down is no longer, later).
  if (tokens_.empty()) {
    connection->owner = PeerIsThisUserOrRoot(fd, &connection->owner_why) ? 1 : 0;
  }
  ++counted_;
  size_t& mine = ++per_address_[connection->address];
  timeval deadline{kTimeoutSeconds, 0};
  evtimer_add(connection->timer, &deadline);
  if (mine <= kMaxConnectionsPerAddress && counted_ <= kMaxConnections) return;

  // Over a limit: the oldest of this address when it is over its share, else the oldest of
  // the address holding the most (never the new one: it is the newest of every address).
  const bool over_share = mine > kMaxConnectionsPerAddress;
  std::string from = connection->address;
  if (!over_share) {
    size_t most = 0;
    for (const auto& [address, count] : per_address_) {
      if (count > most) most = count;
    }
    // Among the addresses holding the most, the one with the oldest connection.
    uint64_t oldest = UINT64_MAX;
    for (const auto& [bev, c] : connections_) {
      if (c->counted && c.get() != connection && per_address_[c->address] == most &&
          c->serial < oldest) {
        oldest = c->serial;
        from = c->address;
      }
    }
  }
  Connection* victim = nullptr;
  for (const auto& [bev, c] : connections_) {
    if (c->counted && c.get() != connection && c->address == from &&
        (victim == nullptr || c->serial < victim->serial)) {
      victim = c.get();
    }
  }
  if (victim == nullptr) return;
  uint64_t passed_over = 0;
  if (evictions_log_.Due(&passed_over)) {
    MC_LOG_WARN("%s: admin HTTP: %zu connections in all, %zu from %s (at most %zu, %zu from "
                "one address): closed the oldest from %s%s",
                component_.c_str(), counted_, mine, connection->address.c_str(), kMaxConnections,
                kMaxConnectionsPerAddress, from.c_str(), NotLogged(passed_over, "closures").c_str());
  }
  Evict(victim);
}

// Shut down, the socket reads as closed: evhttp frees the connection on its next read.
void AdminHttpServer::Evict(Connection* connection) {
  evutil_socket_t fd = bufferevent_getfd(connection->bev);
  if (fd >= 0) shutdown(fd, SHUT_RDWR);
  Release(connection);
}

void AdminHttpServer::OnClosed(evhttp_connection*, void* arg) {
  auto* connection = static_cast<Connection*>(arg);
  connection->server->Release(connection);
}

void AdminHttpServer::Release(Connection* connection) {
  if (connection->evcon != nullptr) evhttp_connection_set_closecb(connection->evcon, nullptr, nullptr);
  if (connection->counted) {
    --counted_;
    auto it = per_address_.find(connection->address);
    if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
  }
  event_free(connection->timer);
  bufferevent* bev = connection->bev;
  connections_.erase(bev);  // deletes connection
  bufferevent_decref(bev);
}

void AdminHttpServer::AcceptTokens(std::vector<std::string> tokens) { tokens_ = std::move(tokens); }

void AdminHttpServer::Handle(const std::string& path, Handler handler, Access access,
                             Handler on_refusal) {
  routes_[path] = Route{std::move(handler), access, std::move(on_refusal)};
}

bool AdminHttpServer::Start(const std::string& address, int port, std::string* error) {
  UseThreadSafeLibevent();
  base_ = event_base_new();
  if (base_ == nullptr) {
    *error = "cannot create an event loop for the admin HTTP server";
    return false;
  }
  http_ = evhttp_new(base_);
  evhttp_set_max_headers_size(http_, static_cast<ev_ssize_t>(kMaxHeaderBytes));
  evhttp_set_max_body_size(http_, static_cast<ev_ssize_t>(kMaxBodyBytes));
  evhttp_set_timeout(http_, kTimeoutSeconds);
  evhttp_set_allowed_methods(http_, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST);
  evhttp_set_gencb(http_, &AdminHttpServer::OnRequest, this);
  evhttp_set_bevcb(http_, &AdminHttpServer::NewConnection, this);
  evhttp_bound_socket* bound =
      evhttp_bind_socket_with_handle(http_, address.c_str(), static_cast<ev_uint16_t>(port));
  if (bound == nullptr) {
    *error = "cannot listen on " + address + ":" + std::to_string(port) + ": " +
             std::strerror(errno);
    return false;
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(evhttp_bound_socket_get_fd(bound), reinterpret_cast<sockaddr*>(&addr),
                  &len) == 0) {
    port_ = addr.ss_family == AF_INET6
                ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  MC_LOG_INFO("%s: admin HTTP listening on %s:%d", component_.c_str(), address.c_str(), port_);
  thread_ = std::thread([this] { event_base_dispatch(base_); });
  return true;
}

void AdminHttpServer::OnRequest(evhttp_request* request, void* self) {
  static_cast<AdminHttpServer*>(self)->Serve(request);
}

bool AdminHttpServer::IsAdmin(evhttp_request* raw, Connection* connection, int* status,
                              std::string* why) {
  if (!tokens_.empty()) {
    *status = 401;
    const char* header = evhttp_find_header(evhttp_request_get_input_headers(raw), "Authorization");
    std::string token;
    if (header == nullptr) {
      *why = "no admin token: send \"Authorization: Bearer <token>\" with the token of the "
             "cluster key file or of --admin_token_file (mooncake-cli admin-token prints it)";
      return false;
    }
    if (!BearerToken(header, &token)) {
      *why = "the Authorization header is not \"Bearer <token>\"";
      return false;
    }
    if (!TokenAccepted(tokens_, token)) {
      *why = "the bearer token is none of this server's admin tokens (those of its cluster key "
             "file and --admin_token_file; mooncake-cli admin-token prints one)";
      return false;
    }
    return true;
  }
  // No token to check: this host's peers of this uid or root, asked at admission.
  *status = 403;
  if (connection == nullptr) {
    *why = "the connection is not known";
    return false;
  }
  if (connection->owner < 0) {
    connection->owner = PeerIsThisUserOrRoot(bufferevent_getfd(connection->bev),
                                             &connection->owner_why) ? 1 : 0;
  }
  if (connection->owner == 1) return true;
  *why = connection->owner_why + ": without an admin token this port answers only its own "
         "user (uid " + std::to_string(geteuid()) + ") and root on this host; run as that "
         "user, or start the server with --admin_token_file (or --cluster_key_file) and send "
         "its token";
  return false;
}

void AdminHttpServer::Serve(evhttp_request* raw) {
  HttpRequest request;
  HttpResponse response;
  request.method = MethodName(evhttp_request_get_command(raw));

  Connection* known = nullptr;
  evhttp_connection* connection = evhttp_request_get_connection(raw);
  if (connection != nullptr) {
    // A request served: the connection has kTimeoutSeconds again, for its reply and the next.
    auto it = connections_.find(evhttp_connection_get_bufferevent(connection));
    if (it != connections_.end()) {
      known = it->second.get();
      if (known->evcon == nullptr) {
        known->evcon = connection;
        evhttp_connection_set_closecb(connection, &AdminHttpServer::OnClosed, known);
      }
      if (known->counted) {
        timeval again{kTimeoutSeconds, 0};
        evtimer_add(known->timer, &again);
      }
    }
    char* peer = nullptr;
    ev_uint16_t peer_port = 0;
    evhttp_connection_get_peer(connection, &peer, &peer_port);
    std::string host = peer != nullptr ? peer : "";
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    request.peer_address = host + ":" + std::to_string(peer_port);
  }

  const evhttp_uri* uri = evhttp_request_get_evhttp_uri(raw);
  const char* raw_path = uri != nullptr ? evhttp_uri_get_path(uri) : nullptr;
  bool parsed = raw_path != nullptr;
  if (parsed) {
    size_t decoded_len = 0;
    char* decoded = evhttp_uridecode(raw_path, 0, &decoded_len);
    parsed = decoded != nullptr && std::strlen(decoded) == decoded_len;  // no NUL inside
    if (decoded != nullptr) request.path.assign(decoded, decoded_len);
    free(decoded);
  }
  const char* raw_query = uri != nullptr ? evhttp_uri_get_query(uri) : nullptr;
  if (parsed && raw_query != nullptr) {
    evkeyvalq params;
    TAILQ_INIT(&params);
    if (evhttp_parse_query_str(raw_query, &params) != 0) {
      parsed = false;
    } else {
      for (evkeyval* kv = params.tqh_first; kv != nullptr; kv = kv->next.tqe_next) {
        request.query[kv->key] = kv->value;
      }
    }
    evhttp_clear_headers(&params);
  }

  evbuffer* input = evhttp_request_get_input_buffer(raw);
  size_t body_len = evbuffer_get_length(input);
  if (body_len > 0) {
    request.body.resize(body_len);
    evbuffer_remove(input, &request.body[0], body_len);
  }

  if (!parsed) {
    SetHttpError(&response, 400, -600, "malformed request target");
  } else {
    auto route = routes_.find(request.path);
    if (route == routes_.end()) {
      SetHttpError(&response, 404, -600, "no such endpoint: " + request.path);
    } else {
      const Route& r = route->second;
      int refusal = 0;
      std::string why;
      request.admin = IsAdmin(raw, known, &refusal, &why);
      const bool reads = request.method == "GET" || request.method == "HEAD";
      if (request.admin || r.access == Access::kOpen ||
          (r.access == Access::kOpenToRead && reads)) {
        r.handler(request, &response);
      } else {
        SetHttpError(&response, refusal,
                     ToInt(refusal == 401 ? ErrorCode::UNAUTHENTICATED
                                          : ErrorCode::PERMISSION_DENIED),
                     why);
        if (refusal == 401) response.headers.push_back({"WWW-Authenticate", "Bearer"});
        uint64_t passed_over = 0;
        if (refusals_log_.Due(&passed_over)) {
          MC_LOG_WARN("%s: admin HTTP refused %s %s from %s (%d): %s%s", component_.c_str(),
                      request.method.c_str(), request.path.c_str(), request.peer_address.c_str(),
                      refusal, why.c_str(), NotLogged(passed_over, "refusals").c_str());
        }
        if (r.on_refusal) r.on_refusal(request, &response);
      }
    }
  }

  evkeyvalq* headers = evhttp_request_get_output_headers(raw);
  evhttp_add_header(headers, "Content-Type", response.content_type.c_str());
  evhttp_add_header(headers, "Cache-Control", "no-store");
  for (const auto& [name, value] : response.headers) {
    evhttp_add_header(headers, name.c_str(), value.c_str());
  }
  evbuffer* out = evbuffer_new();
  if (request.method == "HEAD") {
    // The headers a GET would have, without the body (evhttp would send it).
    evhttp_add_header(headers, "Content-Length", std::to_string(response.body.size()).c_str());
  } else {
    evbuffer_add(out, response.body.data(), response.body.size());
  }
  evhttp_send_reply(raw, response.status, nullptr, out);
  evbuffer_free(out);
}

void RegisterLogLevelEndpoint(AdminHttpServer* server) {
  server->Handle(
      "/log_level",
      [](const HttpRequest& request, HttpResponse* response) {
        static const char* const kNames[] = {"debug", "info", "warning", "error"};
        if (request.method == "POST") {  // an admin's: the server checked
          LogLevel level;
          std::string wanted = request.Param("level");
          if (!ParseLogLevel(wanted, &level)) {
            SetHttpError(response, 400, -600, "level must be debug, info, warning or error");
            return;
          }
          SetLogLevel(level);
          MC_LOG_WARN("log level set to %s (POST /log_level from %s)", wanted.c_str(),
                      request.peer_address.c_str());
        }
        response->body = std::string("{\"level\":\"") +
                         kNames[static_cast<int>(GetLogLevel())] + "\"}\n";
      },
      AdminHttpServer::Access::kOpenToRead);
}

bool LoadAdminTokensForProcess(const ClusterKey* cluster_key, const std::string& admin_token_file,
                               std::vector<std::string>* tokens) {
  tokens->clear();
  if (cluster_key != nullptr) *tokens = cluster_key->AdminTokens();
  std::string from = cluster_key != nullptr ? "the cluster key's" : "";
  if (!admin_token_file.empty()) {
    std::string error;
    Result<ClusterKey> loaded = ClusterKey::Load(admin_token_file, &error);
    if (!loaded.ok()) {
      MC_LOG_ERROR("--admin_token_file: %s", error.c_str());
      return false;
    }
    for (std::string& token : loaded.value().AdminTokens()) tokens->push_back(std::move(token));
    from += std::string(from.empty() ? "" : " and ") + admin_token_file + "'s (" +
            loaded.value().Fingerprint() + ")";
  }
  if (tokens->empty()) {
    MC_LOG_WARN("admin HTTP: no cluster key and no --admin_token_file: the endpoints that name "
                "keys, tenants or segments answer only this host's uid %u and root "
                "(docs/security.md, \"The admin HTTP port\")",
                static_cast<unsigned>(geteuid()));
  } else {
    MC_LOG_INFO("admin HTTP: the endpoints that name keys, tenants or segments need an admin "
                "token: %s (%zu accepted)",
                from.c_str(), tokens->size());
  }
  return true;
}

}  // namespace mooncake

#include "common/admin_http.h"

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

#include <cstring>
#include <mutex>

#include "common/logging.h"

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

bufferevent* AdminHttpServer::NewConnection(event_base* base, void* self) {
  auto* server = static_cast<AdminHttpServer*>(self);
  bufferevent* bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
  if (bev == nullptr) return nullptr;
  bufferevent_incref(bev);
  auto connection = std::make_unique<Connection>();
  connection->server = server;
  connection->bev = bev;
  connection->timer = evtimer_new(base, &AdminHttpServer::OnDeadline, connection.get());
  timeval deadline{kTimeoutSeconds, 0};
  evtimer_add(connection->timer, &deadline);
  server->connections_[bev] = std::move(connection);
  return bev;
}

// Shut down, the socket reads as closed: evhttp frees the connection on its next read.
void AdminHttpServer::OnDeadline(int, short, void* arg) {
  auto* connection = static_cast<Connection*>(arg);
  evutil_socket_t fd = bufferevent_getfd(connection->bev);
  if (fd >= 0) shutdown(fd, SHUT_RDWR);
  connection->server->Release(connection);
}

void AdminHttpServer::OnClosed(evhttp_connection*, void* arg) {
  auto* connection = static_cast<Connection*>(arg);
  connection->server->Release(connection);
}

void AdminHttpServer::Release(Connection* connection) {
  if (connection->evcon != nullptr) evhttp_connection_set_closecb(connection->evcon, nullptr, nullptr);
  event_free(connection->timer);
  bufferevent* bev = connection->bev;
  connections_.erase(bev);  // deletes connection
  bufferevent_decref(bev);
}

void AdminHttpServer::Handle(const std::string& path, Handler handler) {
  routes_[path] = std::move(handler);
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

void AdminHttpServer::Serve(evhttp_request* raw) {
  HttpRequest request;
  HttpResponse response;
  request.method = MethodName(evhttp_request_get_command(raw));

  evhttp_connection* connection = evhttp_request_get_connection(raw);
  if (connection != nullptr) {
    // A request served: the connection has kTimeoutSeconds again, for its reply and the next.
    auto it = connections_.find(evhttp_connection_get_bufferevent(connection));
    if (it != connections_.end()) {
      Connection* deadline = it->second.get();
      if (deadline->evcon == nullptr) {
        deadline->evcon = connection;
        evhttp_connection_set_closecb(connection, &AdminHttpServer::OnClosed, deadline);
      }
      timeval again{kTimeoutSeconds, 0};
      evtimer_add(deadline->timer, &again);
    }
    char* peer = nullptr;
    ev_uint16_t peer_port = 0;
    evhttp_connection_get_peer(connection, &peer, &peer_port);
    if (peer != nullptr) request.peer_address = peer;
    in_addr v4{};
    in6_addr v6{};
    if (inet_pton(AF_INET, request.peer_address.c_str(), &v4) == 1) {
      request.peer_is_loopback = (ntohl(v4.s_addr) >> 24) == 127;
    } else if (inet_pton(AF_INET6, request.peer_address.c_str(), &v6) == 1) {
      request.peer_is_loopback = IN6_IS_ADDR_LOOPBACK(&v6);
    }
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
      route->second(request, &response);
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
  server->Handle("/log_level", [](const HttpRequest& request, HttpResponse* response) {
    static const char* const kNames[] = {"debug", "info", "warning", "error"};
    if (request.method == "POST") {
      if (!request.peer_is_loopback) {
        SetHttpError(response, 403, -600, "the log level is set from this host only");
        return;
      }
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
  });
}

}  // namespace mooncake

// The admin HTTP server of the master and the daemon (docs/operations.md): /metrics,
// /health and the read-only introspection endpoints. Built on libevent's evhttp (already
// linked for Thrift's non-blocking server), not a hand-written parser.
//
// It never serves object bytes, and it is isolated from the process's real work: one
// thread of its own with its own event loop, so a hostile or slow client (huge headers, a
// request trickled byte by byte, thousands of idle connections) costs that thread a socket
// and a timer, never a Thrift or Unix-socket thread. Limits: request headers
// kMaxHeaderBytes and bodies kMaxBodyBytes (larger: refused and the connection closed), a
// request not read completely or a connection idle for kTimeoutSeconds is closed, methods
// GET, HEAD and POST only (others: 501). evhttp's own timeout restarts with every byte
// read, so a request trickled a byte at a time would never reach it: each connection also
// has a deadline of its own, kTimeoutSeconds from its accept and again from each request
// served, at which it is shut down whatever it is doing.
//
// Handlers run on the server's thread, one at a time: they must answer promptly (take
// what they need under the owner's locks and format outside them).
//
// Thread roles: Handle() before Start(); Start() once; port() from any thread; the
// destructor stops the thread (from any thread but the server's own).
#ifndef MOONCAKE_COMMON_ADMIN_HTTP_H_
#define MOONCAKE_COMMON_ADMIN_HTTP_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

struct bufferevent;
struct event;
struct event_base;
struct evhttp;
struct evhttp_connection;
struct evhttp_request;

namespace mooncake {

struct HttpRequest {
  std::string method;  // "GET", "HEAD" or "POST"
  std::string path;    // decoded, without the query
  std::map<std::string, std::string> query;  // decoded; a repeated name keeps its last value
  std::string body;
  std::string peer_address;  // numeric
  bool peer_is_loopback = false;

  // The query parameter, or fallback when absent.
  std::string Param(const std::string& name, const std::string& fallback = "") const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Further headers (name, value); values the handler made, never the request's bytes.
  std::vector<std::pair<std::string, std::string>> headers;
};

// Sets status and a JSON body {"success":false,"error_code":code,"error_message":message}
// (the shape Mooncake's admin endpoints answer errors with).
void SetHttpError(HttpResponse* response, int status, int code, const std::string& message);

class AdminHttpServer {
 public:
  static constexpr size_t kMaxHeaderBytes = 8192;
  static constexpr size_t kMaxBodyBytes = 64 * 1024;
  static constexpr int kTimeoutSeconds = 5;

  using Handler = std::function<void(const HttpRequest&, HttpResponse*)>;

  // component names the server in log lines ("master", "daemon").
  explicit AdminHttpServer(std::string component);
  ~AdminHttpServer();
  AdminHttpServer(const AdminHttpServer&) = delete;
  AdminHttpServer& operator=(const AdminHttpServer&) = delete;

  // Routes an exact path (any allowed method; the handler may refuse one with 405).
  // Unrouted paths answer 404 with a JSON error.
  void Handle(const std::string& path, Handler handler);

  // Binds address:port (port 0: any free port) and starts serving. false with *error
  // ("cannot listen on ...: Address already in use") when it cannot.
  bool Start(const std::string& address, int port, std::string* error);
  int port() const { return port_; }

 private:
  // A connection's deadline. It holds a reference on the connection's bufferevent, so that
  // the socket stays this connection's until the deadline is released, even after evhttp
  // let go of it.
  struct Connection {
    AdminHttpServer* server = nullptr;
    bufferevent* bev = nullptr;
    event* timer = nullptr;
    evhttp_connection* evcon = nullptr;  // known once it sent a request
  };
  static void OnRequest(evhttp_request* request, void* self);
  static bufferevent* NewConnection(event_base* base, void* self);
  static void OnDeadline(int fd, short what, void* connection);
  static void OnClosed(evhttp_connection* evcon, void* connection);
  void Serve(evhttp_request* request);
  void Release(Connection* connection);

  std::string component_;
  std::map<std::string, Handler> routes_;
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  std::thread thread_;
  int port_ = 0;
  // By bufferevent; touched on the server's thread only (and by the destructor after it).
  std::map<bufferevent*, std::unique_ptr<Connection>> connections_;
};

// Routes /log_level on server, shared by every binary: GET answers the level
// ({"level":"info"}); POST ?level=debug|info|warning|error sets it at run time, from a
// loopback peer only (403 otherwise: the admin port may face the network, and a flood of
// debug lines is a denial of service), and logs the change.
void RegisterLogLevelEndpoint(AdminHttpServer* server);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_ADMIN_HTTP_H_

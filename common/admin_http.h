// The admin HTTP server of the master and the daemon (docs/operations.md): /metrics,
// /health and the introspection endpoints. Built on libevent's evhttp (already linked for
// Thrift's non-blocking server), not a hand-written parser.
//
// Who may call what (docs/security.md, "The admin HTTP port"). Every route is registered
// with an Access, kAdmin unless it says otherwise, so a route nobody thought about is closed:
//   - kOpen routes answer whoever reaches the port (/health, /metrics: aggregate figures).
//   - kAdmin routes (keys, tenants, segments, addresses, anything that changes something)
//     answer a caller that sends "Authorization: Bearer <token>", token one of those given
//     to AcceptTokens (ClusterKey::AdminTokens of the cluster key file and of
//     --admin_token_file), compared in constant time; anyone else gets 401 with
//     "WWW-Authenticate: Bearer" and error -1400. A server given no token at all (a process
//     without either file) admits instead the peers on this host whose socket belongs to
//     this process's uid or root (common/auth/peer_owner.h, asked once per connection, at
//     accept), and answers others 403 with error -1401 and how to get in.
//   - kOpenToRead routes are open to GET and HEAD and kAdmin to other methods (/log_level).
// Refusals are logged with the peer's address, at most one line a second (LogThrottle).
//
// Isolation: it never serves object bytes, and runs on one thread of its own with its own
// event loop, so a hostile or slow client (huge headers, a request trickled byte by byte,
// thousands of idle connections) costs that thread a socket and a timer, never a Thrift or
// Unix-socket thread. Limits, all before any authentication: request headers
// kMaxHeaderBytes and bodies kMaxBodyBytes (larger: refused and the connection closed);
// methods GET, HEAD and POST only (others: 501); each connection has a deadline,
// kTimeoutSeconds from its accept and again from each request served, at which it is shut
// down whatever it is doing (evhttp's own timeout restarts with every byte read, so a
// request trickled a byte at a time would never reach it).
//
// Connections are capped: kMaxConnectionsPerAddress from one source address and
// kMaxConnections in all, so that idle connections cannot exhaust the process's
// descriptors (a burst beyond them holds at most the listen backlog more, for one turn of
// the loop). The newest connection is always admitted; the one closed to make room is the
// oldest of its own address when that address is over its share, else the oldest of the
// address holding the most connections. Refusing the newest instead would let whoever holds
// the slots keep everyone else out by reopening each before its deadline; closing the oldest
// of the fullest address means a flood from one address displaces only itself, and a client
// with one connection gives way only once every address holds a single one.
//
// Handlers run on the server's thread, one at a time: they must answer promptly (take
// what they need under the owner's locks and format outside them).
//
// Thread roles: AcceptTokens and Handle before Start(); Start() once; port() from any
// thread; the destructor stops the thread (from any thread but the server's own).
#ifndef MOONCAKE_COMMON_ADMIN_HTTP_H_
#define MOONCAKE_COMMON_ADMIN_HTTP_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/base/log_throttle.h"

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
  std::string peer_address;  // numeric, with the port: "127.0.0.1:40112"
  // The caller may call kAdmin routes (see above): it sent a token accepted here, or, on a
  // server without tokens, its socket is this process's uid's or root's. An open route may
  // say more to such a caller (the master's /metrics adds its per-segment series).
  bool admin = false;

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
  static constexpr size_t kMaxConnections = 128;
  static constexpr size_t kMaxConnectionsPerAddress = 16;

  using Handler = std::function<void(const HttpRequest&, HttpResponse*)>;

  enum class Access {
    kAdmin,       // every method needs the admin token (or, without tokens, this uid/root)
    kOpen,        // anyone who reaches the port
    kOpenToRead,  // GET and HEAD open; POST as kAdmin
  };

  // component names the server in log lines ("master", "daemon").
  explicit AdminHttpServer(std::string component);
  ~AdminHttpServer();
  AdminHttpServer(const AdminHttpServer&) = delete;
  AdminHttpServer& operator=(const AdminHttpServer&) = delete;

  // The admin tokens this server accepts (lowercase hex, ClusterKey::AdminTokens); none:
  // the same-user rule above.
  void AcceptTokens(std::vector<std::string> tokens);

  // Routes an exact path (any allowed method; the handler may refuse one with 405).
  // Unrouted paths answer 404 with a JSON error, to anyone. on_refusal, when given, may
  // reshape the answer a refused caller gets (it runs after the 401 or 403 is set), never
  // to serve what the route protects.
  void Handle(const std::string& path, Handler handler, Access access = Access::kAdmin,
              Handler on_refusal = nullptr);

  // Binds address:port (port 0: any free port) and starts serving. false with *error
  // ("cannot listen on ...: Address already in use") when it cannot.
  bool Start(const std::string& address, int port, std::string* error);
  int port() const { return port_; }

 private:
  // A connection's place in the budget and its deadline. It holds a reference on the
  // connection's bufferevent, so that the socket stays this connection's until it is
  // released, even after evhttp let go of it.
  struct Connection {
    AdminHttpServer* server = nullptr;
    bufferevent* bev = nullptr;
    event* timer = nullptr;  // first the admission (at once), then the deadline
    evhttp_connection* evcon = nullptr;  // known once it sent a request
    uint64_t serial = 0;                 // accept order: lower is older
    bool counted = false;                // admitted into the budget under address
    std::string address;                 // the peer's numeric address, without the port
    int owner = -1;                      // without tokens: 1 this uid or root, 0 not, -1 not asked
    std::string owner_why;               // why not
  };
  struct Route {
    Handler handler;
    Access access = Access::kAdmin;
    Handler on_refusal;
  };
  static void OnRequest(evhttp_request* request, void* self);
  static bufferevent* NewConnection(event_base* base, void* self);
  static void OnTimer(int fd, short what, void* connection);
  static void OnClosed(evhttp_connection* evcon, void* connection);
  void Admit(Connection* connection);
  void Evict(Connection* connection);
  void Serve(evhttp_request* request);
  // Whether the request's caller may call kAdmin routes; false with *status (401 or 403)
  // and *why otherwise.
  bool IsAdmin(evhttp_request* raw, Connection* connection, int* status, std::string* why);
  void Release(Connection* connection);

  std::string component_;
  std::vector<std::string> tokens_;
  std::map<std::string, Route> routes_;
  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  std::thread thread_;
  int port_ = 0;
  // By bufferevent; touched on the server's thread only (and by the destructor after it).
  std::map<bufferevent*, std::unique_ptr<Connection>> connections_;
  std::map<std::string, size_t> per_address_;  // counted connections by address
  size_t counted_ = 0;
  uint64_t next_serial_ = 0;
  LogThrottle refusals_log_;
  LogThrottle evictions_log_;
};

// Routes /log_level on server, shared by every binary: GET answers the level
// ({"level":"info"}), to anyone; POST ?level=debug|info|warning|error sets it at run time
// for an admin caller only (a flood of debug lines is a denial of service), and logs the
// change.
void RegisterLogLevelEndpoint(AdminHttpServer* server);

class ClusterKey;

// At a process's start: the admin tokens of its cluster key (null: none) and of the key
// file at admin_token_file ("": none; loaded by ClusterKey::Load, so with the cluster key
// file's checks) into *tokens, and a log line saying which rule the admin port follows.
// False, after logging why, when admin_token_file cannot be used.
bool LoadAdminTokensForProcess(const ClusterKey* cluster_key, const std::string& admin_token_file,
                               std::vector<std::string>* tokens);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_ADMIN_HTTP_H_

// A client's name, as Mooncake's setup() makes it from local_hostname (real_client.cpp,
// setup_internal): the name of the memory the client lends (docs/mooncake-api.md,
// "naming"), what get_hostname() answers, and what preferred segments, copy and move
// targets and batch_replica_clear name.
//
// A local_hostname with a port ("host:port", "[v6]:port") is the name as given. One
// without gets a port of this host appended: a free one from [MC_STORE_CLIENT_MIN_PORT,
// MC_STORE_CLIENT_MAX_PORT] (Mooncake's environment variables; 12300..14300 by default),
// picked at random and held -- bound on every interface, never listened on, nothing sent
// -- for as long as the name is in use, as Mooncake's AutoPortBinder holds it, so that two
// clients of one host never pick the same name. "" names no client: the memory it lends
// carries its daemon's name.
//
// Thread-safety: an object is used by one thread at a time (StoreClient's state lock).
#ifndef MOONCAKE_LIBMC_CLIENT_NAME_H_
#define MOONCAKE_LIBMC_CLIENT_NAME_H_

#include <string>

#include "common/base/error_code.h"

namespace mooncake {
namespace client {

class ClientName {
 public:
  ClientName() = default;
  ~ClientName();  // lets the held port go
  ClientName(ClientName&& other) noexcept;
  ClientName& operator=(ClientName&& other) noexcept;
  ClientName(const ClientName&) = delete;
  ClientName& operator=(const ClientName&) = delete;

  // The name for local_hostname (see above). INVALID_PARAMS (*why) for a name with a blank
  // or a control character, one longer than 255 bytes, or a port outside 1..65535;
  // INTERNAL_ERROR (*why) when no port of the range could be bound.
  static ErrorCode Make(const std::string& local_hostname, ClientName* out, std::string* why);

  const std::string& name() const { return name_; }
  // The port was picked here (another can be tried when the name turns out to be taken).
  bool picked_port() const { return held_fd_ >= 0; }

  // Mooncake's rule: a port follows the last ':' (a bracketed IPv6 address's after the ']').
  static bool HasPort(const std::string& host);

 private:
  std::string name_;
  int held_fd_ = -1;
};

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_CLIENT_NAME_H_

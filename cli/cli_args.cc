#include "cli/cli_args.h"

#include <cstdlib>
#include <sstream>

#include "common/master_address.h"

namespace mooncake {
namespace cli {
namespace {

const char* kDefaultSocket = "/run/mooncake/mooncaked.sock";
const char* kDefaultMaster = "127.0.0.1:50051";
// Mooncake's metrics port: the master's admin HTTP unless --metrics_port says otherwise.
const char* kDefaultAdminPort = "9003";

struct GlobalOptionSpec {
  const char* name;
  bool takes_value;
  const char* help;
};

const std::vector<GlobalOptionSpec>& GlobalOptionSpecs() {
  static const std::vector<GlobalOptionSpec> specs = {
      {"socket", true,
       "PATH the daemon's Unix socket ($MOONCAKE_SOCKET, else /run/mooncake/mooncaked.sock)"},
      {"master", true,
       "HOST:PORT the master's Thrift service ($MOONCAKE_MASTER, else 127.0.0.1:50051)"},
      {"admin_url", true, "URL the master's admin HTTP (default http://<master host>:9003)"},
      {"daemon_admin_url", true, "URL the daemon's admin HTTP, for health (default: not asked)"},
      {"tenant", true, "T the tenant whose keys the command names (default: the default tenant)"},
      {"cluster_key_file", true,
       "PATH the cluster key, for snapshot ($MOONCAKE_CLUSTER_KEY_FILE, else no handshake)"},
      {"json", false, "print JSON for scripts instead of tables"},
      {"progress", false, "show the progress line even when stderr is not a terminal"},
      {"help", false, "print help and exit"},
  };
  return specs;
}

const GlobalOptionSpec* FindGlobal(const std::string& name) {
  for (const auto& spec : GlobalOptionSpecs()) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

const OptionSpec* FindOption(const CommandSpec& command, const std::string& name) {
  for (const auto& option : command.options) {
    if (name == option.name) return &option;
  }
  return nullptr;
}

bool IsCount(const std::string& text) {
  if (text.empty() || text.size() > 19) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

void SetGlobal(GlobalOptions* g, const std::string& name, const std::string& value) {
  if (name == "socket") g->socket = value;
  if (name == "master") g->master = value;
  if (name == "admin_url") g->admin_url = value;
  if (name == "daemon_admin_url") g->daemon_admin_url = value;
  if (name == "tenant") g->tenant = value;
  if (name == "cluster_key_file") g->cluster_key_file = value;
  if (name == "json") g->json = true;
  if (name == "progress") g->progress = true;
}

void ApplyDefaults(GlobalOptions* g) {
  if (g->socket.empty()) {
    const char* env = std::getenv("MOONCAKE_SOCKET");
    g->socket = env != nullptr && *env != '\0' ? env : kDefaultSocket;
  }
  if (g->master.empty()) {
    const char* env = std::getenv("MOONCAKE_MASTER");
    g->master = env != nullptr && *env != '\0' ? env : kDefaultMaster;
  }
  if (g->cluster_key_file.empty()) {
    const char* env = std::getenv("MOONCAKE_CLUSTER_KEY_FILE");
    if (env != nullptr) g->cluster_key_file = env;
  }
  // The admin port is on the master's host; with etcd (HA) the leader is not known here,
  // so the admin commands then need --admin_url (they say so).
  MasterAddress master;
  std::string ignored;
  if (g->admin_url.empty() && ParseMasterAddress(g->master, &master, &ignored) &&
      !master.via_etcd()) {
    g->admin_url = "http://" + master.host + ":" + kDefaultAdminPort;
  }
  while (!g->admin_url.empty() && g->admin_url.back() == '/') g->admin_url.pop_back();
  while (!g->daemon_admin_url.empty() && g->daemon_admin_url.back() == '/') {
    g->daemon_admin_url.pop_back();
  }
}

}  // namespace

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec> commands = {
      {"put",
       "KEY FILE|-",
       "store FILE (or stdin with -) under KEY",
       "  KEY    the key, 1 to 4096 bytes\n"
       "  FILE   the file to store; - reads stdin\n"
       "A put never overwrites: a key that exists keeps its value (use rm first).\n"
       "Example: mooncake-cli put model/layer0 layer0.bin\n",
       2,
       2,
       {{"replicas", OptionKind::kCount, "N memory replicas on distinct daemons (default 1)"},
        {"soft_pin", OptionKind::kFlag, "evict only when nothing else qualifies"},
        {"hard_pin", OptionKind::kFlag, "never evict; removed only by rm --force"},
        {"prefer", OptionKind::kText, "HOST:PORT the daemon to place the first replica on"}}},
      {"get",
       "KEY [FILE|-]",
       "write KEY's value to FILE (or stdout)",
       "  KEY    the key\n"
       "  FILE   where to write the value (created or truncated); - or none: stdout\n"
       "Exit 1 when KEY does not exist.\n"
       "Example: mooncake-cli get model/layer0 /tmp/layer0.bin\n",
       1,
       2,
       {}},
      {"exists",
       "KEY...",
       "say which keys exist",
       "  KEY... one or more keys\n"
       "Prints \"present KEY\" or \"missing KEY\" per key; exit 1 when any is missing.\n"
       "Example: mooncake-cli exists a b c\n",
       1,
       -1,
       {}},
      {"stat",
       "KEY",
       "show KEY's size, replicas and their tiers, lease and pins",
       "  KEY    the key\n"
       "Asks the master's /query_key, which takes no read lease. Exit 1 when KEY does not "
       "exist.\nExample: mooncake-cli stat model/layer0\n",
       1,
       1,
       {}},
      {"rm",
       "KEY... | --regex PATTERN",
       "remove keys, or every key matching PATTERN",
       "  KEY...           keys to remove; exit 1 when any did not exist\n"
       "  --regex PATTERN  remove every key of the tenant in which the RE2 pattern finds a\n"
       "                   match, and print how many were removed\n"
       "Without --force, objects with an active read lease and hard-pinned ones are kept.\n"
       "Example: mooncake-cli rm --regex '^session/42/'\n",
       0,
       -1,
       {{"regex", OptionKind::kText, "PATTERN remove the keys this RE2 pattern matches"},
        {"force", OptionKind::kFlag, "remove leased and hard-pinned objects too"}}},
      {"ls",
       "",
       "list keys (one per line)",
       "Follows the master's /get_all_keys pages until --limit keys are printed. Paging is\n"
       "weakly consistent: a key added or removed meanwhile may or may not be listed.\n"
       "Example: mooncake-cli ls --regex '^model/' --limit 50\n",
       0,
       0,
       {{"regex", OptionKind::kText, "R only keys in which this RE2 pattern finds a match"},
        {"limit", OptionKind::kCount, "N print at most N keys (default 1000; 0: all)"}}},
      {"segments",
       "",
       "list the master's segments: kind, size, use, status, endpoint",
       "Example: mooncake-cli segments\n",
       0,
       0,
       {}},
      {"stats",
       "",
       "print the master's statistics",
       "Every figure of the master's /stats, sizes in human units.\n"
       "Example: mooncake-cli stats --json\n",
       0,
       0,
       {}},
      {"snapshot",
       "[status]",
       "take a snapshot of the master's state, or show the last one",
       "  (none)  ask the master (over Thrift, with --cluster_key_file) to take a snapshot\n"
       "          and wait until it is published\n"
       "  status  the newest snapshot's outcome (the master's /snapshot)\n"
       "Example: mooncake-cli --cluster_key_file /etc/mooncake/cluster.key snapshot\n",
       0,
       1,
       {{"no_wait", OptionKind::kFlag, "return once the snapshot is started"}}},
      {"health",
       "",
       "is the master (and, with --daemon_admin_url, the daemon) healthy",
       "Exit 0 when every endpoint asked answers ok, 3 when one answers otherwise, 4 when\n"
       "one cannot be reached.\n"
       "Example: mooncake-cli --daemon_admin_url http://127.0.0.1:9300 health\n",
       0,
       0,
       {}},
  };
  return commands;
}

const CommandSpec* FindCommand(const std::string& name) {
  for (const auto& command : Commands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

std::string Invocation::Text(const std::string& option, const std::string& fallback) const {
  auto it = options.find(option);
  return it == options.end() ? fallback : it->second;
}

uint64_t Invocation::Count(const std::string& option, uint64_t fallback) const {
  auto it = options.find(option);
  return it == options.end() ? fallback : std::strtoull(it->second.c_str(), nullptr, 10);
}

bool ParseArgs(int argc, char** argv, Invocation* out, std::string* error) {
  bool help_command = false;  // "help CMD": the next argument names the command
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      if (out->command == nullptr && !help_command) {
        if (arg == "help") {
          help_command = true;
          out->help = true;
          continue;
        }
        out->command = FindCommand(arg);
        if (out->command == nullptr) {
          *error = "unknown command \"" + arg + "\" (mooncake-cli --help lists them)";
          return false;
        }
        continue;
      }
      if (help_command && out->command == nullptr) {
        out->command = FindCommand(arg);
        if (out->command == nullptr) {
          *error = "unknown command \"" + arg + "\" (mooncake-cli --help lists them)";
          return false;
        }
        continue;
      }
      out->args.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "-h") arg = "--help";
    if (arg.compare(0, 2, "--") != 0) {
      *error = "unknown option \"" + arg + "\"";
      return false;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    bool takes_value;
    const GlobalOptionSpec* global = FindGlobal(name);
    const OptionSpec* local = nullptr;
    if (global != nullptr) {
      takes_value = global->takes_value;
    } else {
      local = out->command != nullptr ? FindOption(*out->command, name) : nullptr;
      if (local == nullptr) {
        *error = "unknown option \"--" + name + "\"" +
                 (out->command != nullptr ? std::string(" for ") + out->command->name +
                                                " (mooncake-cli " + out->command->name + " --help)"
                                          : std::string());
        return false;
      }
      takes_value = local->kind != OptionKind::kFlag;
    }
    if (!takes_value && has_value) {
      *error = "option --" + name + " takes no value";
      return false;
    }
    if (takes_value && !has_value) {
      if (i + 1 >= argc) {
        *error = "option --" + name + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (name == "help") {
      out->help = true;
    } else if (global != nullptr) {
      if (takes_value && value.empty()) {
        *error = "option --" + name + " needs a value";
        return false;
      }
      SetGlobal(&out->global, name, value);
    } else {
      if (local->kind == OptionKind::kCount && !IsCount(value)) {
        *error = "option --" + name + " takes a non-negative integer, not \"" + value + "\"";
        return false;
      }
      out->options[name] = takes_value ? value : "1";
    }
  }
  ApplyDefaults(&out->global);
  if (out->help) return true;
  if (out->command == nullptr) {
    *error = "no command given (mooncake-cli --help lists them)";
    return false;
  }
  const CommandSpec& c = *out->command;
  int n = static_cast<int>(out->args.size());
  std::string name = c.name;
  if (name == "rm") {
    // rm takes keys, or --regex and no keys.
    if (out->Has("regex") ? n != 0 : n == 0) {
      *error =
          out->Has("regex") ? "rm --regex takes no keys" : "rm needs KEY... or --regex PATTERN";
      return false;
    }
  } else if (n < c.min_args || (c.max_args >= 0 && n > c.max_args)) {
    *error = name + " takes " + (c.arguments[0] != '\0' ? c.arguments : "no arguments") + ", not " +
             std::to_string(n) + " argument" + (n == 1 ? "" : "s");
    return false;
  }
  if (name == "snapshot" && n == 1 && out->args[0] != "status") {
    *error = "snapshot takes no argument or \"status\", not \"" + out->args[0] + "\"";
    return false;
  }
  return true;
}

std::string GeneralHelp() {
  std::ostringstream s;
  s << "usage: mooncake-cli [global options] COMMAND [options] ARGS...\n\n"
       "Commands:\n";
  for (const auto& c : Commands()) {
    std::string head = std::string(c.name) + " " + c.arguments;
    s << "  " << head << std::string(head.size() < 30 ? 30 - head.size() : 1, ' ') << c.summary
      << "\n";
  }
  s << "\nGlobal options (before or after the command):\n";
  for (const auto& g : GlobalOptionSpecs()) {
    s << "  --" << g.name << " " << g.help << "\n";
  }
  s << "\nmooncake-cli help COMMAND (or COMMAND --help) describes one command.\n"
       "\nExit codes: 0 ok; 1 a key does not exist (get, stat, exists, rm); 2 usage error;\n"
       "3 the daemon or master answered an error (its code is printed); 4 the daemon or\n"
       "master cannot be reached.\n";
  return s.str();
}

std::string CommandHelp(const CommandSpec& c) {
  std::ostringstream s;
  s << "usage: mooncake-cli [global options] " << c.name << (c.options.empty() ? "" : " [options]")
    << (c.arguments[0] != '\0' ? " " : "") << c.arguments << "\n\n"
    << c.summary << "\n\n"
    << c.details;
  if (!c.options.empty()) {
    s << "\nOptions:\n";
    for (const auto& o : c.options) s << "  --" << o.name << " " << o.help << "\n";
  }
  s << "\nGlobal options: mooncake-cli --help.\n";
  return s.str();
}

}  // namespace cli
}  // namespace mooncake

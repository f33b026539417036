#include "cli/cli_args.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "common/base/master_address.h"
#include "common/base/version.h"

namespace mooncake {
namespace cli {
namespace {

const char* kDefaultSocket = "/run/mooncake/mooncaked.sock";
const char* kDefaultMaster = "127.0.0.1:50051";
// Mooncake's metrics port: the master's admin HTTP unless --metrics_port says otherwise.
const char* kDefaultAdminPort = "9003";

const char* kDescription =
    "Puts, gets and looks up the keys of a Mooncake Store, lists its segments and\n"
    "statistics, takes snapshots. Data commands (put, get, exists, rm) go through the\n"
    "local mooncaked's Unix socket and the C ABI, as an application does; the others read\n"
    "the master's admin HTTP (with the admin token of --cluster_key_file or\n"
    "--admin_token_file), and snapshot asks its Thrift service. The options below\n"
    "may come before or after the command.\n";

const char* kExitCodes =
    "  0  success\n"
    "  1  a key does not exist (get, stat, exists, rm)\n"
    "  2  usage error: unknown command or option, wrong arguments, a bad value\n"
    "  3  the daemon or the master answered an error (its code is printed), or a local file\n"
    "     could not be read or written\n"
    "  4  the daemon's socket, the master's admin HTTP or its Thrift port cannot be reached\n"
    "  5  put: the key exists, nothing was stored (--upsert replaces it)\n";

// A global option: its value lands in one field of GlobalOptions.
struct GlobalOptionSpec {
  const char* name;
  const char* value_name;  // nullptr: a flag
  const char* env;         // read when the option is not given (nullptr: none)
  const char* help;
  std::string GlobalOptions::*text;
  bool GlobalOptions::*flag;
};

const std::vector<GlobalOptionSpec>& GlobalOptionSpecs() {
  static const std::vector<GlobalOptionSpec> specs = {
      {"socket", "PATH", "MOONCAKE_SOCKET",
       "the daemon's Unix socket ($MOONCAKE_SOCKET, else /run/mooncake/mooncaked.sock)",
       &GlobalOptions::socket, nullptr},
      {"master", "HOST:PORT", "MOONCAKE_MASTER",
       "the master's Thrift service ($MOONCAKE_MASTER, else 127.0.0.1:50051)",
       &GlobalOptions::master, nullptr},
      {"admin_url", "URL", "MOONCAKE_MASTER_ADMIN_URL",
       "the master's admin HTTP ($MOONCAKE_MASTER_ADMIN_URL, else http://<master host>:9003)",
       &GlobalOptions::admin_url, nullptr},
      {"daemon_admin_url", "URL", "MOONCAKE_DAEMON_ADMIN_URL",
       "the daemon's admin HTTP, asked by health ($MOONCAKE_DAEMON_ADMIN_URL, else not asked)",
       &GlobalOptions::daemon_admin_url, nullptr},
      {"tenant", "T", nullptr, "the tenant whose keys the command names (default: the default one)",
       &GlobalOptions::tenant, nullptr},
      {"cluster_key_file", "PATH", "MOONCAKE_CLUSTER_KEY_FILE",
       "the cluster key: snapshot's handshake, and the admin token of the commands that read "
       "the admin HTTP ($MOONCAKE_CLUSTER_KEY_FILE, else none)",
       &GlobalOptions::cluster_key_file, nullptr},
      {"admin_token_file", "PATH", "MOONCAKE_ADMIN_TOKEN_FILE",
       "a key file given to the master as --admin_token_file: its admin token is sent instead "
       "of the cluster key's ($MOONCAKE_ADMIN_TOKEN_FILE, else none)",
       &GlobalOptions::admin_token_file, nullptr},
      {"json", nullptr, nullptr, "print JSON for scripts instead of tables", nullptr,
       &GlobalOptions::json},
      {"progress", nullptr, nullptr, "show the progress line even when stderr is not a terminal",
       nullptr, &GlobalOptions::progress},
  };
  return specs;
}

bool IsCount(const std::string& text) {
  if (text.empty() || text.size() > 19) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* env = name != nullptr ? std::getenv(name) : nullptr;
  return env != nullptr && *env != '\0' ? env : fallback;
}

// Flag, else environment, else default; then the admin URL that follows from the master.
void ApplyDefaults(GlobalOptions* g) {
  for (const auto& spec : GlobalOptionSpecs()) {
    if (spec.text != nullptr && (g->*spec.text).empty()) g->*spec.text = EnvOr(spec.env, "");
  }
  if (g->socket.empty()) g->socket = kDefaultSocket;
  if (g->master.empty()) g->master = kDefaultMaster;
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

// ---- help ----------------------------------------------------------------------------

// "-f, --file FILE": an option's names and, when it takes one, its value.
std::string OptionNames(const CLI::Option* o) {
  std::string names;
  for (const auto& s : o->get_snames()) names += "-" + s + ", ";
  for (const auto& l : o->get_lnames()) names += "--" + l + ", ";
  if (names.size() >= 2) names.resize(names.size() - 2);
  if (o->get_type_size() != 0) names += " " + o->get_type_name();
  return names;
}

// Two columns, the second starting where the widest first one ends (help2man reads one
// item per line, its description after two or more spaces).
std::string Columns(const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  std::string out;
  for (const auto& r : rows) {
    out += "  " + r.first + std::string(width - r.first.size() + 2, ' ') + r.second + "\n";
  }
  return out;
}

// An application's options, its help and version flags last.
std::string OptionLines(const CLI::App* app) {
  std::vector<std::pair<std::string, std::string>> rows, last;
  for (const CLI::Option* o : app->get_options()) {
    if (o->get_positional()) continue;
    bool help = o == app->get_help_ptr() || o->check_lname("version");
    (help ? last : rows).emplace_back(OptionNames(o), o->get_description());
  }
  rows.insert(rows.end(), last.begin(), last.end());
  return Columns(rows);
}

std::string GeneralHelp(const CLI::App* app) {
  std::ostringstream s;
  s << "Usage: mooncake-cli [OPTIONS] COMMAND [COMMAND OPTIONS] [ARGS]...\n\n"
    << kDescription << "\nCommands:\n";
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& c : Commands()) {
    rows.emplace_back(std::string(c.name) + (c.arguments[0] != '\0' ? " " : "") + c.arguments,
                      c.summary);
  }
  rows.emplace_back("help [COMMAND]", "describe one command (as COMMAND --help does)");
  s << Columns(rows) << "\nOptions:\n"
    << OptionLines(app) << "\nExit codes:\n"
    << kExitCodes
    << "\nmooncake-cli help COMMAND (or mooncake-cli COMMAND --help) describes one command;\n"
       "docs/operations.md, \"mooncake-cli\", has them all.\n";
  return s.str();
}

std::string CommandHelp(const CLI::App* app, const CommandSpec& c) {
  std::ostringstream s;
  s << "Usage: mooncake-cli [OPTIONS] " << c.name << (c.options.empty() ? "" : " [COMMAND OPTIONS]")
    << (c.arguments[0] != '\0' ? " " : "") << c.arguments << "\n\n"
    << c.summary << "\n\n"
    << c.details << "\nOptions:\n"
    << OptionLines(app) << "\nGlobal options (mooncake-cli --help) may come before or after "
    << c.name << ".\n";
  return s.str();
}

// Every help text of the CLI, from the application CLI11 parsed with.
class HelpFormatter : public CLI::FormatterBase {
 public:
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    const CommandSpec* command =
        app->get_parent() != nullptr ? FindCommand(app->get_name()) : nullptr;
    if (command != nullptr) return CommandHelp(app, *command);
    return GeneralHelp(app->get_parent() != nullptr ? app->get_parent() : app);
  }
};

// ---- parsing -------------------------------------------------------------------------

// One command's CLI11 subcommand and where its arguments and options land.
struct BoundCommand {
  const CommandSpec* spec = nullptr;
  CLI::App* app = nullptr;
  std::vector<std::string> args;
  std::map<std::string, std::string> values;                  // text and count options
  std::vector<std::pair<std::string, CLI::Option*>> options;  // by long name
};

CLI::Validator NotEmpty() {
  return CLI::Validator(
      [](std::string& value) {
        return value.empty() ? std::string("needs a value") : std::string();
      },
      "");
}

CLI::Validator NonNegative() {
  return CLI::Validator(
      [](std::string& value) {
        return IsCount(value) ? std::string()
                              : "takes a non-negative integer, not \"" + value + "\"";
      },
      "");
}

// CLI11's error, in the CLI's words: one line that names the culprit.
std::string UsageError(const CLI::ParseError& e, const CLI::App& app, const BoundCommand* command,
                       const std::vector<std::string>& words) {
  std::string what = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    std::vector<std::string> extra = app.remaining();
    if (extra.empty() && command != nullptr) extra = command->app->remaining();
    std::string first = extra.empty() ? what : extra[0];
    if (command == nullptr && (first.empty() || first[0] != '-')) {
      return "unknown command \"" + first + "\" (mooncake-cli --help lists them)";
    }
    // Before the command it is no option of the command's.
    auto at = std::find(words.begin(), words.end(), first);
    if (command != nullptr && std::find(words.begin(), at, command->spec->name) == at) {
      command = nullptr;
    }
    first = first.substr(0, first.find('='));
    if (command == nullptr) return "unknown option \"" + first + "\" (mooncake-cli --help)";
    std::string name = command->spec->name;
    return "unknown option \"" + first + "\" for " + name + " (mooncake-cli " + name +
           " --help; a key or value that starts with '-' goes after \"--\")";
  }
  const std::string no_value = " was given a disallowed flag override";
  size_t at = what.find(no_value);
  if (at != std::string::npos) return "option --" + what.substr(0, at) + " takes no value";
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr &&
      what.find("missing") != std::string::npos) {
    return "option " + what.substr(0, what.find(':')) + " needs a value";
  }
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) {
    size_t colon = what.find(": ");
    return "option " + (colon == std::string::npos ? what : what.erase(colon, 1));
  }
  return what;
}

// The checks CLI11 does not make: the number of arguments, and what goes with what.
bool CheckArguments(const Invocation& inv, std::string* error) {
  const CommandSpec& c = *inv.command;
  int n = static_cast<int>(inv.args.size());
  std::string name = c.name;
  if (name == "rm") {
    // rm takes keys, or --regex and no keys.
    if (inv.Has("regex") ? n != 0 : n == 0) {
      *error = inv.Has("regex") ? "rm --regex takes no keys" : "rm needs KEY... or --regex PATTERN";
      return false;
    }
    return true;
  }
  if (n < c.min_args || (c.max_args >= 0 && n > c.max_args)) {
    *error = name + " takes " + (c.arguments[0] != '\0' ? c.arguments : "no arguments") + ", not " +
             std::to_string(n) + " argument" + (n == 1 ? "" : "s");
    return false;
  }
  if (name == "put" && (n == 2) == inv.Has("file")) {
    *error = n == 2 ? "put takes VALUE or -f FILE, not both"
                    : "put needs VALUE, - (stdin) or -f FILE after KEY";
    return false;
  }
  if (name == "snapshot" && n == 1 && inv.args[0] != "status") {
    *error = "snapshot takes no argument or \"status\", not \"" + inv.args[0] + "\"";
    return false;
  }
  return true;
}

}  // namespace

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec> commands = {
      {"put",
       "KEY [VALUE|-]",
       "store VALUE (or a file, or stdin) under KEY",
       "  KEY    the key, 1 to 4096 bytes\n"
       "  VALUE  the bytes to store, as given on the command line\n"
       "  -      read the value from stdin (so does -f -)\n"
       "A put never overwrites: when KEY exists, nothing is stored, \"KEY exists; not\n"
       "stored\" is printed and the exit code is 5; --upsert replaces the value instead.\n"
       "Prints \"stored KEY (SIZE)\", and on stderr how many replicas the master placed when\n"
       "it placed fewer than --replicas (it places what the daemons have room for).\n"
       "Examples:\n"
       "  mooncake-cli put greeting hello\n"
       "  mooncake-cli put model/layer0 -f layer0.bin\n"
       "  producer | mooncake-cli put stream/7 -\n",
       1,
       2,
       {{"file", 'f', OptionKind::kText, "FILE", "read the value from FILE (-: stdin)"},
        {"upsert", '\0', OptionKind::kFlag, nullptr, "replace the value when KEY exists"},
        {"replicas", '\0', OptionKind::kCount, "N",
         "memory replicas on distinct daemons (default 1)"},
        {"soft_pin", '\0', OptionKind::kFlag, nullptr, "evict only when nothing else qualifies"},
        {"hard_pin", '\0', OptionKind::kFlag, nullptr, "never evict; removed only by rm --force"},
        {"prefer", '\0', OptionKind::kText, "HOST:PORT",
         "the daemon to place the first replica on"}}},
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
       "A key a read holds (its read lease, after a get) is removed all the same: it is gone\n"
       "at once and its space returns when the lease ends. A hard-pinned key is kept (exit 3)\n"
       "unless --force. rm --regex without --force skips leased and hard-pinned keys.\n"
       "Example: mooncake-cli rm --regex '^session/42/'\n",
       0,
       -1,
       {{"regex", '\0', OptionKind::kText, "PATTERN", "remove the keys this RE2 pattern matches"},
        {"force", '\0', OptionKind::kFlag, nullptr,
         "remove hard-pinned (and leased) objects too"}}},
      {"ls",
       "",
       "list keys (one per line)",
       "Follows the master's /get_all_keys pages until --limit keys are printed. Paging is\n"
       "weakly consistent: a key added or removed meanwhile may or may not be listed.\n"
       "Example: mooncake-cli ls --regex '^model/' --limit 50\n",
       0,
       0,
       {{"regex", '\0', OptionKind::kText, "R",
         "only keys in which this RE2 pattern finds a match"},
        {"limit", '\0', OptionKind::kCount, "N", "print at most N keys (default 1000; 0: all)"}}},
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
       {{"no_wait", '\0', OptionKind::kFlag, nullptr, "return once the snapshot is started"}}},
      {"admin-token",
       "",
       "print the admin token of the admin HTTP, for curl",
       "Prints the bearer token the master's and the daemons' admin HTTP accept from a holder\n"
       "of --admin_token_file (when given) or --cluster_key_file: lowercase hex of\n"
       "HMAC-SHA256(the file's first key, \"mooncake admin token v1\"). Without it the\n"
       "endpoints that name keys, segments or tenants answer 401. The other commands send it\n"
       "themselves.\n"
       "Example:\n"
       "  curl -H \"Authorization: Bearer $(mooncake-cli admin-token --cluster_key_file F)\" \\\n"
       "    http://127.0.0.1:9003/get_all_keys\n",
       0,
       0,
       {}},
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
  // "--" ends the options. CLI11 would hand the words after it to the parent application
  // (a subcommand's positionals that take any number do not claim them), so they are split
  // off here and appended to the command's arguments.
  std::vector<std::string> words(argv + 1, argv + argc);
  std::vector<std::string> tail;
  auto end_of_options = std::find(words.begin(), words.end(), "--");
  if (end_of_options != words.end()) {
    tail.assign(end_of_options + 1, words.end());
    words.erase(end_of_options, words.end());
  }
  // CLI11 reads "--name=" as "--name" and takes the next word for its value.
  for (const auto& w : words) {
    if (w.size() > 3 && w.compare(0, 2, "--") == 0 && w.back() == '=') {
      *error = "option " + w.substr(0, w.size() - 1) + " needs a value";
      return false;
    }
  }

  CLI::App app(kDescription, "mooncake-cli");
  app.formatter(std::make_shared<HelpFormatter>());
  app.set_help_flag("-h,--help", "print this help and exit");
  app.set_version_flag("-v,--version", std::string("mooncake-cli ") + MooncakeVersion(),
                       "print the version and exit");
  app.require_subcommand(0, 1);
  GlobalOptions given;
  for (const auto& spec : GlobalOptionSpecs()) {
    std::string name = std::string("--") + spec.name;
    if (spec.flag != nullptr) {
      app.add_flag(name, given.*spec.flag, spec.help)->disable_flag_override();
    } else {
      app.add_option(name, given.*spec.text, spec.help)
          ->type_name(spec.value_name)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
          ->check(NotEmpty());
    }
  }
  std::vector<BoundCommand> bound(Commands().size());
  for (size_t i = 0; i < Commands().size(); ++i) {
    BoundCommand& b = bound[i];
    b.spec = &Commands()[i];
    b.app = app.add_subcommand(b.spec->name, b.spec->summary);
    b.app->fallthrough();  // global options after the command
    b.app->add_option("ARGS", b.args)->expected(0, CLI::detail::expected_max_vector_size);
    for (const auto& o : b.spec->options) {
      std::string names = std::string("--") + o.name;
      if (o.short_name != '\0') names = std::string("-") + o.short_name + "," + names;
      CLI::Option* opt;
      if (o.kind == OptionKind::kFlag) {
        opt = b.app->add_flag(names, o.help)->disable_flag_override();
      } else {
        opt = b.app->add_option(names, b.values[o.name], o.help)
                  ->type_name(o.value_name)
                  ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        if (o.kind == OptionKind::kCount) opt->check(NonNegative());
      }
      b.options.emplace_back(o.name, opt);
    }
  }
  std::string help_topic;
  CLI::App* help = app.add_subcommand("help", "describe one command");
  help->add_option("COMMAND", help_topic);

  auto selected = [&]() -> BoundCommand* {
    for (auto& b : bound) {
      if (b.app->parsed()) return &b;
    }
    return nullptr;
  };
  try {
    std::vector<std::string> reversed(words.rbegin(), words.rend());  // CLI11's order
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out->message = app.help();
    return true;
  } catch (const CLI::CallForVersion& e) {
    out->message = std::string(e.what()) + "\n";
    return true;
  } catch (const CLI::ParseError& e) {
    *error = UsageError(e, app, selected(), words);
    return false;
  }

  if (help->parsed()) {
    if (help_topic.empty()) {
      out->message = GeneralHelp(&app);
      return true;
    }
    const CommandSpec* topic = FindCommand(help_topic);
    if (topic == nullptr) {
      *error = "unknown command \"" + help_topic + "\" (mooncake-cli --help lists them)";
      return false;
    }
    out->message = CommandHelp(app.get_subcommand(help_topic), *topic);
    return true;
  }
  BoundCommand* command = selected();
  if (command == nullptr) {
    *error = tail.empty() ? "no command given (mooncake-cli --help lists them)"
                          : "\"--\" ends a command's options: put it after the command "
                            "(mooncake-cli rm -- -KEY)";
    return false;
  }
  out->command = command->spec;
  out->args = command->args;
  out->args.insert(out->args.end(), tail.begin(), tail.end());
  for (const auto& o : command->options) {
    if (o.second->count() == 0) continue;
    out->options[o.first] = o.second->get_type_size() == 0 ? "1" : command->values[o.first];
  }
  out->global = given;
  ApplyDefaults(&out->global);
  return CheckArguments(*out, error);
}

}  // namespace cli
}  // namespace mooncake

// mooncake-cli's command line: the table of subcommands (arguments, options, help text) and
// the parser, CLI11 (Debian's libcli11-dev), that turns argv into an Invocation.
//
// Syntax: mooncake-cli [OPTIONS] COMMAND [COMMAND OPTIONS] ARGS...
// Global options may also follow the command. Options are "--name value" or "--name=value"
// (flags take no value), short ones "-f value"; "--" ends the options, so that a key or a
// value may start with '-'; a lone "-" is an argument (stdin or stdout). "mooncake-cli help
// CMD" and "mooncake-cli CMD --help" print a command's help, "mooncake-cli --version" the
// version.
//
// Defaults: a global option not given is read from its environment variable (the ones
// scripts/with-cluster.sh exports: MOONCAKE_SOCKET, MOONCAKE_MASTER,
// MOONCAKE_MASTER_ADMIN_URL, MOONCAKE_DAEMON_ADMIN_URL, MOONCAKE_CLUSTER_KEY_FILE; and
// MOONCAKE_ADMIN_TOKEN_FILE), else
// takes the built-in default. The flag wins over the variable, the variable over the default.
//
// Help: every help text is built from the CLI11 application (its subcommands and options,
// declared from the table below) in one regular shape that help2man reads: a "Usage:" line,
// the description, then sections ("Options:", ...) with one option per line.
//
// Input policy: any argv. What the parser refuses (unknown command or option, a missing
// value, a count that is not a number, too few or too many arguments) comes back as an
// error message for a usage error (exit 2) that names the culprit; nothing here touches the
// network or files.
#ifndef MOONCAKE_CLI_CLI_ARGS_H_
#define MOONCAKE_CLI_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mooncake {
namespace cli {

// Options every command takes, with the defaults of the environment.
struct GlobalOptions {
  std::string socket;            // the daemon's Unix socket
  std::string master;            // "host:port" of the master's Thrift service
  std::string admin_url;         // "http://host:port" of the master's admin HTTP ("": none)
  std::string daemon_admin_url;  // the daemon's admin HTTP ("" = not asked)
  std::string tenant;            // "" = the default tenant
  std::string cluster_key_file;  // "" = no handshake (a master without a key)
  // The admin HTTP's token comes from this file when given, else from cluster_key_file;
  // neither: none is sent (a master without a key, asked by its own uid).
  std::string admin_token_file;
  bool json = false;
  bool progress = false;  // a progress line even when stderr is not a terminal
};

// How an option of a command takes its value.
enum class OptionKind {
  kFlag,   // no value: present or not
  kText,   // any text
  kCount,  // a non-negative integer
};

struct OptionSpec {
  const char* name;  // the long name, without the leading "--"
  char short_name;   // '\0': none
  OptionKind kind;
  const char* value_name;  // as help shows the value: "N", "FILE" (nullptr for a flag)
  const char* help;
};

struct CommandSpec {
  const char* name;
  const char* arguments;  // as the synopsis shows them: "KEY [VALUE|-]"
  const char* summary;    // one line
  const char* details;    // the arguments explained, examples, what is printed
  int min_args;
  int max_args;  // -1: any number
  std::vector<OptionSpec> options;
};

// Every command, in the order help lists them.
const std::vector<CommandSpec>& Commands();
// The command called name, or nullptr.
const CommandSpec* FindCommand(const std::string& name);

struct Invocation {
  GlobalOptions global;
  const CommandSpec* command = nullptr;
  std::vector<std::string> args;
  std::map<std::string, std::string> options;  // by long name; flags map to "1"
  // Help or the version was asked for: print this on stdout and exit 0 (no command runs).
  std::string message;

  bool Has(const std::string& option) const { return options.count(option) != 0; }
  std::string Text(const std::string& option, const std::string& fallback = "") const;
  // A kCount option's value (validated by the parser), or fallback when absent.
  uint64_t Count(const std::string& option, uint64_t fallback) const;
};

// Parses argv. false with *error (one line, naming the culprit) on a usage error; true with
// out->message set when help or the version was asked for.
bool ParseArgs(int argc, char** argv, Invocation* out, std::string* error);

}  // namespace cli
}  // namespace mooncake

#endif  // MOONCAKE_CLI_CLI_ARGS_H_

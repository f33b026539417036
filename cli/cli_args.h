// mooncake-cli's command line: the table of subcommands (arguments, options, help text)
// and the parser that turns argv into an Invocation.
//
// Syntax: mooncake-cli [global options] COMMAND [options] ARGS...
// Global options may also follow the command. Options are "--name value" or
// "--name=value" (flags take no value); "--" ends the options, so that a key may start with
// '-'; a lone "-" is an argument (stdin or stdout). "mooncake-cli help CMD" and
// "mooncake-cli CMD --help" print a command's help.
//
// Input policy: any argv. What the parser refuses (unknown command or option, a missing
// value, a count that is not a number, too few or too many arguments) comes back as an
// error message for a usage error (exit 2); nothing here touches the network or files.
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
  std::string socket;            // the daemon's Unix socket ($MOONCAKE_SOCKET, else default)
  std::string master;            // "host:port" of the master's Thrift service
  std::string admin_url;         // "http://host:port" of the master's admin HTTP
  std::string daemon_admin_url;  // the daemon's admin HTTP ("" = not asked)
  std::string tenant;            // "" = the default tenant
  std::string cluster_key_file;  // "" = no handshake (a master without a key)
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
  const char* name;  // without the leading "--"
  OptionKind kind;
  const char* help;
};

struct CommandSpec {
  const char* name;
  const char* arguments;  // as the synopsis shows them: "KEY FILE|-"
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
  const CommandSpec* command = nullptr;  // nullptr: general help
  std::vector<std::string> args;
  std::map<std::string, std::string> options;  // flags map to "1"
  bool help = false;  // print help (the command's, or the general one) and exit 0

  bool Has(const std::string& option) const { return options.count(option) != 0; }
  std::string Text(const std::string& option, const std::string& fallback = "") const;
  // A kCount option's value (validated by the parser), or fallback when absent.
  uint64_t Count(const std::string& option, uint64_t fallback) const;
};

// Parses argv. false with *error (one line, naming the culprit) on a usage error.
bool ParseArgs(int argc, char** argv, Invocation* out, std::string* error);

// The general help (commands, global options, exit codes) and one command's help.
std::string GeneralHelp();
std::string CommandHelp(const CommandSpec& command);

}  // namespace cli
}  // namespace mooncake

#endif  // MOONCAKE_CLI_CLI_ARGS_H_

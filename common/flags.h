// Command-line flags and config files for every binary.
//
// A binary declares its flags (each bound to a variable holding the default), then calls
// Parse(). The command line is read by CLI11 with gflags' spellings, so that Mooncake's own
// command lines (mooncake_master -v=1 -port=50051 ...) work unchanged:
//   --name=value  --name value  -name=value  -name value
//   booleans: --name  --noname  --name=true|false (also 1/0, yes/no, on/off, t/f, y/n)
//             and, as before, --name true|false
//   --flagfile=FILE  gflags' flag file: one flag per line (--name=value), blank lines and
//                    # comments skipped, nested flag files expanded; its flags stand where
//                    the --flagfile does (a later flag wins over an earlier one)
//   -v=N, --v=N, -v N  glog's verbosity: N >= 1 logs at debug (see AddLogLevel)
//   --config=FILE  a YAML or JSON map with the same keys; any flag given on the command
//                  line (or in a flag file) wins over the file
//   --help, -h, --version
// Unknown flags, unknown config keys, missing and malformed values are errors that name
// the culprit (and the nearest known name when one is obviously meant).
//
// CLI11 does the tokenising, "=" splitting, negation, unknown-flag detection and required
// values. Two small rewrites come before it, because CLI11 has no single-dash long names:
// "-name..." becomes "--name..." when name is a declared flag, alias or ignored setting
// (anything else is left for CLI11 to refuse), and a flag file is replaced by its lines.
//
// Mooncake's own spellings are accepted too (common/base/mooncake_compat.h): an alias is a second
// name of a flag, and an ignored setting is one of Mooncake's that this binary knows but
// does not implement: given anywhere, it is skipped with one warning (warnings()), so that
// an operator's existing command line or conf/master.yaml starts it.
//
// Thread roles: one thread, at start. Input policy: argv and files are any bytes.
#ifndef MOONCAKE_COMMON_FLAGS_H_
#define MOONCAKE_COMMON_FLAGS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mooncake {

class FlagSet {
 public:
  explicit FlagSet(std::string program, std::string summary);

  // Each help string says what the flag does, its unit where the value name does not, and
  // what 0 or "" means; the default is taken from *value as it is when declared.
  void AddString(const std::string& name, std::string* value, const std::string& help);
  void AddInt(const std::string& name, int64_t* value, const std::string& help);
  void AddDouble(const std::string& name, double* value, const std::string& help);
  void AddBool(const std::string& name, bool* value, const std::string& help);
  // Sizes such as "16MB" or whole bytes (see ParseSize).
  void AddSize(const std::string& name, uint64_t* value, const std::string& help);
  // Durations stored in milliseconds; a bare number is in default_unit_ms (1 or 1000).
  void AddDuration(const std::string& name, int64_t* value_ms, int64_t default_unit_ms,
                   const std::string& help);
  // A string restricted to one of choices.
  void AddChoice(const std::string& name, std::string* value,
                 const std::vector<std::string>& choices, const std::string& help);
  // --log_level (debug|info|warning|error) bound to *level; glog's -v=N with N >= 1 then
  // sets it to debug, whatever --log_level or the config file say.
  void AddLogLevel(std::string* level);

  // A second name of the flag target (declared before), on the command line and in config
  // files alike; "config" names the --config option itself.
  void AddAlias(const std::string& alias, const std::string& target);
  // A setting another implementation has and this binary does not implement: given, it is
  // skipped with a warning "--name is ignored: reason". On the command line its value is
  // "--name=V", or the next argument unless that is a flag (a bare boolean); --noname too.
  void AddIgnored(const std::string& name, const std::string& reason);

  // Parses argv (argv[0] is skipped), then the --config file if one was given.
  // Returns false with *error set on the first problem.
  bool Parse(int argc, char** argv, std::string* error);

  // One line per ignored setting Parse() met (once each, even if given twice).
  const std::vector<std::string>& warnings() const { return warnings_; }

  // True after Parse() saw --help (--version); the caller prints Usage() (the version)
  // and exits 0.
  bool help_requested() const { return help_requested_; }
  bool version_requested() const { return version_requested_; }
  // glog's -v as given (0 without one).
  int64_t verbosity() const { return verbosity_; }
  const std::string& program() const { return program_; }

  // One flag as --help and the docs show it.
  struct Doc {
    std::string name;
    // "" for a boolean; else what --help writes after "=": INT, NUMBER, TEXT, SIZE, MS,
    // SECONDS, or the choices joined by "|".
    std::string value_name;
    // The bound variable's default, written so that --name=<default_value> sets it again.
    std::string default_value;
    std::string help;
    std::vector<std::string> aliases;
  };
  // The binary's own flags in the order they were declared (not --config, --flagfile, -v,
  // --help and --version, which every binary has).
  std::vector<Doc> Docs() const;
  // The --help text: a usage line, the summary, then one block per flag
  // ("  --name=VALUE    help (default: X)", the help in a column of its own as GNU
  // programs print theirs), regular enough for help2man.
  std::string Usage() const;
  // A Markdown table (flag | default | meaning) of the flags named, in that order, or of
  // every flag of Docs() when names is empty: what the docs' generated sections hold.
  std::string MarkdownTable(const std::vector<std::string>& names = {}) const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string value_name;  // "" for booleans
    std::string default_text;
    std::function<bool(const std::string&)> set;  // false: malformed value
    std::string expected{};  // what a malformed value should have been, for the error
    bool builtin = false;    // --config, --flagfile, -v, --help, --version
  };
  // What a name on the command line is (after its aliases are resolved).
  enum class Kind { kUnknown, kValue, kBool, kNegatedBool, kIgnored, kFlagfile };

  void Add(Flag flag);
  // The flag an alias names (name itself otherwise).
  std::string Canonical(const std::string& name) const;
  const Flag* Find(const std::string& name) const;  // after Canonical; nullptr: none
  Kind KindOf(const std::string& name) const;
  // argv with flag files replaced by their lines and single-dash names made double, for
  // CLI11; and the names of the flags and ignored settings it mentions, the only ones CLI11
  // is told of (declaring every one costs milliseconds a parse, which fuzzing feels).
  struct Rewritten {
    std::vector<std::string> args;
    std::set<std::string> names;
  };
  bool Rewrite(const std::vector<std::string>& in, int depth, Rewritten* out,
               std::string* error) const;
  bool ReadFlagfile(const std::string& path, int depth, Rewritten* out, std::string* error) const;
  // The message for an argument CLI11 left over: an unknown flag (with the nearest name)
  // or a stray word.
  std::string Unexpected(const std::string& arg) const;
  void NoteIgnored(const std::string& name, const std::string& origin);
  bool Set(const std::string& name, const std::string& value, const std::string& origin,
           std::string* error);
  bool LoadConfigFile(const std::string& path, std::string* error);
  std::map<std::string, std::vector<std::string>> AliasesByFlag() const;

  std::string program_;
  std::string summary_;
  std::vector<Flag> flags_;                     // in declaration order, the built-in ones first
  std::map<std::string, size_t> index_;         // name -> flags_ index
  std::map<std::string, std::string> aliases_;  // alias -> flag
  std::map<std::string, std::string> ignored_;  // name -> why it is ignored
  std::map<std::string, bool> explicit_;        // flags given on the command line
  std::vector<std::string> warnings_;
  std::map<std::string, bool> warned_;
  std::string config_path_;
  std::string* log_level_ = nullptr;
  int64_t verbosity_ = 0;
  bool help_requested_ = false;
  bool version_requested_ = false;
};

// Parses or exits: prints usage and exits 0 on --help, the version on --version, prints
// the error and exits 2 on a bad flag; with -v >= 1 logs at debug; logs each of
// warnings() as a warning. Every binary's main() starts with this.
void ParseFlagsOrExit(FlagSet* flags, int argc, char** argv);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_FLAGS_H_

// Command-line flags and config files for every binary.
//
// A binary declares its flags (each bound to a variable holding the default), then calls
// Parse(). Flags are written "--name value" or "--name=value"; "--config FILE" loads a YAML
// or JSON map with the same keys. A flag given on the command line wins over the file.
// Unknown flags, unknown config keys and malformed values are errors that name the culprit.
//
// Mooncake's own spellings are accepted too (common/mooncake_compat.h): an alias is a second
// name of a flag, and an ignored setting is one of Mooncake's that this binary knows but
// does not implement: given anywhere, it is skipped with one warning (warnings()), so that
// an operator's existing command line or conf/master.yaml starts it.
#ifndef MOONCAKE_COMMON_FLAGS_H_
#define MOONCAKE_COMMON_FLAGS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mooncake {

class FlagSet {
 public:
  explicit FlagSet(std::string program, std::string summary);

  void AddString(const std::string& name, std::string* value, const std::string& help);
  void AddInt(const std::string& name, int64_t* value, const std::string& help);
  void AddDouble(const std::string& name, double* value, const std::string& help);
  // "--name", "--name=true|false", "--name true|false" (also 1/0, yes/no).
  void AddBool(const std::string& name, bool* value, const std::string& help);
  // Sizes such as "16MB" (see ParseSize).
  void AddSize(const std::string& name, uint64_t* value, const std::string& help);
  // Durations stored in milliseconds; a bare number is in default_unit_ms.
  void AddDuration(const std::string& name, int64_t* value_ms, int64_t default_unit_ms,
                   const std::string& help);
  // A string restricted to one of choices.
  void AddChoice(const std::string& name, std::string* value,
                 const std::vector<std::string>& choices, const std::string& help);

  // A second name of the flag target (declared before), on the command line and in config
  // files alike; "config" names the --config option itself.
  void AddAlias(const std::string& alias, const std::string& target);
  // A setting another implementation has and this binary does not implement: given, it is
  // skipped with a warning "--name is ignored: reason". On the command line its value is
  // "--name=V", or the next argument unless that starts with "--" (a bare boolean).
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
  std::string Usage() const;
  const std::string& program() const { return program_; }

 private:
  struct Flag {
    std::string help;
    std::string default_text;
    bool is_bool = false;
    std::function<bool(const std::string&)> set;  // false: malformed value
    std::string expected{};  // what a malformed value should have been, for the error
  };

  void Add(const std::string& name, Flag flag);
  // The flag an alias names (name itself otherwise).
  std::string Canonical(const std::string& name) const;
  void NoteIgnored(const std::string& name, const std::string& origin);
  bool Set(const std::string& name, const std::string& value, const std::string& origin,
           std::string* error);
  bool LoadConfigFile(const std::string& path, std::string* error);

  std::string program_;
  std::string summary_;
  std::map<std::string, Flag> flags_;
  std::map<std::string, std::string> aliases_;  // alias -> flag
  std::map<std::string, std::string> ignored_;  // name -> why it is ignored
  std::map<std::string, bool> explicit_;        // flags given on the command line
  std::vector<std::string> warnings_;
  std::map<std::string, bool> warned_;
  std::string config_path_;
  bool help_requested_ = false;
  bool version_requested_ = false;
};

// Parses or exits: prints usage and exits 0 on --help, the version on --version, prints
// the error and exits 2 on a bad flag; logs each of warnings() as a warning. Every
// binary's main() starts with this.
void ParseFlagsOrExit(FlagSet* flags, int argc, char** argv);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_FLAGS_H_

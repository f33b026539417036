// Command-line flags and config files for every binary.
//
// A binary declares its flags (each bound to a variable holding the default), then calls
// Parse(). Flags are written "--name value" or "--name=value"; "--config FILE" loads a YAML
// or JSON map with the same keys. A flag given on the command line wins over the file.
// Unknown flags, unknown config keys and malformed values are errors that name the culprit.
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

  // Parses argv (argv[0] is skipped), then the --config file if one was given.
  // Returns false with *error set on the first problem.
  bool Parse(int argc, char** argv, std::string* error);

  // True after Parse() saw --help; the caller prints Usage() and exits 0.
  bool help_requested() const { return help_requested_; }
  std::string Usage() const;

 private:
  struct Flag {
    std::string help;
    std::string default_text;
    bool is_bool = false;
    std::function<bool(const std::string&)> set;  // false: malformed value
  };

  void Add(const std::string& name, Flag flag);
  bool Set(const std::string& name, const std::string& value, const std::string& origin,
           std::string* error);
  bool LoadConfigFile(const std::string& path, std::string* error);

  std::string program_;
  std::string summary_;
  std::map<std::string, Flag> flags_;
  std::map<std::string, bool> explicit_;  // flags given on the command line
  std::string config_path_;
  bool help_requested_ = false;
};

// Parses or exits: prints usage and exits 0 on --help, prints the error and exits 2 on a
// bad flag. Every binary's main() starts with this.
void ParseFlagsOrExit(FlagSet* flags, int argc, char** argv);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_FLAGS_H_

#include "common/flags.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/logging.h"
#include "common/units.h"
#include "common/version.h"

namespace mooncake {

namespace {

bool ParseBool(const std::string& text, bool* value) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") {
    *value = true;
  } else if (text == "false" || text == "0" || text == "no" || text == "off") {
    *value = false;
  } else {
    return false;
  }
  return true;
}

bool ParseInt(const std::string& text, int64_t* value) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *value = v;
  return true;
}

bool ParseDouble(const std::string& text, double* value) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0') return false;
  *value = v;
  return true;
}

}  // namespace

FlagSet::FlagSet(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagSet::Add(const std::string& name, Flag flag) { flags_[name] = std::move(flag); }

void FlagSet::AddString(const std::string& name, std::string* value, const std::string& help) {
  Add(name, {help, *value, false, [value](const std::string& v) {
               *value = v;
               return true;
             }});
}

void FlagSet::AddInt(const std::string& name, int64_t* value, const std::string& help) {
  Add(name, {help, std::to_string(*value), false,
             [value](const std::string& v) { return ParseInt(v, value); }});
}

void FlagSet::AddDouble(const std::string& name, double* value, const std::string& help) {
  std::ostringstream def;
  def << *value;
  Add(name, {help, def.str(), false,
             [value](const std::string& v) { return ParseDouble(v, value); }});
}

void FlagSet::AddBool(const std::string& name, bool* value, const std::string& help) {
  Add(name, {help, *value ? "true" : "false", true,
             [value](const std::string& v) { return ParseBool(v, value); }});
}

void FlagSet::AddSize(const std::string& name, uint64_t* value, const std::string& help) {
  Add(name, {help, std::to_string(*value), false,
             [value](const std::string& v) { return ParseSize(v, value); }});
}

void FlagSet::AddDuration(const std::string& name, int64_t* value_ms, int64_t default_unit_ms,
                          const std::string& help) {
  Add(name, {help, std::to_string(*value_ms / default_unit_ms), false,
             [value_ms, default_unit_ms](const std::string& v) {
               return ParseDuration(v, default_unit_ms, value_ms);
             }});
}

void FlagSet::AddChoice(const std::string& name, std::string* value,
                        const std::vector<std::string>& choices, const std::string& help) {
  std::string joined;
  for (const auto& c : choices) joined += (joined.empty() ? "" : "|") + c;
  Add(name, {help + " (" + joined + ")", *value, false,
             [value, choices](const std::string& v) {
               for (const auto& c : choices) {
                 if (v == c) {
                   *value = v;
                   return true;
                 }
               }
               return false;
             }});
  flags_[name].expected = joined;
}

void FlagSet::AddAlias(const std::string& alias, const std::string& target) {
  aliases_[alias] = target;
}

void FlagSet::AddIgnored(const std::string& name, const std::string& reason) {
  ignored_[name] = reason;
}

std::string FlagSet::Canonical(const std::string& name) const {
  auto it = aliases_.find(name);
  return it == aliases_.end() ? name : it->second;
}

void FlagSet::NoteIgnored(const std::string& name, const std::string& origin) {
  if (warned_[name]) return;
  warned_[name] = true;
  warnings_.push_back("--" + name + origin + " is ignored: " + ignored_[name]);
}

bool FlagSet::Set(const std::string& name, const std::string& value, const std::string& origin,
                  std::string* error) {
  auto it = flags_.find(name);
  if (it == flags_.end()) {
    *error = "unknown flag --" + name + origin;
    return false;
  }
  if (!it->second.set(value)) {
    *error = "malformed value '" + value + "' for --" + name + origin;
    if (!it->second.expected.empty()) *error += " (expected " + it->second.expected + ")";
    return false;
  }
  return true;
}

bool FlagSet::Parse(int argc, char** argv, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_requested_ = true;
      return true;
    }
    if (arg == "--version") {
      version_requested_ = true;
      return true;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      *error = "unexpected argument '" + arg + "' (flags are written --name value)";
      return false;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    name = Canonical(name);
    if (ignored_.count(name)) {
      // Its type is unknown here: a value is whatever follows unless that is a flag.
      if (!has_value && i + 1 < argc && std::string(argv[i + 1]).compare(0, 2, "--") != 0) ++i;
      NoteIgnored(name, "");
      explicit_[name] = true;  // the same key in the config file is not reported again
      continue;
    }
    if (name == "config") {
      if (!has_value) {
        if (i + 1 >= argc) {
          *error = "--config needs a file name";
          return false;
        }
        value = argv[++i];
      }
      config_path_ = value;
      continue;
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      *error = "unknown flag --" + name;
      return false;
    }
    if (!has_value) {
      bool next_is_bool = false, ignored;
      if (it->second.is_bool) {
        next_is_bool = i + 1 < argc && ParseBool(argv[i + 1], &ignored);
        if (!next_is_bool) {
          value = "true";  // bare "--flag"
          has_value = true;
        }
      }
      if (!has_value) {
        if (i + 1 >= argc) {
          *error = "--" + name + " needs a value";
          return false;
        }
        value = argv[++i];
      }
    }
    if (!Set(name, value, "", error)) return false;
    explicit_[name] = true;
  }
  if (!config_path_.empty()) return LoadConfigFile(config_path_, error);
  return true;
}

bool FlagSet::LoadConfigFile(const std::string& path, std::string* error) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);  // JSON is YAML, so one parser reads both
  } catch (const std::exception& e) {
    *error = "cannot read config file " + path + ": " + e.what();
    return false;
  }
  if (root.IsNull()) return true;
  if (!root.IsMap()) {
    *error = "config file " + path + " must hold a map of flag names to values";
    return false;
  }
  for (const auto& entry : root) {
    // A key that is itself a list or a map ({[a, b]: 1}) has no string to convert to: as<>
    // would throw out of here and take the process down.
    if (!entry.first.IsScalar()) {
      *error = "config file " + path + " has a key that is not a flag name";
      return false;
    }
    std::string name = Canonical(entry.first.Scalar());
    if (ignored_.count(name)) {  // whatever its value's shape
      if (!explicit_.count(name)) NoteIgnored(name, " (in " + path + ")");
      continue;
    }
    if (!entry.second.IsScalar()) {
      *error = "config key '" + name + "' in " + path + " must have a single value";
      return false;
    }
    if (explicit_.count(name)) continue;  // the command line wins
    if (name == "config") {
      *error = "config file " + path + " cannot name another config file";
      return false;
    }
    if (!Set(name, entry.second.Scalar(), " (in " + path + ")", error)) return false;
  }
  return true;
}

std::string FlagSet::Usage() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [--flag value ...] [--config FILE]\n" << summary_ << "\n\n";
  std::map<std::string, std::string> also;  // flag -> its aliases
  for (const auto& [alias, target] : aliases_) also[target] += " --" + alias;
  for (const auto& [name, flag] : flags_) {
    out << "  --" << name << "  " << flag.help << " [default: " << flag.default_text << "]";
    if (also.count(name)) out << " (also:" << also[name] << ")";
    out << "\n";
  }
  out << "  --config  YAML or JSON file with the same keys; command-line flags win";
  if (also.count("config")) out << " (also:" << also["config"] << ")";
  out << "\n  --version  print the version and exit\n";
  if (!ignored_.empty()) {
    out << "\nAccepted and ignored, each with a warning (Mooncake's settings not implemented "
           "here; docs/operations.md, \"Compatibility\"):\n ";
    for (const auto& [name, reason] : ignored_) out << " " << name;
    out << "\n";
  }
  return out.str();
}

void ParseFlagsOrExit(FlagSet* flags, int argc, char** argv) {
  std::string error;
  if (!flags->Parse(argc, argv, &error)) {
    std::fprintf(stderr, "%s: %s\n(see --help)\n", argv[0], error.c_str());
    std::exit(2);
  }
  if (flags->help_requested()) {
    std::fputs(flags->Usage().c_str(), stdout);
    std::exit(0);
  }
  if (flags->version_requested()) {
    std::printf("%s %s\n", flags->program().c_str(), MooncakeVersion());
    std::exit(0);
  }
  for (const std::string& warning : flags->warnings()) MC_LOG_WARN("%s", warning.c_str());
}

}  // namespace mooncake

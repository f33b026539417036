// FlagSet: declarations, the command line through CLI11, flag files and config files.
// The help text and the docs' tables are in flags_help.cc.
#include "common/base/flags.h"

#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/base/logging.h"
#include "common/base/text.h"
#include "common/base/units.h"
#include "common/base/version.h"

namespace mooncake {

namespace {

// Flag files may include flag files; a file that includes itself stops here.
constexpr int kMaxFlagfileDepth = 16;
// A flag file is a few lines: anything bigger was named by mistake (a log, /dev/zero).
constexpr size_t kMaxFlagfileBytes = 1 << 20;

bool ParseBool(const std::string& text, bool* value) {
  std::string t = text;
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "true" || t == "1" || t == "yes" || t == "on" || t == "t" || t == "y") {
    *value = true;
  } else if (t == "false" || t == "0" || t == "no" || t == "off" || t == "f" || t == "n") {
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

// The exact text of a size, in the biggest unit that divides it: "1GiB", "64MiB", "4096".
std::string SizeText(uint64_t bytes) {
  static const char* kUnits[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4 && bytes != 0; ++i) {
    const uint64_t unit = 1ull << (10 * (4 - i));
    if (bytes % unit == 0) return std::to_string(bytes / unit) + kUnits[i];
  }
  return std::to_string(bytes);
}

// A duration in the flag's own unit, with that unit written: "10000ms", "60s".
std::string DurationText(int64_t ms, int64_t default_unit_ms) {
  if (default_unit_ms == 1000 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

// Edit distance, for "did you mean".
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

FlagSet::FlagSet(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {
  // Built-in: Parse() handles them itself (config, flagfile, help, version), or they set
  // FlagSet's own state (v).
  Add({"config", "YAML or JSON map of flag names to values; flags on the command line win", "FILE",
       "",
       [this](const std::string& v) {
         config_path_ = v;
         return true;
       },
       "", true});
  Add({"flagfile",
       "gflags' flag file: one flag per line (--name=value), # comments; nested flag files "
       "too; its flags stand where it does",
       "FILE", "", nullptr, "", true});
  Add({"v", "glog's verbosity (also -v=N, -v N): N >= 1 logs at debug", "N", "0",
       [this](const std::string& v) { return ParseInt(v, &verbosity_); }, "an integer", true});
  Add({"help", "print this help and exit (also -h)", "", "", nullptr, "", true});
  Add({"version", "print \"" + program_ + " VERSION\" and exit", "", "", nullptr, "", true});
}

void FlagSet::Add(Flag flag) {
  index_[flag.name] = flags_.size();
  flags_.push_back(std::move(flag));
}

void FlagSet::AddString(const std::string& name, std::string* value, const std::string& help) {
  Add({name, help, "TEXT", *value, [value](const std::string& v) {
         *value = v;
         return true;
       }});
}

void FlagSet::AddInt(const std::string& name, int64_t* value, const std::string& help) {
  Add({name, help, "INT", std::to_string(*value),
       [value](const std::string& v) { return ParseInt(v, value); }, "an integer"});
}

void FlagSet::AddDouble(const std::string& name, double* value, const std::string& help) {
  std::ostringstream def;
  def << *value;
  Add({name, help, "NUMBER", def.str(),
       [value](const std::string& v) { return ParseDouble(v, value); }, "a number"});
}

void FlagSet::AddBool(const std::string& name, bool* value, const std::string& help) {
  Add({name, help, "", *value ? "true" : "false",
       [value](const std::string& v) { return ParseBool(v, value); },
       "true or false (also 1/0, yes/no, on/off)"});
}

void FlagSet::AddSize(const std::string& name, uint64_t* value, const std::string& help) {
  Add({name, help, "SIZE", SizeText(*value),
       [value](const std::string& v) { return ParseSize(v, value); }, kSizeSyntax});
}

void FlagSet::AddDuration(const std::string& name, int64_t* value_ms, int64_t default_unit_ms,
                          const std::string& help) {
  // What a bare number is in: its VALUE name in --help, and said again in an error.
  std::string value_name = "DURATION", expected = "a duration such as 250ms, 10s, 5m or 1h";
  if (default_unit_ms == 1 || default_unit_ms == 1000) {
    value_name = default_unit_ms == 1 ? "MS" : "SECONDS";
    expected += default_unit_ms == 1 ? ", or a bare number of ms" : ", or a bare number of s";
  }
  Add({name, help, value_name, DurationText(*value_ms, default_unit_ms),
       [value_ms, default_unit_ms](const std::string& v) {
         return ParseDuration(v, default_unit_ms, value_ms);
       },
       expected});
}

void FlagSet::AddChoice(const std::string& name, std::string* value,
                        const std::vector<std::string>& choices, const std::string& help) {
  std::string joined;
  for (const auto& c : choices) joined += (joined.empty() ? "" : "|") + c;
  Add({name, help, joined, *value,
       [value, choices](const std::string& v) {
         if (std::find(choices.begin(), choices.end(), v) == choices.end()) return false;
         *value = v;
         return true;
       },
       joined});
}

void FlagSet::AddLogLevel(std::string* level) {
  AddChoice("log_level", level, {"debug", "info", "warning", "error"},
            "least severe level logged; POST /log_level on the admin HTTP port changes it "
            "at run time; -v=1 is debug");
  log_level_ = level;
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

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &flags_[it->second];
}

FlagSet::Kind FlagSet::KindOf(const std::string& name) const {
  const std::string canonical = Canonical(name);
  if (ignored_.count(canonical)) return Kind::kIgnored;
  if (const Flag* flag = Find(canonical)) {
    if (flag->name == "flagfile") return Kind::kFlagfile;
    return flag->value_name.empty() ? Kind::kBool : Kind::kValue;
  }
  if (name.size() > 2 && name.compare(0, 2, "no") == 0) {
    const std::string rest = Canonical(name.substr(2));
    if (ignored_.count(rest)) return Kind::kIgnored;
    const Flag* flag = Find(rest);
    if (flag != nullptr && flag->value_name.empty() && !flag->builtin) return Kind::kNegatedBool;
  }
  return Kind::kUnknown;
}

bool FlagSet::Rewrite(const std::vector<std::string>& in, int depth, Rewritten* out,
                      std::string* error) const {
  bool literal;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& arg = in[i];
    if (arg == "--") {  // gflags' end of flags: these programs take nothing after it
      *error = "unexpected argument '--' (flags are written --name=value)";
      return false;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      out->args.push_back(arg);
      continue;
    }
    const size_t dashes = arg[1] == '-' ? 2 : 1;
    const std::string body = arg.substr(dashes);
    const size_t eq = body.find('=');
    const std::string name = body.substr(0, eq);
    const Kind kind = KindOf(name);
    if (kind == Kind::kUnknown) {  // CLI11 names it
      out->args.push_back(arg);
      continue;
    }
    out->names.insert(Canonical(name));
    if (name.compare(0, 2, "no") == 0) out->names.insert(Canonical(name.substr(2)));
    const std::string flag = "--" + name;
    const bool has_value = eq != std::string::npos;
    const std::string value = has_value ? body.substr(eq + 1) : "";
    if (kind == Kind::kFlagfile) {
      if (!has_value && i + 1 == in.size()) {
        *error = "--flagfile needs a file name";
        return false;
      }
      if (!ReadFlagfile(has_value ? value : in[++i], depth, out, error)) return false;
    } else if (kind == Kind::kValue && !has_value) {
      // The value follows, whatever it looks like ("-1", "-v=1" for a spawned process):
      // kept as written.
      out->args.push_back(flag);
      if (i + 1 < in.size()) out->args.push_back(in[++i]);
    } else if (kind == Kind::kValue && value.empty()) {
      // "--name=": CLI11 would take the next argument as the value; gflags sets "".
      out->args.push_back(flag);
      out->args.push_back("");
    } else if (kind == Kind::kBool && !has_value && i + 1 < in.size() &&
               ParseBool(in[i + 1], &literal)) {
      out->args.push_back(flag + "=" + in[++i]);  // "--name false", as this parser always took it
    } else {
      out->args.push_back(has_value ? flag + "=" + value : flag);
    }
  }
  return true;
}

bool FlagSet::ReadFlagfile(const std::string& path, int depth, Rewritten* out,
                           std::string* error) const {
  if (depth >= kMaxFlagfileDepth) {
    *error = "--flagfile " + path + ": flag files nested deeper than " +
             std::to_string(kMaxFlagfileDepth) + " (does one include itself?)";
    return false;
  }
  std::ifstream file(path);
  std::string text(kMaxFlagfileBytes + 1, '\0');
  text.resize(file ? static_cast<size_t>(file.read(&text[0], text.size()).gcount()) : 0);
  if (!file && !file.eof()) {
    *error = "--flagfile " + path + ": cannot read it";
    return false;
  }
  if (text.size() > kMaxFlagfileBytes) {
    *error = "--flagfile " + path + ": bigger than 1 MiB, so no flag file";
    return false;
  }
  std::istringstream lines_in(text);
  std::vector<std::string> lines;
  std::string line;
  for (int number = 1; std::getline(lines_in, line); ++number) {
    line = Trim(line, " \t\r");
    if (line.empty() || line[0] == '#') continue;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    if (line[0] != '-') {
      *error = where + "'" + line + "' is not a flag (gflags' per-program sections are not " +
               "supported: one --name=value per line)";
      return false;
    }
    const size_t eq = line.find('=');
    const std::string name = line.substr(0, eq);
    const std::string bare = name.substr(std::min(name.find_first_not_of('-'), name.size()));
    if (name.find_first_of(" \t") != std::string::npos ||
        (eq == std::string::npos && KindOf(bare) == Kind::kValue)) {
      // A value on the next line, or after the file, would be taken for this flag's.
      *error = where + "'" + line + "' is not one flag with its value: write --name=value";
      return false;
    }
    lines.push_back(line);
  }
  return Rewrite(lines, depth + 1, out, error);
}

std::string FlagSet::Unexpected(const std::string& arg) const {
  if (arg.size() < 2 || arg[0] != '-' || arg == "--") {
    return "unexpected argument '" + arg + "' (flags are written --name=value)";
  }
  const size_t dashes = arg[1] == '-' ? 2 : 1;
  const std::string name = arg.substr(dashes, arg.find('=') - dashes);
  const std::string shown = arg.substr(0, dashes) + name;
  if (name.size() > 2 && name.compare(0, 2, "no") == 0) {
    const Flag* flag = Find(Canonical(name.substr(2)));
    if (flag != nullptr && !flag->value_name.empty()) {
      return shown + ": --" + flag->name + " is not a boolean; give it a value (--" + flag->name +
             "=" + flag->value_name + ")";
    }
  }
  // The nearest known name, when one is close and no other is as close.
  std::vector<std::string> known;
  for (const Flag& f : flags_) known.push_back(f.name);
  for (const auto& [alias, target] : aliases_) known.push_back(alias);
  for (const auto& [ignored, reason] : ignored_) known.push_back(ignored);
  // Up to one edit in a name of 4 characters or more, two from 8: anything further is a
  // guess, not an obvious typo.
  std::string message = "unknown flag " + shown;
  const size_t most = name.size() >= 8 ? 2 : name.size() >= 4 ? 1 : 0;
  std::string best;
  size_t best_distance = most + 1;
  bool tie = false;
  for (const std::string& k : known) {
    if (k.size() > name.size() + most || name.size() > k.size() + most) continue;  // too far
    const size_t d = Distance(name, k);
    if (d < best_distance) {
      best = k;
      best_distance = d;
      tie = false;
    } else if (d == best_distance && !best.empty()) {
      tie = true;
    }
  }
  if (!best.empty() && !tie) message += " (did you mean --" + best + "?)";
  return message;
}

void FlagSet::NoteIgnored(const std::string& name, const std::string& origin) {
  if (warned_[name]) return;
  warned_[name] = true;
  warnings_.push_back("--" + name + origin + " is ignored: " + ignored_[name]);
}

bool FlagSet::Set(const std::string& name, const std::string& value, const std::string& origin,
                  std::string* error) {
  const Flag* flag = Find(name);
  if (flag == nullptr || flag->set == nullptr) {
    *error = "unknown flag --" + name + origin;
    return false;
  }
  if (!flag->set(value)) {
    *error = "malformed value '" + value + "' for --" + name + origin;
    if (!flag->expected.empty()) *error += " (expected " + flag->expected + ")";
    return false;
  }
  return true;
}

bool FlagSet::Parse(int argc, char** argv, std::string* error) {
  Rewritten rewritten;
  if (!Rewrite(std::vector<std::string>(argv + 1, argv + argc), 0, &rewritten, error)) {
    return false;
  }

  // The flags the command line mentions (and the built-in ones) as CLI11 options, each bound
  // to the text it was given last.
  CLI::App app(summary_, program_);
  app.set_help_flag();  // ours is an ordinary flag: --help prints our Usage()
  app.allow_extras();   // what is left over is reported below, with a better message
  const auto aliases = AliasesByFlag();
  std::vector<std::string> given(flags_.size());
  std::vector<CLI::Option*> options(flags_.size(), nullptr);
  std::map<const CLI::Option*, std::string> ignored_options;  // -> the setting's name
  std::string unused;
  try {
    for (size_t i = 0; i < flags_.size(); ++i) {
      const Flag& flag = flags_[i];
      // A flag file is expanded already; a flag not given needs no option.
      if (flag.name == "flagfile" || (!flag.builtin && !rewritten.names.count(flag.name))) {
        continue;
      }
      std::vector<std::string> names = {flag.name};
      if (aliases.count(flag.name)) {
        names.insert(names.end(), aliases.at(flag.name).begin(), aliases.at(flag.name).end());
      }
      std::string spec;
      for (const std::string& n : names) spec += ",--" + n;
      if (flag.name == "help") spec += ",-h";
      if (flag.value_name.empty()) {
        if (!flag.builtin) {
          for (const std::string& n : names) {
            if (KindOf("no" + n) == Kind::kNegatedBool) spec += ",!--no" + n;
          }
        }
        options[i] = app.add_flag(spec.substr(1), given[i]);
      } else {
        options[i] = app.add_option(spec.substr(1), given[i])->take_last();
      }
    }
    for (const auto& [name, reason] : ignored_) {
      if (!rewritten.names.count(name)) continue;
      // Its type is unknown here: its value is whatever follows unless that is a flag.
      ignored_options[app.add_option("--" + name, unused)->expected(0, 1)] = name;
      if (!Find("no" + name) && !aliases_.count("no" + name) && !ignored_.count("no" + name)) {
        ignored_options[app.add_flag("--no" + name)] = name;
      }
    }
  } catch (const CLI::Error& e) {  // two declarations of one name: a bug of the binary
    *error = std::string("flags declared twice: ") + e.what();
    return false;
  }

  std::vector<std::string> reversed(rewritten.args.rbegin(), rewritten.args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11 says "--name: 1 required TEXT missing".
    const std::string what = e.what();
    *error =
        what.compare(0, 2, "--") == 0 ? what.substr(0, what.find(':')) + " needs a value" : what;
    return false;
  } catch (const CLI::Error& e) {
    *error = e.what();
    return false;
  }
  const std::vector<std::string> left = app.remaining();
  if (!left.empty()) {
    *error = Unexpected(left.front());
    return false;
  }
  if (options[index_.at("help")]->count() > 0) {
    help_requested_ = true;
    return true;
  }
  if (options[index_.at("version")]->count() > 0) {
    version_requested_ = true;
    return true;
  }
  for (size_t i = 0; i < flags_.size(); ++i) {
    if (options[i] == nullptr || options[i]->count() == 0 || flags_[i].set == nullptr) continue;
    if (!Set(flags_[i].name, given[i], "", error)) return false;
    explicit_[flags_[i].name] = true;
  }
  for (const CLI::Option* option : app.parse_order()) {  // warned in the order given
    auto it = ignored_options.find(option);
    if (it == ignored_options.end()) continue;
    NoteIgnored(it->second, "");
    explicit_[it->second] = true;  // the same key in the config file is not reported again
  }
  if (!config_path_.empty() && !LoadConfigFile(config_path_, error)) return false;
  if (verbosity_ >= 1 && log_level_ != nullptr) *log_level_ = "debug";
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
    if (name == "config" || name == "flagfile") {
      *error = "config file " + path + " cannot name another file (" + name + ")";
      return false;
    }
    if (!Set(name, entry.second.Scalar(), " (in " + path + ")", error)) return false;
  }
  return true;
}

std::map<std::string, std::vector<std::string>> FlagSet::AliasesByFlag() const {
  std::map<std::string, std::vector<std::string>> by_flag;
  for (const auto& [alias, target] : aliases_) by_flag[target].push_back(alias);
  return by_flag;
}

void ParseFlagsOrExit(FlagSet* flags, int argc, char** argv) {
  std::string error;
  if (!flags->Parse(argc, argv, &error)) {
    std::fprintf(stderr, "%s: %s\n(see %s --help)\n", argv[0], error.c_str(), argv[0]);
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
  // A binary without --log_level (the benchmarks) still honours -v.
  if (flags->verbosity() >= 1) SetLogLevel(LogLevel::kDebug);
  for (const std::string& warning : flags->warnings()) MC_LOG_WARN("%s", warning.c_str());
}

}  // namespace mooncake

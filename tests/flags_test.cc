// FlagSet's command line (common/base/flags.h), in process:
//  - every gflags spelling sets its flag: --name=value, --name value, -name=value,
//    -name value; booleans --name, --noname, --name=true|false|1|0|yes|no, -name, -noname,
//    and --name false; glog's -v=N, --v=N, -v N (N >= 1: log level debug);
//  - errors name the flag: unknown (with the nearest name when one is obvious), a malformed
//    value, a missing value, a fractional size without a unit, --noX on a non-boolean;
//  - --flagfile: comments and blank lines skipped, nested files expanded where they stand,
//    later flags win, a missing or self-including file is an error naming it;
//  - the config file fills what the command line (and its flag files) did not give;
//  - --help's text has one block per flag with its real default, and the Markdown table
//    the docs hold the same.
#include "common/base/flags.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

namespace {

using mooncake::FlagSet;

std::string g_dir;

struct Flags {
  std::string name = "default";
  int64_t count = 1;
  double ratio = 0.5;
  bool verbose = false;
  bool cache = true;
  uint64_t size = 0;
  int64_t ttl_ms = 0;
  int64_t wait_ms = 2000;
  std::string mode = "a";
  std::string log_level = "info";
  std::string error;
  FlagSet set{"prog", "A program for the tests."};
  Flags() {
    set.AddString("name", &name, "a name");
    set.AddInt("count", &count, "how many");
    set.AddDouble("ratio", &ratio, "a fraction");
    set.AddBool("verbose", &verbose, "say more");
    set.AddBool("cache", &cache, "remember");
    set.AddSize("size", &size, "how big");
    set.AddDuration("ttl_sec", &ttl_ms, 1000, "how long");
    set.AddDuration("wait", &wait_ms, 1, "how long to wait");
    set.AddChoice("mode", &mode, {"a", "b"}, "which way");
    set.AddLogLevel(&log_level);
    set.AddAlias("port", "count");
    set.AddAlias("config_path", "config");
    set.AddIgnored("rpc_interface", "why");
    set.AddIgnored("logtostderr", "logs go to stderr");
  }
  bool Parse(std::vector<std::string> args) {
    args.insert(args.begin(), "prog");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    error.clear();
    return set.Parse(static_cast<int>(argv.size()), argv.data(), &error);
  }
};

// A file under g_dir holding text; its path.
std::string Write(const std::string& name, const std::string& text) {
  const std::string path = g_dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

void ExpectError(std::vector<std::string> args, const char* wanted) {
  Flags f;
  if (f.Parse(args)) fail_msg("%s: parsed", args.front().c_str());
  if (strstr(f.error.c_str(), wanted) == nullptr) {
    fail_msg("error \"%s\" does not say \"%s\"", f.error.c_str(), wanted);
  }
}

void TestValueSpellings(void**) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--count=7", "--name=x", "--size=16MB"},
                                             {"--count", "7", "--name", "x", "--size", "16MB"},
                                             {"-count=7", "-name=x", "-size=16MB"},
                                             {"-count", "7", "-name", "x", "-size", "16MB"},
                                             {"-port=7", "--name", "x", "-size", "16 MB"}}) {
    Flags f;
    assert_true(f.Parse(args));
    assert_int_equal(f.count, 7);
    assert_string_equal(f.name.c_str(), "x");
    assert_int_equal(f.size, 16 << 20);
  }
  Flags f;
  assert_true(f.Parse({"-ttl_sec=2", "--wait", "1.5s", "-mode", "b", "--ratio=0.25"}));
  assert_int_equal(f.ttl_ms, 2000);
  assert_int_equal(f.wait_ms, 1500);
  assert_string_equal(f.mode.c_str(), "b");
  assert_true(f.ratio == 0.25);
  // A value is taken as written, even one that looks like a flag; "--name=" is empty.
  Flags g;
  assert_true(g.Parse({"--name", "-v=1", "--count", "-5"}));
  assert_string_equal(g.name.c_str(), "-v=1");
  assert_int_equal(g.count, -5);
  assert_int_equal(g.set.verbosity(), 0);
  Flags h;
  assert_true(h.Parse({"--name=", "--count=3"}));
  assert_string_equal(h.name.c_str(), "");
  assert_int_equal(h.count, 3);
  // The last of a flag given twice wins, as in gflags.
  Flags k;
  assert_true(k.Parse({"--count=1", "-count", "2", "--port=3"}));
  assert_int_equal(k.count, 3);
}

void TestBooleanSpellings(void**) {
  struct Case {
    std::vector<std::string> args;
    bool verbose;
    bool cache;
  };
  const std::vector<Case> cases = {
      {{"--verbose", "--nocache"}, true, false},
      {{"-verbose", "-nocache"}, true, false},
      {{"--verbose=true", "--cache=false"}, true, false},
      {{"--verbose=1", "--cache=0"}, true, false},
      {{"--verbose=yes", "--cache=no"}, true, false},
      {{"-verbose=on", "-cache=off"}, true, false},
      {{"--verbose", "true", "--cache", "false"}, true, false},
      {{"--verbose", "--noverbose", "--nocache", "--cache"}, false, true},
      {{"--noverbose=false"}, true, true},
      {{}, false, true},
  };
  for (const Case& c : cases) {
    Flags f;
    assert_true(f.Parse(c.args));
    assert_int_equal(f.verbose, c.verbose);
    assert_int_equal(f.cache, c.cache);
  }
  // A bare boolean does not take the next flag for its value.
  Flags f;
  assert_true(f.Parse({"--verbose", "--count", "4"}));
  assert_true(f.verbose);
  assert_int_equal(f.count, 4);
}

void TestVerbosity(void**) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"-v=1"}, {"--v=1"}, {"-v", "2"}, {"--v", "1"}}) {
    Flags f;
    assert_true(f.Parse(args));
    assert_true(f.set.verbosity() >= 1);
    assert_string_equal(f.log_level.c_str(), "debug");
  }
  Flags quiet;
  assert_true(quiet.Parse({"-v=0", "--log_level=warning"}));
  assert_string_equal(quiet.log_level.c_str(), "warning");
  // -v wins over --log_level, and over the config file's log_level.
  Flags both;
  assert_true(both.Parse(
      {"--log_level", "error", "-v=1", "--config=" + Write("level.yaml", "log_level: warning\n")}));
  assert_string_equal(both.log_level.c_str(), "debug");
  ExpectError({"-v=x"}, "'x' for --v");
  ExpectError({"-v"}, "--v needs a value");
}

void TestErrorsNameTheFlag(void**) {
  ExpectError({"--bogus"}, "unknown flag --bogus");
  ExpectError({"-bogus=1"}, "unknown flag -bogus");
  ExpectError({"--bogus", "1"}, "unknown flag --bogus");
  ExpectError({"--verbos"}, "unknown flag --verbos (did you mean --verbose?)");
  ExpectError({"--ttl_secs=1"}, "(did you mean --ttl_sec?)");
  ExpectError({"--count=three"}, "malformed value 'three' for --count (expected an integer)");
  ExpectError({"--mode", "c"}, "malformed value 'c' for --mode (expected a|b)");
  ExpectError({"--verbose=maybe"}, "malformed value 'maybe' for --verbose");
  ExpectError({"--count"}, "--count needs a value");
  ExpectError({"--size=1.5"}, "malformed value '1.5' for --size (expected whole bytes");
  ExpectError({"--size=-1"}, "for --size");
  ExpectError({"--nocount"}, "--nocount: --count is not a boolean; give it a value (--count=INT)");
  ExpectError({"stray"}, "unexpected argument 'stray'");
  ExpectError({"--count=1", "--", "--name=x"}, "unexpected argument '--'");
  Flags f;
  assert_true(f.Parse({"--size=1.5GB"}));
  assert_int_equal(f.size, 3ull << 29);
}

void TestIgnoredSpellings(void**) {
  Flags f;
  assert_true(f.Parse({"-rpc_interface", "eth0", "--nologtostderr", "--count", "2"}));
  assert_int_equal(f.count, 2);
  assert_int_equal(f.set.warnings().size(), 2);
  assert_string_equal(f.set.warnings()[0].c_str(), "--rpc_interface is ignored: why");
  assert_string_equal(f.set.warnings()[1].c_str(), "--logtostderr is ignored: logs go to stderr");
}

void TestFlagfile(void**) {
  const std::string inner = Write("inner.flags", "# nested\n--mode=b\n-size=4KB\n");
  const std::string outer =
      Write("outer.flags", "# a comment\n\n  --count=5  \n-noverbose\n--flagfile=" + inner +
                               "\n--name=from file with spaces\n");
  Flags f;
  // Before the file: overridden by it; after it: wins over it.
  assert_true(f.Parse({"--verbose", "--mode=a", "--flagfile=" + outer, "--size", "8KB"}));
  assert_int_equal(f.count, 5);
  assert_false(f.verbose);
  assert_string_equal(f.mode.c_str(), "b");
  assert_int_equal(f.size, 8 << 10);
  assert_string_equal(f.name.c_str(), "from file with spaces");
  Flags g;
  assert_true(g.Parse({"-flagfile", outer, "--count=6"}));
  assert_int_equal(g.count, 6);
  assert_int_equal(g.size, 4 << 10);

  ExpectError({"--flagfile=" + g_dir + "/none.flags"},
              ("--flagfile " + g_dir + "/none.flags: cannot read it").c_str());
  ExpectError({"--flagfile"}, "--flagfile needs a file name");
  const std::string loop = g_dir + "/loop.flags";
  Write("loop.flags", "--flagfile=" + loop + "\n");
  ExpectError({"--flagfile", loop}, "nested deeper than");
  ExpectError({"--flagfile=" + Write("bad.flags", "--count 5\n")}, "bad.flags:1: '--count 5'");
  ExpectError({"--flagfile=" + Write("section.flags", "\n\nprog\n")}, "section.flags:3: 'prog'");
  ExpectError({"--flagfile=" + Write("unknown.flags", "--nope=1\n")}, "unknown flag --nope");
}

void TestConfigFileAndPrecedence(void**) {
  const std::string config = Write("c.yaml",
                                   "name: from-config\ncount: 9\nsize: 1.5 GiB\n"
                                   "verbose: true\nrpc_interface: eth0\n");
  const std::string flagfile = Write("c.flags", "--count=4\n");
  Flags f;
  assert_true(f.Parse({"-config_path", config, "--flagfile=" + flagfile, "--nocache"}));
  assert_string_equal(f.name.c_str(), "from-config");
  assert_int_equal(f.count, 4);  // the flag file is the command line: it wins
  assert_int_equal(f.size, 3ull << 29);
  assert_true(f.verbose);
  assert_false(f.cache);
  assert_int_equal(f.set.warnings().size(), 1);
  // The command line's --noverbose wins over the file's true.
  Flags g;
  assert_true(g.Parse({"--noverbose", "--config", config}));
  assert_false(g.verbose);
  // Sizes in config files follow the same rule as on the command line.
  Flags h;
  assert_false(h.Parse({"--config=" + Write("frac.yaml", "size: 1.5\n")}));
  assert_non_null(strstr(h.error.c_str(), "'1.5' for --size (in "));
  Flags k;
  assert_false(k.Parse({"--config=" + Write("ff.yaml", "flagfile: x\n")}));
  assert_non_null(strstr(k.error.c_str(), "cannot name another file"));
}

void TestHelpAndVersion(void**) {
  for (const char* arg : {"--help", "-h", "-help"}) {
    Flags f;
    assert_true(f.Parse({"--count=1", arg}));
    assert_true(f.set.help_requested());
  }
  Flags v;
  assert_true(v.Parse({"--version"}));
  assert_true(v.set.version_requested());

  Flags f;
  const std::string usage = f.set.Usage();
  assert_int_equal(usage.find("Usage: prog [FLAG]...\nA program for the tests.\n"), 0);
  // A block: the flag indented by two, its help from column 30 (on the next line when the
  // flag is longer), wrapped at blanks onto lines indented by 30.
  const std::vector<std::pair<std::string, std::string>> blocks = {
      {"--count=INT", "how many (also --port) (default: 1)"},
      {"--[no]cache", "remember (default: true)"},
      {"--size=SIZE", "how big (default: 0)"},
      {"--ttl_sec=SECONDS", "how long (default: 0s)"},
      {"--wait=MS", "how long to wait (default: 2000ms)"},
      {"--mode=a|b", "which way (default: a)"},
      {"--name=TEXT", "a name (default: default)"},
      {"--log_level=debug|info|warning|error",
       "least severe level logged; POST /log_level on the admin HTTP port changes it at run "
       "time; -v=1 is debug (default: info)"},
      {"--config=FILE",
       "YAML or JSON map of flag names to values; flags on the command line win (also "
       "--config_path)"},
      {"-v=N, --v=N", "glog's verbosity (also -v=N, -v N): N >= 1 logs at debug (default: 0)"},
      {"--version", "print \"prog VERSION\" and exit"},
  };
  auto literal = [](char c) {  // c in a regex
    return std::string(std::strchr("[](){}.*+?^$|\\", c) != nullptr ? "\\" : "") + c;
  };
  for (const auto& [tag, help] : blocks) {
    std::string pattern = "\n  ";
    for (char c : tag) pattern += literal(c);
    pattern += "( {2,}|\n {30})";
    for (char c : help) pattern += c == ' ' ? "( |\n {30})" : literal(c);
    pattern += "\n";
    if (!std::regex_search(usage, std::regex(pattern))) {
      fail_msg("no block %s in:\n%s", tag.c_str(), usage.c_str());
    }
  }
  assert_non_null(strstr(usage.c_str(), "\n  logtostderr rpc_interface\n"));
  // No line of the help passes 79 columns unless one word does; help text never starts a
  // line within 10 columns with a dash (help2man would take it for a flag).
  size_t start = 0;
  for (size_t end = usage.find('\n'); end != std::string::npos;
       start = end + 1, end = usage.find('\n', start)) {
    const std::string line = usage.substr(start, end - start);
    if (line.size() > 79 && line.find(' ', line.find_first_not_of(' ')) < 79) {
      fail_msg("line over 79 columns: %s", line.c_str());
    }
    const size_t text = line.find_first_not_of(' ');
    if (text != std::string::npos && text > 2 && text <= 10 && line[text] == '-') {
      fail_msg("a help line help2man would read as a flag: %s", line.c_str());
    }
  }
}

void TestMarkdownTable(void**) {
  Flags f;
  const std::string table = f.set.MarkdownTable();
  assert_int_equal(table.find("| flag | default | meaning |\n|---|---|---|\n"), 0);
  for (const char* row :
       {"| `--count=INT` | `1` | how many (also `--port`) |\n",
        "| `--mode=a\\|b` | `a` | which way |\n", "| `--verbose` | `false` | say more |\n",
        "| `--wait=MS` | `2000ms` | how long to wait |\n"}) {
    if (table.find(row) == std::string::npos) fail_msg("no \"%s\" in:\n%s", row, table.c_str());
  }
  assert_true(table.find("--config") == std::string::npos);  // every binary's flags are not
  const std::string some = f.set.MarkdownTable({"wait", "count"});
  assert_true(some.find("--wait") < some.find("--count"));
  assert_true(some.find("--name") == std::string::npos);
  // Each default reads back as the flag's value.
  for (const FlagSet::Doc& doc : f.set.Docs()) {
    Flags g;
    if (!g.Parse({"--" + doc.name + "=" + doc.default_value})) {
      fail_msg("--%s=%s: %s", doc.name.c_str(), doc.default_value.c_str(), g.error.c_str());
    }
  }
}

int Setup(void**) {
  g_dir = mooncake::testing::MakeTempDir("mc-flags");
  return g_dir.empty() ? -1 : 0;
}

int Teardown(void**) {
  mooncake::testing::RemoveTree(g_dir);
  return 0;
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(TestValueSpellings),
      cmocka_unit_test(TestBooleanSpellings),
      cmocka_unit_test(TestVerbosity),
      cmocka_unit_test(TestErrorsNameTheFlag),
      cmocka_unit_test(TestIgnoredSpellings),
      cmocka_unit_test(TestFlagfile),
      cmocka_unit_test(TestConfigFileAndPrecedence),
      cmocka_unit_test(TestHelpAndVersion),
      cmocka_unit_test(TestMarkdownTable),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}

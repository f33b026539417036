// common/text: trimming and splitting the lists flags and files carry.
#include <string>
#include <vector>

#include "common/base/text.h"
#include "tests/cmocka_cpp.h"

using namespace mooncake;

namespace {

void test_trim(void**) {
  assert_string_equal(Trim(" \ta b\t ").c_str(), "a b");
  assert_string_equal(Trim(" \t ").c_str(), "");
  assert_string_equal(Trim("").c_str(), "");
  assert_string_equal(Trim("key\r").c_str(), "key\r");  // spaces and tabs only by default
  assert_string_equal(Trim(" key\r", " \t\r").c_str(), "key");
}

void test_split_list_keeps_empty_items(void**) {
  std::vector<std::string> want = {"a", "b", "", "c"};
  assert_true(SplitList("a, b,,c", ',') == want);
  assert_true(SplitList("", ',') == std::vector<std::string>{""});
  want = {"1", "2", ""};
  assert_true(SplitList(" 1 :2:", ':') == want);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trim),
      cmocka_unit_test(test_split_list_keeps_empty_items),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}

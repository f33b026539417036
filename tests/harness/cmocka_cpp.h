// Includes CMocka from C++ test files. Debian's cmocka 1.1 header lacks extern "C", and it
// needs these C headers first.
#ifndef MOONCAKE_TESTS_CMOCKA_CPP_H_
#define MOONCAKE_TESTS_CMOCKA_CPP_H_

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#endif  // MOONCAKE_TESTS_CMOCKA_CPP_H_

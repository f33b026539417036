// The release every binary reports (--version, the start line of its log): the project's
// version in CMakeLists.txt.
#ifndef MOONCAKE_COMMON_VERSION_H_
#define MOONCAKE_COMMON_VERSION_H_

namespace mooncake {

const char* MooncakeVersion();

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_VERSION_H_

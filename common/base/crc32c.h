// CRC-32C (Castagnoli): reflected polynomial 0x82F63B78, initial value and final xor
// 0xFFFFFFFF — the checksum of iSCSI (RFC 3720), ext4 and SCTP. Crc32c("123456789") is
// 0xE3069283.
//
// Our own implementation because Debian packages none. On x86-64 CPUs with SSE4.2 (chosen
// at run time, so the build needs no -msse4.2) it runs the crc32 instruction on three
// independent streams to hide its latency, on large buffers faster than copying the same
// bytes; elsewhere a slicing-by-8 table, several times slower (bench/README.md,
// "crc32c_bench").
#ifndef MOONCAKE_COMMON_CRC32C_H_
#define MOONCAKE_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace mooncake {

// Extends crc (the CRC of the bytes before) over data[0, n). Crc32c(p, n) =
// Crc32cExtend(0, p, n), and Crc32cExtend(Crc32c(a), b) is the CRC of a followed by b.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// The CRC of a followed by b, from the CRCs of each and b's length: how a value that moved
// in chunks, in any order, gets its checksum without reading it again. About a
// microsecond (one multiplication per bit of length_b).
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

// The table-driven path whatever the CPU, for tests comparing it with the hardware path
// and for benchmarks. Production code calls Crc32cExtend.
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_CRC32C_H_

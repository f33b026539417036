// CRC-32C: a slicing-by-8 table everywhere, and the SSE4.2 crc32 instruction on three
// interleaved streams where the CPU has it. The method is Mark Adler's (crc32c.c, 2013).
//
// Every table is computed at compile time, so there is no initialization to race on.
#include "common/base/crc32c.h"

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace mooncake {

namespace {

constexpr uint32_t kPoly = 0x82F63B78;  // reflected Castagnoli polynomial

// t[k][b]: the CRC register after byte b followed by k zero bytes (from a zero register).
// Slicing-by-8 looks up the eight bytes of a word in the eight tables at once.
struct SlicingTables {
  uint32_t t[8][256];
};

constexpr SlicingTables MakeSlicingTables() {
  SlicingTables s{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
    s.t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t prev = s.t[k - 1][b];
      s.t[k][b] = (prev >> 8) ^ s.t[0][prev & 0xff];
    }
  }
  return s;
}

constexpr SlicingTables kSlicing = MakeSlicingTables();

uint32_t LoadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

#if defined(__x86_64__)

// ---- combining streams -----------------------------------------------------------------
//
// A CRC register is linear over GF(2): the register after A followed by B equals the
// register after A advanced over |B| zero bytes, xor the register after B alone (started
// at zero). Advancing over a fixed number of zeros is a 32x32 bit matrix; split into four
// byte-indexed tables it costs four lookups. That lets three streams run independently.

// A 32x32 matrix over GF(2): column[i] is the image of bit i.
struct Gf2Matrix {
  uint32_t column[32];
};

constexpr uint32_t Times(const Gf2Matrix& m, uint32_t v) {
  uint32_t r = 0;
  for (int i = 0; v != 0; ++i, v >>= 1) {
    if (v & 1) r ^= m.column[i];
  }
  return r;
}

// The operator that advances a register over `bytes` zero bytes (a power of two).
constexpr Gf2Matrix ZerosOperator(size_t bytes) {
  Gf2Matrix op{};  // over one zero bit: shift right, and xor the polynomial if bit 0 was set
  op.column[0] = kPoly;
  for (int i = 1; i < 32; ++i) op.column[i] = 1u << (i - 1);
  for (size_t bits = 1; bits < bytes * 8; bits *= 2) {  // squaring doubles the distance
    Gf2Matrix squared{};
    for (int i = 0; i < 32; ++i) squared.column[i] = Times(op, op.column[i]);
    op = squared;
  }
  return op;
}

struct ShiftTables {
  uint32_t t[4][256];  // t[k][b]: the operator applied to b << 8k
};

constexpr ShiftTables MakeShiftTables(size_t bytes) {
  Gf2Matrix op = ZerosOperator(bytes);
  ShiftTables s{};
  for (int k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) s.t[k][b] = Times(op, b << (8 * k));
  }
  return s;
}

uint32_t Shift(const ShiftTables& s, uint32_t crc) {
  return s.t[0][crc & 0xff] ^ s.t[1][(crc >> 8) & 0xff] ^ s.t[2][(crc >> 16) & 0xff] ^
         s.t[3][crc >> 24];
}

// ---- the hardware path ----------------------------------------------------------------

// Stream lengths: long enough that the two shifts per block cost little, and a short one
// so that buffers of a few KiB use all three streams too.
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;
constexpr ShiftTables kLongShift = MakeShiftTables(kLong);
constexpr ShiftTables kShortShift = MakeShiftTables(kShort);

// crc32 on a 64-bit word has a latency of three cycles but a throughput of one per cycle:
// three independent streams over p[0, 3 * kBlock) keep the unit busy.
template <size_t kBlock>
__attribute__((target("sse4.2"))) uint64_t ThreeStreams(uint64_t crc, const uint8_t* p,
                                                        const ShiftTables& shift) {
  uint64_t crc1 = 0;
  uint64_t crc2 = 0;
  for (const uint8_t* end = p + kBlock; p < end; p += 8) {
    uint64_t w0, w1, w2;
    std::memcpy(&w0, p, 8);
    std::memcpy(&w1, p + kBlock, 8);
    std::memcpy(&w2, p + 2 * kBlock, 8);
    crc = _mm_crc32_u64(crc, w0);
    crc1 = _mm_crc32_u64(crc1, w1);
    crc2 = _mm_crc32_u64(crc2, w2);
  }
  crc = Shift(shift, static_cast<uint32_t>(crc)) ^ crc1;
  return Shift(shift, static_cast<uint32_t>(crc)) ^ crc2;
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const uint8_t* p,
                                                       size_t n) {
  uint64_t c = crc ^ 0xFFFFFFFFu;
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; ++p, --n) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p);
  }
  for (; n >= 3 * kLong; p += 3 * kLong, n -= 3 * kLong) c = ThreeStreams<kLong>(c, p, kLongShift);
  for (; n >= 3 * kShort; p += 3 * kShort, n -= 3 * kShort) {
    c = ThreeStreams<kShort>(c, p, kShortShift);
  }
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  for (; n > 0; ++p, --n) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p);
  return static_cast<uint32_t>(c) ^ 0xFFFFFFFFu;
}

bool HaveSse42() {
  __builtin_cpu_init();  // may run before libgcc's own constructor did
  return __builtin_cpu_supports("sse4.2");
}

#endif  // __x86_64__

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n) {
  const auto& t = kSlicing.t;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = crc ^ 0xFFFFFFFFu;
  for (; n >= 8; p += 8, n -= 8) {
    uint32_t lo = c ^ LoadLe32(p);
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
  }
  for (; n > 0; ++p, --n) c = t[0][(c ^ *p) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
  static const bool hardware = HaveSse42();
  if (hardware) return ExtendSse42(crc, static_cast<const uint8_t*>(data), n);
#endif
  return Crc32cExtendPortable(crc, data, n);
}

namespace {

// Carry-less multiplication of a(x) and b(x) modulo the CRC-32C polynomial, both in the
// reflected bit order the CRC uses (bit 31 is x^0).
uint32_t MultiplyModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

// x^(8 n) modulo P: what a CRC is multiplied by to move it past n zero bytes.
uint32_t ShiftFactor(uint64_t n) {
  uint32_t factor = 1u << 31;  // x^0
  uint32_t power = 1u << 23;   // x^8: one byte
  for (; n != 0; n >>= 1) {
    if (n & 1) factor = MultiplyModP(factor, power);
    power = MultiplyModP(power, power);
  }
  return factor;
}

}  // namespace

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  return MultiplyModP(crc_a, ShiftFactor(length_b)) ^ crc_b;
}

}  // namespace mooncake

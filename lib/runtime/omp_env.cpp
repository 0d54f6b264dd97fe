// OMP_NUM_THREADS checked as libgomp's parse_unsigned_long_list reads it (see omp_env.h).
#include "lib/runtime/omp_env.h"

#include <climits>

namespace trainer::runtime {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

}  // namespace

bool omp_num_threads_is_valid(const char* value) {
  const char* p = value;
  while (true) {
    while (is_space(*p)) ++p;
    if (*p == '+') ++p;
    if (*p < '0' || *p > '9') return false;
    unsigned long number = 0;
    for (; *p >= '0' && *p <= '9'; ++p) {
      const unsigned long digit = static_cast<unsigned long>(*p - '0');
      if (number > (ULONG_MAX - digit) / 10) return false;
      number = number * 10 + digit;
    }
    if (number == 0) return false;
    while (is_space(*p)) ++p;
    if (*p == '\0') return true;
    if (*p != ',') return false;
    ++p;
  }
}

}  // namespace trainer::runtime

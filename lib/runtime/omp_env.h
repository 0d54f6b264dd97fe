// OMP_NUM_THREADS as libgomp reads it. libgomp reads it while the program loads, before main, and
// complains on stderr in words of its own about a value it cannot read; the trainer program
// checks it first (apps/trainer/main.cpp) so that such a value is one line of ours. Torch-free.
#pragma once

namespace trainer::runtime {

// Whether libgomp reads `value` without complaint: a comma-separated list of positive whole
// numbers, each with optional white space around it and an optional '+', none past unsigned long
// ("2", " 2 ", "2,1", "+2"; not "", "0", "-1", "2x", "1,", "1 2"). Allocates nothing: safe
// before the C++ runtime's initialisers.
bool omp_num_threads_is_valid(const char* value);

}  // namespace trainer::runtime

// bench/probe_check.hpp — CK(call): the one-off CUDA probes' check (bench/*_probe.cu):
// a non-zero status from a CUDA or cuBLAS call prints it with the place and exits.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                             \
    do {                                                                                  \
        if (auto e_ = (x); e_ != 0) {                                                     \
            std::printf("error %d at %s:%d\n", static_cast<int>(e_), __FILE__, __LINE__); \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

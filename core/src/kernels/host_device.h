// HTM_HD: a function of htm's CUDA kernels' headers (greedy_matching.h, set_assignment.h,
// pair_log_prob.h) compiled for the device and the host alike under nvcc, and for the host
// alone by the C++ compiler (their CPU drivers, the tests).
#pragma once

#if defined(__CUDACC__)
#define HTM_HD __host__ __device__
#else
#define HTM_HD
#endif

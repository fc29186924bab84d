// HTM_HD: a function of htm's CUDA kernels' headers (greedy_matching.h, set_assignment.h,
// pair_log_prob.h) compiled for the device and the host alike under nvcc, and for the host
// alone by the C++ compiler (their CPU drivers, the tests). HTM_SHARED(name): a kernel's dynamic
// shared memory as bytes; where the tests run a kernel's own code on the CPU
// (tests/cuda_emulation.h defines HTM_CUDA_EMULATION), the emulated block's.
#pragma once

#if defined(__CUDACC__)
#define HTM_HD __host__ __device__
#else
#define HTM_HD
#endif

#if defined(HTM_CUDA_EMULATION)
#define HTM_SHARED(name) unsigned char* name = ::htm::emulation::shared_memory()
#else
#define HTM_SHARED(name) extern __shared__ __align__(8) unsigned char name[]
#endif

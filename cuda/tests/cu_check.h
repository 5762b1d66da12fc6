// cu_check.h -- CU(call): run a CUDA runtime call and exit(2) with the call, file, line and CUDA's
// message when it fails. Shared by the runtime-API test programs (gcmx_device_check.cu, sweep.cu).
#ifndef GCMX_CU_CHECK_H
#define GCMX_CU_CHECK_H
#include <stdio.h>
#include <stdlib.h>

#define CU(x)                                                                                              \
    do {                                                                                                   \
        cudaError_t e_ = (x);                                                                              \
        if (e_ != cudaSuccess) {                                                                           \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_)); \
            exit(2);                                                                                       \
        }                                                                                                  \
    } while (0)

#endif  // GCMX_CU_CHECK_H

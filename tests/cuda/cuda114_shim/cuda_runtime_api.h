/* tests/cuda/cuda114_shim/cuda_runtime_api.h - the CUDA 11.4 runtime API, as much of it as pnmem uses.
 *
 * Not NVIDIA's header: a stand-in that declares ONLY what adapters/cuda/cudart_backend.cpp
 * may use at its API floor (CUDA 11.4, CUDART_VERSION 11040), so that compiling the
 * backend against this file (test cuda_cudart_api_floor, with no real toolkit on the
 * include path) proves the backend builds for an 11.4 toolkit. A call the backend makes
 * without a CUDART_VERSION guard that is missing here fails that test.
 *
 * Every symbol carries the release it first appeared in (NVIDIA's CUDA Runtime API
 * reference and toolkit release notes). "< 11.0" marks symbols present in every toolkit
 * the floor admits, where the exact first release does not matter here. Enum values and
 * signatures are those of the real headers (they are ABI and do not change).
 *
 * Deliberately absent (newer than 11.4, or not needed at the floor):
 *   cudaStreamGetId (12.0) - the backend's 11.x path assigns stream ids itself.
 *
 * Adding a symbol: only if the backend's 11.4 path needs it, with its version, after
 * checking the 11.4 documentation (docs.nvidia.com/cuda/archive/11.4.0/).
 */
#ifndef PNMEM_TEST_CUDA114_SHIM_CUDA_RUNTIME_API_H
#define PNMEM_TEST_CUDA114_SHIM_CUDA_RUNTIME_API_H

#include <stddef.h>

#define PNMEM_CUDA114_SHIM 1
#define CUDART_VERSION 11040 /* CUDA 11.4 */

#ifdef __cplusplus
extern "C" {
#endif

/* --- driver_types.h pieces ------------------------------------------------------------- */

enum cudaError {
  cudaSuccess = 0,                            /* < 11.0 */
  cudaErrorInvalidValue = 1,                  /* < 11.0 */
  cudaErrorMemoryAllocation = 2,              /* < 11.0 */
  cudaErrorInvalidDevicePointer = 17,         /* < 11.0 */
  cudaErrorStubLibrary = 34,                  /* 11.1 */
  cudaErrorInsufficientDriver = 35,           /* < 11.0 */
  cudaErrorCallRequiresNewerDriver = 36,      /* 11.1 */
  cudaErrorDevicesUnavailable = 46,           /* < 11.0 */
  cudaErrorNoDevice = 100,                    /* < 11.0 */
  cudaErrorInvalidDevice = 101,               /* < 11.0 */
  cudaErrorInvalidResourceHandle = 400,       /* < 11.0 */
  cudaErrorNotReady = 600,                    /* < 11.0 */
  cudaErrorNotSupported = 801,                /* < 11.0 */
  cudaErrorSystemNotReady = 802,              /* 10.0 */
  cudaErrorSystemDriverMismatch = 803,        /* 10.1 */
  cudaErrorCompatNotSupportedOnDevice = 804,  /* 10.1 */
  cudaErrorUnknown = 999                      /* < 11.0 */
};
typedef enum cudaError cudaError_t; /* < 11.0 */

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,     /* < 11.0 */
  cudaMemcpyHostToDevice = 1,   /* < 11.0 */
  cudaMemcpyDeviceToHost = 2,   /* < 11.0 */
  cudaMemcpyDeviceToDevice = 3, /* < 11.0 */
  cudaMemcpyDefault = 4         /* 4.0 (unified virtual addressing) */
};

enum cudaDeviceAttr {
  cudaDevAttrMemoryPoolsSupported = 115 /* 11.2 (the only attribute the backend asks) */
};

typedef struct CUuuid_st {
  char bytes[16];
} cudaUUID_t; /* 10.0 */

/* The device's properties: only the members the backend reads are declared (the real struct has
 * many more; this shim is compiled against, never linked or laid out). */
struct cudaDeviceProp {
  char name[256];   /* < 11.0 */
  cudaUUID_t uuid;  /* 10.0 */
};

typedef struct CUstream_st* cudaStream_t; /* < 11.0 */
typedef struct CUevent_st* cudaEvent_t;   /* < 11.0 */

#define cudaStreamNonBlocking 0x01  /* 5.0 */
#define cudaEventDisableTiming 0x02 /* < 11.0 (3.2) */

/* --- errors --------------------------------------------------------------------------- */
cudaError_t cudaGetLastError(void);                    /* < 11.0 */
cudaError_t cudaPeekAtLastError(void);                 /* < 11.0 */
const char* cudaGetErrorName(cudaError_t error);       /* < 11.0 */
const char* cudaGetErrorString(cudaError_t error);     /* < 11.0 */

/* --- devices -------------------------------------------------------------------------- */
cudaError_t cudaGetDeviceCount(int* count);                                         /* < 11.0 */
cudaError_t cudaGetDevice(int* device);                                             /* < 11.0 */
cudaError_t cudaSetDevice(int device);                                              /* < 11.0 */
cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device); /* 5.0 */
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);                           /* < 11.0 */
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device);       /* < 11.0 */

/* --- memory --------------------------------------------------------------------------- */
cudaError_t cudaMalloc(void** devPtr, size_t size);                                  /* < 11.0 */
cudaError_t cudaFree(void* devPtr);                                                  /* < 11.0 */
cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream);       /* 11.2 */
cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream);                       /* 11.2 */
cudaError_t cudaMallocHost(void** ptr, size_t size);                                 /* < 11.0 */
cudaError_t cudaFreeHost(void* ptr);                                                 /* < 11.0 */
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream);                                    /* < 11.0 */

/* --- streams and events ----------------------------------------------------------------- */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags);              /* 5.0 */
cudaError_t cudaStreamDestroy(cudaStream_t stream);                                            /* < 11.0 */
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags);  /* 3.2 */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);                 /* < 11.0 */
cudaError_t cudaEventDestroy(cudaEvent_t event);                                               /* < 11.0 */
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);                           /* < 11.0 */
cudaError_t cudaEventQuery(cudaEvent_t event);                                                 /* < 11.0 */

#ifdef __cplusplus
}
#endif

#endif /* PNMEM_TEST_CUDA114_SHIM_CUDA_RUNTIME_API_H */

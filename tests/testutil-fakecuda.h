/* testutil-fakecuda.h: what the driver tests share (testutil-fakecuda.c). */
#ifndef TESTUTIL_FAKECUDA_H
#define TESTUTIL_FAKECUDA_H

#include "testutil.h"

#define MiB (1024 * 1024)

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

#define CU_FAILS(call, code) g_assert_cmpint ((call), ==, (code))

/* A failure whose code cuda.h does not document: exactly @code from the fake, any error from the
 * real driver. */
#define CU_FAILS_UNDOC(call, code)                                                                 \
  do                                                                                               \
    {                                                                                              \
      CUresult r_ = (call);                                                                        \
      if (mt_driver_is_fake ())                                                                    \
        g_assert_cmpint (r_, ==, (code));                                                          \
      else                                                                                         \
        g_assert_cmpint (r_, !=, CUDA_SUCCESS);                                                    \
    }                                                                                              \
  while (0)

extern const MemresCudaDriver *drv;

gboolean setup (int n_devices);

CUmemoryPool pool_new (int device, CUmemAllocationHandleType handle_types, size_t max_size);

cuuint64_t pool_attr (CUmemoryPool pool, CUmemPool_attribute attr);

CUstream stream_new (void);

void assert_round_trip (CUdeviceptr dptr, gsize size, guint32 seed, CUstream stream);

size_t granularity (CUmemAllocationGranularity_flags which);

CUmemGenericAllocationHandle physical_new (size_t size, CUmemAllocationHandleType types);

#endif

/* test-dlpack-layout.c: memres's DLPack declarations (memres-dlpack.h, written from the
 * specification) against a real dlpack.h, field by field: sizes, offsets, the values of the
 * device types, type codes and flag bits. The build passes the header it found as
 * MEMRES_REAL_DLPACK_H (torch's copy, or the system's); without one the test skips. A header
 * older than DLPack 1.0 has no DLManagedTensorVersioned: then only the shared structures are
 * compared and that part is skipped. */
#include <memres/memres.h>

#include <stddef.h>

#ifdef MEMRES_REAL_DLPACK_H
#include MEMRES_REAL_DLPACK_H
#endif

#include "testutil.h"

#define HEADER_NAME_(x)         #x
#define HEADER_NAME(x)          HEADER_NAME_ (x)
#define SAME_SIZE(ours, theirs) g_assert_cmpuint (sizeof (ours), ==, sizeof (theirs))
#define SAME_FIELD(ours, theirs, field)                                                            \
  do                                                                                               \
    {                                                                                              \
      g_assert_cmpuint (offsetof (ours, field), ==, offsetof (theirs, field));                     \
      g_assert_cmpuint (sizeof (((ours *) 0)->field), ==, sizeof (((theirs *) 0)->field));         \
    }                                                                                              \
  while (0)

static void
test_shared_structures (void)
{
#ifndef MEMRES_REAL_DLPACK_H
  g_test_skip ("no dlpack.h was found at build time (torch's include/dlpack/dlpack.h, "
               "include/ATen/dlpack.h, or the system's <dlpack/dlpack.h>)");
#else
  g_test_message ("comparing with %s", HEADER_NAME (MEMRES_REAL_DLPACK_H));
  SAME_SIZE (MemresDLDevice, DLDevice);
  SAME_FIELD (MemresDLDevice, DLDevice, device_type);
  SAME_FIELD (MemresDLDevice, DLDevice, device_id);

  SAME_SIZE (MemresDLDataType, DLDataType);
  SAME_FIELD (MemresDLDataType, DLDataType, code);
  SAME_FIELD (MemresDLDataType, DLDataType, bits);
  SAME_FIELD (MemresDLDataType, DLDataType, lanes);

  SAME_SIZE (MemresDLTensor, DLTensor);
  SAME_FIELD (MemresDLTensor, DLTensor, data);
  SAME_FIELD (MemresDLTensor, DLTensor, device);
  SAME_FIELD (MemresDLTensor, DLTensor, ndim);
  SAME_FIELD (MemresDLTensor, DLTensor, dtype);
  SAME_FIELD (MemresDLTensor, DLTensor, shape);
  SAME_FIELD (MemresDLTensor, DLTensor, strides);
  SAME_FIELD (MemresDLTensor, DLTensor, byte_offset);

  g_assert_cmpint (MEMRES_DL_CPU, ==, kDLCPU);
  g_assert_cmpint (MEMRES_DL_CUDA, ==, kDLCUDA);
  g_assert_cmpint (MEMRES_DL_CUDA_HOST, ==, kDLCUDAHost);
  g_assert_cmpint (MEMRES_DL_CUDA_MANAGED, ==, kDLCUDAManaged);
  g_assert_cmpint (MEMRES_DL_INT, ==, kDLInt);
  g_assert_cmpint (MEMRES_DL_UINT, ==, kDLUInt);
  g_assert_cmpint (MEMRES_DL_FLOAT, ==, kDLFloat);
  g_assert_cmpint (MEMRES_DL_OPAQUE_HANDLE, ==, kDLOpaqueHandle);
  g_assert_cmpint (MEMRES_DL_BFLOAT, ==, kDLBfloat);
  g_assert_cmpint (MEMRES_DL_COMPLEX, ==, kDLComplex);
#endif
}

static void
test_versioned (void)
{
#if !defined(MEMRES_REAL_DLPACK_H)
  g_test_skip ("no dlpack.h was found at build time");
#elif !defined(DLPACK_MAJOR_VERSION)
  g_test_skip ("the dlpack.h found is older than DLPack 1.0 (no DLManagedTensorVersioned)");
#else
  g_assert_cmpint (MEMRES_DLPACK_MAJOR_VERSION, ==, DLPACK_MAJOR_VERSION);
  g_assert_cmpint (MEMRES_DLPACK_MINOR_VERSION, <=, DLPACK_MINOR_VERSION);
  g_assert_cmpint (MEMRES_DL_BOOL, ==, kDLBool); /* DLPack 0.8 */

  SAME_SIZE (MemresDLPackVersion, DLPackVersion);
  SAME_FIELD (MemresDLPackVersion, DLPackVersion, major);
  SAME_FIELD (MemresDLPackVersion, DLPackVersion, minor);

  SAME_SIZE (MemresDLManagedTensorVersioned, DLManagedTensorVersioned);
  SAME_FIELD (MemresDLManagedTensorVersioned, DLManagedTensorVersioned, version);
  SAME_FIELD (MemresDLManagedTensorVersioned, DLManagedTensorVersioned, manager_ctx);
  SAME_FIELD (MemresDLManagedTensorVersioned, DLManagedTensorVersioned, deleter);
  SAME_FIELD (MemresDLManagedTensorVersioned, DLManagedTensorVersioned, flags);
  SAME_FIELD (MemresDLManagedTensorVersioned, DLManagedTensorVersioned, dl_tensor);

  g_assert_cmpuint (MEMRES_DLPACK_FLAG_READ_ONLY, ==, DLPACK_FLAG_BITMASK_READ_ONLY);
  g_assert_cmpuint (MEMRES_DLPACK_FLAG_IS_COPIED, ==, DLPACK_FLAG_BITMASK_IS_COPIED);
#ifdef DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
  g_assert_cmpuint (MEMRES_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED, ==,
                    DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED);
#endif
#endif
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/dlpack-layout/shared-structures", test_shared_structures);
  g_test_add_func ("/dlpack-layout/versioned", test_versioned);
  return g_test_run ();
}

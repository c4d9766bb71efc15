/* testutil-fakecuda.c: what the driver tests (test-fakecuda*.c) share: the driver table, pools,
 * streams, a copy's round trip, granularity and physical memory. */
#include <memres/memres-plugin.h>
#include "testutil.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil-fakecuda.h"

const MemresCudaDriver *drv;

/* The driver, with device 0's primary context current. */
gboolean
setup (int n_devices)
{
  g_autoptr (GError) error = NULL;

  if (!mt_require_devices (n_devices))
    return FALSE;
  drv = memres_cuda_get_driver (&error);
  g_assert_no_error (error);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  g_assert_no_error (error);
  return TRUE;
}

CUmemoryPool
pool_new (int device, CUmemAllocationHandleType handle_types, size_t max_size)
{
  CUmemPoolProps props = { 0 };
  CUmemoryPool pool = NULL;

  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = handle_types;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  props.maxSize = max_size;
  CU_OK (drv->cuMemPoolCreate (&pool, &props));
  g_assert_nonnull (pool);
  return pool;
}

cuuint64_t
pool_attr (CUmemoryPool pool, CUmemPool_attribute attr)
{
  cuuint64_t value = G_MAXUINT64;

  CU_OK (drv->cuMemPoolGetAttribute (pool, attr, &value));
  return value;
}

CUstream
stream_new (void)
{
  CUstream stream = NULL;

  CU_OK (drv->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING));
  return stream;
}

/* Writes a pattern to @dptr and reads it back. */
void
assert_round_trip (CUdeviceptr dptr, gsize size, guint32 seed, CUstream stream)
{
  g_autofree guint8 *in = g_malloc (size);
  g_autofree guint8 *out = g_malloc0 (size);

  mt_fill_pattern (in, size, seed);
  CU_OK (drv->cuMemcpyHtoDAsync (dptr, in, size, stream));
  CU_OK (drv->cuMemcpyDtoHAsync (out, dptr, size, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  mt_assert_pattern (out, size, seed);
}

size_t
granularity (CUmemAllocationGranularity_flags which)
{
  CUmemAllocationProp prop = { 0 };
  size_t g = 0;

  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CU_OK (drv->cuMemGetAllocationGranularity (&g, &prop, which));
  g_assert_cmpuint (g, >, 0);
  return g;
}

CUmemGenericAllocationHandle
physical_new (size_t size, CUmemAllocationHandleType types)
{
  CUmemAllocationProp prop = { 0 };
  CUmemGenericAllocationHandle handle = 0;

  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = types;
  CU_OK (drv->cuMemCreate (&handle, size, &prop, 0));
  return handle;
}

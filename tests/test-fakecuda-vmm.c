/* test-fakecuda-vmm.c: the driver's virtual memory calls through the core's driver table
 * (granularity, map, access and unmap, growth in place, export and import, adjacent
 * reservations), against tests/fakecuda (suite fake) and the real driver (suite gpu). */
#include <memres/memres-plugin.h>
#include "testutil.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil-fakecuda.h"

static void
set_access (CUdeviceptr ptr, size_t size, int device, CUmemAccess_flags flags)
{
  CUmemAccessDesc desc = { { CU_MEM_LOCATION_TYPE_DEVICE, device }, flags };

  CU_OK (drv->cuMemSetAccess (ptr, size, &desc, 1));
}

static void
test_vmm_granularity (void)
{
  FakeCudaCounts base;
  size_t min = 0, rec = 0;
  CUmemGenericAllocationHandle handle = 0;
  CUmemAllocationProp prop = { 0 }, got;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  min = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  rec = granularity (CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  g_assert_cmpuint (rec % min, ==, 0);
  if (mt_driver_is_fake ())
    g_assert_cmpuint (min, ==, 2 * MiB);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CU_FAILS (drv->cuMemCreate (&handle, min / 2, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  CU_FAILS (drv->cuMemCreate (&handle, min + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CU_FAILS (drv->cuMemCreate (&handle, min, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  mt_assert_fake_counts_equal (&base);
  handle = physical_new (2 * min, CU_MEM_HANDLE_TYPE_NONE);
  CU_OK (drv->cuMemGetAllocationPropertiesFromHandle (&got, handle));
  g_assert_cmpint (got.location.type, ==, CU_MEM_LOCATION_TYPE_DEVICE);
  g_assert_cmpint (got.location.id, ==, 0);
  g_assert_cmpint (got.type, ==, CU_MEM_ALLOCATION_TYPE_PINNED);
  CU_OK (drv->cuMemRelease (handle));
  mt_assert_fake_counts_equal (&base);
}

static void
test_vmm_map (void)
{
  FakeCudaCounts base, now;
  size_t g;
  CUdeviceptr va = 0, range_start = 0;
  size_t range_size = 0;
  CUmemGenericAllocationHandle h1, h2, retained = 0;
  CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
  unsigned long long flags = 0;
  int mapped = -1;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CU_OK (drv->cuMemAddressReserve (&va, 4 * g, 0, 0, 0));
  g_assert_cmpuint (va % g, ==, 0);
  h1 = physical_new (2 * g, CU_MEM_HANDLE_TYPE_NONE);
  h2 = physical_new (g, CU_MEM_HANDLE_TYPE_NONE);

  /* Misaligned, outside or overlapping mappings are refused. */
  CU_FAILS (drv->cuMemMap (va + 4096, g, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);
  CU_FAILS (drv->cuMemMap (va, g + 4096, 0, h2, 0), CUDA_ERROR_NOT_SUPPORTED);
  CU_OK (drv->cuMemMap (va, 2 * g, 0, h1, 0));
  CU_FAILS_UNDOC (drv->cuMemMap (va + g, g, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemMap (va + 2 * g, g, 0, h2, 0));
  if (mt_driver_is_fake ())
    {
      mt_counts_snapshot (&now);
      g_assert_cmpint (now.reservations, ==, base.reservations + 1);
      g_assert_cmpint (now.mappings, ==, base.mappings + 2);
      g_assert_cmpint (now.physical_handles, ==, base.physical_handles + 2);
    }
  /* Released handles stay alive while mapped. */
  CU_OK (drv->cuMemRelease (h1));
  CU_OK (drv->cuMemRelease (h2));

  /* Access over both mappings at once; then the bytes go through. */
  set_access (va, 3 * g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CU_OK (drv->cuMemGetAccess (&flags, &loc, va + g));
  g_assert_cmpuint (flags, ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  assert_round_trip (va, 3 * g, 7, NULL);
  CU_OK (drv->cuPointerGetAttribute (&range_start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + g));
  g_assert_cmpuint (range_start, ==, va);
  CU_OK (drv->cuPointerGetAttribute (&range_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + g));
  g_assert_cmpuint (range_size, ==, 4 * g);
  CU_OK (drv->cuPointerGetAttribute (&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va));
  g_assert_cmpint (mapped, ==, 1);

  /* The last granule is reserved but not mapped: copies there fail. (Fake only: on a device
   * such a copy may fault the context instead of failing.) */
  if (mt_driver_is_fake ())
    {
      guint8 bytes[64] = { 0 };
      int zero = -1;
      CU_FAILS (drv->cuMemcpyHtoDAsync (va + 3 * g, bytes, sizeof bytes, NULL),
                CUDA_ERROR_INVALID_VALUE);
      CU_FAILS (drv->cuMemcpyHtoDAsync (va + 3 * g - 32, bytes, sizeof bytes, NULL),
                CUDA_ERROR_INVALID_VALUE);
      CU_FAILS (drv->cuMemcpyDtoHAsync (bytes, va + 3 * g, sizeof bytes, NULL),
                CUDA_ERROR_INVALID_VALUE);
      CU_OK (drv->cuPointerGetAttribute (&zero, CU_POINTER_ATTRIBUTE_MAPPED, va + 3 * g));
      g_assert_cmpint (zero, ==, 0);
    }

  CU_OK (drv->cuMemRetainAllocationHandle (&retained, (void *) (va + 100)));
  g_assert_cmpuint (retained, ==, h1);
  CU_OK (drv->cuMemRelease (retained));

  /* A sub-range of a mapping cannot be unmapped; the range of two whole mappings can. */
  CU_FAILS_UNDOC (drv->cuMemUnmap (va, g), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemUnmap (va, 3 * g));
  /* Only the exact reservation can be freed. */
  CU_FAILS_UNDOC (drv->cuMemAddressFree (va, 2 * g), CUDA_ERROR_INVALID_VALUE);
  CU_FAILS_UNDOC (drv->cuMemAddressFree (va + g, 3 * g), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemAddressFree (va, 4 * g));
  mt_assert_fake_counts_equal (&base);
}

static void
test_vmm_no_access (void)
{
  FakeCudaCounts base;
  size_t g;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle h;
  guint8 bytes[64] = { 0 };

  if (!setup (1))
    return;
  /* On a GPU, touching mapped memory without access faults the context: fake only. */
  if (!mt_require_fake ("an inaccessible mapping would fault the real device"))
    return;
  mt_counts_snapshot (&base);
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CU_OK (drv->cuMemAddressReserve (&va, g, 0, 0, 0));
  h = physical_new (g, CU_MEM_HANDLE_TYPE_NONE);
  CU_OK (drv->cuMemMap (va, g, 0, h, 0));
  CU_FAILS (drv->cuMemcpy (va, (CUdeviceptr) bytes, sizeof bytes), CUDA_ERROR_INVALID_VALUE);
  set_access (va, g, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
  CU_FAILS (drv->cuMemcpy (va, (CUdeviceptr) bytes, sizeof bytes), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemcpy ((CUdeviceptr) bytes, va, sizeof bytes));
  set_access (va, g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CU_OK (drv->cuMemcpy (va, (CUdeviceptr) bytes, sizeof bytes));
  CU_FAILS (drv->cuMemSetAccess (va, g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemUnmap (va, g));
  /* Unmapped again: no access any more. */
  CU_FAILS (drv->cuMemcpy (va, (CUdeviceptr) bytes, sizeof bytes), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemRelease (h));
  CU_OK (drv->cuMemAddressFree (va, g));
  /* A freed reservation is no memory at all. */
  CU_FAILS (drv->cuMemcpy (va, (CUdeviceptr) bytes, sizeof bytes), CUDA_ERROR_INVALID_VALUE);
  mt_assert_fake_counts_equal (&base);
}

static void
test_vmm_grow_in_place (void)
{
  size_t g;
  CUdeviceptr a = 0, b = 0;

  if (!setup (1))
    return;
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CU_OK (drv->cuMemAddressReserve (&a, 2 * g, 0, 0, 0));
  CU_OK (drv->cuMemAddressReserve (&b, 2 * g, 0, a + 2 * g, 0));
  /* The hint is only a hint for the real driver; the fake honours a free one. */
  if (mt_driver_is_fake ())
    g_assert_cmpuint (b, ==, a + 2 * g);
  g_assert_true (b >= a + 2 * g || b + 2 * g <= a);
  CU_OK (drv->cuMemAddressFree (b, 2 * g));
  CU_OK (drv->cuMemAddressFree (a, 2 * g));
}

static void
test_vmm_export_import (void)
{
  FakeCudaCounts base;
  size_t g;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle h, imported = 0;
  int fd = -1, supported = 0, fds;
  g_autofree guint8 *bytes = NULL;

  if (!setup (1))
    return;
  CU_OK (drv->cuDeviceGetAttribute (
      &supported, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0));
  if (!supported)
    {
      g_test_skip ("no POSIX file descriptor handles");
      return;
    }
  mt_counts_snapshot (&base);
  fds = mt_count_open_fds ();
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  bytes = g_malloc (g);
  CU_OK (drv->cuMemAddressReserve (&va, 2 * g, 0, 0, 0));

  /* Not requested at creation: no export. */
  h = physical_new (g, CU_MEM_HANDLE_TYPE_NONE);
  g_assert_cmpint (
      drv->cuMemExportToShareableHandle (&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), !=,
      CUDA_SUCCESS);
  CU_OK (drv->cuMemRelease (h));

  h = physical_new (g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CU_OK (drv->cuMemExportToShareableHandle (&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  g_assert_cmpint (fd, >=, 0);
  if (mt_driver_is_fake ())
    {
      FakeCudaCounts now;
      mt_counts_snapshot (&now);
      g_assert_cmpint (now.exported_fds, ==, base.exported_fds + 1);
    }
  CU_OK (drv->cuMemImportFromShareableHandle (&imported, (void *) (intptr_t) fd,
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close (fd);
  /* The same memory mapped twice: bytes written through one mapping show in the other. */
  CU_OK (drv->cuMemMap (va, g, 0, h, 0));
  CU_OK (drv->cuMemMap (va + g, g, 0, imported, 0));
  set_access (va, 2 * g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  mt_fill_pattern (bytes, g, 8);
  CU_OK (drv->cuMemcpy (va, (CUdeviceptr) bytes, g));
  memset (bytes, 0, g);
  CU_OK (drv->cuMemcpy ((CUdeviceptr) bytes, va + g, g));
  mt_assert_pattern (bytes, g, 8);
  CU_OK (drv->cuMemUnmap (va, 2 * g));
  CU_OK (drv->cuMemRelease (imported));
  CU_OK (drv->cuMemRelease (h));
  CU_OK (drv->cuMemAddressFree (va, 2 * g));
  /* (The real driver may open descriptors of its own on first use.) */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_assert_fake_counts_equal (&base);
}

static void
test_vmm_adjacent (void)
{
  FakeCudaCounts base;
  size_t g;
  CUdeviceptr a = 0, b = 0;
  CUmemGenericAllocationHandle h1, h2;
  g_autofree guint8 *in = NULL, *out = NULL;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CU_OK (drv->cuMemAddressReserve (&a, 2 * g, 0, 0, 0));
  CU_OK (drv->cuMemAddressReserve (&b, 2 * g, 0, a + 2 * g, 0));
  if (b != a + 2 * g)
    {
      CU_OK (drv->cuMemAddressFree (b, 2 * g));
      CU_OK (drv->cuMemAddressFree (a, 2 * g));
      g_assert_false (mt_driver_is_fake ());
      g_test_skip ("the driver placed the second reservation elsewhere");
      return;
    }
  h1 = physical_new (2 * g, CU_MEM_HANDLE_TYPE_NONE);
  h2 = physical_new (2 * g, CU_MEM_HANDLE_TYPE_NONE);
  CU_OK (drv->cuMemMap (a, 2 * g, 0, h1, 0));
  CU_OK (drv->cuMemMap (b, 2 * g, 0, h2, 0));
  CU_OK (drv->cuMemRelease (h1));
  CU_OK (drv->cuMemRelease (h2));
  set_access (a, 2 * g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  set_access (b, 2 * g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  if (mt_driver_is_fake ())
    set_access (a, 4 * g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  /* One contiguous range over both reservations. */
  in = g_malloc (2 * g);
  out = g_malloc0 (2 * g);
  mt_fill_pattern (in, 2 * g, 11);
  CU_OK (drv->cuMemcpy (a + g, (CUdeviceptr) in, 2 * g));
  CU_OK (drv->cuMemcpy ((CUdeviceptr) out, a + g, 2 * g));
  mt_assert_pattern (out, 2 * g, 11);
  /* Both mappings go in one unmap; each reservation is freed on its own. */
  CU_OK (drv->cuMemUnmap (a, 4 * g));
  CU_FAILS_UNDOC (drv->cuMemAddressFree (a, 4 * g), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemAddressFree (a, 2 * g));
  CU_OK (drv->cuMemAddressFree (b, 2 * g));
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{ /* Two fake devices, for peer access; read when the driver loads. */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);
  g_test_add_func ("/fakecuda/vmm/granularity", test_vmm_granularity);
  g_test_add_func ("/fakecuda/vmm/map-access-unmap-free", test_vmm_map);
  g_test_add_func ("/fakecuda/vmm/no-access", test_vmm_no_access);
  g_test_add_func ("/fakecuda/vmm/grow-in-place", test_vmm_grow_in_place);
  g_test_add_func ("/fakecuda/vmm/export-import", test_vmm_export_import);
  g_test_add_func ("/fakecuda/vmm/adjacent-reservations", test_vmm_adjacent);
  return g_test_run ();
}

/* testutil-vmm.c: what the vmm tests (test-vmm*.c) share: resources, buffers and resizes that must
 * succeed, patterns written and checked, a blocked driver call, access flags, statistics. */
#include "testutil.h"

#include <string.h>
#include "testutil-vmm.h"

#include <dlfcn.h>

const MemresCudaDriver *drv;

/* --- helpers ------------------------------------------------------------------------------- */

gboolean
require_device (void)
{
  if (!mt_require_devices (1))
    return FALSE;
  drv = memres_cuda_get_driver (NULL);
  g_assert_nonnull (drv);
  return TRUE;
}

gsize
granularity (CUmemLocationType type, CUmemAllocationGranularity_flags flag)
{
  CUmemAllocationProp prop = { 0 };
  size_t value = 0;

  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = type;
  prop.location.id = 0;
  g_assert_cmpint (drv->cuMemGetAllocationGranularity (&value, &prop, flag), ==, CUDA_SUCCESS);
  g_assert_cmpuint (value, >, 0);
  return value;
}

/* The granularity of the default resource (device memory, recommended). */
gsize
gran (void)
{
  return granularity (CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
}

MemresBuffer *
allocate (MemresResource *mr, gsize size)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, size, NULL, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  return buf;
}

void
close_buffer (MemresBuffer *buf)
{
  g_autoptr (GError) error = NULL;

  gboolean ok = memres_buffer_close (buf, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  memres_buffer_unref (buf);
}

void
resize (MemresBuffer *buf, gsize size)
{
  g_autoptr (GError) error = NULL;

  gboolean ok = memres_buffer_resize (buf, size, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
}

static void
transfer (MemresBuffer *buf, gsize offset, guint8 *data, gsize n, gboolean to_buffer)
{
  g_autoptr (GError) error = NULL;
  gboolean ok = to_buffer ? memres_buffer_write (buf, offset, data, n, NULL, &error)
                          : memres_buffer_read (buf, offset, data, n, NULL, &error);

  g_assert_no_error (error);
  g_assert_true (ok);
}

void
write_pattern (MemresBuffer *buf, gsize offset, gsize n, guint32 seed)
{
  g_autofree guint8 *data = g_malloc (n);

  mt_fill_pattern (data, n, seed);
  transfer (buf, offset, data, n, TRUE);
}

void
check_pattern (MemresBuffer *buf, gsize offset, gsize n, guint32 seed)
{
  g_autofree guint8 *data = g_malloc (n);

  transfer (buf, offset, data, n, FALSE);
  mt_assert_pattern (data, n, seed);
}

/* Reserves the address range right after @buf so that it cannot grow in place. */
VmmBlocker
block_after (MemresBuffer *buf)
{
  CUdeviceptr end = memres_buffer_get_address (buf) + memres_buffer_get_size (buf);
  VmmBlocker b = { 0, gran () };

  g_assert_cmpint (drv->cuMemAddressReserve (&b.ptr, b.size, 0, end, 0), ==, CUDA_SUCCESS);
  /* Anywhere else, the range after the buffer was taken already: a grow moves either way. */
  if (b.ptr != end)
    g_test_message ("the range after the buffer was taken already (blocker at %#llx)",
                    (unsigned long long) b.ptr);
  return b;
}

void
unblock (VmmBlocker *b)
{
  if (b->ptr != 0)
    g_assert_cmpint (drv->cuMemAddressFree (b->ptr, b->size), ==, CUDA_SUCCESS);
  b->ptr = 0;
}

CUmemAccess_flags
get_access (MemresBuffer *buf, int device)
{
  CUmemLocation location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device };
  unsigned long long flags = 0;

  g_assert_cmpint (drv->cuMemGetAccess (&flags, &location, memres_buffer_get_address (buf)), ==,
                   CUDA_SUCCESS);
  return (CUmemAccess_flags) flags;
}

MemresStats
stats (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  MemresStats s;

  gboolean ok = memres_resource_get_stats (mr, &s, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  return s;
}

MemresTagCounts
tag_counts (MemresResource *mr, const char *tag)
{
  g_autoptr (GError) error = NULL;
  MemresTagCounts t;

  gboolean ok = memres_resource_get_tag_counts (mr, tag, &t, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  return t;
}

void
vmm_test_init (int *argc, char ***argv)
{
  const char *driver = g_getenv ("MEMRES_CUDA_DRIVER");

  /* Before the driver loads: two fake devices for the peer tests, room for 64 × 64 MiB. */
  if (driver != NULL && strstr (driver, "fakecuda") != NULL)
    {
      g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
      g_setenv ("FAKECUDA_DEVICE_MEMORY", "8GiB", FALSE);
    }
  mt_init (argc, argv);
}

void
vmm_small_chunks_begin (VmmSmallChunks *sc)
{
  g_assert_nonnull (sc->fake = dlopen (mt_driver ()->path, RTLD_NOW | RTLD_NOLOAD));
  g_assert_nonnull (sc->set
                    = (void (*) (size_t, size_t)) dlsym (sc->fake, "fakecuda_set_granularity"));
  sc->minimum = granularity (CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  sc->recommended = granularity (CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  sc->set (VMM_SMALL_CHUNK, VMM_SMALL_CHUNK);
  mt_fake_counts_begin (&sc->base);
  sc->mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, VMM_SMALL_CHUNK);
}

void
vmm_small_chunks_end (VmmSmallChunks *sc)
{
  g_clear_pointer (&sc->mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&sc->base);
  sc->set (sc->minimum, sc->recommended);
  dlclose (sc->fake);
}

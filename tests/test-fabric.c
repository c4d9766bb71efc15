/* test-fabric.c: fabric handles (CU_MEM_HANDLE_TYPE_FABRIC, docs/distributed.md): the probe a
 * `vmm` resource with handle_type=fabric makes at creation, what it reports
 * (MEMRES_MEMORY_FABRIC_HANDLES), the error naming the missing IMEX channel where the driver
 * refuses (CUDA_ERROR_NOT_PERMITTED), and fabric_fallback=posix_fd. The fake driver grants fabric
 * handles and refuses them when told (a failed call); the real one decides for itself (the H200
 * machine, without an IMEX channel, refuses: the cases hold to whichever it does). */
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static gsize
gran (void)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
  CUmemAllocationProp prop = { 0 };
  size_t value = 0;

  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  g_assert_cmpint (
      drv->cuMemGetAllocationGranularity (&value, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), ==,
      CUDA_SUCCESS);
  return value;
}

static void
counts_begin (FakeCudaCounts *base)
{
  memset (base, 0, sizeof *base);
  if (mt_driver_is_fake ())
    mt_fake_get_counts (base);
}

/* The error of a driver that refuses fabric handles: the driver's code, and words that say what
 * is missing and what to do. */
static void
assert_refused (const GError *error)
{
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_PERMITTED);
  g_assert_nonnull (strstr (error->message, "IMEX channel"));
  g_assert_nonnull (strstr (error->message, "fabric_fallback=posix_fd"));
}

/* A buffer of @mr written and read back: the memory works whichever handle type it has. */
static void
use (MemresResource *mr)
{
  MemresBuffer *buf = mt_alloc_ok (mr, 2 * gran (), NULL);

  mt_write_pattern (buf, 0, 2 * gran (), 7, NULL);
  mt_check_pattern (buf, 0, 2 * gran (), 7, NULL);
  mt_close_ok (buf, NULL);
}

/* handle_type=fabric where the driver grants it: the flag says so; where it refuses, the error
 * names the IMEX channel (the real driver decides which). */
static void
test_probe (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  counts_begin (&base);
  mr = memres_resource_new ("vmm:handle_type=fabric", &error);
  if (mr == NULL)
    {
      g_test_message ("the driver refuses fabric handles: %s", error->message);
      assert_refused (error);
      g_assert_false (mt_driver_is_fake ()); /* the fake grants them unless told */
      return;
    }
  g_assert_no_error (error);
  g_assert_cmpuint (memres_resource_get_flags (mr) & MEMRES_MEMORY_FABRIC_HANDLES, ==,
                    MEMRES_MEMORY_FABRIC_HANDLES);
  /* no export path of fabric bytes yet: not shareable by the IPC calls */
  g_assert_false (memres_resource_get_flags (mr) & MEMRES_MEMORY_IPC_ENABLED);
  use (mr);
  g_clear_pointer (&mr, memres_resource_unref);
  if (mt_driver_is_fake ())
    mt_assert_fake_counts_equal (&base); /* the probe's granule was released */
}

/* The fake refuses as the H200 does (cuMemCreate of a fabric handle: CUDA_ERROR_NOT_PERMITTED),
 * or refuses the export alone: creation fails naming the IMEX channel, nothing left behind. */
static void
test_refused (void)
{
  const char *calls[] = { "cuMemCreate", "cuMemExportToShareableHandle" };
  FakeCudaCounts base;

  if (!mt_require_fake ("tells the driver to refuse fabric handles"))
    return;
  counts_begin (&base);
  for (guint i = 0; i < G_N_ELEMENTS (calls); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresResource) mr = NULL;

      mt_fake_fail_call (calls[i], 1, CUDA_ERROR_NOT_PERMITTED);
      mr = memres_resource_new ("vmm:handle_type=fabric,fabric_fallback=fail", &error);
      g_assert_null (mr);
      assert_refused (error);
      g_assert_nonnull (strstr (error->message, calls[i]));
      mt_fake_reset_faults ();
    }
  /* another failure of the probe is the driver's error, with no fallback */
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (MemresResource) mr = NULL;

    mt_fake_fail_call ("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
    mr = memres_resource_new ("vmm:handle_type=fabric,fabric_fallback=posix_fd", &error);
    g_assert_null (mr);
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    g_assert_nonnull (strstr (error->message, "probing fabric handles"));
    mt_fake_reset_faults ();
  }
  mt_assert_fake_counts_equal (&base);
}

/* fabric_fallback=posix_fd where fabric is refused: a resource of POSIX-fd handles, which says
 * so (ipc-enabled, no fabric flag) and shares its buffers as one message with fds. On the real
 * driver, where fabric is granted, the resource is a fabric one. */
static void
test_fallback (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autofree char *spec = NULL;
  MemresBuffer *buf;
  GBytes *bytes;
  gint *fds;
  guint n_fds;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  counts_begin (&base);
  if (mt_driver_is_fake ())
    mt_fake_fail_call ("cuMemCreate", 1, CUDA_ERROR_NOT_PERMITTED);
  spec = g_strdup_printf ("vmm:handle_type=fabric,fabric_fallback=posix_fd,chunk=%" G_GSIZE_FORMAT,
                          gran ());
  mr = mt_new_ok (spec);
  if (memres_resource_get_flags (mr) & MEMRES_MEMORY_FABRIC_HANDLES)
    {
      g_assert_false (mt_driver_is_fake ());
      g_test_message ("the driver grants fabric handles: no fallback to test here");
      use (mr);
      return;
    }
  g_assert_true (memres_resource_get_flags (mr) & MEMRES_MEMORY_IPC_ENABLED);
  use (mr);
  buf = mt_alloc_ok (mr, 2 * gran (), NULL);
  g_assert_true (memres_buffer_export_message (buf, &bytes, &fds, &n_fds, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n_fds, ==, 2); /* one POSIX fd per chunk */
  for (guint i = 0; i < n_fds; i++)
    close (fds[i]);
  g_free (fds);
  g_bytes_unref (bytes);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_fake_reset_faults ();
  if (mt_driver_is_fake ())
    mt_assert_fake_counts_equal (&base);
}

/* Bad option values and combinations, refused before any driver call. */
static void
test_options (void)
{
  mt_new_fails ("vmm:handle_type=fabric,fabric_fallback=maybe", MEMRES_ERROR,
                MEMRES_ERROR_INVALID_ARGUMENT, "fabric_fallback");
  if (!mt_require_devices (1))
    return;
  mt_new_fails ("vmm:location=host,handle_type=fabric", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "handle_type");
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/fabric/vmm/probe", test_probe);
  g_test_add_func ("/fabric/vmm/refused", test_refused);
  g_test_add_func ("/fabric/vmm/fallback", test_fallback);
  g_test_add_func ("/fabric/vmm/options", test_options);
  return g_test_run ();
}

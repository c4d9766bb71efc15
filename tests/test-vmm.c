/* test-vmm.c: the `vmm` kind: allocation, rounding, close, options, peer and read-only access,
 * statistics. Growth and shrinking: test-vmm-resize.c; rollback of every failing driver call:
 * test-vmm-faults.c. Runs against the fake driver (suite fake) and the real one (suite gpu). */
#include "testutil.h"

#include <string.h>
#include <sys/resource.h>
#include "testutil-vmm.h"

static void
assert_spec_error (const char *spec, GQuark domain, gint code, const char *needle)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr = memres_resource_new (spec, &error);

  g_assert_null (mr);
  g_assert_error (error, domain, code);
  if (needle != NULL && strstr (error->message, needle) == NULL)
    g_error ("\"%s\": message \"%s\" does not mention \"%s\"", spec, error->message, needle);
}

static void
ensure_context (void)
{
  g_autoptr (GError) error = NULL;

  gboolean ok = memres_cuda_ensure_context (0, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
}

static gsize
free_device_memory (void)
{
  size_t free_bytes = 0, total = 0;

  ensure_context ();
  g_assert_cmpint (drv->cuMemGetInfo (&free_bytes, &total), ==, CUDA_SUCCESS);
  return free_bytes;
}

/* --- allocation ---------------------------------------------------------------------------- */

static void
test_allocate_rounding (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  const gsize sizes[] = { 1, g - 1, g, g + 1, 3 * g - 5 };
  const gsize expect[] = { g, g, g, 2 * g, 3 * g };
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm");
  g_assert_cmpint (memres_resource_get_device (mr), ==, 0);
  g_assert_cmpuint (memres_resource_get_flags (mr), ==,
                    MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_RESIZABLE);

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      MemresBuffer *buf = allocate (mr, sizes[i]);

      g_assert_cmpuint (memres_buffer_get_size (buf), ==, expect[i]);
      g_assert_cmpuint (memres_buffer_get_address (buf) % gran (), ==, 0);
      g_assert_true (memres_buffer_is_device_accessible (buf));
      g_assert_false (memres_buffer_is_host_accessible (buf));
      write_pattern (buf, 0, expect[i], i);
      check_pattern (buf, 0, expect[i], i);
      close_buffer (buf);
    }
  mt_assert_fake_counts_equal (&base);
}

static void
test_allocate_minimum_granularity (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  gsize minimum;
  MemresBuffer *buf;

  if (!require_device ())
    return;
  mt_fake_counts_begin (&base);
  minimum = granularity (CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  mr = mt_new_printf_ok ("vmm:granularity=minimum");
  buf = allocate (mr, minimum + 1);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 2 * minimum);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

static void
test_allocate_huge (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  long reserves = 0;

  if (!require_device ())
    return;
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm");
  if (mt_driver_is_fake ())
    reserves = mt_fake_call_count ("cuMemAddressReserve");
  g_assert_null (memres_resource_allocate (mr, G_MAXSIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_null (memres_resource_allocate (mr, G_MAXSIZE - 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemAddressReserve"), ==, reserves);
  mt_assert_fake_counts_equal (&base);
}

/* Requests far beyond any memory that reach the kind (1 PiB, G_MAXSSIZE) fail at the driver
 * without a table sized by them: with the process's data limit (RLIMIT_DATA) 256 MiB over what
 * it uses, each fails with MEMRES_ERROR_OUT_OF_MEMORY naming a driver call, where a chunk table
 * of 12 GiB and 96 TiB failed as "cannot track" here and, on a host that overcommits, was
 * written whole by MALLOC_PERTURB_ until the OOM killer ended peers-fake on the H100. The
 * resource serves afterwards. */
static void
test_allocate_huge_table (void)
{
  static const gsize huge[] = { (gsize) 1 << 50, G_MAXSSIZE };
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *status = NULL;
  MemresBuffer *buf;
  struct rlimit was, lowered;
  const char *data;
  guint64 kib;

#if defined(__SANITIZE_ADDRESS__)
  g_test_skip ("AddressSanitizer's allocator does not keep to RLIMIT_DATA");
  return;
#endif
  if (!require_device ())
    return;
  mr = mt_new_printf_ok ("vmm");
  g_assert_true (g_file_get_contents ("/proc/self/status", &status, NULL, NULL));
  g_assert_nonnull (data = strstr (status, "VmData:"));
  kib = g_ascii_strtoull (data + strlen ("VmData:"), NULL, 10);
  g_assert_cmpuint (kib, >, 0);
  g_assert_cmpint (getrlimit (RLIMIT_DATA, &was), ==, 0);
  lowered = was;
  lowered.rlim_cur = (rlim_t) (kib * 1024 + (G_GUINT64_CONSTANT (256) << 20));
  if (was.rlim_cur != RLIM_INFINITY && was.rlim_cur < lowered.rlim_cur)
    lowered.rlim_cur = was.rlim_cur;
  g_assert_cmpint (setrlimit (RLIMIT_DATA, &lowered), ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS (huge); i++)
    {
      /* a real driver may reserve 1 PiB of address space: the device filled first */
      if (!mt_driver_is_fake () && huge[i] < G_MAXSSIZE)
        continue;
      g_assert_null (memres_resource_allocate (mr, huge[i], NULL, &error));
      g_test_message ("%" G_GSIZE_FORMAT ": %s", huge[i], error->message);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
      g_assert_nonnull (strstr (error->message, "cuMem"));
      g_assert_null (strstr (error->message, "cannot track"));
      g_clear_error (&error);
    }
  g_assert_cmpint (setrlimit (RLIMIT_DATA, &was), ==, 0);
  buf = memres_resource_allocate (mr, 4096, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (buf), >=, 4096);
  close_buffer (buf);
}

/* Thousands of chunks: the table grows (doubling) as they are created (_vmm_create_chunks()),
 * one past 4,096 here. The fake's granularity lowered to 64 KiB (fakecuda_set_granularity()), a
 * buffer of 4,097 chunks of 64 KiB: 4,097 cuMemCreate, its last bytes written and read back;
 * closed, nothing left. */
static void
test_allocate_many_chunks (void)
{
  VmmSmallChunks sc = { 0 };
  gsize g = VMM_SMALL_CHUNK;
  MemresBuffer *buf;
  long creates;

  if (!require_device () || !mt_require_fake ("sets the fake's granularity"))
    return;
  vmm_small_chunks_begin (&sc);
  creates = mt_fake_call_count ("cuMemCreate");
  buf = allocate (sc.mr, 4097 * g);
  g_assert_cmpint (mt_fake_call_count ("cuMemCreate") - creates, ==, 4097);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 4097 * g);
  mt_write_pattern (buf, 4096 * g, g, 41, NULL);
  mt_check_pattern (buf, 4096 * g, g, 41, NULL);
  close_buffer (buf);
  vmm_small_chunks_end (&sc);
}

/* A tag's buffer of thousands of chunks (its table grown as they were created) sleeps and wakes
 * whole:
 * 4,097 chunks of 64 KiB (the fake's granularity lowered, as /vmm/allocate/many-chunks). The
 * sleep (backup) gives back 4,097 handles, a wake whose 4,097th cuMemCreate fails is refused with
 * the driver's error and leaves the tag asleep with nothing of it left, then the wake recreates
 * all 4,097 and restores the bytes around chunk 4,096 and of the last. */
static void
test_sleep_many_chunks (void)
{
  VmmSmallChunks sc = { 0 };
  gsize g = VMM_SMALL_CHUNK;
  g_autoptr (MemresSleepPolicy) policy = NULL;
  g_autoptr (GError) error = NULL;
  FakeCudaCounts awake, asleep, now;
  MemresBuffer *buf;
  guint64 address;

  if (!require_device () || !mt_require_fake ("sets the fake's granularity"))
    return;
  vmm_small_chunks_begin (&sc);
  g_assert_true (memres_tag_push ("vmm-many", &error));
  buf = allocate (sc.mr, 4097 * g);
  g_assert_true (memres_tag_pop ("vmm-many", &error));
  g_assert_no_error (error);
  address = memres_buffer_get_address (buf);
  mt_write_pattern (buf, 0, g, 61, NULL);
  mt_write_pattern (buf, 4095 * g, 2 * g, 62, NULL);
  mt_fake_get_counts (&awake);
  policy = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, &error);
  g_assert_no_error (error);

  g_assert_true (memres_resource_sleep (sc.mr, "vmm-many", policy, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_asleep (buf));
  mt_fake_get_counts (&asleep);
  g_assert_cmpint (asleep.physical_handles, ==, awake.physical_handles - 4097);

  mt_fake_fail_call ("cuMemCreate", 4097, CUDA_ERROR_OUT_OF_MEMORY);
  g_assert_false (memres_resource_wake (sc.mr, "vmm-many", NULL, &error));
  mt_fake_reset_faults ();
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, "cuMemCreate"));
  g_clear_error (&error);
  g_assert_true (memres_buffer_is_asleep (buf));
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.physical_handles, ==, asleep.physical_handles);
  g_assert_cmpint (now.mappings, ==, asleep.mappings);

  g_assert_true (memres_resource_wake (sc.mr, "vmm-many", NULL, &error));
  g_assert_no_error (error);
  g_assert_false (memres_buffer_is_asleep (buf));
  g_assert_cmphex (memres_buffer_get_address (buf), ==, address);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.physical_handles, ==, awake.physical_handles);
  mt_check_pattern (buf, 0, g, 61, NULL);
  mt_check_pattern (buf, 4095 * g, 2 * g, 62, NULL);
  close_buffer (buf);
  vmm_small_chunks_end (&sc);
}

/* location=host and host_numa: the CPU uses the pointer, the device sees the same bytes. */
static void
check_host_location (const char *spec)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  gsize size;

  mt_fake_counts_begin (&base);
  mr = memres_resource_new (spec, &error);
  if (mr == NULL && !mt_driver_is_fake ()
      && g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
    {
      g_test_skip (error->message);
      return;
    }
  g_assert_no_error (error);
  g_assert_cmpuint (memres_resource_get_flags (mr), ==,
                    MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE
                        | MEMRES_MEMORY_RESIZABLE);
  /* page-locked host memory belongs to no device (the rule of memres_buffer_get_device()) */
  g_assert_cmpint (memres_resource_get_device (mr), ==, -1);
  buf = allocate (mr, 3 * gran () + 1);
  size = memres_buffer_get_size (buf);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
  g_assert_true (memres_buffer_is_host_accessible (buf));
  mt_fill_pattern (memres_buffer_get_pointer (buf), size, 77);
  check_pattern (buf, 0, size, 77);
  resize (buf, 2 * size);
  mt_assert_pattern (memres_buffer_get_pointer (buf), size, 77);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

static void
test_allocate_host (void)
{
  if (!require_device ())
    return;
  check_host_location ("vmm:location=host");
}

static void
test_allocate_host_numa (void)
{
  if (!require_device ())
    return;
  check_host_location ("vmm:location=host_numa");
}

/* --- close --------------------------------------------------------------------------------- */

static void
test_close_returns_memory (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *bufs[64];
  gsize before, during, after;
  const gsize size = 64 * 1024 * 1024;

  if (!require_device ())
    return;
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm");
  /* settle the driver's own allocations first */
  close_buffer (allocate (mr, size));

  before = free_device_memory ();
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    bufs[i] = allocate (mr, size);
  during = free_device_memory ();
  g_assert_cmpuint (before - during, >=, G_N_ELEMENTS (bufs) * size);
  g_assert_cmpuint (stats (mr).reserved_current, ==, G_N_ELEMENTS (bufs) * size);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    close_buffer (bufs[i]);
  after = free_device_memory ();

  if (mt_driver_is_fake ())
    g_assert_cmpuint (after, ==, before);
  else /* the real driver may move a little for itself; one leaked buffer would be 64 MiB */
    g_assert_cmpuint (after + size / 2, >=, before);
  g_assert_cmpuint (stats (mr).reserved_current, ==, 0);
  mt_assert_fake_counts_equal (&base);
}

/* --- options ------------------------------------------------------------------------------- */

static void
test_options_invalid (void)
{
  FakeCudaCounts base;
  gint n_devices = 0;

  if (!require_device ())
    return;
  mt_fake_counts_begin (&base);
  g_assert_true (memres_cuda_get_device_count (&n_devices, NULL));

  assert_spec_error ("vmm:location=moon", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "location");
  assert_spec_error ("vmm:numa_id=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "numa_id");
  assert_spec_error ("vmm:location=host,numa_id=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "numa_id");
  assert_spec_error ("vmm:handle_type=win32", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "handle_type");
  assert_spec_error ("vmm:location=host,handle_type=posix_fd", MEMRES_ERROR,
                     MEMRES_ERROR_INVALID_ARGUMENT, "handle_type");
  assert_spec_error ("vmm:granularity=huge", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "granularity");
  assert_spec_error ("vmm:access=wo", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "access");
  assert_spec_error ("vmm:chunk=max", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "chunk");
  assert_spec_error ("vmm:reserve=max", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "reserve");
  assert_spec_error ("vmm:peers=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "peers");
  {
    g_autofree char *spec = g_strdup_printf ("vmm:device=%d", n_devices);
    assert_spec_error (spec, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
    g_free (spec);
    spec = g_strdup_printf ("vmm:peers=%d", n_devices);
    assert_spec_error (spec, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
  }
  mt_assert_fake_counts_equal (&base);
}

/* Runs @spec with device 0's attribute @attr forced to 0 (fake only) and expects
 * NOT_SUPPORTED naming @needle. */
static void
check_unsupported (CUdevice_attribute attr, const char *spec, const char *needle)
{
  CUdevice dev;
  int saved = 0;

  g_assert_cmpint (drv->cuDeviceGet (&dev, 0), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuDeviceGetAttribute (&saved, attr, dev), ==, CUDA_SUCCESS);
  mt_fake_set_attribute (0, attr, 0);
  assert_spec_error (spec, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, needle);
  mt_fake_set_attribute (0, attr, saved);
}

static void
test_options_unsupported (void)
{
  FakeCudaCounts base;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("needs the fake driver to switch device attributes off");
      return;
    }
  mt_fake_counts_begin (&base);
  check_unsupported (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "vmm", "device 0");
  check_unsupported (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                     "vmm:handle_type=posix_fd", "posix_fd");
  check_unsupported (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, "vmm:handle_type=fabric",
                     "fabric");
  check_unsupported (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                     "vmm:gpu_direct_rdma=true", "gpu_direct_rdma");
  check_unsupported (CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                     "vmm:location=host_numa", "host_numa");
  /* CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
  check_unsupported ((CUdevice_attribute) 145, "vmm:location=host", "location=host");
  mt_assert_fake_counts_equal (&base);
}

/* The handle types and RDMA, where the device has them: the memory works the same. */
static void
test_options_supported (void)
{
  FakeCudaCounts base;
  const char *specs[] = { "vmm:handle_type=posix_fd",
                          "vmm:gpu_direct_rdma=true",
                          "vmm:location=host_numa,numa_id=0",
                          "vmm:location=host_numa,numa_id=-1",
                          "vmm:location=host_numa,handle_type=posix_fd",
                          "vmm:access=rw,granularity=recommended,reserve=0,chunk=0" };

  if (!require_device ())
    return;
  mt_fake_counts_begin (&base);
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresResource) mr = memres_resource_new (specs[i], &error);
      MemresBuffer *buf;

      if (mr == NULL && g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
        {
          g_test_message ("%s: %s", specs[i], error->message);
          continue;
        }
      g_assert_no_error (error);
      buf = allocate (mr, gran ());
      write_pattern (buf, 0, gran (), 11 + i);
      resize (buf, 3 * gran ());
      check_pattern (buf, 0, gran (), 11 + i);
      close_buffer (buf);
    }
  mt_assert_fake_counts_equal (&base);
}

/* --- access -------------------------------------------------------------------------------- */

/* Copies @n bytes at @address to @dest with device @device's context current. */
static CUresult
copy_from_device (int device, CUdeviceptr address, gpointer dest, gsize n)
{
  g_autoptr (GError) error = NULL;
  CUcontext ctx, previous = NULL;
  CUresult res;

  gboolean ok = memres_cuda_get_primary_context (device, &ctx, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  g_assert_cmpint (drv->cuCtxGetCurrent (&previous), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuCtxSetCurrent (ctx), ==, CUDA_SUCCESS);
  res = drv->cuMemcpyDtoHAsync (dest, address, n, NULL);
  if (res == CUDA_SUCCESS)
    res = drv->cuStreamSynchronize (NULL);
  g_assert_cmpint (drv->cuCtxSetCurrent (previous), ==, CUDA_SUCCESS);
  return res;
}

static void
test_peers (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) shared = NULL;
  g_autoptr (MemresResource) unshared = NULL;
  MemresBuffer *a, *b;
  gsize g;
  g_autofree guint8 *data = NULL;

  if (!mt_require_devices (2) || !require_device ())
    return;
  g = gran ();
  data = g_malloc (2 * g);
  mt_fake_counts_begin (&base);
  assert_spec_error ("vmm:peers=1+1", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "peers");
  shared = mt_new_printf_ok ("vmm:peers=1,chunk=%" G_GSIZE_FORMAT, g);
  unshared = mt_new_printf_ok ("vmm");

  a = allocate (shared, g);
  b = allocate (unshared, g);
  write_pattern (a, 0, g, 12);
  write_pattern (b, 0, g, 13);
  g_assert_cmpint (get_access (a, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  g_assert_cmpint (get_access (a, 1), ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  g_assert_cmpint (get_access (b, 1), ==, CU_MEM_ACCESS_FLAGS_PROT_NONE);

  g_assert_cmpint (copy_from_device (1, memres_buffer_get_address (a), data, g), ==, CUDA_SUCCESS);
  mt_assert_pattern (data, g, 12);
  g_assert_cmpint (copy_from_device (1, memres_buffer_get_address (b), data, g), !=, CUDA_SUCCESS);

  /* memory added by a grow is shared too, in place and after a move */
  resize (a, 2 * g);
  write_pattern (a, g, g, 14);
  g_assert_cmpint (copy_from_device (1, memres_buffer_get_address (a), data, 2 * g), ==,
                   CUDA_SUCCESS);
  mt_assert_pattern (data, g, 12);
  mt_assert_pattern (data + g, g, 14);
  {
    VmmBlocker blocker = block_after (a);
    guint64 address = memres_buffer_get_address (a);

    resize (a, 3 * g);
    g_assert_cmpuint (memres_buffer_get_address (a), !=, address);
    g_assert_cmpint (copy_from_device (1, memres_buffer_get_address (a), data, 2 * g), ==,
                     CUDA_SUCCESS);
    mt_assert_pattern (data, g, 12);
    mt_assert_pattern (data + g, g, 14);
    unblock (&blocker);
  }

  /* with device 1's context current, a shrink waits in device 0's and leaves device 1's current */
  {
    g_autoptr (GError) error = NULL;
    CUcontext ctx1, previous = NULL, now = NULL;
    long pushes = mt_driver_is_fake () ? mt_fake_call_count ("cuCtxPushCurrent") : 0;
    gboolean ok = memres_cuda_get_primary_context (1, &ctx1, &error);

    g_assert_no_error (error);
    g_assert_true (ok);
    g_assert_cmpint (drv->cuCtxGetCurrent (&previous), ==, CUDA_SUCCESS);
    g_assert_cmpint (drv->cuCtxSetCurrent (ctx1), ==, CUDA_SUCCESS);
    resize (a, g);
    g_assert_cmpint (drv->cuCtxGetCurrent (&now), ==, CUDA_SUCCESS);
    g_assert_true (now == ctx1);
    g_assert_cmpint (drv->cuCtxSetCurrent (previous), ==, CUDA_SUCCESS);
    if (mt_driver_is_fake ())
      g_assert_cmpint (mt_fake_call_count ("cuCtxPushCurrent"), ==, pushes + 1);
    check_pattern (a, 0, g, 12);
  }

  close_buffer (a);
  close_buffer (b);
  mt_assert_fake_counts_equal (&base);
}

/* Writes into a read-only buffer. Runs in a subprocess: on a GPU, a faulting write can leave the
 * context unusable. */
static void
test_read_only (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  gsize g;
  g_autofree guint8 *before = NULL;
  g_autofree guint8 *after = NULL;
  CUresult res;

  if (!require_device ())
    return;
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
      g_test_trap_assert_passed ();
      return;
    }
  g = gran ();
  before = g_malloc (g);
  after = g_malloc (g);
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:access=ro");
  buf = allocate (mr, g);
  g_assert_cmpint (get_access (buf, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READ);
  gboolean ok = memres_buffer_read (buf, 0, before, g, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);

  ensure_context ();
  res = drv->cuMemsetD8Async (memres_buffer_get_address (buf), 0xa5, g, NULL);
  if (res == CUDA_SUCCESS)
    res = drv->cuStreamSynchronize (NULL);
  if (mt_driver_is_fake ())
    g_assert_cmpint (res, !=, CUDA_SUCCESS);
  if (res == CUDA_SUCCESS)
    {
      /* a driver that does not report the write must at least not have done it */
      gboolean ok = memres_buffer_read (buf, 0, after, g, NULL, &error);
      g_assert_no_error (error);
      g_assert_true (ok);
      g_assert_cmpmem (before, g, after, g);
    }
  else
    g_test_message ("the write failed with %d", (int) res);

  /* growing keeps the buffer read-only */
  if (mt_driver_is_fake ())
    {
      resize (buf, 2 * g);
      g_assert_cmpint (get_access (buf, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READ);
      gboolean ok = memres_buffer_read (buf, 0, after, g, NULL, &error);
      g_assert_no_error (error);
      g_assert_true (ok);
      close_buffer (buf);
      mt_assert_fake_counts_equal (&base);
    }
}

/* --- statistics ---------------------------------------------------------------------------- */

static void
test_stats (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  MemresStats s;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 3 * g);
  s = stats (mr);
  g_assert_cmpuint (s.reserved_current, ==, 3 * g);
  g_assert_cmpuint (s.used_current, ==, 3 * g);
  resize (buf, 5 * g);
  resize (buf, 2 * g - 1);
  s = stats (mr);
  g_assert_cmpuint (s.reserved_current, ==, 2 * g);
  g_assert_cmpuint (s.used_current, ==, 2 * g);
  g_assert_cmpuint (s.reserved_high, ==, 5 * g);
  g_assert_cmpuint (s.used_high, ==, 5 * g);
  gboolean ok = memres_resource_reset_stats (mr, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  s = stats (mr);
  g_assert_cmpuint (s.reserved_high, ==, 2 * g);
  g_assert_cmpuint (s.used_high, ==, 2 * g);
  close_buffer (buf);
  s = stats (mr);
  g_assert_cmpuint (s.reserved_current, ==, 0);
  g_assert_cmpuint (s.used_current, ==, 0);
  mt_assert_fake_counts_equal (&base);
}

/* A resize through `stats>vmm` changes what the `stats` layer counts as it changes vmm's usage:
 * the used bytes (and the tag's) are the new size after growing and after shrinking, a growth
 * raises the peaks, the allocation and its totals stay one; closing takes the new size back. */
static void
test_stats_counted_resize (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresStatsCounters c;
  MemresTagCounts t;
  MemresBuffer *buf;
  MemresStats s;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("stats>vmm:chunk=%" G_GSIZE_FORMAT, g);
  g_assert_true (memres_tag_push ("test-vmm-resize", &error));
  g_assert_no_error (error);
  buf = allocate (mr, 3 * g);
  g_assert_true (memres_tag_pop ("test-vmm-resize", &error));
  resize (buf, 5 * g);
  s = stats (mr);
  g_assert_cmpuint (s.used_current, ==, 5 * g);
  g_assert_cmpuint (s.used_high, ==, 5 * g);
  g_assert_true (memres_stats_get_counters (mr, &c, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (c.bytes_current, ==, 5 * g);
  g_assert_cmpuint (c.bytes_peak, ==, 5 * g);
  g_assert_cmpuint (c.bytes_total, ==, 3 * g);
  g_assert_cmpuint (c.count_current, ==, 1);
  g_assert_cmpuint (c.count_total, ==, 1);
  g_assert_true (memres_resource_get_tag_counts (mr, "test-vmm-resize", &t, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (t.bytes_current, ==, 5 * g);
  g_assert_cmpuint (t.bytes_peak, ==, 5 * g);
  g_assert_cmpuint (t.count_current, ==, 1);
  /* the layer below counts the same */
  g_assert_cmpuint (stats (memres_resource_get_upstream (mr)).used_current, ==, 5 * g);
  resize (buf, 2 * g - 1);
  s = stats (mr);
  g_assert_cmpuint (s.used_current, ==, 2 * g);
  g_assert_cmpuint (s.used_high, ==, 5 * g);
  g_assert_true (memres_resource_get_tag_counts (mr, "test-vmm-resize", &t, &error));
  g_assert_cmpuint (t.bytes_current, ==, 2 * g);
  g_assert_cmpuint (t.bytes_peak, ==, 5 * g);
  g_assert_cmpuint (stats (memres_resource_get_upstream (mr)).used_current, ==, 2 * g);
  resize (buf, 0);
  g_assert_cmpuint (stats (mr).used_current, ==, 0);
  resize (buf, g);
  g_assert_cmpuint (stats (mr).used_current, ==, g);
  close_buffer (buf);
  g_assert_true (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.bytes_current, ==, 0);
  g_assert_cmpuint (c.count_current, ==, 0);
  g_assert_true (memres_resource_get_tag_counts (mr, "test-vmm-resize", &t, &error));
  g_assert_cmpuint (t.bytes_current, ==, 0);
  g_assert_cmpuint (stats (mr).used_current, ==, 0);
  g_assert_cmpuint (stats (memres_resource_get_upstream (mr)).used_current, ==, 0);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  vmm_test_init (&argc, &argv);

  g_test_add_func ("/vmm/allocate/rounding", test_allocate_rounding);
  g_test_add_func ("/vmm/allocate/minimum-granularity", test_allocate_minimum_granularity);
  g_test_add_func ("/vmm/allocate/huge", test_allocate_huge);
  g_test_add_func ("/vmm/allocate/huge-table", test_allocate_huge_table);
  g_test_add_func ("/vmm/allocate/many-chunks", test_allocate_many_chunks);
  g_test_add_func ("/vmm/sleep/many-chunks", test_sleep_many_chunks);
  g_test_add_func ("/vmm/allocate/host", test_allocate_host);
  g_test_add_func ("/vmm/allocate/host-numa", test_allocate_host_numa);
  g_test_add_func ("/vmm/close/returns-memory", test_close_returns_memory);
  g_test_add_func ("/vmm/options/invalid", test_options_invalid);
  g_test_add_func ("/vmm/options/unsupported", test_options_unsupported);
  g_test_add_func ("/vmm/options/supported", test_options_supported);
  g_test_add_func ("/vmm/access/peers", test_peers);
  g_test_add_func ("/vmm/access/read-only", test_read_only);
  g_test_add_func ("/vmm/stats", test_stats);
  g_test_add_func ("/vmm/stats/counted-resize", test_stats_counted_resize);
  return g_test_run ();
}

/* test-ipc.c: the ipc kind in one process, against the fake driver (suite fake) and the real
 * one (suite gpu). Several processes: tests/test-ipc-procs.c. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "descriptor-layout.h"
#include "testutil.h"

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

static MemresBuffer *
alloc_pattern (MemresResource *mr, gsize size, guint32 seed)
{
  MemresBuffer *buf = mt_alloc_ok (mr, size, NULL);

  mt_write_pattern (buf, 0, size, seed, NULL);
  return buf;
}

static void
assert_buffer_pattern (MemresBuffer *buf, gsize offset, gsize size, guint32 seed, gsize seed_offset)
{
  g_autofree guint8 *host = g_malloc (size);
  g_autofree guint8 *want = g_malloc (seed_offset + size);
  GError *error = NULL;

  g_assert_true (memres_buffer_read (buf, offset, host, size, NULL, &error));
  g_assert_no_error (error);
  mt_sync_ok (NULL);
  mt_fill_pattern (want, seed_offset + size, seed);
  g_assert_cmpmem (host, size, want + seed_offset, size);
}

/* The exporter's handle imported back into this process, or NULL (test skipped) when the real
 * driver refuses to import a pool into the process that created it. */
static MemresResource *
import_own (MemresResource *exporter)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  GError *error = NULL;
  MemresResource *importer;

  handle = memres_resource_export_handle (exporter, &error);
  g_assert_no_error (error);
  importer = memres_resource_import_handle (handle, &error);
  if (importer == NULL && !mt_driver_is_fake () && error->domain == MEMRES_CUDA_ERROR)
    {
      g_test_skip_printf ("the driver does not import a pool into its own process: %s",
                          error->message);
      g_clear_error (&error);
      return NULL;
    }
  g_assert_no_error (error);
  g_assert_true (importer != exporter);
  return importer;
}

static void
test_create (void)
{
  g_autoptr (MemresResource) mr = NULL;
  FakeCudaCounts base;
  MemresBuffer *buf;
  MemresStats stats;
  GError *error = NULL;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("ipc:device=0,max_size=64MiB,release_threshold=1MiB");
  g_assert_cmpint (memres_resource_get_device (mr), ==, 0);
  g_assert_cmpint (memres_resource_get_flags (mr), ==,
                   MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED
                       | MEMRES_MEMORY_IPC_ENABLED);
  buf = alloc_pattern (mr, 1 * MiB, 3);
  assert_buffer_pattern (buf, 0, 1 * MiB, 3, 0);
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.used_current, >=, 1 * MiB);
  g_assert_cmpuint (stats.n_buffers, ==, 1);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_options (void)
{
  GError *error = NULL;

  if (!mt_require_devices (1))
    return;
  g_assert_null (memres_resource_new ("ipc:device=0,pool=new", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_resource_new ("ipc:device=0,max_size=0", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_resource_new ("ipc:device=4096", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  g_clear_error (&error);
}

/* A device without POSIX-fd pool handles cannot make an ipc pool (fake: attribute set to 0). */
static void
test_no_posix_fd_support (void)
{
  FakeCudaCounts base;
  GError *error = NULL;

  if (!mt_require_fake ("needs the fake driver to hide POSIX file descriptor support"))
    return;
  mt_counts_snapshot (&base);
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0);
  g_assert_null (memres_resource_new ("ipc", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
  g_assert_null (memres_resource_new ("ipc", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1);
  mt_assert_fake_counts_equal (&base);
}

/* Export and import within one process: the import is a separate resource that maps the same
 * memory; writes through one are read through the other. */
static void
test_same_process (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresBufferDescriptor desc;
  MemresBuffer *buf, *imported;
  MemresResource *again;
  FakeCudaCounts base;
  GError *error = NULL;
  int fds;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("ipc");
  fds = mt_count_open_fds ();
  importer = import_own (exporter);
  if (importer == NULL)
    return;
  g_assert_true (memres_resource_get_flags (importer) & MEMRES_MEMORY_IMPORTED);
  g_assert_true (memres_resource_get_flags (importer) & MEMRES_MEMORY_IPC_ENABLED);
  g_assert_cmpint (memres_resource_get_device (importer), ==, 0);
  g_assert_cmpstr (memres_resource_get_kind_name (importer), ==, "ipc");

  /* Same pool again: the same resource. */
  handle = memres_resource_export_handle (exporter, &error);
  g_assert_no_error (error);
  again = memres_resource_import_handle (handle, &error);
  g_assert_no_error (error);
  g_assert_true (again == importer);
  memres_resource_unref (again);

  buf = alloc_pattern (exporter, 256 * KiB, 11);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  g_assert_no_error (error);
  imported = memres_buffer_import (importer, desc.bytes, sizeof desc.bytes, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (imported), ==, 256 * KiB);
  g_assert_true (memres_buffer_get_flags (imported) & MEMRES_MEMORY_IMPORTED);
  g_assert_true (memres_buffer_get_resource (imported) == importer);
  assert_buffer_pattern (imported, 0, 256 * KiB, 11, 0);

  /* Importer writes, exporter reads. */
  g_assert_true (memres_buffer_fill (imported, 0xabcd1234, 4, NULL, &error));
  g_assert_no_error (error);
  mt_sync_ok (NULL);
  {
    guint32 words[4];
    g_assert_true (memres_buffer_read (buf, 64 * KiB, words, sizeof words, NULL, &error));
    mt_sync_ok (NULL);
    for (int i = 0; i < 4; i++)
      g_assert_cmphex (words[i], ==, 0xabcd1234);
  }

  /* The importer's buffer goes first (the driver's rule), then the exporter's. */
  mt_close_ok (imported, NULL);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  memres_buffer_unref (buf);
  g_clear_pointer (&handle, memres_ipc_handle_free);
  g_clear_pointer (&importer, memres_resource_unref);
  /* The imported pool's fds are gone with it. The real driver opens descriptors of its own on
   * the first import of a process (two more on the H200, kept for the life of the process):
   * there, flatness is asserted over repeated cycles by /ipc-procs/cycles. */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_count_open_fds (), ==, fds);
  else
    g_assert_cmpint (mt_count_open_fds (), <=, fds + 4);
  g_clear_pointer (&exporter, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_imported_cannot_allocate (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresBuffer) empty = NULL;
  GError *error = NULL;

  if (!mt_require_devices (1))
    return;
  exporter = mt_new_ok ("ipc");
  importer = import_own (exporter);
  if (importer == NULL)
    return;
  g_assert_null (memres_resource_allocate (importer, 4096, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  /* Zero bytes are the core's business, the same for every kind. */
  empty = mt_alloc_ok (importer, 0, NULL);
  g_assert_cmpuint (memres_buffer_get_size (empty), ==, 0);
  /* The exporter cannot import its own buffers (it has them). */
  {
    g_autoptr (MemresBuffer) buf = alloc_pattern (exporter, 4096, 1);
    MemresBufferDescriptor desc;
    g_assert_true (memres_buffer_export (buf, &desc, &error));
    g_assert_null (memres_buffer_import (exporter, desc.bytes, sizeof desc.bytes, NULL, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_clear_error (&error);
  }
}

/* Pools that are not shareable, and fds that are not pool handles: NOT_SUPPORTED, no crash,
 * no leak. */
static void
test_non_ipc_handle (void)
{
  g_autoptr (MemresResource) dmr = NULL;
  FakeCudaCounts base;
  MemresIpcHandle *handle;
  GError *error = NULL;
  guint8 id[MEMRES_IPC_ID_SIZE] = { 7 };
  guint8 uuid[MEMRES_IPC_ID_SIZE];
  int fds;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  g_assert_true (memres_cuda_get_device_uuid (0, uuid, &error));
  g_assert_no_error (error);
  dmr = mt_new_ok ("dmr:device=0,pool=new");
  g_assert_null (memres_resource_export_handle (dmr, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  fds = mt_count_open_fds ();

  /* A handle that claims kind dmr: that kind cannot import. */
  handle
      = memres_ipc_handle_new ("dmr", memfd_create ("not-a-pool", MFD_CLOEXEC), id, uuid, &error);
  g_assert_no_error (error);
  g_assert_null (memres_resource_import_handle (handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  memres_ipc_handle_free (handle);

  /* Kind ipc, but the fd is no pool's. */
  handle
      = memres_ipc_handle_new ("ipc", memfd_create ("not-a-pool", MFD_CLOEXEC), id, uuid, &error);
  g_assert_no_error (error);
  g_assert_null (memres_resource_import_handle (handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_test_message ("refused: %s", error->message);
  g_clear_error (&error);
  memres_ipc_handle_free (handle);

  /* A kind nobody provides. */
  handle = memres_ipc_handle_new ("nosuchkind", memfd_create ("x", MFD_CLOEXEC), id, uuid, &error);
  g_assert_null (memres_resource_import_handle (handle, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);
  memres_ipc_handle_free (handle);

  /* A device UUID no device here has. */
  {
    g_autoptr (MemresResource) exporter = mt_new_ok ("ipc");
    g_autoptr (MemresIpcHandle) good = memres_resource_export_handle (exporter, &error);
    guint8 bad_uuid[MEMRES_IPC_ID_SIZE];
    int fd = fcntl (memres_ipc_handle_get_fd (good), F_DUPFD_CLOEXEC, 0);
    memset (bad_uuid, 0x5a, sizeof bad_uuid);
    handle
        = memres_ipc_handle_new ("ipc", fd, memres_ipc_handle_get_pool_id (good), bad_uuid, &error);
    g_assert_no_error (error);
    g_assert_null (memres_resource_import_handle (handle, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE);
    g_clear_error (&error);
    memres_ipc_handle_free (handle);
  }

  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  g_clear_pointer (&dmr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
assert_import_not_supported (MemresResource *mr, const MemresBufferDescriptor *desc)
{
  g_autoptr (GError) error = NULL;
  long imports = mt_driver_is_fake () ? mt_fake_call_count ("cuMemPoolImportPointer") : 0;

  g_assert_null (memres_buffer_import (mr, desc->bytes, sizeof desc->bytes, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_test_message ("%s: %s", memres_resource_get_kind_name (mr), error->message);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemPoolImportPointer"), ==, imports);
}

/* A resource that imports nothing answers NOT_SUPPORTED to a well-formed descriptor on every
 * path, whatever kind, pool and device the descriptor names: a kind without IPC, an exporter
 * (before and after it exported), a pinned pool made without ipc=true, a vmm resource, and
 * receiving a buffer sent as chunks. */
static void
test_import_not_importer (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) pinned_exporter = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  g_autoptr (MemresBuffer) pinned_buf = NULL;
  FakeCudaCounts base;
  MemresBufferDescriptor desc, pinned_desc;
  GError *error = NULL;
  const char *const others[]
      = { "dmr", "dmr:pool=new", "ipc", "pinned", "pinned:ipc=false", "vmm", "host" };

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("ipc");
  buf = alloc_pattern (exporter, 64 * KiB, 8);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  g_assert_no_error (error);
  pinned_exporter = memres_resource_new ("pinned:ipc=true", &error);
  if (pinned_exporter == NULL)
    {
      /* the real driver may have no host NUMA pools */
      g_assert_false (mt_driver_is_fake ());
      g_test_message ("no shareable pinned pool: %s", error->message);
      g_clear_error (&error);
    }
  else
    {
      pinned_buf = alloc_pattern (pinned_exporter, 64 * KiB, 9);
      g_assert_true (memres_buffer_export (pinned_buf, &pinned_desc, &error));
      g_assert_no_error (error);
    }

  /* the exporter itself, with its own descriptor (its pool identity is known) */
  assert_import_not_supported (exporter, &desc);
  if (pinned_exporter != NULL)
    assert_import_not_supported (pinned_exporter, &pinned_desc);
  /* new resources that never exported, with descriptors of their kind and of another */
  for (guint i = 0; i < G_N_ELEMENTS (others); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (others[i]);

      assert_import_not_supported (mr, &desc);
      if (pinned_exporter != NULL)
        assert_import_not_supported (mr, &pinned_desc);
    }

  /* a buffer sent as chunks, received by resources that cannot import chunks */
  {
    const char *const receivers[] = { "vmm", "dmr", "ipc" };
    g_autoptr (MemresResource) sender = mt_new_ok ("vmm:handle_type=posix_fd");
    g_autoptr (MemresBuffer) vbuf = mt_alloc_ok (sender, 2 * MiB, NULL);

    for (guint i = 0; i < G_N_ELEMENTS (receivers); i++)
      {
        g_autoptr (MemresResource) mr = mt_new_ok (receivers[i]);
        int sv[2];

        g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
        g_assert_true (memres_ipc_send_buffer (sv[0], vbuf, &error));
        g_assert_no_error (error);
        g_assert_null (memres_ipc_receive_buffer (sv[1], mr, 0, NULL, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
        g_test_message ("%s: %s", receivers[i], error->message);
        g_clear_error (&error);
        close (sv[0]);
        close (sv[1]);
      }
    mt_close_ok (g_steal_pointer (&vbuf), NULL);
  }

  g_clear_pointer (&buf, memres_buffer_unref);
  g_clear_pointer (&pinned_buf, memres_buffer_unref);
  g_clear_pointer (&exporter, memres_resource_unref);
  g_clear_pointer (&pinned_exporter, memres_resource_unref);
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&base);
}

/* Imports @exporter's handle relabelled as kind @as, and one of its buffers with the descriptor's
 * kind relabelled alike: the importer of @as must find out from the driver that the memory is
 * not what kind @as makes (device memory named pinned, host memory named ipc), and refuse the
 * buffer with INVALID_DESCRIPTOR, leaving nothing mapped. */
static void
check_relabelled (const char *exporter_spec, const char *as)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autoptr (MemresIpcHandle) forged = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  MemresBufferDescriptor desc;
  FakeCudaCounts base;
  GError *error = NULL;

  mt_counts_snapshot (&base);
  exporter = memres_resource_new (exporter_spec, &error);
  if (exporter == NULL)
    {
      g_assert_false (mt_driver_is_fake ());
      g_test_skip_printf ("%s: %s", exporter_spec, error->message);
      g_clear_error (&error);
      return;
    }
  buf = alloc_pattern (exporter, 64 * KiB, 12);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  g_assert_no_error (error);
  handle = memres_resource_export_handle (exporter, &error);
  g_assert_no_error (error);
  forged = memres_ipc_handle_new (as, fcntl (memres_ipc_handle_get_fd (handle), F_DUPFD_CLOEXEC, 0),
                                  memres_ipc_handle_get_pool_id (handle),
                                  memres_ipc_handle_get_device_uuid (handle), &error);
  g_assert_no_error (error);
  importer = memres_resource_import_handle (forged, &error);
  if (importer == NULL)
    {
      /* refusing the pool outright is as good (the real driver may refuse the access grant) */
      g_test_message ("%s relabelled %s: pool refused: %s", exporter_spec, as, error->message);
      g_clear_error (&error);
    }
  else
    {
      MemresBufferDescriptor relabelled = desc;
      long imports = mt_driver_is_fake () ? mt_fake_call_count ("cuMemPoolImportPointer") : 0;
      MemresStats stats;

      /* what the resource cannot know before a mapping: it claims the memory of kind @as */
      if (g_str_equal (as, "pinned"))
        {
          g_assert_cmphex (memres_resource_get_flags (importer)
                               & (MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE),
                           ==, MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE);
          g_assert_cmpint (memres_resource_get_device (importer), ==, -1);
        }
      else
        {
          g_assert_cmphex (memres_resource_get_flags (importer)
                               & (MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE),
                           ==, MEMRES_MEMORY_DEVICE_ACCESSIBLE);
          g_assert_cmpint (memres_resource_get_device (importer), ==, 0);
        }
      g_assert_cmphex (memres_resource_get_flags (importer) & MEMRES_MEMORY_IMPORTED, ==,
                       MEMRES_MEMORY_IMPORTED);
      memset (relabelled.bytes + OFF_KIND, 0, OFF_POOL_ID - OFF_KIND);
      memcpy (relabelled.bytes + OFF_KIND, as, strlen (as));
      g_assert_null (
          memres_buffer_import (importer, relabelled.bytes, sizeof relabelled.bytes, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
      g_test_message ("%s relabelled %s: %s", exporter_spec, as, error->message);
      g_assert_nonnull (strstr (error->message, "relabelled"));
      g_clear_error (&error);
      /* and again: every import asks the driver, none maps */
      g_assert_null (
          memres_buffer_import (importer, relabelled.bytes, sizeof relabelled.bytes, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
      g_clear_error (&error);
      /* the driver was asked (the check is the mapped memory's type), and nothing stays */
      if (mt_driver_is_fake ())
        g_assert_cmpint (mt_fake_call_count ("cuMemPoolImportPointer"), ==, imports + 2);
      g_assert_true (memres_resource_get_stats (importer, &stats, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (stats.n_buffers, ==, 0);
      g_assert_cmpuint (stats.used_current, ==, 0);
      g_clear_pointer (&importer, memres_resource_unref);
    }
  /* the exporter's bytes are intact */
  assert_buffer_pattern (buf, 0, 64 * KiB, 12, 0);
  mt_close_ok (g_steal_pointer (&buf), NULL);
  g_clear_pointer (&exporter, memres_resource_unref);
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&base);
}

static void
test_relabelled_handle (void)
{
  if (!mt_require_devices (1))
    return;
  check_relabelled ("ipc", "pinned");
  check_relabelled ("pinned:ipc=true", "ipc");
}

/* Bad descriptors are refused before any driver call. */
static void
test_validation_before_driver (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  MemresBufferDescriptor desc, bad;
  GError *error = NULL;
  long imports, ranges;

  if (!mt_require_devices (1))
    return;
  exporter = mt_new_ok ("ipc");
  importer = import_own (exporter);
  if (importer == NULL)
    return;
  buf = alloc_pattern (exporter, 64 * KiB, 5);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  g_assert_no_error (error);

  imports = mt_driver_is_fake () ? mt_fake_call_count ("cuMemPoolImportPointer") : 0;
  ranges = mt_driver_is_fake () ? mt_fake_call_count ("cuPointerGetAttributes") : 0;

  g_assert_null (memres_buffer_import (importer, desc.bytes, 159, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
  bad = desc;
  bad.bytes[0] ^= 1;
  g_assert_null (memres_buffer_import (importer, bad.bytes, sizeof bad.bytes, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
  bad = desc;
  mt_put_u64 (bad.bytes + OFF_SIZE, 0);
  g_assert_null (memres_buffer_import (importer, bad.bytes, sizeof bad.bytes, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
  bad = desc;
  mt_put_u64 (bad.bytes + OFF_OFFSET, G_MAXUINT64);
  g_assert_null (memres_buffer_import (importer, bad.bytes, sizeof bad.bytes, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
  bad = desc;
  bad.bytes[40] ^= 0xff; /* pool identity */
  g_assert_null (memres_buffer_import (importer, bad.bytes, sizeof bad.bytes, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);

  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuMemPoolImportPointer"), ==, imports);
      g_assert_cmpint (mt_fake_call_count ("cuPointerGetAttributes"), ==, ranges);
    }
}

/* A descriptor claiming more bytes than were exported is refused and unmapped again. */
static void
test_size_lying (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  MemresBufferDescriptor desc, bad;
  FakeCudaCounts base;
  GError *error = NULL;

  if (!mt_require_devices (1))
    return;
  exporter = mt_new_ok ("ipc");
  importer = import_own (exporter);
  if (importer == NULL)
    return;
  buf = alloc_pattern (exporter, 64 * KiB, 5);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  g_assert_no_error (error);
  mt_counts_snapshot (&base);

  bad = desc;
  mt_put_u64 (bad.bytes + OFF_SIZE, 1024 * MiB);
  g_assert_null (memres_buffer_import (importer, bad.bytes, sizeof bad.bytes, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_test_message ("refused: %s", error->message);
  g_clear_error (&error);
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&base);

  /* A part of the buffer is fine. */
  {
    g_autoptr (MemresBuffer) part = NULL;
    bad = desc;
    mt_put_u64 (bad.bytes + OFF_OFFSET, 4 * KiB);
    mt_put_u64 (bad.bytes + OFF_SIZE, 8 * KiB);
    part = memres_buffer_import (importer, bad.bytes, sizeof bad.bytes, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (memres_buffer_get_size (part), ==, 8 * KiB);
    assert_buffer_pattern (part, 0, 8 * KiB, 5, 4 * KiB);
  }
}

/* Two imports of one buffer share one mapping: closing one leaves the other usable. */
static void
test_dedup (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  MemresBufferDescriptor desc;
  MemresBuffer *a, *b;
  FakeCudaCounts base;
  GError *error = NULL;
  long imports;

  if (!mt_require_devices (1))
    return;
  exporter = mt_new_ok ("ipc");
  importer = import_own (exporter);
  if (importer == NULL)
    return;
  buf = alloc_pattern (exporter, 128 * KiB, 9);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  mt_counts_snapshot (&base);
  imports = mt_driver_is_fake () ? mt_fake_call_count ("cuMemPoolImportPointer") : 0;

  a = memres_buffer_import (importer, desc.bytes, sizeof desc.bytes, NULL, &error);
  g_assert_no_error (error);
  b = memres_buffer_import (importer, desc.bytes, sizeof desc.bytes, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (a != b);
  /* The importer's statistics come from the core (the driver refuses cuMemPoolGetAttribute on
   * an imported pool): two open buffers, one mapping of at least their size. */
  {
    MemresStats stats;

    g_assert_true (memres_resource_get_stats (importer, &stats, &error));
    g_assert_no_error (error);
    g_assert_cmpuint (stats.n_buffers, ==, 2);
    g_assert_cmpuint (stats.used_current, >=, 128 * KiB);
    g_assert_cmpuint (stats.used_current, <, 2 * 128 * KiB);
    g_assert_cmpuint (stats.reserved_current, ==, stats.used_current);
    g_assert_cmpuint (stats.used_high, ==, stats.used_current);
  }
  /* One mapping: the driver saw one import (real drivers unmap both on the first free). */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemPoolImportPointer"), ==, imports + 1);
  g_assert_cmphex (memres_buffer_get_address (a), ==, memres_buffer_get_address (b));
  g_assert_true (memres_buffer_close (a, NULL, &error));
  g_assert_no_error (error);
  mt_sync_ok (NULL);
  assert_buffer_pattern (b, 0, 128 * KiB, 9, 0);
  memres_buffer_unref (a);
  memres_buffer_unref (b);
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&base);
  /* Nothing mapped any more; the high-water mark stays until reset. */
  {
    MemresStats stats;

    g_assert_true (memres_resource_get_stats (importer, &stats, &error));
    g_assert_no_error (error);
    g_assert_cmpuint (stats.n_buffers, ==, 0);
    g_assert_cmpuint (stats.used_current, ==, 0);
    g_assert_cmpuint (stats.used_high, >=, 128 * KiB);
    g_assert_true (memres_resource_reset_stats (importer, &error));
    g_assert_no_error (error);
    g_assert_true (memres_resource_get_stats (importer, &stats, &error));
    g_assert_cmpuint (stats.used_high, ==, 0);
  }
}

typedef struct
{
  MemresResource *importer;
  const MemresBufferDescriptor *desc;
  GError *error;
} ThreadData;

static gpointer
import_thread (gpointer data)
{
  ThreadData *t = data;

  for (int i = 0; i < 200 && t->error == NULL; i++)
    {
      MemresBuffer *buf = memres_buffer_import (t->importer, t->desc->bytes, sizeof t->desc->bytes,
                                                NULL, &t->error);
      if (buf == NULL)
        break;
      memres_buffer_unref (buf);
    }
  return NULL;
}

/* Four threads importing one descriptor: no deadlock, no leak. */
static void
test_threads (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  MemresBufferDescriptor desc;
  FakeCudaCounts base;
  GThread *threads[4];
  ThreadData t[4];
  GError *error = NULL;

  if (!mt_require_devices (1))
    return;
  exporter = mt_new_ok ("ipc");
  importer = import_own (exporter);
  if (importer == NULL)
    return;
  buf = alloc_pattern (exporter, 4 * KiB, 2);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  mt_counts_snapshot (&base);
  for (int i = 0; i < 4; i++)
    {
      t[i] = (ThreadData){ importer, &desc, NULL };
      threads[i] = g_thread_new ("import", import_thread, &t[i]);
    }
  for (int i = 0; i < 4; i++)
    {
      g_thread_join (threads[i]);
      g_assert_no_error (t[i].error);
    }
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&base);
}

/* Repeated export/import in one process keeps fds and driver objects flat. */
static void
test_cycles_flat (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  FakeCudaCounts base;
  GError *error = NULL;
  int fds;

  if (!mt_require_devices (1))
    return;
  exporter = mt_new_ok ("ipc");
  mt_counts_snapshot (&base);
  fds = mt_count_open_fds ();
  for (int i = 0; i < 1000; i++)
    {
      /* The real driver opens descriptors of its own at the first import of a process and keeps
       * them: count from the end of the first cycle there. */
      if (i == 1 && !mt_driver_is_fake ())
        fds = mt_count_open_fds ();
      MemresIpcHandle *handle = memres_resource_export_handle (exporter, &error);
      MemresResource *importer;
      MemresBuffer *buf, *imported;
      MemresBufferDescriptor desc;

      g_assert_no_error (error);
      importer = memres_resource_import_handle (handle, &error);
      if (importer == NULL && !mt_driver_is_fake ())
        {
          g_test_skip_printf ("no import into the exporting process: %s", error->message);
          g_clear_error (&error);
          memres_ipc_handle_free (handle);
          return;
        }
      g_assert_no_error (error);
      memres_ipc_handle_free (handle);
      buf = mt_alloc_ok (exporter, 4096, NULL);
      g_assert_true (memres_buffer_export (buf, &desc, &error));
      imported = memres_buffer_import (importer, desc.bytes, sizeof desc.bytes, NULL, &error);
      g_assert_no_error (error);
      memres_buffer_unref (imported);
      memres_resource_unref (importer);
      memres_buffer_unref (buf);
    }
  mt_sync_ok (NULL);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_assert_fake_counts_equal (&base);
}

/* Fault sweeps (fake): every driver call of each step fails once; nothing leaks. */
static gboolean
op_create (gpointer data, GError **error)
{
  MtIpcSweepData *d = data;

  d->made_import = memres_resource_new ("ipc:release_threshold=1MiB,max_size=256MiB", error);
  return d->made_import != NULL;
}

static void
test_fault_sweep (void)
{
  static const char *const ignore[] = { "cuStreamIsCapturing", NULL };
  MtIpcSweepData d = { 0 };
  GError *error = NULL;

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  d.exporter = mt_new_ok ("ipc");
  d.handle = memres_resource_export_handle (d.exporter, &error);
  g_assert_no_error (error);
  d.buf = alloc_pattern (d.exporter, 4096, 1);
  g_assert_true (memres_buffer_export (d.buf, &d.desc, &error));

  /* Creating an exporting pool, importing its handle and exporting a buffer make driver calls;
   * exporting a handle only duplicates the fd the pool exported at creation. */
  g_assert_cmpint (mt_fault_sweep ("ipc create", op_create, mt_undo_ipc, &d,
                                   CUDA_ERROR_OPERATING_SYSTEM, ignore),
                   >, 0);
  g_assert_cmpint (mt_fault_sweep ("export handle", mt_op_export_handle, mt_undo_ipc, &d,
                                   CUDA_ERROR_OPERATING_SYSTEM, ignore),
                   ==, 0);
  g_assert_cmpint (mt_fault_sweep ("import handle", mt_op_import_handle, mt_undo_ipc, &d,
                                   CUDA_ERROR_OPERATING_SYSTEM, ignore),
                   >, 0);
  g_assert_cmpint (mt_fault_sweep ("export buffer", mt_op_export_buffer, NULL, &d,
                                   CUDA_ERROR_OPERATING_SYSTEM, ignore),
                   >, 0);
  d.importer = memres_resource_import_handle (d.handle, &error);
  g_assert_no_error (error);
  g_assert_cmpint (mt_fault_sweep ("import buffer", mt_op_import_buffer, mt_undo_ipc, &d,
                                   CUDA_ERROR_OPERATING_SYSTEM, ignore),
                   >, 0);
  memres_resource_unref (d.importer);
  memres_ipc_handle_free (d.handle);
  memres_buffer_unref (d.buf);
  memres_resource_unref (d.exporter);
}

/* memres_ipc_send_buffer() of a pool buffer: one message with the pool's handle record and the
 * buffer's descriptor; the receiver imports the pool (importer NULL) or uses the pool it
 * imported (importer that pool), then the buffer. */
static MemresBuffer *
send_receive (MemresBuffer *buf, MemresResource *importer, GError **error)
{
  MemresBuffer *got = NULL;
  int sv[2];

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  if (memres_ipc_send_buffer (sv[0], buf, error))
    got = memres_ipc_receive_buffer (sv[1], importer, MEMRES_IPC_NONE, NULL, error);
  close (sv[0]);
  close (sv[1]);
  return got;
}

static void
test_send_pool_buffer (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) other = NULL;
  MemresBuffer *buf, *got, *again;
  MemresResource *pool;
  FakeCudaCounts base;
  GError *error = NULL;
  int fds;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("ipc");
  other = mt_new_ok ("ipc");
  buf = alloc_pattern (exporter, 256 * KiB, 17);
  /* The real driver opens descriptors of its own at the first import of a process and keeps
   * them (see /ipc/import/cycles): one cycle first there, then count */
  if (!mt_driver_is_fake () && (got = send_receive (buf, NULL, NULL)) != NULL)
    mt_close_ok (got, NULL);
  fds = mt_count_open_fds ();

  got = send_receive (buf, NULL, &error);
  if (got == NULL && !mt_driver_is_fake () && error->domain == MEMRES_CUDA_ERROR)
    {
      g_test_skip_printf ("the driver does not import a pool into its own process: %s",
                          error->message);
      g_clear_error (&error);
      mt_close_ok (buf, NULL);
      return;
    }
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (got), ==, 256 * KiB);
  g_assert_true (memres_buffer_get_flags (got) & MEMRES_MEMORY_IMPORTED);
  assert_buffer_pattern (got, 0, 256 * KiB, 17, 0);
  pool = memres_buffer_get_resource (got);
  g_assert_true (pool != exporter);
  g_assert_true (memres_resource_get_flags (pool) & MEMRES_MEMORY_IMPORTED);
  g_assert_cmpstr (memres_resource_get_kind_name (pool), ==, "ipc");

  /* into the pool imported before: the same resource */
  again = send_receive (buf, pool, &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_get_resource (again) == pool);
  assert_buffer_pattern (again, 0, 256 * KiB, 17, 0);
  mt_close_ok (again, NULL);

  /* into a resource that is not that pool's import: refused, nothing left open */
  g_assert_null (send_receive (buf, exporter, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
  g_assert_null (send_receive (buf, other, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);

  /* an imported buffer is not sent on */
  {
    int sv[2];

    g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
    g_assert_false (memres_ipc_send_buffer (sv[0], got, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_clear_error (&error);
    close (sv[0]);
    close (sv[1]);
  }
  mt_close_ok (got, NULL);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&exporter, memres_resource_unref);
  g_clear_pointer (&other, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* The pool buffer message (MRPB) is checked before anything is imported: every forgery is
 * MEMRES_ERROR_INVALID_DESCRIPTOR, every fd that came with it is closed. */
enum
{
  PB_SIZE = 240,
  PB_HANDLE = 8,
  PB_DESC = 80,
  PB_H_POOL_ID = 8 + 32,
};

/* A genuine message for @buf, as memres_ipc_send_buffer() makes it, from the public pieces. */
static void
genuine_message (MemresBuffer *buf, guint8 out[PB_SIZE])
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresBufferDescriptor desc;
  GError *error = NULL;
  const char *kind;

  handle = memres_resource_export_handle (memres_buffer_get_resource (buf), &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  g_assert_no_error (error);
  memset (out, 0, PB_SIZE);
  memcpy (out, "MRPB", 4);
  mt_put_le (out + 4, 1, 2);
  mt_put_le (out + 6, PB_SIZE, 2);
  memcpy (out + PB_HANDLE, "MRIH", 4);
  mt_put_le (out + PB_HANDLE + 4, 1, 2);
  mt_put_le (out + PB_HANDLE + 6, 72, 2);
  kind = memres_ipc_handle_get_kind (handle);
  memcpy (out + PB_HANDLE + 8, kind, strlen (kind));
  memcpy (out + PB_HANDLE + 40, memres_ipc_handle_get_pool_id (handle), MEMRES_IPC_ID_SIZE);
  memcpy (out + PB_HANDLE + 56, memres_ipc_handle_get_device_uuid (handle), MEMRES_IPC_ID_SIZE);
  memcpy (out + PB_DESC, desc.bytes, sizeof desc.bytes);
}

/* Sends @len bytes of @msg with @n_fds duplicates of a pool fd and expects the receive to fail
 * with @code, every fd closed; returns the buffer instead when @code is 0. */
static MemresBuffer *
receive_crafted (MemresResource *exporter, const guint8 *msg, gsize len, int n_fds, gint code,
                 int sock_type)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  GError *error = NULL;
  MemresBuffer *got;
  int sv[2], fds[2], before;

  handle = memres_resource_export_handle (exporter, &error);
  g_assert_no_error (error);
  g_assert_cmpint (socketpair (AF_UNIX, sock_type | SOCK_CLOEXEC, 0, sv), ==, 0);
  before = mt_count_open_fds ();
  for (int i = 0; i < n_fds; i++)
    fds[i] = dup (memres_ipc_handle_get_fd (handle));
  mt_send_raw (sv[0], msg, len, fds, n_fds, TRUE);
  for (int i = 0; i < n_fds; i++)
    close (fds[i]);
  if (sock_type == SOCK_STREAM)
    shutdown (sv[0], SHUT_WR); /* a truncated message ends here */
  got = memres_ipc_receive_buffer (sv[1], NULL, MEMRES_IPC_NONE, NULL, &error);
  if (code == 0)
    g_assert_no_error (error);
  else
    {
      g_assert_null (got);
      g_assert_error (error, MEMRES_ERROR, code);
      g_test_message ("refused: %s", error->message);
      g_clear_error (&error);
      g_assert_cmpint (mt_count_open_fds (), ==, before);
    }
  close (sv[0]);
  close (sv[1]);
  return got;
}

static void
test_send_pool_buffer_forged (void)
{
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) other = NULL;
  guint8 msg[PB_SIZE], bad[PB_SIZE];
  MemresBuffer *buf, *got;
  FakeCudaCounts base;
  int types[] = { SOCK_STREAM, SOCK_SEQPACKET };

  if (!mt_require_devices (1) || !mt_driver_is_fake ())
    {
      g_test_skip ("crafted pool messages run against the fake driver");
      return;
    }
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("ipc");
  other = mt_new_ok ("ipc");
  buf = alloc_pattern (exporter, 64 * KiB, 23);
  genuine_message (buf, msg);

  for (guint t = 0; t < G_N_ELEMENTS (types); t++)
    {
      /* the control: the genuine bytes are received */
      got = receive_crafted (exporter, msg, sizeof msg, 1, 0, types[t]);
      g_assert_nonnull (got);
      assert_buffer_pattern (got, 0, 64 * KiB, 23, 0);
      mt_close_ok (got, NULL);

      /* truncated: cut inside the descriptor, and a length field that says so */
      receive_crafted (exporter, msg, PB_SIZE - 1, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      memcpy (bad, msg, sizeof bad);
      mt_put_le (bad + 6, PB_SIZE - 8, 2);
      receive_crafted (exporter, bad, PB_SIZE - 8, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      /* another version */
      memcpy (bad, msg, sizeof bad);
      mt_put_le (bad + 4, 2, 2);
      receive_crafted (exporter, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      /* wrong record order: the descriptor first, then the handle */
      memcpy (bad, msg, 8);
      memcpy (bad + 8, msg + PB_DESC, 160);
      memcpy (bad + 8 + 160, msg + PB_HANDLE, 72);
      receive_crafted (exporter, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      /* fd count mismatch: none, two */
      receive_crafted (exporter, msg, sizeof msg, 0, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      receive_crafted (exporter, msg, sizeof msg, 2, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      /* forged pool id: in the handle (the descriptor no longer matches), in the descriptor */
      memcpy (bad, msg, sizeof bad);
      bad[PB_HANDLE + PB_H_POOL_ID] ^= 0x5a;
      receive_crafted (exporter, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      memcpy (bad, msg, sizeof bad);
      bad[PB_DESC + 8 + 32] ^= 0x5a; /* the descriptor's pool_id */
      receive_crafted (exporter, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
      /* another pool's handle with this pool's descriptor */
      {
        MemresBuffer *obuf = alloc_pattern (other, 4 * KiB, 1);
        guint8 omsg[PB_SIZE];

        genuine_message (obuf, omsg);
        memcpy (bad, omsg, PB_DESC);
        memcpy (bad + PB_DESC, msg + PB_DESC, 160);
        receive_crafted (other, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
        mt_close_ok (obuf, NULL);
      }
      /* a bad handle record inside (its magic) */
      memcpy (bad, msg, sizeof bad);
      bad[PB_HANDLE] ^= 0x01;
      receive_crafted (exporter, bad, sizeof bad, 1, MEMRES_ERROR_INVALID_DESCRIPTOR, types[t]);
    }
  mt_close_ok (buf, NULL);
  g_clear_pointer (&exporter, memres_resource_unref);
  g_clear_pointer (&other, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

#define CARVES                                                                                     \
  "\"cache\" carves its blocks out of larger allocations of the layer below (it does not pass "    \
  "allocations through, MEMRES_KIND_PASSES_ALLOCATIONS), "
#define HIDES_IPC                                                                                  \
  "which hides the sharing of kind \"ipc\" under it; share from the layer below "                  \
  "(memres_resource_get_upstream()), or use a stack without \"cache\""

/* Export and send refused with @want (NOT_SUPPORTED), leaving no fd open. */
static void
assert_not_shared (GError *error, const char *want)
{
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_cmpstr (error->message, ==, want);
  g_error_free (error);
}

/* An adaptor that carves its blocks out of larger upstream allocations (cache) hides the
 * sharing of the pool below it: the pool's handle, a buffer's descriptor and its message are
 * each refused saying why and what to do, not suggesting the kind that is there; with no layer
 * below that shares either, the kinds that do. Refused before any driver export, no fd left
 * open; the layer below still shares. */
static void
test_adaptor_hides_sharing (void)
{
  MemresResource *mr;
  MemresBufferDescriptor desc;
  MemresBuffer *buf;
  FakeCudaCounts base;
  GError *error = NULL;
  GBytes *bytes = NULL;
  gint *fds = NULL;
  guint n_fds = 0;
  int sv[2], open_fds;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  mr = mt_new_ok ("cache>ipc");
  buf = mt_alloc_ok (mr, MiB, NULL);
  open_fds = mt_count_open_fds ();

  g_assert_null (memres_resource_export_handle (mr, &error));
  assert_not_shared (
      error,
      "resources of kind \"cache\" cannot be shared with other processes: " CARVES HIDES_IPC);
  error = NULL;
  g_assert_false (memres_buffer_export (buf, &desc, &error));
  assert_not_shared (
      error, "buffers of kind \"cache\" cannot be shared with other processes: " CARVES HIDES_IPC);
  error = NULL;
  g_assert_false (memres_buffer_export_message (buf, &bytes, &fds, &n_fds, &error));
  assert_not_shared (
      error, "buffers of kind \"cache\" cannot be sent to other processes: " CARVES HIDES_IPC);
  error = NULL;
  g_assert_null (bytes);
  g_assert_null (fds);
  g_assert_false (memres_ipc_send_buffer (sv[0], buf, &error));
  assert_not_shared (
      error, "buffers of kind \"cache\" cannot be sent to other processes: " CARVES HIDES_IPC);
  error = NULL;
  g_assert_cmpint (mt_count_open_fds (), ==, open_fds);
  /* what the message says: the layer below shares */
  {
    g_autoptr (MemresIpcHandle) handle
        = memres_resource_export_handle (memres_resource_get_upstream (mr), &error);

    g_assert_no_error (error);
    g_assert_nonnull (handle);
  }
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);

  /* nothing below shares either */
  mr = mt_new_ok ("cache>dmr");
  buf = mt_alloc_ok (mr, MiB, NULL);
  open_fds = mt_count_open_fds ();
  g_assert_null (memres_resource_export_handle (mr, &error));
  assert_not_shared (error,
                     "resources of kind \"cache\" cannot be shared with other processes: " CARVES
                     "and no layer below it shares either (use kind \"ipc\", in a "
                     "stack without \"cache\")");
  error = NULL;
  g_assert_false (memres_ipc_send_buffer (sv[0], buf, &error));
  assert_not_shared (error, "buffers of kind \"cache\" cannot be sent to other processes: " CARVES
                            "and no layer below it shares either (use kind \"ipc\", \"pinned\" "
                            "with ipc=true, or \"vmm\" with handle_type=posix_fd, in a stack "
                            "without \"cache\")");
  error = NULL;
  g_assert_cmpint (mt_count_open_fds (), ==, open_fds);
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);
  close (sv[0]);
  close (sv[1]);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  /* The fake gets two devices (peer tests); the real driver ignores this. */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);

  g_test_add_func ("/ipc/create", test_create);
  g_test_add_func ("/ipc/options", test_options);
  g_test_add_func ("/ipc/no-posix-fd-support", test_no_posix_fd_support);
  g_test_add_func ("/ipc/same-process", test_same_process);
  g_test_add_func ("/ipc/imported-cannot-allocate", test_imported_cannot_allocate);
  g_test_add_func ("/ipc/non-ipc-handle", test_non_ipc_handle);
  g_test_add_func ("/ipc/adaptor-hides-sharing", test_adaptor_hides_sharing);
  g_test_add_func ("/ipc/import/not-an-importer", test_import_not_importer);
  g_test_add_func ("/ipc/import/relabelled-handle", test_relabelled_handle);
  g_test_add_func ("/ipc/descriptor/validated-before-driver", test_validation_before_driver);
  g_test_add_func ("/ipc/descriptor/size-lying", test_size_lying);
  g_test_add_func ("/ipc/import/dedup", test_dedup);
  g_test_add_func ("/ipc/import/threads", test_threads);
  g_test_add_func ("/ipc/cycles-flat", test_cycles_flat);
  g_test_add_func ("/ipc/fault-sweep", test_fault_sweep);
  g_test_add_func ("/ipc/send-buffer/pool", test_send_pool_buffer);
  g_test_add_func ("/ipc/send-buffer/pool-forged", test_send_pool_buffer_forged);
  return g_test_run ();
}

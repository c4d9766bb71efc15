/* test-ipc-import.c: imports into the ipc kind in one process (not an importer, relabelled
 * handles, descriptors validated before the driver and lying about their size, deduplication,
 * threads, flat cycles, every driver call failing), against the fake driver (suite fake) and the
 * real one (suite gpu). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "descriptor-layout.h"
#include "testutil.h"
#include "testutil-ipc-kind.h"

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

int
main (int argc, char **argv)
{
  /* The fake gets two devices (peer tests); the real driver ignores this. */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);
  g_test_add_func ("/ipc/import/not-an-importer", test_import_not_importer);
  g_test_add_func ("/ipc/import/relabelled-handle", test_relabelled_handle);
  g_test_add_func ("/ipc/descriptor/validated-before-driver", test_validation_before_driver);
  g_test_add_func ("/ipc/descriptor/size-lying", test_size_lying);
  g_test_add_func ("/ipc/import/dedup", test_dedup);
  g_test_add_func ("/ipc/import/threads", test_threads);
  g_test_add_func ("/ipc/cycles-flat", test_cycles_flat);
  g_test_add_func ("/ipc/fault-sweep", test_fault_sweep);
  return g_test_run ();
}

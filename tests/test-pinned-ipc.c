/* test-pinned-ipc.c: sharing pinned pools (same process, not shareable, sent buffers, other
 * processes, every driver call failing in turn), against the fake driver (suite fake) and the
 * real one (suite gpu). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "testutil-pinned.h"

/* ---- ipc=true ------------------------------------------------------------------------------ */

static MemresIpcHandle *
export_handle (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  MemresIpcHandle *handle = memres_resource_export_handle (mr, &error);

  g_assert_no_error (error);
  g_assert_nonnull (handle);
  g_assert_cmpstr (memres_ipc_handle_get_kind (handle), ==, "pinned");
  return handle;
}

static void
export_buffer (MemresBuffer *buf, MemresBufferDescriptor *desc)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_buffer_export (buf, desc, &error));
  g_assert_no_error (error);
}

static MemresBuffer *
import_buffer (MemresResource *importer, const MemresBufferDescriptor *desc)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf
      = memres_buffer_import (importer, desc->bytes, sizeof desc->bytes, NULL, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  return buf;
}

#define IPC_FLAGS                                                                                  \
  (MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED  \
   | MEMRES_MEMORY_IPC_ENABLED)

/* Export and import inside one process: the importer maps the exporter's bytes, through its
 * host pointer and through copies. */
static void
test_ipc_same_process (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresResource) dev_mr = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresBufferDescriptor desc;
  MemresBuffer *buf, *imported, *dev;
  FakeCudaCounts base;
  const gsize size = 2 * MiB;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("pinned:ipc=true");
  g_assert_cmphex (memres_resource_get_flags (exporter), ==, IPC_FLAGS);

  handle = export_handle (exporter);
  importer = memres_resource_import_handle (handle, &error);
  if (importer == NULL && !mt_driver_is_fake () && error->domain == MEMRES_CUDA_ERROR)
    {
      g_test_skip_printf ("the driver does not import a pool into its own process: %s",
                          error->message);
      g_clear_pointer (&exporter, memres_resource_unref);
      return;
    }
  g_assert_no_error (error);
  g_assert_true (importer != exporter);
  g_assert_cmpstr (memres_resource_get_kind_name (importer), ==, "pinned");
  g_assert_cmpint (memres_resource_get_device (importer), ==, -1);
  g_assert_cmphex (memres_resource_get_flags (importer), ==, IPC_FLAGS | MEMRES_MEMORY_IMPORTED);

  /* An importer cannot allocate. */
  g_assert_null (memres_resource_allocate (importer, 4096, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);

  buf = mt_alloc_ok (exporter, size, NULL);
  mt_sync_ok (NULL);
  mt_fill_pattern (memres_buffer_get_pointer (buf), size, 21);
  export_buffer (buf, &desc);
  imported = import_buffer (importer, &desc);
  g_assert_cmpuint (memres_buffer_get_size (imported), ==, size);
  g_assert_true (memres_buffer_get_resource (imported) == importer);
  g_assert_true (memres_buffer_is_host_accessible (imported));
  mt_assert_pattern (memres_buffer_get_pointer (imported), size, 21);

  /* Through a device buffer: imported -> device -> exporter's buffer. */
  dev_mr = mt_new_ok ("dmr:device=0");
  dev = mt_alloc_ok (dev_mr, size, NULL);
  mt_fill_pattern (memres_buffer_get_pointer (imported), size, 22);
  g_assert_true (memres_buffer_copy_to (imported, dev, NULL, &error));
  g_assert_no_error (error);
  /* buf and imported are the same page-locked memory and the copy from it is asynchronous:
   * wait for it before clearing the source (the fake runs copies at once, the GPU does not). */
  mt_sync_ok (NULL);
  memset (memres_buffer_get_pointer (buf), 0, size);
  g_assert_true (memres_buffer_copy_to (dev, buf, NULL, &error));
  g_assert_no_error (error);
  mt_sync_ok (NULL);
  mt_assert_pattern (memres_buffer_get_pointer (buf), size, 22);
  mt_close_ok (dev, NULL);

  /* The importer's buffer goes first (the driver's rule), then the exporter's. */
  mt_close_ok (imported, NULL);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&handle, memres_ipc_handle_free);
  g_clear_pointer (&importer, memres_resource_unref);
  g_clear_pointer (&exporter, memres_resource_unref);
  g_clear_pointer (&dev_mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_ipc_not_shareable (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) pool = NULL;
  g_autoptr (MemresResource) legacy = NULL;
  MemresBufferDescriptor desc;
  FakeCudaCounts base;
  MemresBuffer *buf;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  pool = mt_new_ok ("pinned");
  g_assert_false (memres_resource_get_flags (pool) & MEMRES_MEMORY_IPC_ENABLED);
  g_assert_null (memres_resource_export_handle (pool, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "ipc=true"));
  g_clear_error (&error);
  buf = mt_alloc_ok (pool, 4096, NULL);
  g_assert_false (memres_buffer_export (buf, &desc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_close_ok (buf, NULL);

  legacy = mt_new_ok ("pinned:mode=legacy");
  g_assert_null (memres_resource_export_handle (legacy, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "mode=pool,ipc=true"));
  g_clear_error (&error);
  buf = mt_alloc_ok (legacy, 4096, NULL);
  g_assert_false (memres_buffer_export (buf, &desc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_close_ok (buf, NULL);

  g_clear_pointer (&pool, memres_resource_unref);
  g_clear_pointer (&legacy, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* ipc=true needs a host NUMA node and POSIX fd pool handles. */
static void
test_ipc_unsupported (void)
{
  MtSavedAttribute saved;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("needs the fake driver to change device attributes"))
    return;
  mt_counts_snapshot (&base);
  mt_override_attribute (&saved, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, -1);
  mt_new_fails ("pinned:ipc=true", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "numa_id");
  mt_new_fails ("pinned:ipc=true,fallback=true", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "numa_id");
  g_clear_pointer (&(MemresResource *){ mt_new_ok ("pinned:ipc=true,numa_id=0") },
                   memres_resource_unref);
  mt_restore_attribute (&saved);

  mt_override_attribute (&saved, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0);
  mt_new_fails ("pinned:ipc=true", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "MEMPOOL_SUPPORTED_HANDLE_TYPES");
  mt_restore_attribute (&saved);
  mt_assert_fake_counts_equal (&base);
}

static void
test_ipc_fault_sweep (void)
{
  MtIpcSweepData d = { 0 };
  FakeCudaCounts base;
  GError *error = NULL;
  int fds;

  if (!require_pool_mode ())
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  sweep ("pinned:ipc=true", TRUE);

  d.exporter = mt_new_ok ("pinned:ipc=true");
  d.buf = mt_alloc_ok (d.exporter, MiB, NULL);
  g_assert_true (mt_op_export_handle (&d, NULL));
  mt_undo_ipc (&d);
  fds = mt_count_open_fds ();
  /* The pool's shareable handle is exported once, at creation (swept above): exporting a
   * handle only duplicates it, with no driver call to fail. */
  g_assert_cmpint (mt_fault_sweep ("export handle", mt_op_export_handle, mt_undo_ipc, &d,
                                   CUDA_ERROR_NOT_PERMITTED, NULL),
                   ==, 0);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  g_assert_cmpint (mt_fault_sweep ("export buffer", mt_op_export_buffer, NULL, &d,
                                   CUDA_ERROR_NOT_PERMITTED, NULL),
                   >, 0);

  d.handle = memres_resource_export_handle (d.exporter, &error);
  g_assert_no_error (error);
  g_assert_cmpint (mt_fault_sweep ("import handle", mt_op_import_handle, mt_undo_ipc, &d,
                                   CUDA_ERROR_NOT_PERMITTED, NULL),
                   >, 0);
  g_clear_pointer (&d.handle, memres_ipc_handle_free);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);

  mt_close_ok (d.buf, NULL);
  g_clear_pointer (&d.exporter, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* Between processes: this program runs again as `--child import` with fd 3 its end of a
 * socketpair. The parent sends the pool's handle, then a descriptor and a seed; the child
 * imports both, checks the bytes through its host pointer, writes the pattern of seed + 1,
 * closes its buffer and answers with one status byte (0: all well). */
#define CHILD_FD 3

typedef struct
{
  MemresBufferDescriptor desc;
  guint32 seed;
} IpcMessage;

static gboolean
read_all (int fd, gpointer data, gsize n)
{
  guint8 *p = data;

  while (n > 0)
    {
      gssize r = read (fd, p, n);

      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return FALSE;
      p += r;
      n -= r;
    }
  return TRUE;
}

static int
child_import (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autoptr (MemresResource) importer = NULL;
  IpcMessage msg;
  MemresBuffer *buf;
  guint8 status = 1;
  gsize size;

  handle = memres_ipc_receive_handle (CHILD_FD, &error);
  if (handle != NULL)
    importer = memres_resource_import_handle (handle, &error);
  if (importer == NULL || !read_all (CHILD_FD, &msg, sizeof msg))
    {
      g_printerr ("child: %s\n", error != NULL ? error->message : "no message");
      return 1;
    }
  buf = memres_buffer_import (importer, msg.desc.bytes, sizeof msg.desc.bytes, NULL, &error);
  if (buf == NULL)
    {
      g_printerr ("child: %s\n", error->message);
      return 1;
    }
  size = memres_buffer_get_size (buf);
  {
    g_autofree guint8 *want = g_malloc (size);

    mt_fill_pattern (want, size, msg.seed);
    if (memcmp (want, memres_buffer_get_pointer (buf), size) == 0)
      status = 0;
  }
  mt_fill_pattern (memres_buffer_get_pointer (buf), size, msg.seed + 1);
  if (!memres_buffer_close (buf, NULL, &error) || !memres_stream_synchronize (NULL, &error))
    status = 2;
  memres_buffer_unref (buf);
  if (write (CHILD_FD, &status, 1) != 1)
    return 1;
  return 0;
}

static void
test_ipc_processes (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  const char *argv[] = { self, "--child", "import", NULL };
  const gsize size = 3 * MiB;
  int sv[2], target = CHILD_FD, status = 0;
  FakeCudaCounts base;
  IpcMessage msg;
  MemresBuffer *buf;
  guint8 reply = 0xff;
  GPid pid;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("pinned:ipc=true");
  buf = mt_alloc_ok (mr, size, NULL);
  mt_sync_ok (NULL);
  mt_fill_pattern (memres_buffer_get_pointer (buf), size, 31);
  export_buffer (buf, &msg.desc);
  msg.seed = 31;

  g_assert_nonnull (self);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  g_assert_true (g_spawn_async_with_pipes_and_fds (NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                                   NULL, NULL, -1, -1, -1, &sv[1], &target, 1, &pid,
                                                   NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  close (sv[1]);

  handle = export_handle (mr);
  g_assert_true (memres_ipc_send_handle (sv[0], handle, &error));
  g_assert_no_error (error);
  g_assert_cmpint (write (sv[0], &msg, sizeof msg), ==, sizeof msg);
  g_assert_true (read_all (sv[0], &reply, 1));
  close (sv[0]);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  g_assert_cmpint (reply, ==, 0);

  /* The child's bytes, seen here. */
  mt_assert_pattern (memres_buffer_get_pointer (buf), size, 32);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&handle, memres_ipc_handle_free);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* memres_ipc_send_buffer() of a pinned pool buffer: one message, the pool imported on receipt;
 * a pool made without ipc=true, and mode=legacy, cannot send (nothing leaks). */
static void
test_ipc_send_buffer (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) exporter = NULL;
  const char *const refused[] = { "pinned", "pinned:mode=legacy" };
  MemresBuffer *buf, *got;
  FakeCudaCounts base;
  const gsize size = 1 * MiB;
  int sv[2], fds;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("pinned:ipc=true");
  buf = mt_alloc_ok (exporter, size, NULL);
  mt_sync_ok (NULL);
  mt_fill_pattern (memres_buffer_get_pointer (buf), size, 31);
  /* The real driver opens descriptors of its own at the first import of a process and keeps
   * them: one cycle first there, then count */
  for (guint round = mt_driver_is_fake () ? 1 : 0; round < 2; round++)
    {
      if (round == 1)
        fds = mt_count_open_fds ();
      g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
      g_assert_true (memres_ipc_send_buffer (sv[0], buf, &error));
      g_assert_no_error (error);
      got = memres_ipc_receive_buffer (sv[1], NULL, MEMRES_IPC_NONE, NULL, &error);
      close (sv[0]);
      close (sv[1]);
      if (round == 0)
        {
          g_clear_error (&error);
          if (got != NULL)
            mt_close_ok (got, NULL);
        }
    }
  if (got == NULL && !mt_driver_is_fake () && error->domain == MEMRES_CUDA_ERROR)
    {
      g_test_skip_printf ("the driver does not import a pool into its own process: %s",
                          error->message);
      mt_close_ok (buf, NULL);
      return;
    }
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (got), ==, size);
  g_assert_true (memres_buffer_get_flags (got) & MEMRES_MEMORY_IMPORTED);
  g_assert_cmpstr (memres_resource_get_kind_name (memres_buffer_get_resource (got)), ==, "pinned");
  g_assert_true (memres_buffer_get_resource (got) != exporter);
  mt_assert_pattern (memres_buffer_get_pointer (got), size, 31);
  mt_close_ok (got, NULL);
  mt_close_ok (buf, NULL);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);

  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (refused[i]);

      buf = mt_alloc_ok (mr, 4096, NULL);
      g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
      fds = mt_count_open_fds ();
      g_assert_false (memres_ipc_send_buffer (sv[0], buf, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_clear_error (&error);
      g_assert_cmpint (mt_count_open_fds (), ==, fds);
      close (sv[0]);
      close (sv[1]);
      mt_close_ok (buf, NULL);
    }
  g_clear_pointer (&exporter, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  if (argc == 3 && strcmp (argv[1], "--child") == 0 && strcmp (argv[2], "import") == 0)
    return child_import ();
  /* Against the fake, two devices for the other-context test (read at cuInit) */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);
  g_test_add_func ("/pinned/ipc/same-process", test_ipc_same_process);
  g_test_add_func ("/pinned/ipc/not-shareable", test_ipc_not_shareable);
  g_test_add_func ("/pinned/ipc/send-buffer", test_ipc_send_buffer);
  g_test_add_func ("/pinned/ipc/unsupported", test_ipc_unsupported);
  g_test_add_func ("/pinned/ipc/processes", test_ipc_processes);
  g_test_add_func ("/pinned/ipc/fault-sweep", test_ipc_fault_sweep);

  return g_test_run ();
}

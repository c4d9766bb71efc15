/* test-fork.c: the child of a fork() made after the driver was initialized (core/fork.c).
 * What the child inherited is released without any driver call, new driver work fails with
 * MEMRES_ERROR_FORKED, host memory keeps working, and the parent's memory is left intact.
 * Against the fake driver (suite fake: the child traces every driver call it makes, and the
 * fake's pool IPC and VMM memory are MAP_SHARED memfds, so a free in the child would zero
 * the parent's bytes) and the real one (suite gpu).
 *
 * The child reports through its exit status (0: every check held); a failed check prints what
 * failed on stderr and exits with status 1, so the parent's test fails. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

/* In the child: @error must be MEMRES_ERROR_FORKED. */
#define CHILD_CHECK_FORKED(error)                                                                  \
  G_STMT_START                                                                                     \
  {                                                                                                \
    if (!g_error_matches ((error), MEMRES_ERROR, MEMRES_ERROR_FORKED))                             \
      {                                                                                            \
        fprintf (stderr, "child: %s:%d: expected MEMRES_ERROR_FORKED, got %s\n", __FILE__,         \
                 __LINE__, (error) != NULL ? (error)->message : "no error");                       \
        _exit (1);                                                                                 \
      }                                                                                            \
    g_clear_error (&(error));                                                                      \
  }                                                                                                \
  G_STMT_END

enum
{
  DMR,
  DMR_NEW,
  IPC,
  VMM,
  PINNED,
  HOST,
  N_SPECS
};

static const char *const specs[N_SPECS] = {
  "dmr", "dmr:pool=new", "ipc", "vmm:handle_type=posix_fd", "pinned", "host",
};

static int n_released; /* calls of count_release() in this process */

static void
count_release (gpointer data)
{
  n_released++;
}

typedef struct
{
  MemresResource *mr[N_SPECS];
  MemresBuffer *buf[N_SPECS];
  MemresBuffer *wrapped_device; /* buf[DMR]'s memory wrapped, with count_release() */
  MemresBuffer *wrapped_host;   /* host memory wrapped, with count_release() */
  guint8 host_bytes[64];
  MemresResource *importer; /* the ipc pool imported back; NULL when the driver refuses */
  MemresBuffer *imported;
  MemresBufferDescriptor desc;
  gsize size;
} Objects;

static void
make_objects (Objects *o)
{
  g_autoptr (GError) error = NULL;

  o->size = 2 * MiB;
  for (guint i = 0; i < N_SPECS; i++)
    {
      o->mr[i] = mt_new_ok (specs[i]);
      o->buf[i] = mt_alloc_ok (o->mr[i], o->size, NULL);
      mt_write_pattern (o->buf[i], 0, o->size, 100 + i, NULL);
    }
  o->wrapped_device = memres_buffer_new_for_pointer (memres_buffer_get_pointer (o->buf[DMR]),
                                                     o->size, 0, 0, count_release, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_device_accessible (o->wrapped_device));
  o->wrapped_host
      = memres_buffer_new_for_pointer (o->host_bytes, sizeof o->host_bytes, -1,
                                       MEMRES_MEMORY_HOST_ACCESSIBLE, count_release, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_export (o->buf[IPC], &o->desc, &error));
  g_assert_no_error (error);
  {
    g_autoptr (MemresIpcHandle) handle = memres_resource_export_handle (o->mr[IPC], &error);

    g_assert_no_error (error);
    o->importer = memres_resource_import_handle (handle, &error);
  }
  if (o->importer == NULL)
    {
      /* the real driver may refuse to import a pool into its own process */
      g_assert_false (mt_driver_is_fake ());
      g_test_message ("no import into this process: %s", error->message);
      g_clear_error (&error);
      return;
    }
  o->imported
      = memres_buffer_import (o->importer, o->desc.bytes, sizeof o->desc.bytes, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (o->imported);
}

static void
check_and_free_objects (Objects *o)
{
  /* the parent's wrapped buffers release as usual */
  n_released = 0;
  mt_close_ok (g_steal_pointer (&o->wrapped_host), NULL);
  mt_close_ok (g_steal_pointer (&o->wrapped_device), NULL);
  g_assert_cmpint (n_released, ==, 2);
  for (guint i = 0; i < N_SPECS; i++)
    {
      mt_check_pattern (o->buf[i], 0, o->size, 100 + i, NULL);
      if (i == IPC && o->imported != NULL)
        {
          mt_check_pattern (o->imported, 0, o->size, 100 + i, NULL);
          mt_close_ok (g_steal_pointer (&o->imported), NULL);
          g_clear_pointer (&o->importer, memres_resource_unref);
        }
      mt_close_ok (g_steal_pointer (&o->buf[i]), NULL);
      g_clear_pointer (&o->mr[i], memres_resource_unref);
    }
  mt_sync_ok (NULL);
}

/* The child's side: every check ends in _exit(). */
static void G_GNUC_NORETURN
child_main (Objects *o, gboolean fake)
{
  GError *error = NULL;
  const char **names = NULL;
  int n_calls;

  if (fake)
    mt_fake_trace_begin ();

  /* new driver work is refused with a clear error */
  CHILD_CHECK (memres_cuda_get_driver (&error) == NULL);
  CHILD_CHECK_FORKED (error);
  CHILD_CHECK (memres_resource_new ("dmr", &error) == NULL);
  CHILD_CHECK_FORKED (error);
  CHILD_CHECK (memres_resource_new ("ipc", &error) == NULL);
  CHILD_CHECK_FORKED (error);
  for (guint i = 0; i < N_SPECS; i++)
    {
      MemresStats stats;

      if (i == HOST)
        continue;
      CHILD_CHECK (memres_resource_allocate (o->mr[i], 4096, NULL, &error) == NULL);
      CHILD_CHECK_FORKED (error);
      CHILD_CHECK (!memres_resource_get_stats (o->mr[i], &stats, &error));
      CHILD_CHECK_FORKED (error);
      CHILD_CHECK (!memres_resource_trim (o->mr[i], 0, &error));
      CHILD_CHECK_FORKED (error);
      CHILD_CHECK (memres_resource_snapshot (o->mr[i], &error) == NULL);
      CHILD_CHECK_FORKED (error);
      CHILD_CHECK (!memres_buffer_fill (o->buf[i], 0, 1, NULL, &error));
      CHILD_CHECK_FORKED (error);
    }
  CHILD_CHECK (!memres_buffer_resize (o->buf[VMM], 4 * MiB, NULL, &error));
  CHILD_CHECK_FORKED (error);
  {
    MemresBufferDescriptor d;

    CHILD_CHECK (!memres_buffer_export (o->buf[IPC], &d, &error));
    CHILD_CHECK_FORKED (error);
  }
  CHILD_CHECK (memres_resource_export_handle (o->mr[IPC], &error) == NULL);
  CHILD_CHECK_FORKED (error);
  if (o->importer != NULL)
    {
      CHILD_CHECK (
          memres_buffer_import (o->importer, o->desc.bytes, sizeof o->desc.bytes, NULL, &error)
          == NULL);
      CHILD_CHECK_FORKED (error);
    }
  /* the default stream has nothing pending here */
  CHILD_CHECK (memres_stream_synchronize (NULL, &error));
  CHILD_CHECK (error == NULL);

  /* host memory keeps working, inherited and new; the default resource is host memory */
  {
    guint8 bytes[64], back[64];
    MemresResource *host = memres_resource_new ("host", &error);
    MemresBuffer *buf;

    CHILD_CHECK (host != NULL && error == NULL);
    buf = memres_resource_allocate (host, sizeof bytes, NULL, &error);
    CHILD_CHECK (buf != NULL && error == NULL);
    memset (bytes, 0x5a, sizeof bytes);
    CHILD_CHECK (memres_buffer_write (buf, 0, bytes, sizeof bytes, NULL, &error));
    CHILD_CHECK (memres_buffer_read (buf, 0, back, sizeof back, NULL, &error));
    CHILD_CHECK (memcmp (bytes, back, sizeof bytes) == 0);
    CHILD_CHECK (memres_buffer_close (buf, NULL, &error) && error == NULL);
    memres_buffer_unref (buf);
    CHILD_CHECK (memres_resource_allocate (o->mr[HOST], 64, NULL, &error) != NULL);
    memres_resource_unref (host);
  }
  {
    MemresResource *def = memres_resource_get_default (0, &error);

    CHILD_CHECK (def != NULL && error == NULL);
    CHILD_CHECK (strcmp (memres_resource_get_kind_name (def), "host") == 0);
    memres_resource_unref (def);
  }

  /* every inherited object is released without an error and without a driver call; wrapped
   * device memory without its release function (it would free through the driver), wrapped
   * host memory with it */
  n_released = 0;
  CHILD_CHECK (memres_buffer_close (o->wrapped_device, NULL, &error) && error == NULL);
  memres_buffer_unref (o->wrapped_device);
  CHILD_CHECK (n_released == 0);
  CHILD_CHECK (memres_buffer_close (o->wrapped_host, NULL, &error) && error == NULL);
  memres_buffer_unref (o->wrapped_host);
  CHILD_CHECK (n_released == 1);
  if (o->imported != NULL)
    {
      MemresBuffer *again = memres_buffer_ref (o->imported);

      CHILD_CHECK (memres_buffer_close (o->imported, NULL, &error) && error == NULL);
      memres_buffer_unref (o->imported);
      memres_buffer_unref (again);
      memres_resource_unref (o->importer);
    }
  for (guint i = 0; i < N_SPECS; i++)
    {
      CHILD_CHECK (memres_buffer_close (o->buf[i], NULL, &error) && error == NULL);
      memres_buffer_unref (o->buf[i]);
      memres_resource_unref (o->mr[i]);
    }

  if (fake)
    {
      n_calls = mt_fake_trace_end (&names);
      for (int i = 0; i < n_calls; i++)
        fprintf (stderr, "child: driver call %s\n", names[i]);
      CHILD_CHECK (n_calls == 0);
    }
  _exit (0);
}

static void
test_fork_child (void)
{
  FakeCudaCounts base;
  Objects o = { 0 };
  int status = 0;
  pid_t pid;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  make_objects (&o);
  mt_sync_ok (NULL);

  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    child_main (&o, mt_driver_is_fake ());

  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);

  /* the parent goes on as if nothing happened: its bytes are intact, everything works */
  check_and_free_objects (&o);
  {
    g_autoptr (MemresResource) mr = mt_new_ok ("dmr");
    MemresBuffer *buf = mt_alloc_ok (mr, 4096, NULL);

    mt_write_pattern (buf, 0, 4096, 7, NULL);
    mt_check_pattern (buf, 0, 4096, 7, NULL);
    mt_close_ok (buf, NULL);
  }
  mt_assert_fake_counts_equal (&base);
}

/* A buffer left open in the child and dropped with its last reference: no warning (the test
 * makes warnings fatal in the child too), no driver call; a child of the child alike. */
static void
test_fork_grandchild (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  int status = 0;
  pid_t pid;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("dmr:pool=new");
  buf = mt_alloc_ok (mr, 64 * KiB, NULL);
  mt_write_pattern (buf, 0, 64 * KiB, 3, NULL);

  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      gboolean fake = mt_driver_is_fake ();
      GError *error = NULL;
      pid_t grandchild;
      int inner = 0;

      g_log_set_always_fatal (G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
      grandchild = fork ();
      CHILD_CHECK (grandchild >= 0);
      if (grandchild == 0)
        {
          if (fake)
            mt_fake_trace_begin ();
          CHILD_CHECK (memres_resource_allocate (mr, 16, NULL, &error) == NULL);
          CHILD_CHECK_FORKED (error);
          memres_buffer_unref (buf);
          memres_resource_unref (mr);
          CHILD_CHECK (!fake || mt_fake_trace_end (NULL) == 0);
          _exit (0);
        }
      CHILD_CHECK (waitpid (grandchild, &inner, 0) == grandchild);
      CHILD_CHECK (WIFEXITED (inner) && WEXITSTATUS (inner) == 0);
      if (fake)
        mt_fake_trace_begin ();
      memres_buffer_unref (buf);
      memres_resource_unref (mr);
      CHILD_CHECK (!fake || mt_fake_trace_end (NULL) == 0);
      _exit (0);
    }
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  mt_check_pattern (buf, 0, 64 * KiB, 3, NULL);
  mt_close_ok (buf, NULL);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);

  g_test_add_func ("/fork/child", test_fork_child);
  g_test_add_func ("/fork/grandchild", test_fork_grandchild);
  return g_test_run ();
}

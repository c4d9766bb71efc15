/* testutil-ipc-kind.c: what the ipc kind's tests (test-ipc.c, test-ipc-import.c) share. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "descriptor-layout.h"
#include "testutil.h"
#include "testutil-ipc-kind.h"

MemresBuffer *
alloc_pattern (MemresResource *mr, gsize size, guint32 seed)
{
  MemresBuffer *buf = mt_alloc_ok (mr, size, NULL);

  mt_write_pattern (buf, 0, size, seed, NULL);
  return buf;
}

void
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
MemresResource *
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

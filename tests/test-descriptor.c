/* test-descriptor.c: buffer descriptors and the core's import path (validation before any
 * plugin or driver call, per-process deduplication of pools and mappings), without a driver.
 *
 * `loopback`, the in-test IPC kind (ipc-testkind.h) registered under that name, plays an
 * IPC-enabled pool on host memory: its export data is the allocation's address and size, and
 * its "mapping" of an import is that same memory. It counts its import and unmap calls
 * (mt_ipc_kind), so the tests see exactly when the core reaches plugin code. */
#include <string.h>
#include <unistd.h>

#include <memres/memres.h>
#include "descriptor-layout.h"
#include "ipc-testkind.h"
#include "testutil.h"

/* the device UUID of the kind's pools: none */
static const guint8 no_uuid[MEMRES_IPC_ID_SIZE] = { 0 };

/* An exporter, an importer of its pool, a buffer of @size bytes filled with a pattern, and its
 * descriptor. */
typedef struct
{
  MemresResource *exporter;
  MemresResource *importer;
  MemresBuffer *buf;
  MemresBufferDescriptor desc;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  GError *error = NULL;

  f->exporter = mt_new_ok ("loopback");
  handle = memres_resource_export_handle (f->exporter, &error);
  g_assert_no_error (error);
  f->importer = memres_resource_import_handle (handle, &error);
  g_assert_no_error (error);
  g_assert_true (f->importer != f->exporter);
  f->buf = mt_alloc_ok (f->exporter, 4096, NULL);
  mt_fill_pattern (memres_buffer_get_pointer (f->buf), 4096, 7);
  g_assert_true (memres_buffer_export (f->buf, &f->desc, &error));
  g_assert_no_error (error);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  memres_buffer_unref (f->buf);
  memres_resource_unref (f->importer);
  memres_resource_unref (f->exporter);
}

/* Imports @len bytes at @bytes into @mr and asserts INVALID_DESCRIPTOR naming @field, with no
 * plugin import made and no buffer counted. */
static void
expect_invalid (MemresResource *mr, gconstpointer bytes, gsize len, const char *field)
{
  GError *error = NULL;
  MemresStats before, after;
  gint imports = g_atomic_int_get (&mt_ipc_kind.maps);
  /* the core counts buffers even for a kind without a get_stats slot, or says it cannot */
  gboolean have_stats = memres_resource_get_stats (mr, &before, NULL);

  g_assert_null (memres_buffer_import (mr, bytes, len, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_test_message ("refused: %s", error->message);
  if (field != NULL)
    g_assert_nonnull (strstr (error->message, field));
  g_clear_error (&error);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps), ==, imports);
  if (have_stats)
    {
      g_assert_true (memres_resource_get_stats (mr, &after, NULL));
      g_assert_cmpuint (after.n_buffers, ==, before.n_buffers);
    }
}

static void
test_round_trip (Fixture *f, gconstpointer data)
{
  g_autoptr (MemresBuffer) imported = NULL;
  MemresBufferDescriptor again;
  GError *error = NULL;

  /* The encoding is the documented one. */
  g_assert_cmpmem (f->desc.bytes + OFF_MAGIC, 4, "MRBD", 4);
  g_assert_cmpuint (f->desc.bytes[OFF_VERSION], ==, 1);
  g_assert_cmpuint (f->desc.bytes[OFF_LENGTH] | (f->desc.bytes[OFF_LENGTH + 1] << 8), ==, 160);
  g_assert_cmpstr ((const char *) f->desc.bytes + OFF_KIND, ==, "loopback");
  g_assert_cmpuint (mt_get_u64 (f->desc.bytes + OFF_SIZE), ==, 4096);
  g_assert_cmpuint (mt_get_u64 (f->desc.bytes + OFF_OFFSET), ==, 0);

  imported = memres_buffer_import (f->importer, f->desc.bytes, sizeof f->desc.bytes, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (imported);
  g_assert_true (memres_buffer_get_resource (imported) == f->importer);
  g_assert_cmpuint (memres_buffer_get_size (imported), ==, 4096);
  g_assert_true (memres_buffer_get_flags (imported) & MEMRES_MEMORY_IMPORTED);
  g_assert_false (memres_buffer_get_flags (f->buf) & MEMRES_MEMORY_IMPORTED);
  g_assert_true (memres_buffer_get_pointer (imported) == memres_buffer_get_pointer (f->buf));
  mt_assert_pattern (memres_buffer_get_pointer (imported), 4096, 7);

  /* An imported buffer re-exports to the same descriptor (to forward it to a third process). */
  g_assert_true (memres_buffer_export (imported, &again, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (again.bytes, sizeof again.bytes, f->desc.bytes, sizeof f->desc.bytes);

  g_assert_true (memres_buffer_close (imported, NULL, &error));
  g_assert_no_error (error);
}

static void
test_truncated (Fixture *f, gconstpointer data)
{
  expect_invalid (f->importer, f->desc.bytes, sizeof f->desc.bytes - 1, "input length");
  expect_invalid (f->importer, f->desc.bytes, 64, "input length");
  expect_invalid (f->importer, f->desc.bytes, 0, NULL);
  expect_invalid (f->importer, NULL, 0, NULL);
}

static void
test_oversized (Fixture *f, gconstpointer data)
{
  guint8 big[MEMRES_BUFFER_DESCRIPTOR_SIZE + 8];

  memset (big, 0, sizeof big);
  memcpy (big, f->desc.bytes, sizeof f->desc.bytes);
  expect_invalid (f->importer, big, MEMRES_BUFFER_DESCRIPTOR_SIZE + 1, "input length");
  expect_invalid (f->importer, big, sizeof big, "input length");
}

static void
test_wrong_magic (Fixture *f, gconstpointer data)
{
  MemresBufferDescriptor d = f->desc;

  d.bytes[OFF_MAGIC + 3] ^= 0x20;
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "magic");
}

static void
test_wrong_version (Fixture *f, gconstpointer data)
{
  MemresBufferDescriptor d = f->desc;

  d.bytes[OFF_VERSION] = 2;
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "version");
  d.bytes[OFF_VERSION] = 0;
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "version");
}

static void
test_wrong_length_field (Fixture *f, gconstpointer data)
{
  MemresBufferDescriptor d = f->desc;

  d.bytes[OFF_LENGTH] = 159;
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "length");
  d.bytes[OFF_LENGTH] = 160;
  d.bytes[OFF_LENGTH + 1] = 1;
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "length");
}

static void
test_bad_kind (Fixture *f, gconstpointer data)
{
  MemresBufferDescriptor d;

  d = f->desc;
  memcpy (d.bytes + OFF_KIND, "Loopback", 8); /* not a kind name */
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "kind");
  d = f->desc;
  memset (d.bytes + OFF_KIND, 'a', 32); /* no NUL */
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "kind");
  d = f->desc;
  d.bytes[OFF_KIND + 31] = 'x'; /* garbage in the padding */
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "kind");
  d = f->desc;
  memset (d.bytes + OFF_KIND, 0, 32); /* empty */
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "kind");
  d = f->desc;
  memset (d.bytes + OFF_KIND, 0, 32);
  memcpy (d.bytes + OFF_KIND, "loopbacks", 9); /* valid, but another kind than the resource */
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "kind");
}

static void
test_nonzero_reserved (Fixture *f, gconstpointer data)
{
  for (int i = 0; i < 8; i++)
    {
      MemresBufferDescriptor d = f->desc;
      d.bytes[OFF_RESERVED + i] = 1;
      expect_invalid (f->importer, d.bytes, sizeof d.bytes, "reserved");
    }
}

static void
test_zero_size (Fixture *f, gconstpointer data)
{
  MemresBufferDescriptor d = f->desc;

  mt_put_u64 (d.bytes + OFF_SIZE, 0);
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "size");
}

static void
test_offset_overflow (Fixture *f, gconstpointer data)
{
  MemresBufferDescriptor d = f->desc;

  mt_put_u64 (d.bytes + OFF_OFFSET, G_MAXUINT64 - 100);
  mt_put_u64 (d.bytes + OFF_SIZE, 101);
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "offset");
  mt_put_u64 (d.bytes + OFF_OFFSET, 1);
  mt_put_u64 (d.bytes + OFF_SIZE, G_MAXUINT64);
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "offset");
}

/* A well-formed descriptor claiming more than was exported: refused after the plugin mapped the
 * allocation (the only place the real extent is known), and unmapped again. */
static void
test_size_lying (Fixture *f, gconstpointer data)
{
  MemresBufferDescriptor d = f->desc;
  GError *error = NULL;
  gint unmaps = g_atomic_int_get (&mt_ipc_kind.unmaps);
  gint imports = g_atomic_int_get (&mt_ipc_kind.maps);

  mt_put_u64 (d.bytes + OFF_SIZE, 4097);
  g_assert_null (memres_buffer_import (f->importer, d.bytes, sizeof d.bytes, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_assert_nonnull (strstr (error->message, "size"));
  g_clear_error (&error);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps), ==, imports + 1);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.unmaps), ==, unmaps + 1);

  /* In range on its own, but not at that offset. */
  mt_put_u64 (d.bytes + OFF_SIZE, 100);
  mt_put_u64 (d.bytes + OFF_OFFSET, 4000);
  g_assert_null (memres_buffer_import (f->importer, d.bytes, sizeof d.bytes, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.unmaps), ==, unmaps + 2);

  /* A sub-range that fits is fine: offset 1000, 96 bytes. */
  {
    g_autoptr (MemresBuffer) part = NULL;
    mt_put_u64 (d.bytes + OFF_SIZE, 96);
    mt_put_u64 (d.bytes + OFF_OFFSET, 1000);
    part = memres_buffer_import (f->importer, d.bytes, sizeof d.bytes, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (memres_buffer_get_size (part), ==, 96);
    g_assert_true ((guint8 *) memres_buffer_get_pointer (part)
                   == (guint8 *) memres_buffer_get_pointer (f->buf) + 1000);
  }
}

/* A size-lying descriptor is refused also when the allocation is already mapped here. */
static void
test_size_lying_mapped (Fixture *f, gconstpointer data)
{
  g_autoptr (MemresBuffer) first = NULL;
  MemresBufferDescriptor d = f->desc;
  GError *error = NULL;
  gint imports;

  first = memres_buffer_import (f->importer, f->desc.bytes, sizeof f->desc.bytes, NULL, &error);
  g_assert_no_error (error);
  imports = g_atomic_int_get (&mt_ipc_kind.maps);
  mt_put_u64 (d.bytes + OFF_SIZE, 8192);
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "size");
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps), ==, imports);
  g_assert_true (memres_buffer_close (first, NULL, NULL));
}

static void
test_wrong_pool (Fixture *f, gconstpointer data)
{
  MemresBufferDescriptor d = f->desc;
  g_autoptr (MemresResource) other = NULL;

  d.bytes[OFF_POOL_ID] ^= 0xff;
  expect_invalid (f->importer, d.bytes, sizeof d.bytes, "pool");

  /* A resource that never exported nor imported a pool imports nothing: NOT_SUPPORTED, as
   * for a kind without imports (not a question of the descriptor's pool); the exporter too. */
  other = mt_new_ok ("loopback");
  {
    MemresResource *not_importers[] = { other, f->exporter };

    for (guint i = 0; i < G_N_ELEMENTS (not_importers); i++)
      {
        GError *error = NULL;

        g_assert_null (memres_buffer_import (not_importers[i], f->desc.bytes, sizeof f->desc.bytes,
                                             NULL, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
        g_clear_error (&error);
      }
  }
  /* ...and a malformed descriptor is still reported as such */
  expect_invalid (other, f->desc.bytes, 10, "input length");
}

static void
test_not_supported (Fixture *f, gconstpointer data)
{
  g_autoptr (MemresResource) host = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  MemresBufferDescriptor d;
  GError *error = NULL;

  host = mt_new_ok ("host");
  g_assert_null (memres_resource_export_handle (host, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  buf = mt_alloc_ok (host, 64, NULL);
  g_assert_false (memres_buffer_export (buf, &d, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_null (memres_buffer_import (host, f->desc.bytes, sizeof f->desc.bytes, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  /* ...but a malformed descriptor is reported as such, whatever the resource. */
  g_assert_null (memres_buffer_import (host, f->desc.bytes, 10, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
}

static void
test_export_closed_empty (Fixture *f, gconstpointer data)
{
  g_autoptr (MemresBuffer) empty = NULL;
  MemresBufferDescriptor d;
  GError *error = NULL;

  empty = mt_alloc_ok (f->exporter, 0, NULL);
  g_assert_false (memres_buffer_export (empty, &d, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  g_assert_true (memres_buffer_close (f->buf, NULL, &error));
  g_assert_false (memres_buffer_export (f->buf, &d, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
}

/* Two imports of one buffer share one mapping; it goes with the last close only. */
static void
test_dedup (Fixture *f, gconstpointer data)
{
  MemresBuffer *a, *b;
  GError *error = NULL;
  gint imports = g_atomic_int_get (&mt_ipc_kind.maps);
  gint unmaps = g_atomic_int_get (&mt_ipc_kind.unmaps);

  a = memres_buffer_import (f->importer, f->desc.bytes, sizeof f->desc.bytes, NULL, &error);
  g_assert_no_error (error);
  b = memres_buffer_import (f->importer, f->desc.bytes, sizeof f->desc.bytes, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (a != b);
  g_assert_true (memres_buffer_get_pointer (a) == memres_buffer_get_pointer (b));
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps), ==, imports + 1);

  g_assert_true (memres_buffer_close (a, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.unmaps), ==, unmaps);
  g_assert_false (memres_buffer_is_closed (b));
  mt_assert_pattern (memres_buffer_get_pointer (b), 4096, 7);
  /* Closing again is a no-op, not a second release of the mapping. */
  g_assert_true (memres_buffer_close (a, NULL, &error));
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.unmaps), ==, unmaps);

  memres_buffer_unref (b); /* the last reference closes it */
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.unmaps), ==, unmaps + 1);
  memres_buffer_unref (a);

  /* A fresh import maps again. */
  a = memres_buffer_import (f->importer, f->desc.bytes, sizeof f->desc.bytes, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps), ==, imports + 2);
  memres_buffer_unref (a);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.unmaps), ==, unmaps + 2);
}

/* Same pool, same resource; the entry leaves the table with the resource. */
static void
test_handle_dedup (Fixture *f, gconstpointer data)
{
  g_autoptr (MemresIpcHandle) h1 = NULL;
  g_autoptr (MemresIpcHandle) h2 = NULL;
  MemresResource *a, *b;
  GError *error = NULL;
  gint imports = g_atomic_int_get (&mt_ipc_kind.handle_imports);

  h1 = memres_resource_export_handle (f->exporter, &error);
  g_assert_no_error (error);
  h2 = memres_resource_export_handle (f->exporter, &error);
  g_assert_no_error (error);
  g_assert_cmpint (memres_ipc_handle_get_fd (h1), !=, memres_ipc_handle_get_fd (h2));

  a = memres_resource_import_handle (h1, &error);
  g_assert_no_error (error);
  b = memres_resource_import_handle (h2, &error);
  g_assert_no_error (error);
  g_assert_true (a == f->importer);
  g_assert_true (b == f->importer);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.handle_imports), ==, imports);
  g_assert_true (memres_resource_get_flags (a) & MEMRES_MEMORY_IMPORTED);
  memres_resource_unref (a);
  memres_resource_unref (b);

  /* Drop the fixture's importer (and the buffer keeping nothing of it): the next import makes
   * a new resource. */
  g_clear_pointer (&f->importer, memres_resource_unref);
  a = memres_resource_import_handle (h1, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.handle_imports), ==, imports + 1);
  f->importer = a;

  /* A handle with no fd cannot be imported. */
  {
    MemresIpcHandle *h3 = memres_resource_export_handle (f->exporter, &error);
    int fd = memres_ipc_handle_steal_fd (h3);
    g_assert_null (memres_resource_import_handle (h3, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    close (fd);
    memres_ipc_handle_free (h3);
  }
}

/* An imported buffer keeps its resource (and the import table entry) alive. */
static void
test_buffer_keeps_import (Fixture *f, gconstpointer data)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresBuffer *imported;
  MemresResource *again;
  GError *error = NULL;
  gint imports = g_atomic_int_get (&mt_ipc_kind.handle_imports);

  imported = memres_buffer_import (f->importer, f->desc.bytes, sizeof f->desc.bytes, NULL, &error);
  g_assert_no_error (error);
  g_clear_pointer (&f->importer, memres_resource_unref);

  handle = memres_resource_export_handle (f->exporter, &error);
  g_assert_no_error (error);
  again = memres_resource_import_handle (handle, &error);
  g_assert_no_error (error);
  g_assert_true (again == memres_buffer_get_resource (imported));
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.handle_imports), ==, imports);
  f->importer = again;
  memres_buffer_unref (imported);
}

static void
assert_n_buffers (MemresResource *mr, guint64 n)
{
  MemresStats stats;
  GError *error = NULL;

  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.n_buffers, ==, n);
}

/* Many buffers, some imported twice, closed in a random order, twice over: each import maps the
 * exporter's buffer (same address, same bytes), each allocation is mapped once and unmapped
 * exactly when its last importer closes, and the importer counts its open buffers. */
#define N_MANY 300
static void
test_many (Fixture *f, gconstpointer data)
{
  MemresBuffer *sources[N_MANY];
  MemresBufferDescriptor descs[N_MANY];
  MemresBuffer *imported[2 * N_MANY];
  guint owner[2 * N_MANY];
  guint users[N_MANY];
  GError *error = NULL;

  for (guint i = 0; i < N_MANY; i++)
    {
      sources[i] = mt_alloc_ok (f->exporter, 64 + i, NULL);
      mt_fill_pattern (memres_buffer_get_pointer (sources[i]), 64 + i, i);
      g_assert_true (memres_buffer_export (sources[i], &descs[i], &error));
      g_assert_no_error (error);
    }
  for (int round = 0; round < 2; round++)
    {
      gint imports = g_atomic_int_get (&mt_ipc_kind.maps);
      gint unmaps = g_atomic_int_get (&mt_ipc_kind.unmaps);
      guint n = 0, n_unmapped = 0;

      for (guint i = 0; i < N_MANY; i++)
        for (guint k = 0; k < (i % 3 == 0 ? 2u : 1u); k++)
          {
            imported[n] = memres_buffer_import (f->importer, descs[i].bytes, sizeof descs[i].bytes,
                                                NULL, &error);
            g_assert_no_error (error);
            g_assert_true (memres_buffer_get_pointer (imported[n])
                           == memres_buffer_get_pointer (sources[i]));
            g_assert_cmpuint (memres_buffer_get_size (imported[n]), ==, 64 + i);
            owner[n++] = i;
          }
      for (guint i = 0; i < N_MANY; i++)
        users[i] = i % 3 == 0 ? 2 : 1;
      g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps) - imports, ==, N_MANY);
      assert_n_buffers (f->importer, n);
      g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.unmaps), ==, unmaps);

      /* Shuffled, then closed in that order. */
      mt_shuffle_buffers (imported, owner, n);
      for (guint i = 0; i < n; i++)
        {
          mt_assert_pattern (memres_buffer_get_pointer (imported[i]), 64 + owner[i], owner[i]);
          g_assert_true (memres_buffer_close (imported[i], NULL, &error));
          g_assert_no_error (error);
          if (--users[owner[i]] == 0)
            n_unmapped++;
          g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.unmaps) - unmaps, ==, n_unmapped);
          assert_n_buffers (f->importer, n - i - 1);
          memres_buffer_unref (imported[i]);
        }
      g_assert_cmpuint (n_unmapped, ==, N_MANY);
    }
  for (guint i = 0; i < N_MANY; i++)
    memres_buffer_unref (sources[i]);
}

typedef struct
{
  Fixture *f;
  GError *error;
  int rounds;
} ThreadData;

static gpointer
import_thread (gpointer data)
{
  ThreadData *t = data;

  for (int i = 0; i < t->rounds && t->error == NULL; i++)
    {
      MemresBuffer *buf = memres_buffer_import (t->f->importer, t->f->desc.bytes,
                                                sizeof t->f->desc.bytes, NULL, &t->error);
      if (buf == NULL)
        break;
      if (memcmp (memres_buffer_get_pointer (buf), memres_buffer_get_pointer (t->f->buf), 4096)
          != 0)
        g_set_error (&t->error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "wrong bytes");
      memres_buffer_close (buf, NULL, t->error ? NULL : &t->error);
      memres_buffer_unref (buf);
    }
  return NULL;
}

static void
test_threads (Fixture *f, gconstpointer data)
{
  ThreadData t[4];
  GThread *threads[4];
  gint imports = g_atomic_int_get (&mt_ipc_kind.maps);
  gint unmaps = g_atomic_int_get (&mt_ipc_kind.unmaps);

  for (int i = 0; i < 4; i++)
    {
      t[i] = (ThreadData){ f, NULL, 500 };
      threads[i] = g_thread_new ("import", import_thread, &t[i]);
    }
  for (int i = 0; i < 4; i++)
    {
      g_thread_join (threads[i]);
      g_assert_no_error (t[i].error);
    }
  /* Every mapping made was unmapped once. */
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps) - imports, ==,
                   g_atomic_int_get (&mt_ipc_kind.unmaps) - unmaps);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps) - imports, >=, 1);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  mt_ipc_kind_register ("loopback", no_uuid);

#define ADD(path, func)                                                                            \
  g_test_add ("/descriptor/" path, Fixture, NULL, fixture_set_up, func, fixture_tear_down)
  ADD ("round-trip", test_round_trip);
  ADD ("invalid/truncated", test_truncated);
  ADD ("invalid/oversized", test_oversized);
  ADD ("invalid/wrong-magic", test_wrong_magic);
  ADD ("invalid/wrong-version", test_wrong_version);
  ADD ("invalid/wrong-length-field", test_wrong_length_field);
  ADD ("invalid/bad-kind", test_bad_kind);
  ADD ("invalid/nonzero-reserved", test_nonzero_reserved);
  ADD ("invalid/zero-size", test_zero_size);
  ADD ("invalid/offset-overflow", test_offset_overflow);
  ADD ("invalid/size-lying", test_size_lying);
  ADD ("invalid/size-lying-mapped", test_size_lying_mapped);
  ADD ("invalid/wrong-pool", test_wrong_pool);
  ADD ("not-supported", test_not_supported);
  ADD ("export/closed-and-empty", test_export_closed_empty);
  ADD ("import/dedup", test_dedup);
  ADD ("import/handle-dedup", test_handle_dedup);
  ADD ("import/buffer-keeps-import", test_buffer_keeps_import);
  ADD ("import/many", test_many);
  ADD ("import/threads", test_threads);
#undef ADD
  return g_test_run ();
}

/* testutil-ipc-attack.c: the loopback half of the IPC attack tests (test-ipc-attack*.c):
 * `attack`, the in-test IPC kind on host memory (ipc-testkind.h) registered under that name,
 * whose imports behave as the driver's pool pointers do: importing an allocation that is already
 * mapped returns the same address, and the first unmap ends the mapping. The fixture counts the
 * imports it holds open per allocation (mt_ipc_kind_hold); an unmap while one is held, or of
 * something not mapped, is a violation. Also the fields of a descriptor and the worker
 * threads. */
#include <string.h>

#include <memres/memres.h>
#include "descriptor-layout.h"
#include "ipc-testkind.h"
#include "testutil.h"
#include "testutil-ipc-attack.h"

/* ------------------------------------------------------------------------------------------ */
/* The loopback half: the `attack` kind */

/* the device UUID of its pools */
const guint8 attack_uuid[MEMRES_IPC_ID_SIZE] = { 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
                                                 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11 };

gsize
source_size (guint i)
{
  return 4096 * (i + 1);
}

guint64
source_address (Fixture *f, guint i)
{
  return (guint64) (guintptr) memres_buffer_get_pointer (f->sources[i]);
}

void
fixture_set_up (Fixture *f, gconstpointer data)
{
  GError *error = NULL;

  f->exporter = mt_new_ok ("attack");
  f->handle = memres_resource_export_handle (f->exporter, &error);
  g_assert_no_error (error);
  f->importer = memres_resource_import_handle (f->handle, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < N_SOURCES; i++)
    {
      f->sources[i] = mt_alloc_ok (f->exporter, source_size (i), NULL);
      mt_fill_pattern (memres_buffer_get_pointer (f->sources[i]), source_size (i), i);
      g_assert_true (memres_buffer_export (f->sources[i], &f->descs[i], &error));
      g_assert_no_error (error);
    }
  f->violations = g_atomic_int_get (&mt_ipc_kind.violations);
  f->imports = g_atomic_int_get (&mt_ipc_kind.maps);
  f->unmaps = g_atomic_int_get (&mt_ipc_kind.unmaps);
}

/* Every mapping made was unmapped exactly once, never under an open import. */
void
assert_balanced (Fixture *f)
{
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.violations), ==, f->violations);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps) - f->imports, ==,
                   g_atomic_int_get (&mt_ipc_kind.unmaps) - f->unmaps);
}

void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_clear_pointer (&f->importer, memres_resource_unref);
  for (guint i = 0; i < N_SOURCES; i++)
    memres_buffer_unref (f->sources[i]);
  memres_ipc_handle_free (f->handle);
  memres_resource_unref (f->exporter);
}

/* Imports source @i's descriptor into @mr, asserting success and the bytes; the test holds it. */
MemresBuffer *
import_ok (Fixture *f, MemresResource *mr, guint i)
{
  GError *error = NULL;
  MemresBuffer *buf;

  buf = memres_buffer_import (mr, f->descs[i].bytes, DESC_SIZE, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (buf);
  g_assert_true (memres_buffer_get_pointer (buf) == memres_buffer_get_pointer (f->sources[i]));
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, source_size (i));
  g_assert_true (memres_buffer_get_flags (buf) & MEMRES_MEMORY_IMPORTED);
  mt_ipc_kind_hold (source_address (f, i), 1);
  return buf;
}

/* Releases the test's hold on @buf (an import of source @i), then closes and unrefs it. */
void
close_held (Fixture *f, MemresBuffer *buf, guint i)
{
  mt_assert_pattern (memres_buffer_get_pointer (buf), source_size (i), i);
  mt_ipc_kind_hold (source_address (f, i), -1);
  mt_close_ok (buf, NULL);
}

guint64
n_buffers_of (MemresResource *mr)
{
  MemresStats stats;
  GError *error = NULL;

  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  return stats.n_buffers;
}

/* The field a descriptor byte belongs to, as an error names it. */
const char *
field_of (gsize byte)
{
  if (byte < 4)
    return "magic";
  if (byte < 6)
    return "version";
  if (byte < 8)
    return "length";
  if (byte < OFF_POOL_ID)
    return "kind";
  if (byte < OFF_DEVICE_UUID)
    return "pool_id";
  if (byte < OFF_OFFSET)
    return "device_uuid";
  if (byte < OFF_EXPORT_DATA)
    return NULL; /* offset and size: either may be named (they are checked together) */
  if (byte < OFF_RESERVED)
    return "export_data";
  return "reserved";
}

void
assert_flip_refused (MemresResource *importer, const guint8 *desc, gsize byte, int bit)
{
  guint8 bytes[DESC_SIZE];
  GError *error = NULL;

  memcpy (bytes, desc, DESC_SIZE);
  bytes[byte] ^= (guint8) (1u << bit);
  g_assert_null (memres_buffer_import (importer, bytes, DESC_SIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  if (field_of (byte) != NULL && strstr (error->message, field_of (byte)) == NULL)
    g_error ("byte %zu bit %d: \"%s\" does not name %s", byte, bit, error->message,
             field_of (byte));
  g_clear_error (&error);
}

/* Many threads import the same and different descriptors; closer threads close what they
 * imported, sometimes after re-exporting it and importing that, or with an extra reference
 * dropped by yet another thread. */
#define N_IMPORTERS 4
#define N_CLOSERS   3
#define N_ROUNDS    3000

typedef struct
{
  MemresBuffer *buf;
  guint which;
} Held;

/* Closes @buf (an import of source @which) in this thread when @here, or hands it to a closer
 * thread. */
void
close_here_or_queue (Worker *w, MemresBuffer *buf, guint which, gboolean here)
{
  Held *h;

  if (here)
    {
      close_held (w->f, buf, which);
      return;
    }
  h = g_new (Held, 1);
  h->buf = buf;
  h->which = which;
  g_async_queue_push (w->queue, h);
}

static gpointer
closer_thread (gpointer data)
{
  Worker *w = data;
  GRand *rand = g_rand_new_with_seed (w->seed);
  Held *h;

  while ((h = g_async_queue_pop (w->queue)) != GINT_TO_POINTER (1))
    {
      switch (g_rand_int_range (rand, 0, 3))
        {
        case 0:
          {
            MemresBufferDescriptor d;
            GError *error = NULL;
            MemresBuffer *again;

            g_assert_true (memres_buffer_export (h->buf, &d, &error));
            g_assert_no_error (error);
            g_assert_cmpmem (d.bytes, DESC_SIZE, w->f->descs[h->which].bytes, DESC_SIZE);
            again = import_ok (w->f, memres_buffer_get_resource (h->buf), h->which);
            close_held (w->f, again, h->which);
            close_held (w->f, h->buf, h->which);
            break;
          }
        case 1:
          /* the last reference closes it (not memres_buffer_close) */
          mt_assert_pattern (memres_buffer_get_pointer (h->buf), source_size (h->which), h->which);
          mt_ipc_kind_hold (source_address (w->f, h->which), -1);
          memres_buffer_unref (h->buf);
          break;
        default:
          close_held (w->f, h->buf, h->which);
          break;
        }
      g_free (h);
    }
  g_rand_free (rand);
  return NULL;
}

static gpointer
importer_thread (gpointer data)
{
  Worker *w = data;
  GRand *rand = g_rand_new_with_seed (w->seed);

  for (guint i = 0; i < N_ROUNDS; i++)
    w->round (w, rand);
  g_rand_free (rand);
  return NULL;
}

/* Runs N_CLOSERS closer threads and N_IMPORTERS importer threads of N_ROUNDS @round's, each
 * thread with a seed of its own, until the importers are done and the closers have closed all
 * they were handed. */
void
run_workers (Fixture *f, RoundFunc round)
{
  GThread *importers[N_IMPORTERS], *closers[N_CLOSERS];
  Worker wi[N_IMPORTERS], wc[N_CLOSERS];
  GAsyncQueue *queue = g_async_queue_new ();

  for (guint i = 0; i < N_CLOSERS; i++)
    {
      wc[i] = (Worker){ f, queue, g_test_rand_int (), NULL };
      closers[i] = g_thread_new ("closer", closer_thread, &wc[i]);
    }
  for (guint i = 0; i < N_IMPORTERS; i++)
    {
      wi[i] = (Worker){ f, queue, g_test_rand_int (), round };
      importers[i] = g_thread_new ("importer", importer_thread, &wi[i]);
    }
  for (guint i = 0; i < N_IMPORTERS; i++)
    g_thread_join (importers[i]);
  for (guint i = 0; i < N_CLOSERS; i++)
    g_async_queue_push (queue, GINT_TO_POINTER (1));
  for (guint i = 0; i < N_CLOSERS; i++)
    g_thread_join (closers[i]);
  g_async_queue_unref (queue);
}

/* test-ipc-attack.c: the IPC import path under attack: forged descriptors (every bit of every
 * field), imports into the wrong resource, re-export, many threads importing and closing (and
 * closing what other threads imported), the application's last resource reference dropped while
 * imported buffers are open, and finalization racing with new imports.
 *
 * Two halves.
 * - /ipc-attack/loopback/: `attack`, the in-test IPC kind on host memory (ipc-testkind.h)
 *   registered under that name, whose imports behave as the driver's pool pointers do:
 *   importing an allocation that is already mapped returns the same address, and the first
 *   unmap ends the mapping. The test counts the imports it holds open per allocation
 *   (mt_ipc_kind_hold); an unmap while one is held, or of something not mapped, is a
 *   violation. No driver needed.
 * - /ipc-attack/ipc/: the `ipc` kind against the fake (suite fake) or the real driver (suite
 *   gpu), for what needs the driver's own export data. */
#include <string.h>

#include <memres/memres.h>
#include "descriptor-layout.h"
#include "ipc-testkind.h"
#include "testutil.h"

/* ------------------------------------------------------------------------------------------ */
/* The loopback half: the `attack` kind */

/* the device UUID of its pools */
static const guint8 attack_uuid[MEMRES_IPC_ID_SIZE]
    = { 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
        0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11 };

#define N_SOURCES 40 /* enough mappings at once that the table grows past its first size */

typedef struct
{
  MemresResource *exporter;
  MemresIpcHandle *handle;
  MemresResource *importer;
  MemresBuffer *sources[N_SOURCES];
  MemresBufferDescriptor descs[N_SOURCES];
  gint violations, imports, unmaps;
} Fixture;

static gsize
source_size (guint i)
{
  return 4096 * (i + 1);
}

static guint64
source_address (Fixture *f, guint i)
{
  return (guint64) (guintptr) memres_buffer_get_pointer (f->sources[i]);
}

static void
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
static void
assert_balanced (Fixture *f)
{
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.violations), ==, f->violations);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps) - f->imports, ==,
                   g_atomic_int_get (&mt_ipc_kind.unmaps) - f->unmaps);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_clear_pointer (&f->importer, memres_resource_unref);
  for (guint i = 0; i < N_SOURCES; i++)
    memres_buffer_unref (f->sources[i]);
  memres_ipc_handle_free (f->handle);
  memres_resource_unref (f->exporter);
}

/* Imports source @i's descriptor into @mr, asserting success and the bytes; the test holds it. */
static MemresBuffer *
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
static void
close_held (Fixture *f, MemresBuffer *buf, guint i)
{
  mt_assert_pattern (memres_buffer_get_pointer (buf), source_size (i), i);
  mt_ipc_kind_hold (source_address (f, i), -1);
  mt_close_ok (buf, NULL);
}

static guint64
n_buffers_of (MemresResource *mr)
{
  MemresStats stats;
  GError *error = NULL;

  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  return stats.n_buffers;
}

/* Importing @bytes into @mr fails with @domain/@code (a message naming @field when not NULL),
 * makes no mapping and changes no buffer count. */
static void
expect_refused (MemresResource *mr, const guint8 *bytes, GQuark domain, gint code,
                const char *field)
{
  GError *error = NULL;
  gint imports = g_atomic_int_get (&mt_ipc_kind.maps);
  guint64 before = n_buffers_of (mr);

  g_assert_null (memres_buffer_import (mr, bytes, DESC_SIZE, NULL, &error));
  g_assert_error (error, domain, code);
  if (field != NULL && strstr (error->message, field) == NULL)
    g_error ("\"%s\" does not name the field %s", error->message, field);
  g_clear_error (&error);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps), ==, imports);
  g_assert_cmpuint (n_buffers_of (mr), ==, before);
}

/* Kind fields that are not the importer's, each refused before the plugin is reached: the fast
 * path compares the whole padded field, the slow path validates the name. */
static void
test_kind_field (Fixture *f, gconstpointer data)
{
  static const struct
  {
    const char *name; /* copied with its NUL */
    gsize pos;        /* then this byte of the field set to @byte (when @byte is not 0) */
    guint8 byte;
  } cases[] = {
    { "ATTACK", 0, 0 },
    { "Attack", 0, 0 },
    { "attack", 7, 'x' },
    { "attack", 31, 1 },
    { "attack", 6, 0x80 },
    { " attack", 0, 0 },
    { "attac", 0, 0 },
    { "attack2", 0, 0 },
    { "ipc", 0, 0 },
    { "", 0, 0 },
    { "attack", 6, ' ' },
    { "attack/..", 0, 0 },
    { "attack_attack_attack_attack_12", 0, 0 }, /* 30 bytes: a valid name, not the kind */
  };
  guint8 bytes[DESC_SIZE];

  for (gsize c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      memcpy (bytes, f->descs[0].bytes, DESC_SIZE);
      memset (bytes + OFF_KIND, 0, 32);
      memcpy (bytes + OFF_KIND, cases[c].name, strlen (cases[c].name));
      if (cases[c].byte != 0)
        bytes[OFF_KIND + cases[c].pos] = cases[c].byte;
      g_test_message ("kind case %zu: \"%s\"", c, cases[c].name);
      expect_refused (f->importer, bytes, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR, "kind");
    }
  /* No NUL in the 32 bytes. */
  memcpy (bytes, f->descs[0].bytes, DESC_SIZE);
  memset (bytes + OFF_KIND, 'a', 32);
  expect_refused (f->importer, bytes, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR, "kind");
  assert_balanced (f);
}

/* The field a descriptor byte belongs to, as an error names it. */
static const char *
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

/* Every single-bit change of every field but the export data (the driver's to check) and the
 * device UUID (/ipc-attack/ipc/flip-device-uuid) is refused with INVALID_DESCRIPTOR. With an
 * import of the buffer held, not even the plugin is reached (offset and size are checked
 * against the existing mapping); without one, offset and size need the mapping, which is
 * undone. */
static void
test_flip_every_bit (Fixture *f, gconstpointer data)
{
  guint8 bytes[DESC_SIZE];

  for (int holding = 1; holding >= 0; holding--)
    {
      MemresBuffer *held = holding ? import_ok (f, f->importer, 0) : NULL;

      for (gsize byte = 0; byte < OFF_EXPORT_DATA; byte++)
        {
          if (byte >= OFF_DEVICE_UUID && byte < OFF_OFFSET)
            continue;
          for (int bit = 0; bit < 8; bit++)
            {
              GError *error = NULL;
              gint imports = g_atomic_int_get (&mt_ipc_kind.maps);

              memcpy (bytes, f->descs[0].bytes, DESC_SIZE);
              bytes[byte] ^= (guint8) (1u << bit);
              g_assert_null (memres_buffer_import (f->importer, bytes, DESC_SIZE, NULL, &error));
              g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
              if (field_of (byte) != NULL && strstr (error->message, field_of (byte)) == NULL)
                g_error ("byte %zu bit %d: \"%s\" does not name %s", byte, bit, error->message,
                         field_of (byte));
              g_clear_error (&error);
              if (holding || byte < OFF_OFFSET)
                g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps), ==, imports);
            }
        }
      for (gsize byte = OFF_RESERVED; byte < DESC_SIZE; byte++)
        for (int bit = 0; bit < 8; bit++)
          {
            memcpy (bytes, f->descs[0].bytes, DESC_SIZE);
            bytes[byte] ^= (guint8) (1u << bit);
            expect_refused (f->importer, bytes, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                            "reserved");
          }
      /* Export data: the plugin refuses every change (the address or size names no
       * allocation, or the zero bytes are not zero). */
      for (gsize byte = OFF_EXPORT_DATA; byte < OFF_RESERVED; byte++)
        for (int bit = 0; bit < 8; bit++)
          {
            memcpy (bytes, f->descs[0].bytes, DESC_SIZE);
            bytes[byte] ^= (guint8) (1u << bit);
            expect_refused (f->importer, bytes, MEMRES_ERROR, MEMRES_ERROR_FAILED, NULL);
          }
      g_assert_cmpuint (n_buffers_of (f->importer), ==, holding ? 1 : 0);
      if (held != NULL)
        close_held (f, held, 0);
    }
  assert_balanced (f);
}

/* A re-exported import is the descriptor that was imported, a sub-range included; importing it
 * again joins the same mapping. */
static void
test_reexport (Fixture *f, gconstpointer data)
{
  MemresBufferDescriptor again, sub_again;
  guint8 sub[DESC_SIZE];
  MemresBuffer *a, *b, *c;
  GError *error = NULL;
  gint imports = g_atomic_int_get (&mt_ipc_kind.maps);

  a = import_ok (f, f->importer, 2);
  g_assert_true (memres_buffer_export (a, &again, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (again.bytes, DESC_SIZE, f->descs[2].bytes, DESC_SIZE);
  b = memres_buffer_import (f->importer, again.bytes, DESC_SIZE, NULL, &error);
  g_assert_no_error (error);
  mt_ipc_kind_hold (source_address (f, 2), 1);
  g_assert_true (memres_buffer_get_pointer (b) == memres_buffer_get_pointer (a));

  /* bytes 512 .. 1535 of the allocation */
  memcpy (sub, f->descs[2].bytes, DESC_SIZE);
  mt_put_u64 (sub + OFF_OFFSET, 512);
  mt_put_u64 (sub + OFF_SIZE, 1024);
  c = memres_buffer_import (f->importer, sub, DESC_SIZE, NULL, &error);
  g_assert_no_error (error);
  mt_ipc_kind_hold (source_address (f, 2), 1);
  g_assert_true ((guint8 *) memres_buffer_get_pointer (c)
                 == (guint8 *) memres_buffer_get_pointer (a) + 512);
  g_assert_cmpuint (memres_buffer_get_size (c), ==, 1024);
  g_assert_true (memres_buffer_export (c, &sub_again, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (sub_again.bytes, DESC_SIZE, sub, DESC_SIZE);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps), ==, imports + 1);

  /* The application lets go of the importer: the buffers still re-export. */
  g_clear_pointer (&f->importer, memres_resource_unref);
  close_held (f, a, 2);
  close_held (f, b, 2);
  g_assert_true (memres_buffer_export (c, &sub_again, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (sub_again.bytes, DESC_SIZE, sub, DESC_SIZE);
  mt_ipc_kind_hold (source_address (f, 2), -1);
  mt_close_ok (c, NULL);
  assert_balanced (f);
}

/* Another pool's importer, the exporter itself, an exporter that never exported, a kind without
 * imports: each refuses, no mapping is made. */
static void
test_wrong_resource (Fixture *f, gconstpointer data)
{
  g_autoptr (MemresResource) other = mt_new_ok ("attack");
  g_autoptr (MemresResource) host = mt_new_ok ("host");
  g_autoptr (MemresIpcHandle) other_handle = NULL;
  g_autoptr (MemresResource) other_importer = NULL;
  GError *error = NULL;
  gint imports = g_atomic_int_get (&mt_ipc_kind.maps);

  /* a resource not imported from another process imports nothing: NOT_SUPPORTED, before its
   * first export (no pool identity), after it, and for the exporter itself, whose pool the
   * descriptor names; only an importer of another pool is told the pool is wrong */
  expect_refused (other, f->descs[0].bytes, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                  "not imported");
  other_handle = memres_resource_export_handle (other, &error);
  g_assert_no_error (error);
  other_importer = memres_resource_import_handle (other_handle, &error);
  g_assert_no_error (error);
  g_assert_true (other_importer != f->importer);
  expect_refused (other_importer, f->descs[0].bytes, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                  "pool_id");
  expect_refused (other, f->descs[0].bytes, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                  "not imported");
  expect_refused (f->exporter, f->descs[0].bytes, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                  "not imported");

  g_assert_null (memres_buffer_import (host, f->descs[0].bytes, DESC_SIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  /* NULL and short inputs */
  g_assert_null (memres_buffer_import (f->importer, NULL, DESC_SIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
  g_assert_null (memres_buffer_import (f->importer, NULL, 0, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
  g_assert_null (
      memres_buffer_import (f->importer, f->descs[0].bytes, DESC_SIZE - 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
  g_clear_error (&error);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps), ==, imports);

  /* The importer cannot allocate; an oversized request is refused before the kind. */
  g_assert_null (memres_resource_allocate (f->importer, 4096, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_null (memres_resource_allocate (f->importer, G_MAXSIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_cmpuint (n_buffers_of (f->importer), ==, 0);
  assert_balanced (f);
}

/* The importer counts its open imported buffers (shared mappings or not), also once the
 * application has let go of it. */
static void
test_stats (Fixture *f, gconstpointer data)
{
  static const guint which[] = { 0, 0, 0, 1, 1, 2, 5, 5 };
  MemresBuffer *bufs[G_N_ELEMENTS (which)];
  MemresBuffer *empty;
  MemresResource *mr;
  GError *error = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (which); i++)
    {
      bufs[i] = import_ok (f, f->importer, which[i]);
      g_assert_cmpuint (n_buffers_of (f->importer), ==, i + 1);
    }
  /* an extra reference on a buffer is not another buffer */
  memres_buffer_ref (bufs[0]);
  g_assert_cmpuint (n_buffers_of (f->importer), ==, G_N_ELEMENTS (which));
  memres_buffer_unref (bufs[0]);
  /* a zero-byte buffer is a buffer of the importer too */
  empty = memres_resource_allocate (f->importer, 0, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (n_buffers_of (f->importer), ==, G_N_ELEMENTS (which) + 1);
  mt_close_ok (empty, NULL);

  mr = memres_buffer_get_resource (bufs[7]);
  g_assert_true (mr == f->importer);
  g_clear_pointer (&f->importer, memres_resource_unref);
  for (guint i = 0; i < G_N_ELEMENTS (which) - 1; i++)
    {
      close_held (f, bufs[i], which[i]);
      g_assert_cmpuint (n_buffers_of (mr), ==, G_N_ELEMENTS (which) - i - 1);
    }
  close_held (f, bufs[G_N_ELEMENTS (which) - 1], which[G_N_ELEMENTS (which) - 1]);
  assert_balanced (f);
}

typedef struct
{
  Fixture *f;
  MemresBuffer **bufs;
  guint *which;
  guint n;
} CloseJob;

static gpointer
close_all_thread (gpointer data)
{
  CloseJob *job = data;

  for (guint i = 0; i < job->n; i++)
    close_held (job->f, job->bufs[i], job->which[i]);
  return NULL;
}

/* The application drops its last reference to the importer while imports are open; another
 * thread closes them in a random order. Each mapping lasts until its last import is closed, the
 * resource until the last of all, and it is finalized exactly once. */
static void
test_last_ref_dropped (Fixture *f, gconstpointer data)
{
  enum
  {
    N = 24
  };
  MemresBuffer *bufs[N];
  guint which[N];
  CloseJob job = { f, bufs, which, N };
  GError *error = NULL;
  gint finalized = g_atomic_int_get (&mt_ipc_kind.finalized_imports);
  gint handles = g_atomic_int_get (&mt_ipc_kind.handle_imports);
  MemresResource *again;

  for (guint round = 0; round < 20; round++)
    {
      for (guint i = 0; i < N; i++)
        {
          which[i] = (guint) g_test_rand_int_range (0, 4);
          bufs[i] = import_ok (f, f->importer, which[i]);
        }
      mt_shuffle_buffers (bufs, which, N);
      g_clear_pointer (&f->importer, memres_resource_unref);
      g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.finalized_imports), ==, finalized);
      g_thread_join (g_thread_new ("close", close_all_thread, &job));
      g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.finalized_imports), ==, ++finalized);
      assert_balanced (f);

      /* the pool is imported anew */
      f->importer = memres_resource_import_handle (f->handle, &error);
      g_assert_no_error (error);
      g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.handle_imports), ==, ++handles);
      again = memres_resource_import_handle (f->handle, &error);
      g_assert_no_error (error);
      g_assert_true (again == f->importer);
      memres_resource_unref (again);
    }
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

typedef struct Worker Worker;

/* One round of an importer thread: imports one buffer, closes it or hands it to a closer. */
typedef void (*RoundFunc) (Worker *w, GRand *rand);

struct Worker
{
  Fixture *f;
  GAsyncQueue *queue;
  guint seed;
  RoundFunc round; /* importers' */
};

/* Closes @buf (an import of source @which) in this thread when @here, or hands it to a closer
 * thread. */
static void
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
static void
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

static void
import_round (Worker *w, GRand *rand)
{
  /* half of them on three sources, so that imports collide; the others spread */
  guint which = (guint) g_rand_int_range (rand, 0, g_rand_boolean (rand) ? 3 : N_SOURCES);
  MemresBuffer *buf = import_ok (w->f, w->f->importer, which);

  close_here_or_queue (w, buf, which, g_rand_int_range (rand, 0, 4) == 0);
}

static void
test_threads (Fixture *f, gconstpointer data)
{
  run_workers (f, import_round);
  g_assert_cmpuint (n_buffers_of (f->importer), ==, 0);
  assert_balanced (f);
}

/* Threads import the pool (deduplicated), import a buffer, drop the resource at once and close
 * the buffer (here or in a closer thread): the last close finalizes the resource while other
 * threads look it up in the table of imported pools. Every resource made is finalized once. */
static void
pool_cycle_round (Worker *w, GRand *rand)
{
  GError *error = NULL;
  MemresResource *mr = memres_resource_import_handle (w->f->handle, &error);
  guint which = (guint) g_rand_int_range (rand, 0, N_SOURCES);
  MemresBuffer *buf;

  g_assert_no_error (error);
  buf = import_ok (w->f, mr, which);
  memres_resource_unref (mr);
  /* mostly here: the resource must often lose its last buffer */
  close_here_or_queue (w, buf, which, g_rand_int_range (rand, 0, 8) != 0);
}

static void
test_finalize_race (Fixture *f, gconstpointer data)
{
  gint handles = g_atomic_int_get (&mt_ipc_kind.handle_imports);
  gint finalized = g_atomic_int_get (&mt_ipc_kind.finalized_imports);

  g_clear_pointer (&f->importer, memres_resource_unref);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.finalized_imports), ==, ++finalized);
  run_workers (f, pool_cycle_round);
  g_test_message ("%d pools imported", g_atomic_int_get (&mt_ipc_kind.handle_imports) - handles);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.handle_imports) - handles, >=, 1);
  g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.handle_imports) - handles, ==,
                   g_atomic_int_get (&mt_ipc_kind.finalized_imports) - finalized);
  assert_balanced (f);
}

/* Revived mappings: imported buffer mappings are retired, not removed, when their last buffer is
 * closed, and revived when the same export data is imported again. */

/* The importer's statistics: mapped bytes now and their high-water mark (reserved and used are
 * the same for an importer), open buffers. */
static void
assert_import_stats (MemresResource *mr, guint64 current, guint64 high, guint64 n_buffers)
{
  MemresStats stats;
  GError *error = NULL;

  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.reserved_current, ==, current);
  g_assert_cmpuint (stats.used_current, ==, current);
  g_assert_cmpuint (stats.reserved_high, ==, high);
  g_assert_cmpuint (stats.used_high, ==, high);
  g_assert_cmpuint (stats.n_buffers, ==, n_buffers);
}

static gint
maps_since (Fixture *f)
{
  return g_atomic_int_get (&mt_ipc_kind.maps) - f->imports;
}

static gint
unmaps_since (Fixture *f)
{
  return g_atomic_int_get (&mt_ipc_kind.unmaps) - f->unmaps;
}

/* Import, close, import again: every import after the last close maps anew (the record is
 * revived), re-exports as the descriptor, counts its bytes once; a second import while one is
 * open joins it. */
static void
test_revive_cycles (Fixture *f, gconstpointer data)
{
  const guint64 size = source_size (3);

  assert_import_stats (f->importer, 0, 0, 0);
  for (gint round = 1; round <= 5; round++)
    {
      MemresBufferDescriptor again;
      GError *error = NULL;
      MemresBuffer *a = import_ok (f, f->importer, 3);
      MemresBuffer *b;

      g_assert_cmpint (maps_since (f), ==, round);
      assert_import_stats (f->importer, size, size, 1);
      g_assert_true (memres_buffer_export (a, &again, &error));
      g_assert_no_error (error);
      g_assert_cmpmem (again.bytes, DESC_SIZE, f->descs[3].bytes, DESC_SIZE);
      b = import_ok (f, f->importer, 3);
      g_assert_cmpint (maps_since (f), ==, round);
      assert_import_stats (f->importer, size, size, 2);
      close_held (f, b, 3);
      g_assert_cmpint (unmaps_since (f), ==, round - 1);
      assert_import_stats (f->importer, size, size, 1);
      close_held (f, a, 3);
      g_assert_cmpint (unmaps_since (f), ==, round);
      assert_import_stats (f->importer, 0, size, 0);
    }
  assert_balanced (f);
}

/* One import open, one closed, a third imported: it joins the open one's mapping (no map), and
 * the mapping ends with the last of them. Then a ring: N_SOURCES buffers imported, all closed,
 * all imported again in another order, a few times; the high-water mark is the whole ring. */
static void
test_revive_open_and_closed (Fixture *f, gconstpointer data)
{
  MemresBuffer *a, *b, *c, *ring[N_SOURCES];
  guint order[N_SOURCES];
  guint64 total = 0;

  a = import_ok (f, f->importer, 1);
  b = import_ok (f, f->importer, 1);
  close_held (f, a, 1);
  c = import_ok (f, f->importer, 1);
  g_assert_cmpint (maps_since (f), ==, 1);
  g_assert_cmpint (unmaps_since (f), ==, 0);
  close_held (f, b, 1);
  g_assert_cmpint (unmaps_since (f), ==, 0);
  assert_import_stats (f->importer, source_size (1), source_size (1), 1);
  close_held (f, c, 1);
  g_assert_cmpint (unmaps_since (f), ==, 1);

  for (guint i = 0; i < N_SOURCES; i++)
    total += source_size (i);
  for (guint round = 0; round < 4; round++)
    {
      for (guint i = 0; i < N_SOURCES; i++)
        {
          order[i] = (i * 7 + round * 13) % N_SOURCES; /* 7 and 40 are coprime */
          ring[i] = import_ok (f, f->importer, order[i]);
        }
      assert_import_stats (f->importer, total, total, N_SOURCES);
      mt_shuffle_buffers (ring, order, N_SOURCES);
      for (guint i = 0; i < N_SOURCES; i++)
        close_held (f, ring[i], order[i]);
      assert_import_stats (f->importer, 0, total, 0);
      g_assert_cmpint (maps_since (f), ==, 1 + (gint) (round + 1) * N_SOURCES);
      assert_balanced (f);
    }
}

/* A descriptor of a retired mapping's export data whose size or offset does not fit what the
 * driver maps now: refused naming the field, the new mapping undone, the record still usable. */
static void
test_revive_does_not_fit (Fixture *f, gconstpointer data)
{
  static const struct
  {
    guint64 offset, size_delta; /* size: source_size (5) + size_delta - offset */
    const char *field;
  } cases[] = {
    { 0, 1, "size" },
    { 4096, 1, "size" },
    { 0, 4096 * 1000, "size" },
  };
  guint8 bytes[DESC_SIZE];
  MemresBuffer *buf;

  close_held (f, import_ok (f, f->importer, 5), 5);
  for (gsize c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      gint maps = maps_since (f);

      memcpy (bytes, f->descs[5].bytes, DESC_SIZE);
      mt_put_u64 (bytes + OFF_OFFSET, cases[c].offset);
      mt_put_u64 (bytes + OFF_SIZE, source_size (5) + cases[c].size_delta - cases[c].offset);
      {
        GError *error = NULL;

        g_assert_null (memres_buffer_import (f->importer, bytes, DESC_SIZE, NULL, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
        g_assert_nonnull (strstr (error->message, cases[c].field));
        g_clear_error (&error);
      }
      /* mapped by the kind, then unmapped by the core */
      g_assert_cmpint (maps_since (f), ==, maps + 1);
      assert_balanced (f);
      assert_import_stats (f->importer, 0, source_size (5), 0);
    }
  /* the genuine descriptor and a sub-range still import, and re-export as they came */
  buf = import_ok (f, f->importer, 5);
  memcpy (bytes, f->descs[5].bytes, DESC_SIZE);
  mt_put_u64 (bytes + OFF_OFFSET, 4096);
  mt_put_u64 (bytes + OFF_SIZE, source_size (5) - 4096);
  {
    MemresBufferDescriptor again;
    GError *error = NULL;
    MemresBuffer *sub = memres_buffer_import (f->importer, bytes, DESC_SIZE, NULL, &error);

    g_assert_no_error (error);
    g_assert_true ((guint8 *) memres_buffer_get_pointer (sub)
                   == (guint8 *) memres_buffer_get_pointer (f->sources[5]) + 4096);
    g_assert_true (memres_buffer_export (sub, &again, &error));
    g_assert_no_error (error);
    g_assert_cmpmem (again.bytes, DESC_SIZE, bytes, DESC_SIZE);
    mt_close_ok (sub, NULL);
  }
  close_held (f, buf, 5);
  assert_balanced (f);
}

/* A retired mapping's allocation is freed by the exporter: importing its descriptor fails in the
 * kind (nothing mapped, nothing counted) as often as it is tried. A new allocation of the same
 * size then imports (at the same address the export data is the same: the record is revived
 * for the new allocation) with the new allocation's bytes and size. */
static void
test_revive_after_exporter_free (Fixture *f, gconstpointer data)
{
  MemresBufferDescriptor stale = f->descs[6];
  GError *error = NULL;
  MemresBuffer *buf;

  close_held (f, import_ok (f, f->importer, 6), 6);
  mt_close_ok (f->sources[6], NULL);
  for (int i = 0; i < 3; i++)
    {
      g_assert_null (memres_buffer_import (f->importer, stale.bytes, DESC_SIZE, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
      g_clear_error (&error);
      assert_import_stats (f->importer, 0, source_size (6), 0);
    }
  g_assert_cmpint (maps_since (f), ==, 1);
  f->sources[6] = mt_alloc_ok (f->exporter, source_size (6), NULL);
  mt_fill_pattern (memres_buffer_get_pointer (f->sources[6]), source_size (6), 66);
  g_assert_true (memres_buffer_export (f->sources[6], &f->descs[6], &error));
  g_assert_no_error (error);
  g_test_message ("the new allocation's descriptor is %sthe stale one",
                  memcmp (stale.bytes, f->descs[6].bytes, DESC_SIZE) == 0 ? "" : "not ");
  buf = import_ok (f, f->importer, 6);
  mt_assert_pattern (memres_buffer_get_pointer (buf), source_size (6), 66);
  assert_import_stats (f->importer, source_size (6), source_size (6), 1);
  mt_ipc_kind_hold (source_address (f, 6), -1);
  mt_close_ok (buf, NULL);
  assert_balanced (f);
}

/* Thousands of distinct allocations imported one after another (a few alive at once), each
 * closed before the next: every one maps and unmaps once, and the statistics follow. */
static void
test_many_keys (Fixture *f, gconstpointer data)
{
  enum
  {
    N = 3000,
    WINDOW = 8
  };
  MemresBuffer *window[WINDOW] = { NULL };
  guint64 high = 0;

  for (guint k = 0; k < N; k++)
    {
      MemresBuffer **slot = &window[k % WINDOW];
      gsize size = 64 * (1 + k % 5);
      MemresBufferDescriptor d;
      GError *error = NULL;
      MemresBuffer *imp;

      if (*slot != NULL)
        mt_close_ok (*slot, NULL);
      *slot = mt_alloc_ok (f->exporter, size, NULL);
      mt_fill_pattern (memres_buffer_get_pointer (*slot), size, k);
      g_assert_true (memres_buffer_export (*slot, &d, &error));
      g_assert_no_error (error);
      imp = memres_buffer_import (f->importer, d.bytes, DESC_SIZE, NULL, &error);
      g_assert_no_error (error);
      g_assert_true (memres_buffer_get_pointer (imp) == memres_buffer_get_pointer (*slot));
      mt_assert_pattern (memres_buffer_get_pointer (imp), size, k);
      high = MAX (high, size);
      assert_import_stats (f->importer, size, high, 1);
      mt_close_ok (imp, NULL);
    }
  g_assert_cmpint (maps_since (f), ==, N);
  g_assert_cmpint (unmaps_since (f), ==, N);
  assert_import_stats (f->importer, 0, high, 0);
  for (guint i = 0; i < WINDOW; i++)
    mt_close_ok (window[i], NULL);
  assert_balanced (f);
}

/* Many threads import and close one buffer as fast as they can: its mapping is retired and
 * revived all the time. No unmap under an open import, one unmap per map, and the importer
 * ends with nothing mapped; the high-water mark is the one mapping. */
static void
one_buffer_round (Worker *w, GRand *rand)
{
  guint which = (guint) g_rand_int_range (rand, 0, 2);
  MemresBuffer *buf = import_ok (w->f, w->f->importer, which);

  close_here_or_queue (w, buf, which, g_rand_int_range (rand, 0, 8) != 0);
}

static void
test_threads_revive (Fixture *f, gconstpointer data)
{
  MemresStats stats;
  GError *error = NULL;

  run_workers (f, one_buffer_round);
  assert_balanced (f);
  g_assert_true (memres_resource_get_stats (f->importer, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.n_buffers, ==, 0);
  g_assert_cmpuint (stats.reserved_current, ==, 0);
  g_assert_cmpuint (stats.used_current, ==, 0);
  g_assert_cmpuint (stats.reserved_high, <=, source_size (0) + source_size (1));
  g_assert_cmpuint (stats.reserved_high, >=, source_size (0));
  g_test_message ("%d maps", maps_since (f));
}

/* The importer's fast path (a descriptor of its own pool, checked with one compare of its first
 * 72 bytes) decides as the full checks do. The reference is an `attack` resource that never
 * exported, so never takes the fast path: every descriptor it refuses in the decoding stage
 * (header, kind, reserved, size, offset, input length) must be refused by the importer with the
 * same domain, code and message; the pool and device checks name their field. An import of the
 * buffer is held, so nothing reaches the kind. */
static void
test_fast_path_errors (Fixture *f, gconstpointer data)
{
  enum
  {
    SAME_AS_DECODE,
    POOL_CHECK,
  };
  static const struct
  {
    const char *what;
    gsize length;         /* bytes passed (from a buffer of DESC_SIZE + 8) */
    gsize pos;            /* byte to set, or G_MAXSIZE */
    guint8 value;         /* its value */
    guint64 offset, size; /* written when size is not 1 (1: the descriptor's) */
    gboolean null;        /* pass NULL */
    int stage;
    const char *field;
  } cases[] = {
    { "magic", DESC_SIZE, 0, 'X', 0, 1, FALSE, SAME_AS_DECODE, "magic" },
    { "magic high byte", DESC_SIZE, 3, 0, 0, 1, FALSE, SAME_AS_DECODE, "magic" },
    { "version 0", DESC_SIZE, OFF_VERSION, 0, 0, 1, FALSE, SAME_AS_DECODE, "version" },
    { "version 2", DESC_SIZE, OFF_VERSION, 2, 0, 1, FALSE, SAME_AS_DECODE, "version" },
    { "version high byte", DESC_SIZE, OFF_VERSION + 1, 1, 0, 1, FALSE, SAME_AS_DECODE, "version" },
    { "length field 161", DESC_SIZE, OFF_LENGTH, 161, 0, 1, FALSE, SAME_AS_DECODE, "length" },
    { "length field 0", DESC_SIZE, OFF_LENGTH, 0, 0, 1, FALSE, SAME_AS_DECODE, "length" },
    { "length field high byte", DESC_SIZE, OFF_LENGTH + 1, 1, 0, 1, FALSE, SAME_AS_DECODE,
      "length" },
    { "kind upper case", DESC_SIZE, OFF_KIND, 'A', 0, 1, FALSE, SAME_AS_DECODE, "kind" },
    { "kind padding", DESC_SIZE, OFF_KIND + 31, 'a', 0, 1, FALSE, SAME_AS_DECODE, "kind" },
    { "kind NUL first", DESC_SIZE, OFF_KIND, 0, 0, 1, FALSE, SAME_AS_DECODE, "kind" },
    { "reserved first", DESC_SIZE, OFF_RESERVED, 1, 0, 1, FALSE, SAME_AS_DECODE, "reserved" },
    { "reserved last", DESC_SIZE, DESC_SIZE - 1, 0x80, 0, 1, FALSE, SAME_AS_DECODE, "reserved" },
    { "size 0", DESC_SIZE, G_MAXSIZE, 0, 0, 0, FALSE, SAME_AS_DECODE, "size" },
    { "size 0 at an offset", DESC_SIZE, G_MAXSIZE, 0, 4096, 0, FALSE, SAME_AS_DECODE, "size" },
    { "offset overflow", DESC_SIZE, G_MAXSIZE, 0, G_MAXUINT64, 2, FALSE, SAME_AS_DECODE, "offset" },
    { "offset + size overflow", DESC_SIZE, G_MAXSIZE, 0, G_MAXUINT64 - 4095, 4097, FALSE,
      SAME_AS_DECODE, "offset" },
    { "size overflow", DESC_SIZE, G_MAXSIZE, 0, 1, G_MAXUINT64, FALSE, SAME_AS_DECODE, "offset" },
    { "truncated", DESC_SIZE - 1, G_MAXSIZE, 0, 0, 1, FALSE, SAME_AS_DECODE, "input length" },
    { "truncated to the prefix", 72, G_MAXSIZE, 0, 0, 1, FALSE, SAME_AS_DECODE, "input length" },
    { "empty", 0, G_MAXSIZE, 0, 0, 1, FALSE, SAME_AS_DECODE, "input length" },
    { "oversized", DESC_SIZE + 1, G_MAXSIZE, 0, 0, 1, FALSE, SAME_AS_DECODE, "input length" },
    { "oversized by 8", DESC_SIZE + 8, G_MAXSIZE, 0, 0, 1, FALSE, SAME_AS_DECODE, "input length" },
    { "NULL", DESC_SIZE, G_MAXSIZE, 0, 0, 1, TRUE, SAME_AS_DECODE, "input" },
    { "NULL, 0 bytes", 0, G_MAXSIZE, 0, 0, 1, TRUE, SAME_AS_DECODE, "input length" },
    { "pool_id first", DESC_SIZE, OFF_POOL_ID, 0xff, 0, 1, FALSE, POOL_CHECK, "pool_id" },
    { "pool_id last", DESC_SIZE, OFF_DEVICE_UUID - 1, 0, 0, 1, FALSE, POOL_CHECK, "pool_id" },
    { "device_uuid first", DESC_SIZE, OFF_DEVICE_UUID, 0, 0, 1, FALSE, POOL_CHECK, "device_uuid" },
    { "device_uuid last", DESC_SIZE, OFF_OFFSET - 1, 0x10, 0, 1, FALSE, POOL_CHECK, "device_uuid" },
  };
  g_autoptr (MemresResource) reference = mt_new_ok ("attack");
  MemresBuffer *held = import_ok (f, f->importer, 0);
  guint8 bytes[DESC_SIZE + 8];

  for (gsize c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      GError *error = NULL, *expected = NULL;
      gint maps = g_atomic_int_get (&mt_ipc_kind.maps);
      gconstpointer input;

      memset (bytes, 0, sizeof bytes);
      memcpy (bytes, f->descs[0].bytes, DESC_SIZE);
      if (cases[c].pos != G_MAXSIZE)
        bytes[cases[c].pos] = cases[c].value;
      if (cases[c].size != 1)
        {
          mt_put_u64 (bytes + OFF_OFFSET, cases[c].offset);
          mt_put_u64 (bytes + OFF_SIZE, cases[c].size);
        }
      input = cases[c].null ? NULL : bytes;
      g_test_message ("case %zu: %s", c, cases[c].what);
      g_assert_null (memres_buffer_import (f->importer, input, cases[c].length, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
      if (!g_str_has_prefix (error->message, "invalid buffer descriptor: ")
          || strstr (error->message, cases[c].field) == NULL)
        g_error ("%s: \"%s\" does not name %s", cases[c].what, error->message, cases[c].field);
      if (cases[c].stage == SAME_AS_DECODE)
        {
          g_assert_null (memres_buffer_import (reference, input, cases[c].length, NULL, &expected));
          g_assert_error (expected, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
          g_assert_cmpstr (error->message, ==, expected->message);
          g_clear_error (&expected);
        }
      g_clear_error (&error);
      g_assert_cmpint (g_atomic_int_get (&mt_ipc_kind.maps), ==, maps);
      g_assert_cmpuint (n_buffers_of (f->importer), ==, 1);
    }
  /* the descriptor itself still imports (joins the held mapping) */
  close_held (f, import_ok (f, f->importer, 0), 0);
  close_held (f, held, 0);
  assert_balanced (f);
}

/* Every single-byte change of the 72 compared bytes and of the offset, size and reserved
 * fields: the importer (fast path) refuses exactly when the full checks do, with the same
 * message for what they refuse in decoding; what they accept decodes to the same buffer. The
 * full checks are what the importer of another `attack` pool gives in decoding (it refuses
 * every decodable descriptor as of another pool). */
static void
test_fast_path_every_byte (Fixture *f, gconstpointer data)
{
  static const guint8 values[] = { 0x00, 0x01, 0x20, 0x61, 0x7f, 0x80, 0xff };
  g_autoptr (MemresResource) other = mt_new_ok ("attack");
  g_autoptr (MemresIpcHandle) other_handle = memres_resource_export_handle (other, NULL);
  g_autoptr (MemresResource) reference = memres_resource_import_handle (other_handle, NULL);
  MemresBuffer *held = import_ok (f, f->importer, 0);
  guint8 bytes[DESC_SIZE];
  guint n_accepted = 0;

  g_assert_nonnull (reference);

  for (gsize byte = 0; byte < DESC_SIZE; byte++)
    {
      if (byte >= OFF_EXPORT_DATA && byte < OFF_RESERVED)
        continue; /* the kind's to check */
      for (gsize v = 0; v < G_N_ELEMENTS (values); v++)
        {
          GError *error = NULL, *expected = NULL;
          MemresBuffer *buf;

          memcpy (bytes, f->descs[0].bytes, DESC_SIZE);
          if (bytes[byte] == values[v])
            continue;
          bytes[byte] = values[v];
          buf = memres_buffer_import (f->importer, bytes, DESC_SIZE, NULL, &error);
          g_assert_null (memres_buffer_import (reference, bytes, DESC_SIZE, NULL, &expected));
          g_assert_error (expected, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
          if (buf != NULL)
            {
              /* only an offset or size that fits (a sub-range) is accepted */
              guint64 offset = mt_get_u64 (bytes + OFF_OFFSET);
              guint64 size = mt_get_u64 (bytes + OFF_SIZE);

              g_assert_no_error (error);
              g_assert_true (byte >= OFF_OFFSET && byte < OFF_EXPORT_DATA);
              g_assert_nonnull (strstr (expected->message, "pool_id"));
              g_assert_true ((guint8 *) memres_buffer_get_pointer (buf)
                             == (guint8 *) memres_buffer_get_pointer (f->sources[0]) + offset);
              g_assert_cmpuint (memres_buffer_get_size (buf), ==, size);
              mt_close_ok (buf, NULL);
              n_accepted++;
            }
          else
            {
              g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
              if (strstr (expected->message, "pool_id") == NULL)
                g_assert_cmpstr (error->message, ==, expected->message);
              else if (byte < OFF_POOL_ID || byte >= OFF_OFFSET)
                /* decodable: refused for not fitting the mapping */
                g_assert_true (byte >= OFF_OFFSET && byte < OFF_EXPORT_DATA);
            }
          g_clear_error (&error);
          g_clear_error (&expected);
        }
    }
  g_test_message ("%u sub-ranges accepted", n_accepted);
  g_assert_cmpuint (n_accepted, >, 0);
  close_held (f, held, 0);
  assert_balanced (f);
}

/* ------------------------------------------------------------------------------------------ */
/* The ipc kind */

#define IPC_SIZE 4096

typedef struct
{
  MemresResource *exporter;
  MemresResource *importer; /* NULL: the driver does not import into its own process (skip) */
  MemresBuffer *buf;
  MemresBufferDescriptor desc;
  FakeCudaCounts base;
  int fds;
} IpcFixture;

static void
ipc_set_up (IpcFixture *f, gconstpointer data)
{
  g_autoptr (MemresIpcHandle) handle = NULL;
  GError *error = NULL;

  memset (f, 0, sizeof *f);
  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&f->base);
  f->fds = mt_count_open_fds ();
  f->exporter = mt_new_ok ("ipc:max_size=64MiB");
  handle = memres_resource_export_handle (f->exporter, &error);
  g_assert_no_error (error);
  f->importer = memres_resource_import_handle (handle, &error);
  if (f->importer == NULL && !mt_driver_is_fake () && error->domain == MEMRES_CUDA_ERROR)
    {
      g_test_skip_printf ("the driver does not import a pool into its own process: %s",
                          error->message);
      g_clear_error (&error);
      return;
    }
  g_assert_no_error (error);
  f->buf = mt_alloc_ok (f->exporter, IPC_SIZE, NULL);
  mt_write_pattern (f->buf, 0, IPC_SIZE, 9, NULL);
  g_assert_true (memres_buffer_export (f->buf, &f->desc, &error));
  g_assert_no_error (error);
}

static void
ipc_tear_down (IpcFixture *f, gconstpointer data)
{
  if (f->exporter == NULL)
    return;
  g_clear_pointer (&f->buf, memres_buffer_unref);
  g_clear_pointer (&f->importer, memres_resource_unref);
  g_clear_pointer (&f->exporter, memres_resource_unref);
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&f->base);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_count_open_fds (), ==, f->fds);
}

static MemresBuffer *
ipc_import_ok (MemresResource *mr, const guint8 *bytes)
{
  GError *error = NULL;
  MemresBuffer *buf = memres_buffer_import (mr, bytes, DESC_SIZE, NULL, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  return buf;
}

/* Every bit of every field but the export data and the device UUID: INVALID_DESCRIPTOR naming
 * the field, and (an import of the buffer held) no driver call at all. Then every bit of the
 * export data: the driver refuses it, or maps memory the core checks and unmaps; nothing
 * leaks. */
static void
test_ipc_flip_every_bit (IpcFixture *f, gconstpointer data)
{
  guint8 bytes[DESC_SIZE];
  MemresBuffer *held;
  long imports;

  if (f->importer == NULL || !mt_require_fake ("counts driver calls"))
    return;
  held = ipc_import_ok (f->importer, f->desc.bytes);
  imports = mt_fake_call_count ("cuMemPoolImportPointer");
  for (gsize byte = 0; byte < DESC_SIZE; byte++)
    {
      if ((byte >= OFF_DEVICE_UUID && byte < OFF_OFFSET)
          || (byte >= OFF_EXPORT_DATA && byte < OFF_RESERVED))
        continue;
      for (int bit = 0; bit < 8; bit++)
        {
          GError *error = NULL;

          memcpy (bytes, f->desc.bytes, DESC_SIZE);
          bytes[byte] ^= (guint8) (1u << bit);
          g_assert_null (memres_buffer_import (f->importer, bytes, DESC_SIZE, NULL, &error));
          g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
          if (field_of (byte) != NULL && strstr (error->message, field_of (byte)) == NULL)
            g_error ("byte %zu bit %d: \"%s\" does not name %s", byte, bit, error->message,
                     field_of (byte));
          g_clear_error (&error);
        }
    }
  g_assert_cmpint (mt_fake_call_count ("cuMemPoolImportPointer"), ==, imports);
  mt_check_pattern (held, 0, IPC_SIZE, 9, NULL);
  mt_close_ok (held, NULL);

  for (gsize byte = OFF_EXPORT_DATA; byte < OFF_RESERVED; byte++)
    for (int bit = 0; bit < 8; bit++)
      {
        GError *error = NULL;
        MemresBuffer *buf;

        memcpy (bytes, f->desc.bytes, DESC_SIZE);
        bytes[byte] ^= (guint8) (1u << bit);
        buf = memres_buffer_import (f->importer, bytes, DESC_SIZE, NULL, &error);
        if (buf == NULL)
          {
            g_assert_nonnull (error);
            g_clear_error (&error);
            continue;
          }
        g_assert_no_error (error);
        /* the fake does not check that the export data names a live allocation: no bytes to
         * compare, only the mapping to undo */
        g_test_message ("export data byte %zu bit %d accepted by the driver",
                        byte - OFF_EXPORT_DATA, bit);
        mt_close_ok (buf, NULL);
      }
  mt_sync_ok (NULL);
}

/* The descriptor's device UUID must be the importer's pool's: every flipped bit there is
 * INVALID_DESCRIPTOR naming device_uuid. (Failures are reported with g_test_fail_printf(), so
 * that the other tests still run.) */
static void
test_ipc_flip_device_uuid (IpcFixture *f, gconstpointer data)
{
  guint8 bytes[DESC_SIZE];
  guint n_accepted = 0;

  if (f->importer == NULL)
    return;
  for (gsize byte = OFF_DEVICE_UUID; byte < OFF_OFFSET; byte++)
    for (int bit = 0; bit < 8; bit++)
      {
        GError *error = NULL;
        MemresBuffer *buf;

        memcpy (bytes, f->desc.bytes, DESC_SIZE);
        bytes[byte] ^= (guint8) (1u << bit);
        buf = memres_buffer_import (f->importer, bytes, DESC_SIZE, NULL, &error);
        if (buf != NULL)
          {
            g_assert_no_error (error);
            mt_close_ok (buf, NULL);
            n_accepted++;
            continue;
          }
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR);
        g_assert_nonnull (strstr (error->message, "device_uuid"));
        g_clear_error (&error);
      }
  mt_sync_ok (NULL);
  if (n_accepted > 0)
    g_test_fail_printf ("%u of 128 descriptors with one device_uuid bit flipped were imported",
                        n_accepted);
}

/* A forged device UUID, were it accepted, would poison the shared mapping: a later, genuine import
 * of the same buffer re-exports with the forged UUID ("the descriptor is the same" no more). */
static void
test_ipc_reexport_after_forged_uuid (IpcFixture *f, gconstpointer data)
{
  guint8 forged[DESC_SIZE];
  MemresBufferDescriptor again;
  MemresBuffer *bad, *good;
  GError *error = NULL;

  if (f->importer == NULL)
    return;
  memcpy (forged, f->desc.bytes, DESC_SIZE);
  forged[OFF_DEVICE_UUID] ^= 0xff;
  bad = memres_buffer_import (f->importer, forged, DESC_SIZE, NULL, &error);
  g_clear_error (&error); /* refusing it is right */
  good = ipc_import_ok (f->importer, f->desc.bytes);
  g_assert_true (memres_buffer_export (good, &again, &error));
  g_assert_no_error (error);
  if (bad != NULL)
    memres_buffer_unref (bad);
  mt_close_ok (good, NULL);
  mt_sync_ok (NULL);
  if (memcmp (again.bytes, f->desc.bytes, DESC_SIZE) != 0)
    g_test_fail_printf ("a genuine import re-exports as another descriptor (device_uuid 0x%02x, "
                        "imported 0x%02x)",
                        again.bytes[OFF_DEVICE_UUID], f->desc.bytes[OFF_DEVICE_UUID]);
}

static gpointer
ipc_close_thread (gpointer data)
{
  GPtrArray *bufs = data;

  for (guint i = 0; i < bufs->len; i++)
    mt_close_ok (g_ptr_array_index (bufs, i), NULL);
  return NULL;
}

/* Cycles of: export the pool's handle, import it, import the buffer a few times, drop the
 * importer, close the imports in another thread. The pool goes with the last close: driver
 * objects and fds of the process stay flat (with the real driver, from the second round: it
 * opens a descriptor of its own on first use). */
static void
test_ipc_last_ref_cycles (IpcFixture *f, gconstpointer data)
{
  FakeCudaCounts base;
  GError *error = NULL;
  int fds;

  if (f->importer == NULL)
    return;
  g_clear_pointer (&f->importer, memres_resource_unref);
  mt_sync_ok (NULL);
  mt_counts_snapshot (&base);
  fds = mt_count_open_fds ();
  for (int round = 0; round < 300; round++)
    {
      g_autoptr (MemresIpcHandle) handle = memres_resource_export_handle (f->exporter, &error);
      g_autoptr (GPtrArray) bufs = g_ptr_array_new ();
      MemresResource *importer;

      g_assert_no_error (error);
      importer = memres_resource_import_handle (handle, &error);
      g_assert_no_error (error);
      g_clear_pointer (&handle, memres_ipc_handle_free);
      for (int i = 0; i < 3; i++)
        g_ptr_array_add (bufs, ipc_import_ok (importer, f->desc.bytes));
      g_assert_cmpuint (n_buffers_of (importer), ==, 3);
      memres_resource_unref (importer);
      mt_check_pattern (g_ptr_array_index (bufs, 2), 0, IPC_SIZE, 9, NULL);
      g_thread_join (g_thread_new ("close", ipc_close_thread, bufs));
      mt_sync_ok (NULL);
      mt_assert_fake_counts_equal (&base);
      if (round == 0 && !mt_driver_is_fake ())
        fds = mt_count_open_fds ();
      g_assert_cmpint (mt_count_open_fds (), ==, fds);
    }
}

/* Threads import three buffers of the pool at random (the same ones often); closer threads close
 * them, some only by dropping the last reference, after checking their bytes. Driver objects and
 * fds end where they began. */
typedef struct
{
  MemresResource *importer;
  const MemresBufferDescriptor *descs;
  GAsyncQueue *queue;
  guint seed;
} IpcWorker;

typedef struct
{
  MemresBuffer *buf;
  guint which;
} IpcHeld;

static gpointer
ipc_importer_thread (gpointer data)
{
  IpcWorker *w = data;
  GRand *rand = g_rand_new_with_seed (w->seed);

  for (guint i = 0; i < 500; i++)
    {
      IpcHeld *h = g_new (IpcHeld, 1);

      h->which = (guint) g_rand_int_range (rand, 0, 3);
      h->buf = ipc_import_ok (w->importer, w->descs[h->which].bytes);
      g_async_queue_push (w->queue, h);
    }
  g_rand_free (rand);
  return NULL;
}

static gpointer
ipc_closer_thread (gpointer data)
{
  IpcWorker *w = data;
  GRand *rand = g_rand_new_with_seed (w->seed);
  IpcHeld *h;

  while ((h = g_async_queue_pop (w->queue)) != GINT_TO_POINTER (1))
    {
      mt_check_pattern (h->buf, 0, IPC_SIZE, 100 + h->which, NULL);
      if (g_rand_boolean (rand))
        mt_close_ok (h->buf, NULL);
      else
        memres_buffer_unref (h->buf);
      g_free (h);
    }
  g_rand_free (rand);
  return NULL;
}

static void
test_ipc_threads (IpcFixture *f, gconstpointer data)
{
  MemresBuffer *sources[3];
  MemresBufferDescriptor descs[3];
  GThread *importers[3], *closers[2];
  IpcWorker wi[3], wc[2];
  GAsyncQueue *queue;
  FakeCudaCounts base;
  GError *error = NULL;

  if (f->importer == NULL)
    return;
  queue = g_async_queue_new ();
  for (guint i = 0; i < 3; i++)
    {
      sources[i] = mt_alloc_ok (f->exporter, IPC_SIZE, NULL);
      mt_write_pattern (sources[i], 0, IPC_SIZE, 100 + i, NULL);
      g_assert_true (memres_buffer_export (sources[i], &descs[i], &error));
      g_assert_no_error (error);
    }
  mt_counts_snapshot (&base);
  for (guint i = 0; i < 2; i++)
    {
      wc[i] = (IpcWorker){ f->importer, descs, queue, g_test_rand_int () };
      closers[i] = g_thread_new ("closer", ipc_closer_thread, &wc[i]);
    }
  for (guint i = 0; i < 3; i++)
    {
      wi[i] = (IpcWorker){ f->importer, descs, queue, g_test_rand_int () };
      importers[i] = g_thread_new ("importer", ipc_importer_thread, &wi[i]);
    }
  for (guint i = 0; i < 3; i++)
    g_thread_join (importers[i]);
  /* the application lets go of the importer while closers still work */
  g_clear_pointer (&f->importer, memres_resource_unref);
  for (guint i = 0; i < 2; i++)
    g_async_queue_push (queue, GINT_TO_POINTER (1));
  for (guint i = 0; i < 2; i++)
    g_thread_join (closers[i]);
  g_async_queue_unref (queue);
  mt_sync_ok (NULL);
  base.pools--; /* the imported pool went with its last buffer */
  mt_assert_fake_counts_equal (&base);
  for (guint i = 0; i < 3; i++)
    mt_close_ok (sources[i], NULL);
}

/* The free at the last close of a shared mapping fails: that close reports the driver's error
 * and releases nothing, the buffer stays open with its mapping, and its next close unmaps it;
 * then the importer counts no buffer. The first close of the two makes no driver call at all. */
static void
test_ipc_last_close_fails (IpcFixture *f, gconstpointer data)
{
  MemresBuffer *a, *b;
  GError *error = NULL;
  FakeCudaCounts base;
  long frees;

  if (f->importer == NULL || !mt_require_fake ("injects a fault"))
    return;
  mt_sync_ok (NULL);
  mt_counts_snapshot (&base);
  a = ipc_import_ok (f->importer, f->desc.bytes);
  b = ipc_import_ok (f->importer, f->desc.bytes);
  frees = mt_fake_call_count ("cuMemFreeAsync");
  mt_fake_fail_call ("cuMemFreeAsync", 1, CUDA_ERROR_INVALID_HANDLE);
  mt_close_ok (a, NULL);
  g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync"), ==, frees);
  g_assert_false (memres_buffer_close (b, NULL, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_HANDLE);
  g_clear_error (&error);
  mt_fake_reset_faults ();
  g_assert_false (memres_buffer_is_closed (b));
  g_assert_cmpuint (n_buffers_of (f->importer), ==, 1);
  g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync"), ==, frees + 1);
  g_assert_true (memres_buffer_close (b, NULL, &error)); /* the free, again */
  g_assert_no_error (error);
  g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync"), ==, frees + 2);
  g_assert_true (memres_buffer_is_closed (b));
  g_assert_true (memres_buffer_close (b, NULL, &error)); /* idempotent, no third free */
  g_assert_no_error (error);
  g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync"), ==, frees + 2);
  memres_buffer_unref (b);
  g_assert_cmpuint (n_buffers_of (f->importer), ==, 0);
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&base);
  /* the buffer imports and frees normally again */
  mt_close_ok (ipc_import_ok (f->importer, f->desc.bytes), NULL);
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&base);
}

/* The driver, with a context current on device 0 and two new non-blocking streams there. */
static const MemresCudaDriver *
new_two_streams (CUstream *s1, CUstream *s2)
{
  GError *error = NULL;
  const MemresCudaDriver *drv = memres_cuda_get_driver (&error);

  g_assert_no_error (error);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  g_assert_no_error (error);
  g_assert_cmpint (drv->cuStreamCreate (s1, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuStreamCreate (s2, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);
  return drv;
}

static long
ordering_calls (void)
{
  static const char *const entries[]
      = { "cuEventRecord", "cuStreamWaitEvent", "cuStreamSynchronize", "cuEventSynchronize",
          "cuCtxSynchronize" };
  long n = 0;

  for (gsize i = 0; i < G_N_ELEMENTS (entries); i++)
    n += mt_fake_call_count (entries[i]);
  return n;
}

/* Two imports of one buffer closed on two streams: the mapping is freed on the last closer's
 * stream (cuMemFreeAsync on @s2), and must also come after the work the first closer may still
 * have queued on @s1, which its close said the memory was free after: some ordering call (an
 * event recorded on s1 and waited for on s2, or a synchronization). The fake runs work at once,
 * so the call is what a test can see. */
static void
test_ipc_close_orders_every_stream (IpcFixture *f, gconstpointer data)
{
  const MemresCudaDriver *drv;
  CUstream s1 = NULL, s2 = NULL;
  MemresBuffer *a, *b;
  GError *error = NULL;
  long before, frees;

  if (f->importer == NULL || !mt_require_fake ("counts driver calls"))
    return;
  drv = new_two_streams (&s1, &s2);
  a = memres_buffer_import (f->importer, f->desc.bytes, DESC_SIZE, s1, &error);
  g_assert_no_error (error);
  b = memres_buffer_import (f->importer, f->desc.bytes, DESC_SIZE, s2, &error);
  g_assert_no_error (error);
  mt_check_pattern (a, 0, IPC_SIZE, 9, s1); /* work of a's user on s1 */
  before = ordering_calls ();
  frees = mt_fake_call_count ("cuMemFreeAsync");
  mt_close_ok (a, s1);
  mt_close_ok (b, s2);
  g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync") - frees, ==, 1);
  if (ordering_calls () == before)
    g_test_fail_printf ("the shared mapping was freed on the last closer's stream only, not "
                        "ordered after the first closer's stream");
  g_assert_cmpint (drv->cuStreamSynchronize (s1), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuStreamSynchronize (s2), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuStreamDestroy (s1), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuStreamDestroy (s2), ==, CUDA_SUCCESS);
}

/* Revived mappings with the driver's export data. Import, close, import again: each import after
 * the last close maps anew (one cuMemPoolImportPointer), reads the exporter's bytes and re-exports
 * as the descriptor; driver objects end where they began. The exporter then frees the buffer and
 * allocates one of the same size, which the fake places where the old one was: the same export
 * data, so the retired record is revived, for the new allocation's bytes. */
static void
test_ipc_revive_cycles (IpcFixture *f, gconstpointer data)
{
  MemresBufferDescriptor again, old = f->desc;
  MemresStats stats;
  GError *error = NULL;
  FakeCudaCounts base;
  long imports;

  if (f->importer == NULL)
    return;
  mt_sync_ok (NULL);
  mt_counts_snapshot (&base);
  imports = mt_driver_is_fake () ? mt_fake_call_count ("cuMemPoolImportPointer") : 0;
  for (int round = 1; round <= 4; round++)
    {
      MemresBuffer *a = ipc_import_ok (f->importer, f->desc.bytes);
      MemresBuffer *b = ipc_import_ok (f->importer, f->desc.bytes);

      g_assert_true (memres_buffer_get_pointer (a) == memres_buffer_get_pointer (b));
      if (mt_driver_is_fake ())
        g_assert_cmpint (mt_fake_call_count ("cuMemPoolImportPointer") - imports, ==, round);
      mt_check_pattern (b, 0, IPC_SIZE, 9, NULL);
      g_assert_true (memres_buffer_export (b, &again, &error));
      g_assert_no_error (error);
      g_assert_cmpmem (again.bytes, DESC_SIZE, f->desc.bytes, DESC_SIZE);
      g_assert_true (memres_resource_get_stats (f->importer, &stats, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (stats.n_buffers, ==, 2);
      g_assert_cmpuint (stats.used_current, >=, IPC_SIZE);
      mt_close_ok (a, NULL);
      mt_close_ok (b, NULL);
      g_assert_true (memres_resource_get_stats (f->importer, &stats, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (stats.n_buffers, ==, 0);
      g_assert_cmpuint (stats.used_current, ==, 0);
      g_assert_cmpuint (stats.used_high, >=, IPC_SIZE);
      mt_sync_ok (NULL);
      mt_assert_fake_counts_equal (&base);
    }

  mt_close_ok (g_steal_pointer (&f->buf), NULL);
  mt_sync_ok (NULL);
  f->buf = mt_alloc_ok (f->exporter, IPC_SIZE, NULL);
  mt_write_pattern (f->buf, 0, IPC_SIZE, 10, NULL);
  g_assert_true (memres_buffer_export (f->buf, &f->desc, &error));
  g_assert_no_error (error);
  if (mt_driver_is_fake ())
    g_assert_cmpmem (f->desc.bytes, DESC_SIZE, old.bytes, DESC_SIZE);
  {
    MemresBuffer *c = ipc_import_ok (f->importer, f->desc.bytes);

    mt_check_pattern (c, 0, IPC_SIZE, 10, NULL);
    mt_close_ok (c, NULL);
  }
  mt_sync_ok (NULL);
}

/* The driver refuses to map a retired mapping's export data again (cuMemPoolImportPointer, then
 * cuPointerGetAttributes failing): the import reports the driver's error, nothing stays mapped or
 * counted, and the next import maps it. */
static void
test_ipc_revive_import_fails (IpcFixture *f, gconstpointer data)
{
  static const char *const entries[] = { "cuMemPoolImportPointer", "cuPointerGetAttributes" };
  MemresStats stats;
  GError *error = NULL;
  FakeCudaCounts base;
  MemresBuffer *buf;

  if (f->importer == NULL || !mt_require_fake ("injects a fault"))
    return;
  mt_sync_ok (NULL);
  mt_counts_snapshot (&base);
  mt_close_ok (ipc_import_ok (f->importer, f->desc.bytes), NULL);
  for (gsize e = 0; e < G_N_ELEMENTS (entries); e++)
    {
      mt_fake_fail_call (entries[e], 1, CUDA_ERROR_OUT_OF_MEMORY);
      g_assert_null (memres_buffer_import (f->importer, f->desc.bytes, DESC_SIZE, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
      g_assert_nonnull (strstr (error->message, entries[e]));
      g_clear_error (&error);
      mt_fake_reset_faults ();
      g_assert_true (memres_resource_get_stats (f->importer, &stats, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (stats.n_buffers, ==, 0);
      g_assert_cmpuint (stats.used_current, ==, 0);
      mt_sync_ok (NULL);
      mt_assert_fake_counts_equal (&base);
    }
  buf = ipc_import_ok (f->importer, f->desc.bytes);
  mt_check_pattern (buf, 0, IPC_SIZE, 9, NULL);
  mt_close_ok (buf, NULL);
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&base);
}

/* Two imports closed on two streams, then the same again on the revived record, three times:
 * each last close is ordered after the other stream (an event recorded and waited for), every
 * event is destroyed, one free per cycle. In one cycle no event can be had (cuEventCreate
 * fails): the first close then waits for its stream instead. */
static void
test_ipc_revive_orders_streams (IpcFixture *f, gconstpointer data)
{
  const MemresCudaDriver *drv;
  CUstream s1 = NULL, s2 = NULL;
  FakeCudaCounts base;
  GError *error = NULL;

  if (f->importer == NULL || !mt_require_fake ("counts driver calls"))
    return;
  drv = new_two_streams (&s1, &s2);
  mt_sync_ok (NULL);
  mt_counts_snapshot (&base);
  for (int cycle = 0; cycle < 3; cycle++)
    {
      long records = mt_fake_call_count ("cuEventRecord");
      long waits = mt_fake_call_count ("cuStreamWaitEvent");
      long syncs = mt_fake_call_count ("cuStreamSynchronize");
      long frees = mt_fake_call_count ("cuMemFreeAsync");
      MemresBuffer *a, *b;

      a = memres_buffer_import (f->importer, f->desc.bytes, DESC_SIZE, s1, &error);
      g_assert_no_error (error);
      b = memres_buffer_import (f->importer, f->desc.bytes, DESC_SIZE, s2, &error);
      g_assert_no_error (error);
      mt_check_pattern (a, 0, IPC_SIZE, 9, s1);
      if (cycle == 1)
        mt_fake_fail_call ("cuEventCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
      mt_close_ok (a, s1);
      mt_fake_reset_faults ();
      mt_close_ok (b, s2);
      g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync") - frees, ==, 1);
      if (cycle == 1)
        {
          g_assert_cmpint (mt_fake_call_count ("cuStreamSynchronize") - syncs, >=, 1);
          g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent") - waits, ==, 0);
        }
      else
        {
          g_assert_cmpint (mt_fake_call_count ("cuEventRecord") - records, ==, 1);
          g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent") - waits, ==, 1);
        }
      g_assert_cmpint (drv->cuStreamSynchronize (s1), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuStreamSynchronize (s2), ==, CUDA_SUCCESS);
      mt_assert_fake_counts_equal (&base);
    }
  g_assert_cmpint (drv->cuStreamDestroy (s1), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuStreamDestroy (s2), ==, CUDA_SUCCESS);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  mt_ipc_kind_register ("attack", attack_uuid);

#define ADD(path, func)                                                                            \
  g_test_add ("/ipc-attack/loopback/" path, Fixture, NULL, fixture_set_up, func, fixture_tear_down)
  ADD ("kind-field", test_kind_field);
  ADD ("flip-every-bit", test_flip_every_bit);
  ADD ("reexport", test_reexport);
  ADD ("wrong-resource", test_wrong_resource);
  ADD ("stats", test_stats);
  ADD ("last-ref-dropped", test_last_ref_dropped);
  ADD ("threads", test_threads);
  ADD ("finalize-race", test_finalize_race);
  ADD ("revive/cycles", test_revive_cycles);
  ADD ("revive/open-and-closed", test_revive_open_and_closed);
  ADD ("revive/does-not-fit", test_revive_does_not_fit);
  ADD ("revive/after-exporter-free", test_revive_after_exporter_free);
  ADD ("revive/many-keys", test_many_keys);
  ADD ("revive/threads", test_threads_revive);
  ADD ("fast-path/errors", test_fast_path_errors);
  ADD ("fast-path/every-byte", test_fast_path_every_byte);
#undef ADD
#define ADD(path, func)                                                                            \
  g_test_add ("/ipc-attack/ipc/" path, IpcFixture, NULL, ipc_set_up, func, ipc_tear_down)
  ADD ("flip-every-bit", test_ipc_flip_every_bit);
  ADD ("last-ref-cycles", test_ipc_last_ref_cycles);
  ADD ("threads", test_ipc_threads);
  ADD ("last-close-fails", test_ipc_last_close_fails);
  ADD ("revive/cycles", test_ipc_revive_cycles);
  ADD ("revive/import-fails", test_ipc_revive_import_fails);
  ADD ("revive/orders-streams", test_ipc_revive_orders_streams);
  /* Known bugs, last: a failure ends the program (TAP bails out unless -k). */
  ADD ("flip-device-uuid", test_ipc_flip_device_uuid);
  ADD ("reexport-after-forged-uuid", test_ipc_reexport_after_forged_uuid);
  ADD ("close-orders-every-stream", test_ipc_close_orders_every_stream);
#undef ADD
  return g_test_run ();
}

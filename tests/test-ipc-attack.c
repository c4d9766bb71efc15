/* test-ipc-attack.c: the IPC import path under attack, its loopback half: forged descriptors
 * (every bit of every field), imports into the wrong resource, re-export, many threads
 * importing and closing (and closing what other threads imported), the application's last
 * resource reference dropped while imported buffers are open, and finalization racing with new
 * imports. `attack`, the in-test IPC kind on host memory (ipc-testkind.h), whose imports behave
 * as the driver's pool pointers do, and the fixture: testutil-ipc-attack.c. No driver needed.
 * Revival and the fast path: test-ipc-attack-revive.c; the `ipc` kind: test-ipc-attack-ipc.c. */
#include <string.h>

#include <memres/memres.h>
#include "descriptor-layout.h"
#include "ipc-testkind.h"
#include "testutil.h"
#include "testutil-ipc-attack.h"

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
              gint imports = g_atomic_int_get (&mt_ipc_kind.maps);

              assert_flip_refused (f->importer, f->descs[0].bytes, byte, bit);
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

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  mt_ipc_kind_register ("attack", attack_uuid);

#define ADD ATTACK_ADD_LOOPBACK
  ADD ("kind-field", test_kind_field);
  ADD ("flip-every-bit", test_flip_every_bit);
  ADD ("reexport", test_reexport);
  ADD ("wrong-resource", test_wrong_resource);
  ADD ("stats", test_stats);
  ADD ("last-ref-dropped", test_last_ref_dropped);
  ADD ("threads", test_threads);
  ADD ("finalize-race", test_finalize_race);
#undef ADD
  return g_test_run ();
}

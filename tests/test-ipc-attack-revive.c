/* test-ipc-attack-revive.c: the IPC import path under attack, loopback half (the `attack`
 * kind, testutil-ipc-attack.c): imports revived after their last close (cycles, open and closed,
 * sizes that do not fit, after the exporter's free, many keys, threads) and the fast path's
 * errors and every byte. No driver needed. */
#include <string.h>

#include <memres/memres.h>
#include "descriptor-layout.h"
#include "ipc-testkind.h"
#include "testutil.h"
#include "testutil-ipc-attack.h"

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

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  mt_ipc_kind_register ("attack", attack_uuid);

#define ADD ATTACK_ADD_LOOPBACK
  ADD ("revive/cycles", test_revive_cycles);
  ADD ("revive/open-and-closed", test_revive_open_and_closed);
  ADD ("revive/does-not-fit", test_revive_does_not_fit);
  ADD ("revive/after-exporter-free", test_revive_after_exporter_free);
  ADD ("revive/many-keys", test_many_keys);
  ADD ("revive/threads", test_threads_revive);
  ADD ("fast-path/errors", test_fast_path_errors);
  ADD ("fast-path/every-byte", test_fast_path_every_byte);
#undef ADD
  return g_test_run ();
}

/* conformance-buffers.c: the conformance suite's cases of buffers that work (test-conformance.c):
 * sizes and alignment, zero bytes, G_MAXSIZE, closed buffers, streams, copy, fill and read-back,
 * statistics, trim, the layer below, segments and memres_lookup() by kind. */
#include "conformance.h"

/* Zero bytes: an empty buffer, counted as a buffer, no memory and no driver call. */
void
test_zero_size (gconstpointer data)
{
  GError *error = NULL;
  MemresStats before, after;
  MemresBuffer *buf;
  long calls = 0;
  Fx f;

  g_test_summary ("Zero bytes give an empty buffer (address 0, no pointer, size 0) that counts "
                  "as a buffer but no bytes, costs no driver allocation, fills and closes.");
  if (!fx_init (&f, data))
    return;
  before = mt_stats_ok (f.mr);
  if (mt_driver_is_fake () && f.s->base->alloc_entry != NULL)
    calls = mt_fake_call_count (f.s->base->alloc_entry);
  buf = memres_resource_allocate (f.mr, 0, f.stream, &error);
  g_assert_no_error (error);
  g_assert_nonnull (buf);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  g_assert_null (memres_buffer_get_pointer (buf));
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  g_assert_true (memres_buffer_get_resource (buf) == f.mr);
  if (!is (f.s, B_DEVICE))
    {
      g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
      g_assert_true (memres_buffer_is_host_accessible (buf));
    }
  after = mt_stats_ok (f.mr);
  g_assert_cmpuint (after.used_current, ==, before.used_current);
  g_assert_cmpuint (after.used_current, ==, 0);
  g_assert_cmpuint (after.n_buffers, ==, before.n_buffers + 1);
  if (mt_driver_is_fake () && f.s->base->alloc_entry != NULL)
    g_assert_cmpint (mt_fake_call_count (f.s->base->alloc_entry), ==, calls);
  MT_CHECK (memres_buffer_fill (buf, 0xff, 1, f.stream, &error));
  mt_close_ok (buf, f.stream);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, before.n_buffers);
  fx_clear (&f);
}

/* Sizes no memory can hold: an out-of-memory, nothing counted or held, and the resource still
 * serves. */
void
test_max_size (gconstpointer data)
{
  static const gsize sizes[] = { G_MAXSIZE, G_MAXSIZE - 1, G_MAXSIZE / 2 + 1 };
  MemresStats stats;
  Fx f;

  g_test_summary ("G_MAXSIZE and other sizes no memory holds fail with MEMRES_ERROR_OUT_OF_MEMORY, "
                  "count nothing, and the resource serves afterwards.");
  if (!fx_init (&f, data))
    return;
  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf = memres_resource_allocate (f.mr, sizes[i], f.stream, &error);

      g_assert_null (buf);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    }
  /* nothing counted, nothing held */
  stats = mt_stats_ok (f.mr);
  g_assert_cmpuint (stats.used_current, ==, 0);
  g_assert_cmpuint (stats.used_high, ==, 0);
  g_assert_cmpuint (stats.n_buffers, ==, 0);
  /* the resource keeps working */
  mt_close_ok (alloc_ok (f.s, f.mr, 4 * KiB, f.stream), f.stream);
  fx_run (&f);
  /* a graph's used bytes are the driver's memory associated with graphs: on the real driver it
   * stays associated after the graph ran and was destroyed, until a trim (test-graph.c's
   * trim-after-destroy) */
  if (is (f.s, B_CAPTURE))
    g_assert_true (memres_resource_trim (f.mr, 0, NULL));
  g_assert_cmpuint (mt_stats_ok (f.mr).used_current, ==, 0);
  fx_clear (&f);
}

/* A closed buffer: its properties are empty, closing it again succeeds, data movement is
 * refused with MEMRES_ERROR_CLOSED. */
void
test_closed (gconstpointer data)
{
  GError *error = NULL;
  MemresBuffer *buf, *other;
  guint8 byte = 0;
  Fx f;

  g_test_summary ("A closed buffer reports NULL/0/-1/FALSE, closes again without an error, and "
                  "refuses fill, read, write and copy with MEMRES_ERROR_CLOSED.");
  if (!fx_init (&f, data))
    return;
  buf = alloc_ok (f.s, f.mr, 4 * KiB, f.stream);
  other = alloc_ok (f.s, f.mr, 4 * KiB, f.stream);
  MT_CHECK (memres_buffer_close (buf, f.stream, &error));
  g_assert_true (memres_buffer_is_closed (buf));
  g_assert_null (memres_buffer_get_pointer (buf));
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
  g_assert_false (memres_buffer_is_host_accessible (buf));
  g_assert_false (memres_buffer_is_device_accessible (buf));
  /* idempotent */
  MT_CHECK (memres_buffer_close (buf, f.stream, &error));
  g_assert_false (memres_buffer_fill (buf, 0, 1, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_write (buf, 0, &byte, 1, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_read (buf, 0, &byte, 1, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_copy_to (other, buf, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_copy_to (buf, other, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 1);
  memres_buffer_unref (buf);
  /* the last unref closes */
  memres_buffer_unref (other);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
  fx_clear (&f);
}

/* Streams: a buffer allocated on one stream and closed on another, on the legacy stream, and
 * through its deallocation stream. */
void
test_streams (gconstpointer data)
{
  GError *error = NULL;
  MemresStream other;
  MemresBuffer *a, *b, *c;
  Fx f;

  g_test_summary ("A buffer allocated on one stream closes on another, on the legacy stream, and "
                  "on its deallocation stream at the last unref; its bytes stay intact meanwhile. "
                  "Memory freed on a stream since destroyed serves another stream.");
  if (!fx_init (&f, data))
    return;
  if (is (f.s, B_CAPTURE))
    {
      /* graph memory lives within its capture: test-graph.c has its streams */
      g_test_skip ("allocated and freed inside one capture");
      fx_clear (&f);
      return;
    }
  other = stream_begin (f.s);
  a = alloc_ok (f.s, f.mr, 64 * KiB, f.stream);
  mt_write_pattern (a, 0, 64 * KiB, 7, f.stream);
  mt_check_pattern (a, 0, 64 * KiB, 7, other);
  mt_close_ok (a, other);
  b = alloc_ok (f.s, f.mr, 64 * KiB, other);
  mt_write_pattern (b, 0, 64 * KiB, 8, other);
  mt_close_ok (b, MEMRES_STREAM_LEGACY);
  c = alloc_ok (f.s, f.mr, 64 * KiB, MEMRES_STREAM_LEGACY);
  mt_write_pattern (c, 0, 64 * KiB, 9, MEMRES_STREAM_LEGACY);
  MT_CHECK (memres_buffer_set_deallocation_stream (c, f.stream, &error));
  g_assert_true (memres_buffer_get_deallocation_stream (c) == f.stream);
  memres_buffer_unref (c); /* closes on f.stream */
  mt_sync_ok (f.stream);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
  /* memory freed on a stream that is then destroyed serves the next allocation on another
   * (RMM's pool DeletedStream) */
  mt_close_ok (alloc_ok (f.s, f.mr, 10000, other), other);
  stream_end (f.s, other);
  a = alloc_ok (f.s, f.mr, 10000, f.stream);
  mt_write_pattern (a, 0, 10000, 10, f.stream);
  mt_check_pattern (a, 0, 10000, 10, f.stream);
  mt_close_ok (a, f.stream);
  mt_sync_ok (f.stream);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
  fx_clear (&f);
}

/* Bytes: fill (widths 1 and 4), copy between buffers, write and read back. */
void
test_bytes (gconstpointer data)
{
  static const gsize sizes[] = { 1, 4 * KiB, MiB + 4 };
  GError *error = NULL;
  Fx f;

  g_test_summary ("fill (widths 1 and 4), copy between buffers and to host memory, write and "
                  "read back: every byte as expected.");
  if (!fx_init (&f, data))
    return;
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      MemresBuffer *a = alloc_ok (f.s, f.mr, sizes[i], f.stream);
      MemresBuffer *b = alloc_ok (f.s, f.mr, sizes[i], f.stream);
      gsize size = memres_buffer_get_size (a); /* rounded up by some kinds */
      HostMem ha, hb;

      g_test_message ("size %" G_GSIZE_FORMAT, size);
      host_mem_init (&f, &ha, size);
      host_mem_init (&f, &hb, size);
      MT_CHECK (memres_buffer_fill (a, 0x5a, 1, f.stream, &error));
      MT_CHECK (memres_buffer_copy_to (a, b, f.stream, &error));
      if (size % 4 == 0)
        MT_CHECK (memres_buffer_fill (a, 0x11223344, 4, f.stream, &error));
      MT_CHECK (memres_buffer_copy_to (a, ha.buf, f.stream, &error));
      MT_CHECK (memres_buffer_copy_from (hb.buf, b, f.stream, &error));
      mt_close_ok (a, f.stream);
      mt_close_ok (b, f.stream);
      fx_run (&f);
      for (gsize j = 0; j < size; j++)
        {
          guint8 want = size % 4 == 0 ? (guint8) (0x11223344u >> (8 * (j % 4))) : 0x5a;

          if (ha.bytes[j] != want || hb.bytes[j] != 0x5a)
            g_error ("byte %" G_GSIZE_FORMAT ": 0x%02x 0x%02x, expected 0x%02x 0x5a", j,
                     ha.bytes[j], hb.bytes[j], want);
        }
      host_mem_clear (&f, &ha);
      host_mem_clear (&f, &hb);
      if (!is (f.s, B_CAPTURE))
        {
          /* write and read back through the API (not capturable from pageable memory) */
          a = alloc_ok (f.s, f.mr, size, f.stream);
          mt_write_pattern (a, 0, size, (guint32) size, f.stream);
          mt_check_pattern (a, 0, size, (guint32) size, f.stream);
          if (memres_buffer_is_host_accessible (a))
            {
              /* the memory is really there: every byte written and read through the pointer */
              guint8 *p = memres_buffer_get_pointer (a);

              g_assert_nonnull (p);
              for (gsize j = 0; j < size; j++)
                p[j] = (guint8) (j * 7);
              for (gsize j = 0; j < size; j++)
                g_assert_cmpint (p[j], ==, (guint8) (j * 7));
            }
          mt_close_ok (a, f.stream);
        }
    }
  fx_clear (&f);
}

/* Statistics: buffers and bytes in use, their high marks, and a reset. */
void
test_stats (gconstpointer data)
{
  GError *error = NULL;
  MemresStats s0, s1, s2, s3;
  MemresBuffer *a, *b;
  gsize size_a, size_b;
  gboolean exact;
  Fx f;

  g_test_summary ("Statistics count live buffers and their bytes, keep high marks across a close, "
                  "bring them down to the current values on reset, and end at zero.");
  if (!fx_init (&f, data))
    return;
  /* host memory is counted to the byte, unless a cache counts its chunks */
  exact = !is (f.s, B_DEVICE) && !layer_is (f.s, L_CHUNKS);
  size_a = is (f.s, B_DEVICE) ? 3 * MiB : 1000;
  size_b = is (f.s, B_DEVICE) ? 5 * MiB + 1 : 3000;
  s0 = mt_stats_ok (f.mr);
  g_assert_cmpuint (s0.used_current, ==, 0);
  g_assert_cmpuint (s0.used_high, ==, 0);
  g_assert_cmpuint (s0.n_buffers, ==, 0);

  a = alloc_ok (f.s, f.mr, size_a, f.stream);
  b = alloc_ok (f.s, f.mr, size_b, f.stream);
  s1 = mt_stats_ok (f.mr);
  g_assert_cmpuint (s1.n_buffers, ==, 2);
  if (is (f.s, B_CAPTURE))
    {
      /* graph memory is counted when a launch allocates it (test-graph.c): the buffers only */
      mt_close_ok (b, f.stream);
      g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 1);
      mt_close_ok (a, f.stream);
      g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
      fx_clear (&f);
      return;
    }
  g_assert_cmpuint (s1.used_current, >=, size_a + size_b);
  g_assert_cmpuint (s1.used_high, >=, s1.used_current);
  g_assert_cmpuint (s1.reserved_current, >=, s1.used_current);
  if (exact)
    {
      g_assert_cmpuint (s1.used_current, ==, size_a + size_b);
      g_assert_cmpuint (s1.used_high, ==, size_a + size_b);
      g_assert_cmpuint (s1.reserved_current, ==, size_a + size_b);
      g_assert_cmpuint (s1.reserved_high, ==, size_a + size_b);
    }

  mt_close_ok (b, f.stream);
  fx_run (&f);
  s2 = mt_stats_ok (f.mr);
  g_assert_cmpuint (s2.n_buffers, ==, 1);
  g_assert_cmpuint (s2.used_current, >=, size_a);
  if (!layer_is (f.s, L_CHUNKS))
    g_assert_cmpuint (s2.used_current, <=, s1.used_current - size_b);
  else
    g_assert_cmpuint (s2.used_current, <, s1.used_current);
  if (exact)
    g_assert_cmpuint (s2.used_current, ==, size_a);
  g_assert_cmpuint (s2.used_high, ==, s1.used_high); /* the mark stays */

  /* reset: the high marks come down to the current values */
  MT_CHECK (memres_resource_reset_stats (f.mr, &error));
  s3 = mt_stats_ok (f.mr);
  g_assert_cmpuint (s3.used_high, ==, s3.used_current);
  g_assert_cmpuint (s3.used_high, <, s1.used_high);
  g_assert_cmpuint (s3.reserved_high, ==, s3.reserved_current);
  if (exact)
    {
      g_assert_cmpuint (s3.used_high, ==, size_a);
      g_assert_cmpuint (s3.reserved_high, ==, size_a);
    }

  memres_buffer_unref (a); /* closes it */
  fx_run (&f);
  s3 = mt_stats_ok (f.mr);
  g_assert_cmpuint (s3.used_current, ==, 0);
  g_assert_cmpuint (s3.n_buffers, ==, 0);
  g_assert_cmpuint (s3.used_high, >=, size_a);
  fx_clear (&f);
}

/* Trim: a kind that keeps memory gives it back; host has none to keep and says so. */
void
test_trim (gconstpointer data)
{
  GError *error = NULL;
  MemresStats s;
  Fx f;

  g_test_summary (
      "trim(0) gives back all memory not in use (reserved falls to 0) and the resource "
      "serves afterwards; a stack with nothing to trim says MEMRES_ERROR_NOT_SUPPORTED.");
  if (!fx_init (&f, data))
    return;
  mt_close_ok (alloc_ok (f.s, f.mr, 2 * MiB, f.stream), f.stream);
  fx_run (&f);
  s = mt_stats_ok (f.mr);
  /* the real driver counts a graph's freed memory as used (associated with graphs) until a
   * trim: the check after the trim below holds it to 0 */
  if (!is (f.s, B_CAPTURE) || mt_driver_is_fake ())
    g_assert_cmpuint (s.used_current, ==, 0);
  /* kept until the trim (the base's own statistics; a cache's always) */
  if (((is (f.s, B_HOLDS) || (f.s->base->as_layer & L_KEEPS)) && f.s->layer->name == NULL)
      || (f.s->layer->flags & L_KEEPS))
    g_assert_cmpuint (s.reserved_current, >=, 2 * MiB);
  if (is (f.s, B_TRIM) || layer_is (f.s, L_KEEPS))
    {
      MT_CHECK (memres_resource_trim (f.mr, 0, &error));
      s = mt_stats_ok (f.mr);
      g_assert_cmpuint (s.reserved_current, ==, 0);
      g_assert_cmpuint (s.used_current, ==, 0);
      if (!is (f.s, B_CAPTURE)) /* graph memory is reserved at launch */
        g_assert_cmpuint (s.reserved_high, >=, 2 * MiB);
    }
  else
    {
      g_assert_false (memres_resource_trim (f.mr, 0, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      {
        /* the message names the kind that cannot */
        g_autofree char *kind
            = g_strdup_printf ("\"%.*s\"", (int) strcspn (f.s->base->spec, ":"), f.s->base->spec);

        g_assert_nonnull (strstr (error->message, kind));
      }
      g_clear_error (&error);
    }
  /* still works after the trim */
  mt_close_ok (alloc_ok (f.s, f.mr, 64 * KiB, f.stream), f.stream);
  fx_clear (&f);
}

/* An adaptor over its base: what it shows comes from below, and the layer below counts what the
 * adaptor took from it. */
void
test_upstream (gconstpointer data)
{
  g_autoptr (MemresResource) below = NULL;
  MemresResource *up;
  guint64 used_before;
  MemresBuffer *buf;
  Fx f;

  g_test_summary ("An adaptor shows its base's kind (below it), device and flags (resizing aside); "
                  "its buffers are of that device, and the layer below counts their bytes while "
                  "they are open, none once closed.");
  if (!fx_init (&f, data))
    return;
  below = mt_new_ok (f.s->base->spec);
  up = memres_resource_get_upstream (f.mr);
  g_assert_nonnull (up);
  g_assert_cmpstr (memres_resource_get_kind_name (up), ==, memres_resource_get_kind_name (below));
  g_assert_cmpint (memres_resource_get_device (f.mr), ==, memres_resource_get_device (below));
  g_assert_cmpint (memres_resource_get_flags (f.mr) & ~MEMRES_MEMORY_RESIZABLE, ==,
                   memres_resource_get_flags (below) & ~MEMRES_MEMORY_RESIZABLE);
  used_before = mt_stats_ok (up).used_current;
  buf = alloc_ok (f.s, f.mr, MiB, f.stream);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, memres_resource_get_device (below));
  if (!is (f.s, B_CAPTURE)) /* graph memory is counted at launch */
    {
      mt_write_pattern (buf, 0, MiB, 1, f.stream);
      mt_check_pattern (buf, 0, MiB, 1, f.stream);
      g_assert_cmpuint (mt_stats_ok (up).used_current, >=,
                        used_before + memres_buffer_get_size (buf));
    }
  mt_close_ok (buf, f.stream);
  g_assert_cmpuint (mt_stats_ok (up).used_current, ==, used_before);
  g_clear_pointer (&below, memres_resource_unref);
  fx_clear (&f);
}

static void
no_event (MemresResource *mr G_GNUC_UNUSED, MemresSegmentEvent event G_GNUC_UNUSED,
          const MemresSegment *seg G_GNUC_UNUSED, guint64 previous G_GNUC_UNUSED, gpointer data)
{
  (*(guint *) data)++;
}

/* Whether a layer of @mr's stack, @mr included, is of a kind with segments; each layer in @layers
 * (NULL-terminated, at most 7). */
static gboolean
stack_has_segments (MemresResource *mr, MemresResource **layers)
{
  gboolean any = FALSE;
  guint n = 0;

  for (MemresResource *l = mr; l != NULL; l = memres_resource_get_upstream (l))
    {
      g_assert_cmpuint (n, <, 7);
      layers[n++] = l;
      any |= (memres_kind_get_flags (memres_resource_get_kind (l)) & MEMRES_KIND_SEGMENTS) != 0;
    }
  layers[n] = NULL;
  return any;
}

/* Segments by kind (docs/segments.md): a stack with a layer that has segments (vmm, arena, a
 * cache over anything) answers memres_lookup() for every byte of a live buffer with a layer of
 * the stack and the offset in its segment, and takes a subscriber, which is told the segments
 * that exist; a stack without one answers "not found" and refuses a subscriber with
 * MEMRES_ERROR_NOT_SUPPORTED. */
void
test_segments (gconstpointer data)
{
  GError *error = NULL;
  MemresResource *layers[8];
  MemresBuffer *bufs[2];
  gboolean segments;
  guint told = 0, id;
  Fx f;

  g_test_summary ("memres_lookup() finds every byte of a buffer of a stack with segments (vmm, "
                  "arena, cache), in a layer of the stack at the right offset, and a subscriber "
                  "is told its segments; without segments, not found and NOT_SUPPORTED.");
  if (!fx_init (&f, data))
    return;
  segments = stack_has_segments (f.mr, layers);
  bufs[0] = alloc_ok (f.s, f.mr, 4 * KiB, f.stream);
  bufs[1] = alloc_ok (f.s, f.mr, is (f.s, B_DEVICE) ? 3 * MiB : 3000, f.stream);
  for (guint i = 0; i < 2; i++)
    {
      guint64 a = memres_buffer_get_address (bufs[i]);
      gsize size = memres_buffer_get_size (bufs[i]);
      guint64 probes[3] = { a, a + size / 2, a + size - 1 };

      for (guint j = 0; j < 3; j++)
        {
          MemresLookupInfo info;
          gboolean found = memres_lookup ((gconstpointer) (guintptr) probes[j], &info);
          gboolean in_stack = FALSE;

          g_assert_cmpint (found, ==, segments);
          if (!found)
            continue;
          for (guint k = 0; layers[k] != NULL; k++)
            in_stack |= info.resource == layers[k];
          g_assert_true (in_stack);
          g_assert_cmphex (info.segment.base, <=, probes[j]);
          g_assert_cmphex (probes[j], <, info.segment.base + info.segment.length);
          g_assert_cmpuint (info.offset, ==, probes[j] - info.segment.base);
        }
    }
  id = memres_resource_subscribe_segments (f.mr, no_event, &told, NULL, &error);
  if (segments)
    {
      g_assert_no_error (error);
      g_assert_cmpuint (id, !=, 0);
      g_assert_cmpuint (told, >=, 1); /* the existing segments, replayed */
      MT_CHECK (memres_resource_unsubscribe_segments (f.mr, id, &error));
    }
  else
    {
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_assert_cmpuint (id, ==, 0);
      g_assert_cmpuint (told, ==, 0);
      g_clear_error (&error);
    }
  for (guint i = 0; i < 2; i++)
    mt_close_ok (bufs[i], f.stream);
  fx_clear (&f);
}

/* Resize: where the stack resizes (MEMRES_MEMORY_RESIZABLE), an empty buffer grows into memory
 * of its own, a buffer grows and shrinks keeping its first bytes, and the statistics follow;
 * elsewhere MEMRES_ERROR_NOT_SUPPORTED, the buffer untouched. */
void
test_resize (gconstpointer data)
{
  const gsize grown = MiB + 5;
  GError *error = NULL;
  MemresBuffer *buf;
  gsize size;
  MemresStats s;
  Fx f;

  g_test_summary ("memres_buffer_resize() grows an empty buffer (0 bytes, never seen by the kind) "
                  "into memory that holds its bytes, grows and shrinks a buffer keeping its "
                  "first bytes with the statistics following; a stack that cannot resize says "
                  "MEMRES_ERROR_NOT_SUPPORTED and leaves the buffer as it was.");
  if (!fx_init (&f, data))
    return;
  buf = alloc_ok (f.s, f.mr, 0, f.stream);
  if (!(memres_resource_get_flags (f.mr) & MEMRES_MEMORY_RESIZABLE))
    {
      g_assert_false (memres_buffer_resize (buf, grown, f.stream, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_clear_error (&error);
      g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
      g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
      mt_close_ok (buf, f.stream);
      buf = alloc_ok (f.s, f.mr, 4 * KiB, f.stream);
      size = memres_buffer_get_size (buf);
      if (!is (f.s, B_CAPTURE)) /* no write from pageable memory in a capture */
        mt_write_pattern (buf, 0, 4 * KiB, 3, f.stream);
      g_assert_false (memres_buffer_resize (buf, grown, f.stream, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_clear_error (&error);
      g_assert_cmpuint (memres_buffer_get_size (buf), ==, size);
      if (!is (f.s, B_CAPTURE))
        mt_check_pattern (buf, 0, 4 * KiB, 3, f.stream);
      mt_close_ok (buf, f.stream);
      fx_clear (&f);
      return;
    }
  /* from nothing: memory of its own, every byte usable */
  MT_CHECK (memres_buffer_resize (buf, grown, f.stream, &error));
  g_assert_cmpuint (memres_buffer_get_size (buf), >=, grown);
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, 0);
  g_assert_cmpuint (memres_buffer_get_address (buf) % 256, ==, 0);
  mt_write_pattern (buf, 0, grown, 5, f.stream);
  mt_check_pattern (buf, 0, grown, 5, f.stream);
  s = mt_stats_ok (f.mr);
  g_assert_cmpuint (s.n_buffers, ==, 1);
  g_assert_cmpuint (s.used_current, >=, grown);
  /* grown: the first bytes kept */
  MT_CHECK (memres_buffer_resize (buf, 3 * MiB, f.stream, &error));
  g_assert_cmpuint (memres_buffer_get_size (buf), >=, 3 * MiB);
  mt_check_pattern (buf, 0, grown, 5, f.stream);
  g_assert_cmpuint (mt_stats_ok (f.mr).used_current, >=, 3 * MiB);
  /* shrunk: the first bytes kept */
  MT_CHECK (memres_buffer_resize (buf, 4 * KiB, f.stream, &error));
  g_assert_cmpuint (memres_buffer_get_size (buf), >=, 4 * KiB);
  g_assert_cmpuint (memres_buffer_get_size (buf), <, 3 * MiB);
  mt_check_pattern (buf, 0, 4 * KiB, 5, f.stream);
  mt_close_ok (buf, f.stream);
  fx_run (&f);
  s = mt_stats_ok (f.mr);
  g_assert_cmpuint (s.n_buffers, ==, 0);
  g_assert_cmpuint (s.used_current, ==, 0);
  fx_clear (&f);
}

typedef struct
{
  guint64 address;
  gsize size;
} Range;

static gint
range_cmp (gconstpointer a, gconstpointer b)
{
  const Range *x = a, *y = b;

  return x->address < y->address ? -1 : x->address > y->address;
}

/* Every live buffer of @bufs (NULL entries skipped): its range overlaps no other's. */
static void
assert_disjoint (MemresBuffer **bufs, guint n)
{
  g_autofree Range *r = g_new (Range, n);
  guint m = 0;

  for (guint i = 0; i < n; i++)
    if (bufs[i] != NULL && memres_buffer_get_size (bufs[i]) > 0)
      r[m++] = (Range){ memres_buffer_get_address (bufs[i]), memres_buffer_get_size (bufs[i]) };
  qsort (r, m, sizeof *r, range_cmp);
  for (guint i = 1; i < m; i++)
    if (r[i - 1].address + r[i - 1].size > r[i].address)
      g_error ("buffers overlap: 0x%" G_GINT64_MODIFIER "x + %" G_GSIZE_FORMAT
               " runs into 0x%" G_GINT64_MODIFIER "x",
               r[i - 1].address, r[i - 1].size, r[i].address);
}

/* RMM's random allocations: many live buffers of random sizes, freed in random order while others
 * are allocated; none overlaps another, each keeps its own bytes. */
void
test_random (gconstpointer data)
{
  enum
  {
    N = 96,
    ROUNDS = 3
  };
  MemresBuffer *bufs[N] = { NULL };
  const guint n = RUNNING_ON_VALGRIND ? N / 4 : N; /* vmm maps each: slow under valgrind */
  g_autoptr (GRand) rand = g_rand_new_with_seed (20261205);
  GError *error = NULL;
  Fx f;

  g_test_summary ("Many live buffers of random sizes (1 byte to 64 KiB, and a few MiB), freed in "
                  "random order while others are allocated: no two overlap, every one is "
                  "aligned to 256 bytes and keeps the byte it was filled with.");
  if (!fx_init (&f, data))
    return;
  for (guint round = 0; round < ROUNDS; round++)
    {
      for (guint i = 0; i < n; i++)
        if (bufs[i] == NULL)
          {
            gsize size = i % 16 == 5 ? MiB + g_rand_int_range (rand, 1, 2 * MiB)
                                     : (gsize) g_rand_int_range (rand, 1, 64 * KiB + 1);

            bufs[i] = alloc_ok (f.s, f.mr, size, f.stream);
            g_assert_cmpuint (memres_buffer_get_address (bufs[i]) % 256, ==, 0);
            MT_CHECK (memres_buffer_fill (bufs[i], (i * 7 + round) & 0xff, 1, f.stream, &error));
          }
      assert_disjoint (bufs, n);
      fx_run (&f);
      if (!is (f.s, B_CAPTURE)) /* no read in a capture */
        for (guint i = 0; i < n; i++)
          {
            gsize size = memres_buffer_get_size (bufs[i]);
            guint8 ends[2];

            MT_CHECK (memres_buffer_read (bufs[i], 0, &ends[0], 1, f.stream, &error));
            MT_CHECK (memres_buffer_read (bufs[i], size - 1, &ends[1], 1, f.stream, &error));
            if (ends[0] != ends[1] || (ends[0] - i * 7) % 256 > round)
              g_error ("buffer %u (%" G_GSIZE_FORMAT " bytes): 0x%02x...0x%02x", i, size, ends[0],
                       ends[1]);
          }
      /* half of them, at random, closed (on another stream every other time) */
      for (guint k = 0; k < n / 2; k++)
        {
          guint i = g_rand_int_range (rand, 0, n);

          if (bufs[i] != NULL)
            {
              mt_close_ok (bufs[i], k % 2 == 0 || is (f.s, B_CAPTURE) ? f.stream : NULL);
              bufs[i] = NULL;
            }
        }
    }
  for (guint i = 0; i < n; i++)
    if (bufs[i] != NULL)
      mt_close_ok (bufs[i], f.stream);
  fx_run (&f);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
  fx_clear (&f);
}

/* segment-check.h: what the tests of segment events share (test-segments.c, test-arena-segments.c,
 * test-nccl.c): a subscriber that records every event, the assertion of one recorded event, and the
 * lookups a segment must answer (memres_lookup() at its base, inside, at its last byte, not one
 * byte past). Static functions: each test program includes it once, after testutil.h. */
#pragma once

#include <string.h>

/* ---- a recording subscriber ------------------------------------------------------------------ */

typedef struct
{
  MemresResource *mr;
  MemresSegmentEvent event;
  MemresSegment seg;
  guint64 previous;
} Rec;

typedef struct
{
  GMutex lock;
  GArray *recs; /* Rec */
  gint destroyed;
} Recorder;

static inline void
record (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg, guint64 previous,
        gpointer data)
{
  Recorder *r = data;
  Rec rec = { mr, event, *seg, previous };

  g_mutex_lock (&r->lock);
  g_array_append_val (r->recs, rec);
  g_mutex_unlock (&r->lock);
}

static inline void
recorder_destroyed (gpointer data)
{
  g_atomic_int_inc (&((Recorder *) data)->destroyed);
}

static Recorder *
recorder_new (void)
{
  Recorder *r = g_new0 (Recorder, 1);

  g_mutex_init (&r->lock);
  r->recs = g_array_new (FALSE, TRUE, sizeof (Rec));
  return r;
}

static inline void
recorder_free (Recorder *r)
{
  g_array_unref (r->recs);
  g_mutex_clear (&r->lock);
  g_free (r);
}

static inline guint
subscribe (MemresResource *mr, Recorder *r)
{
  g_autoptr (GError) error = NULL;
  guint id = memres_resource_subscribe_segments (mr, record, r, recorder_destroyed, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (id, !=, 0);
  return id;
}

static inline void
unsubscribe (MemresResource *mr, guint id)
{
  g_autoptr (GError) error = NULL;

  MT_CHECK (memres_resource_unsubscribe_segments (mr, id, &error));
}

/* Asserts that the recorder's event @i is @event of @mr for [@base, +@length) (and @previous),
 * with no tag. */
static inline void
assert_rec (Recorder *r, guint i, MemresResource *mr, MemresSegmentEvent event, guint64 base,
            guint64 length, guint64 previous)
{
  const Rec *rec;

  g_assert_cmpuint (r->recs->len, >, i);
  rec = &g_array_index (r->recs, Rec, i);
  g_assert_true (rec->mr == mr);
  g_assert_cmpint (rec->event, ==, event);
  g_assert_cmphex (rec->seg.base, ==, base);
  g_assert_cmpuint (rec->seg.length, ==, length);
  g_assert_cmpuint (rec->previous, ==, previous);
  g_assert_cmpuint (rec->seg.tag_id, ==, 0);
  g_assert_null (rec->seg.tag);
}

/* ---- lookups --------------------------------------------------------------------------------- */

static inline gconstpointer
addr (guint64 a)
{
  return (gconstpointer) (guintptr) a;
}

/* Asserts that @a is found in @mr's segment [@base, +@length) at the right offset. */
static inline void
assert_found (guint64 a, MemresResource *mr, guint64 base, guint64 length)
{
  MemresLookupInfo info;

  memset (&info, 0xa5, sizeof info);
  if (!memres_lookup (addr (a), &info))
    g_error ("0x%" G_GINT64_MODIFIER "x not found (expected in [0x%" G_GINT64_MODIFIER
             "x, +%" G_GUINT64_FORMAT "))",
             a, base, length);
  if (info.resource != mr)
    g_error ("0x%" G_GINT64_MODIFIER "x found in [0x%" G_GINT64_MODIFIER "x, +%" G_GUINT64_FORMAT
             ") of another resource (expected in [0x%" G_GINT64_MODIFIER "x, +%" G_GUINT64_FORMAT
             "))",
             a, info.segment.base, info.segment.length, base, length);
  g_assert_cmphex (info.segment.base, ==, base);
  g_assert_cmpuint (info.segment.length, ==, length);
  g_assert_cmpuint (info.offset, ==, a - base);
}

static inline void
assert_missing (guint64 a)
{
  MemresLookupInfo info;

  memset (&info, 0xa5, sizeof info);
  if (memres_lookup (addr (a), &info))
    g_error ("0x%" G_GINT64_MODIFIER "x found in [0x%" G_GINT64_MODIFIER "x, +%" G_GUINT64_FORMAT
             ") of a %s",
             a, info.segment.base, info.segment.length,
             memres_resource_get_kind_name (info.resource));
  /* untouched */
  g_assert_cmphex (info.segment.base, ==, G_GUINT64_CONSTANT (0xa5a5a5a5a5a5a5a5));
}

/* The lookups every segment answers: its base, inside, its last byte; not one byte past. */
static inline void
assert_segment_lookups (MemresResource *mr, guint64 base, guint64 length)
{
  assert_found (base, mr, base, length);
  assert_found (base + length / 2 + 1, mr, base, length);
  assert_found (base + length - 1, mr, base, length);
  assert_missing (base + length);
}

/* The segments @mr has now whose tag is @tag (any tag when @all), and their bytes in @bytes
 * (may be NULL): the events a new subscriber is told (one mapped event each). */
static inline guint
count_segments_tagged (MemresResource *mr, gboolean all, const char *tag, guint64 *bytes)
{
  Recorder *r = recorder_new ();
  guint id = subscribe (mr, r), n = 0;
  guint64 sum = 0;

  unsubscribe (mr, id);
  for (guint i = 0; i < r->recs->len; i++)
    {
      const Rec *rec = &g_array_index (r->recs, Rec, i);

      g_assert_cmpint (rec->event, ==, MEMRES_SEGMENT_MAPPED);
      if (all || g_strcmp0 (rec->seg.tag, tag) == 0)
        {
          n++;
          sum += rec->seg.length;
        }
    }
  recorder_free (r);
  if (bytes != NULL)
    *bytes = sum;
  return n;
}

/* The segments @mr has now. */
static inline guint
count_segments (MemresResource *mr)
{
  return count_segments_tagged (mr, TRUE, NULL, NULL);
}

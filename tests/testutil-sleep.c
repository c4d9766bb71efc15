/* testutil-sleep.c: what the sleep tests (test-sleep*.c) share: resources and tagged buffers,
 * sleeps and wakes that must succeed, the fake's live handles, policies, segment events, and
 * the case of a sleep with no open buffer; the driver calls a sleep traced, the granules mapped
 * under buffers, and a set of buffers of two tags (TaggedSet: test-sleep-chunks.c,
 * test-sleep-calls.c). */
#include <memres/memres.h>

#include "testutil.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil-sleep.h"

gboolean
require_device (void)
{
  return mt_require_devices (1);
}

MemresResource *
new_ok (const char *spec)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr = memres_resource_new (spec, &error);

  g_assert_no_error (error);
  g_assert_nonnull (mr);
  return mr;
}

MemresBuffer *
alloc_tagged (MemresResource *mr, const char *tag, gsize size)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  if (tag != NULL)
    g_assert_true (memres_tag_push (tag, NULL));
  buf = memres_resource_allocate (mr, size, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (buf);
  g_assert_cmpuint (memres_buffer_get_size (buf), >=, size);
  if (tag != NULL)
    {
      g_assert_true (memres_tag_pop (tag, &error));
      g_assert_no_error (error);
    }
  return buf;
}

int
live_handles (void)
{
  FakeCudaCounts c = { 0 };

  if (mt_driver_is_fake ())
    mt_fake_get_counts (&c);
  return c.physical_handles;
}

/* The device's free bytes (cuMemGetInfo, device 0's primary context). */
guint64
device_free_bytes (void)
{
  g_autoptr (GError) error = NULL;
  size_t free_b = 0, total = 0;
  gboolean pushed;

  g_assert_true (memres_cuda_push_context (0, &pushed, &error));
  g_assert_cmpint (mt_driver ()->cuMemGetInfo (&free_b, &total), ==, CUDA_SUCCESS);
  memres_cuda_pop_context (pushed);
  return free_b;
}

void
sleep_ok (MemresResource *mr, const char *tag, MemresSleepPolicy *policy)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_sleep (mr, tag, policy, NULL, &error));
  g_assert_no_error (error);
}

void
wake_ok (MemresResource *mr, const char *tag)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_wake (mr, tag, NULL, &error));
  g_assert_no_error (error);
}

MemresSleepPolicy *
policy_new (MemresSleepMode mode)
{
  g_autoptr (GError) error = NULL;
  MemresSleepPolicy *p = memres_sleep_policy_new (mode, &error);

  g_assert_no_error (error);
  return p;
}

/* --- the driver calls and granules of a sleep ----------------------------------------------- */

guint
trace_count (const char **names, int n_names, const char *entry)
{
  guint c = 0;

  for (int i = 0; i < n_names; i++)
    c += g_str_equal (names[i], entry);
  return c;
}

gboolean
granule_mapped (guint64 address)
{
  const MemresCudaDriver *drv = mt_driver ();
  CUmemGenericAllocationHandle h = 0;

  if (drv->cuMemRetainAllocationHandle (&h, (void *) (guintptr) address) != CUDA_SUCCESS)
    return FALSE;
  g_assert_cmpint (drv->cuMemRelease (h), ==, CUDA_SUCCESS);
  return TRUE;
}

void
granules_add (GHashTable *set, MemresBuffer *buf)
{
  gsize granule = mt_device_granularity ();
  guint64 a = memres_buffer_get_address (buf), end = a + memres_buffer_get_size (buf);

  for (a = a / granule * granule; a < end; a += granule)
    g_hash_table_add (set, GSIZE_TO_POINTER ((gsize) a));
}

void
assert_granules (GHashTable *set, gboolean mapped)
{
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, set);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    g_assert_cmpint (granule_mapped (GPOINTER_TO_SIZE (key)), ==, mapped);
}

/* --- a set of tagged buffers ----------------------------------------------------------------- */

void
tagged_set_init (TaggedSet *s, const char *spec, const char *a, const char *b)
{
  memset (s, 0, sizeof *s);
  s->mr = new_ok (spec);
  s->tag[0] = a;
  s->tag[1] = b;
  s->granules[0] = g_hash_table_new (NULL, NULL);
  s->granules[1] = g_hash_table_new (NULL, NULL);
}

guint
tagged_set_add (TaggedSet *s, const char *tag, gsize size)
{
  guint i = s->n++;
  int t = tag == NULL ? -1 : tag == s->tag[0] ? 0 : 1;

  g_assert_cmpuint (i, <, TAGGED_SET_MAX);
  g_assert_true (tag == NULL || tag == s->tag[t]);
  s->tags[i] = tag;
  s->bufs[i] = alloc_tagged (s->mr, tag, size);
  s->addrs[i] = memres_buffer_get_address (s->bufs[i]);
  if (t < 0)
    return i;
  mt_write_pattern (s->bufs[i], 0, memres_buffer_get_size (s->bufs[i]), TAGGED_SET_SEED + i, NULL);
  s->bytes[t] += memres_buffer_get_size (s->bufs[i]);
  granules_add (s->granules[t], s->bufs[i]);
  return i;
}

void
tagged_set_assert_apart (const TaggedSet *s)
{
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, s->granules[1]);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    g_assert_false (g_hash_table_contains (s->granules[0], key));
}

void
tagged_set_check (const TaggedSet *s, const char *tag, gboolean asleep)
{
  for (guint i = 0; i < s->n; i++)
    {
      if (s->bufs[i] == NULL || s->tags[i] == NULL || (tag != NULL && s->tags[i] != tag))
        continue;
      g_assert_cmpuint (memres_buffer_get_address (s->bufs[i]), ==, s->addrs[i]);
      g_assert_cmpint (memres_buffer_is_asleep (s->bufs[i]), ==, asleep);
      if (!asleep)
        mt_check_pattern (s->bufs[i], 0, memres_buffer_get_size (s->bufs[i]), TAGGED_SET_SEED + i,
                          NULL);
    }
}

void
tagged_set_clear (TaggedSet *s)
{
  for (guint i = 0; i < s->n; i++)
    if (s->bufs[i] != NULL)
      mt_close_ok (g_steal_pointer (&s->bufs[i]), NULL);
  g_clear_pointer (&s->mr, memres_resource_unref);
  g_clear_pointer (&s->granules[0], g_hash_table_unref);
  g_clear_pointer (&s->granules[1], g_hash_table_unref);
}

/* --- segment events -------------------------------------------------------------------------- */

typedef struct
{
  guint mapped, unmapping;
  guint64 bytes_mapped, bytes_unmapping;
  const char *tag; /* the slept tag: each event's segment must carry it */
  guint32 tag_id;  /* the id they carry (the same each time, not 0) */
  guint tagged;    /* events whose segment carries it */
} Events;

static void
on_segment (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
            guint64 previous_length, gpointer user_data)
{
  Events *e = user_data;

  if (e->tag != NULL && segment->tag != NULL && g_str_equal (segment->tag, e->tag)
      && segment->tag_id != 0 && (e->tag_id == 0 || e->tag_id == segment->tag_id))
    {
      e->tag_id = segment->tag_id;
      e->tagged++;
    }
  if (event == MEMRES_SEGMENT_MAPPED)
    {
      e->mapped++;
      e->bytes_mapped += segment->length;
    }
  else if (event == MEMRES_SEGMENT_UNMAPPING)
    {
      e->unmapping++;
      e->bytes_unmapping += segment->length;
    }
}

/* Puts @tag of @mr to sleep and wakes it, subscribed to its segment events: the sleep tells
 * @n_segments segments of @bytes in all as about to be unmapped and none mapped, and
 * memres_lookup() finds none of @bufs meanwhile; the wake tells the same as mapped, and all of
 * @bufs are found again. Every segment event and lookup carries @tag (MemresSegment.tag, and
 * one tag_id that is not 0). */
void
assert_sleep_segment_events (MemresResource *mr, const char *tag, MemresBuffer *const *bufs,
                             guint n_bufs, guint n_segments, guint64 bytes)
{
  g_autoptr (GError) error = NULL;
  Events e = { 0 };
  MemresLookupInfo info;
  guint id;

  for (guint i = 0; i < n_bufs; i++)
    {
      g_assert_true (memres_lookup (memres_buffer_get_pointer (bufs[i]), &info));
      g_assert_cmpstr (info.segment.tag, ==, tag);
      g_assert_cmpuint (info.segment.tag_id, !=, 0);
    }
  id = memres_resource_subscribe_segments (mr, on_segment, &e, NULL, &error);
  g_assert_no_error (error);
  memset (&e, 0, sizeof e); /* the replay of what exists */
  e.tag = tag;
  sleep_ok (mr, tag, NULL);
  g_assert_cmpuint (e.unmapping, ==, n_segments);
  g_assert_cmpuint (e.bytes_unmapping, ==, bytes);
  g_assert_cmpuint (e.mapped, ==, 0);
  for (guint i = 0; i < n_bufs; i++)
    g_assert_false (memres_lookup (memres_buffer_get_pointer (bufs[i]), &info));
  wake_ok (mr, tag);
  g_assert_cmpuint (e.mapped, ==, n_segments);
  g_assert_cmpuint (e.bytes_mapped, ==, bytes);
  g_assert_cmpuint (e.tagged, ==, 2 * n_segments);
  for (guint i = 0; i < n_bufs; i++)
    {
      g_assert_true (memres_lookup (memres_buffer_get_pointer (bufs[i]), &info));
      g_assert_cmpstr (info.segment.tag, ==, tag);
      g_assert_cmpuint (info.segment.tag_id, ==, e.tag_id);
    }
  g_assert_true (memres_resource_unsubscribe_segments (mr, id, NULL));
}

static void
assert_alloc_tag_asleep (MemresResource *mr, const char *tag)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  g_assert_true (memres_tag_push (tag, NULL));
  buf = memres_resource_allocate (mr, 8192, NULL, &error);
  g_assert_true (memres_tag_pop (tag, NULL));
  g_assert_null (buf);
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_TAG_ASLEEP);
}

/* A tag without an open buffer sleeps too, and releases the free memory its buffers left cached:
 * on `arena` its slabs (one granule here), through `cache>vmm` the cache's free blocks; the tag
 * refuses allocations until its wake, after which its blocks have memory again (written and read
 * back). A tag that exists in the process but never went through the resource sleeps and wakes
 * too; one never used in the process is MEMRES_TAG_ERROR_UNKNOWN. */
void
test_no_open_buffer (gconstpointer spec)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr;
  MemresBuffer *bufs[6], *again;
  int before;
  FakeCudaCounts base;
  gboolean cache = g_str_has_prefix (spec, "cache");
  gsize size = cache ? 3 * MiB : 8192; /* a cached block of its own upstream allocation */

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok (spec);
  before = live_handles ();
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    bufs[i] = alloc_tagged (mr, "sl-none", size);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    mt_close_ok (bufs[i], NULL); /* free blocks, kept by the layer */
  if (mt_driver_is_fake ())      /* live_handles() counts the fake's handles only */
    g_assert_cmpint (live_handles (), >, before);
  sleep_ok (mr, "sl-none", NULL);
  if (mt_driver_is_fake ())
    g_assert_cmpint (live_handles (), ==, before); /* every free block of the tag released */
  assert_alloc_tag_asleep (mr, "sl-none");
  /* sleeping again is refused as for a tag with buffers */
  g_assert_false (memres_resource_sleep (mr, "sl-none", NULL, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ALREADY_ASLEEP);
  g_clear_error (&error);
  wake_ok (mr, "sl-none");
  again = alloc_tagged (mr, "sl-none", size);
  mt_write_pattern (again, 0, 8192, 34, NULL);
  mt_check_pattern (again, 0, 8192, 34, NULL);
  mt_close_ok (again, NULL);

  /* a tag of the process that this resource never saw: asleep all the same (the kinds give
   * their free memory back first, as at every sleep) */
  g_assert_true (memres_tag_push ("sl-none-elsewhere", NULL));
  g_assert_true (memres_tag_pop ("sl-none-elsewhere", NULL));
  sleep_ok (mr, "sl-none-elsewhere", NULL);
  assert_alloc_tag_asleep (mr, "sl-none-elsewhere");
  wake_ok (mr, "sl-none-elsewhere");
  g_assert_false (memres_resource_wake (mr, "sl-none-elsewhere", NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_NOT_ASLEEP);
  g_clear_error (&error);
  /* never used in the process: an error, nothing asleep */
  g_assert_false (memres_resource_sleep (mr, "sl-never-used-anywhere", NULL, NULL, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_UNKNOWN);
  g_clear_error (&error);
  g_assert_false (memres_resource_wake (mr, "sl-never-used-anywhere", NULL, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_UNKNOWN);
  g_clear_error (&error);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

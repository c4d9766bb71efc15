/* memres - CUDA memory resources
 * sleep-state.c: a resource's sleep state (sleep.h): the tagged buffers of a stack that can
 * sleep, by tag, recorded at their allocation and forgotten at their close; which tags sleep; the
 * refusals of a sleeping tag or buffer; the state's lock around a fork(). The lowest file of
 * sleep and wake: it calls no other file of the core but tags.c (the names in its messages) and
 * fork.c (its part, handed over once), and frees what sleep.c made through the functions
 * sleep.c gave it. */
#include "memres-private.h"

#include <string.h>
#include <unistd.h>

// clang-format off
/**
 * memres_sleep_error_quark:
 *
 * The quark of %MEMRES_SLEEP_ERROR.
 *
 * Returns: the quark
 *
 * Since: 2.0
 */
G_DEFINE_QUARK (memres-sleep-error-quark, memres_sleep_error)
// clang-format on

/* --- the state of a resource ----------------------------------------------------------------- */

/* fork.c's part (MEMRES_FORK_SLEEP, called with each live resource): the state's lock taken
 * around a fork(), so that a child never inherits it held by a thread that is gone; in the child
 * no sleep or wake runs any more (the tags being put to sleep or woken stay marked asleep: the
 * child refuses every call on an inherited resource anyway). The lock is a leaf: nothing holds
 * it while calling into a resource or the driver, or creating a resource. */
static void
sleep_fork (MemresResource *mr, MemresForkPhase phase)
{
  MemresSleepState *state = mr != NULL ? mr->sleep : NULL;

  if (state == NULL)
    return;
  memres_fork_mutex (&state->lock, phase);
  if (phase == MEMRES_FORK_CHILD)
    {
      state->busy = 0;
      memset (state->busy_owner, 0, sizeof state->busy_owner);
      /* the locked sleep files: the child's copies closed, so that the parent's wake releases
       * the lock (a flock() lasts while any copy of its descriptor is open) */
      for (guint i = 0; i <= MEMRES_TAGS_MAX; i++)
        if (state->tags[i].file_fd >= 0)
          {
            close (state->tags[i].file_fd);
            state->tags[i].file_fd = -1;
          }
    }
}

MemresSleepState *
_memres_sleep_state_new (void)
{
  static gsize part_added;
  MemresSleepState *state;

  if (g_once_init_enter (&part_added))
    {
      _memres_fork_add_part (MEMRES_FORK_SLEEP, sleep_fork);
      g_once_init_leave (&part_added, 1);
    }

  state = g_new0 (MemresSleepState, 1);
  for (guint i = 0; i <= MEMRES_TAGS_MAX; i++)
    state->tags[i].file_fd = -1;
  g_mutex_init (&state->lock);
  g_cond_init (&state->cond);
  return state;
}

static MemresSleepFrees frees; /* set before the first backup, policy or resource is kept */

void
_memres_sleep_set_frees (const MemresSleepFrees *f)
{
  frees = *f;
}

void
_memres_sleep_entry_free (MemresSleepEntry *entry)
{
  if (entry->backup != NULL)
    frees.free_backup (entry->backup);
  g_free (entry);
}

static void
entry_free (gpointer data)
{
  _memres_sleep_entry_free (data);
}

void
_memres_sleep_state_free (MemresSleepState *state)
{
  if (state == NULL)
    return;
  for (guint i = 0; i <= MEMRES_TAGS_MAX; i++)
    {
      if (state->tags[i].buffers != NULL)
        g_hash_table_unref (state->tags[i].buffers);
      if (state->tags[i].entries != NULL)
        g_hash_table_unref (state->tags[i].entries);
      if (state->tags[i].policy != NULL)
        frees.free_policy (state->tags[i].policy);
      if (state->tags[i].file_fd >= 0)
        close (state->tags[i].file_fd);
    }
  if (state->host_mr != NULL)
    frees.free_resource (state->host_mr);
  g_mutex_clear (&state->lock);
  g_cond_clear (&state->cond);
  g_free (state);
}

gboolean
_memres_sleep_tag_asleep_error (GError **error, guint tag)
{
  g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_TAG_ASLEEP,
               "cannot allocate under tag \"%s\": it is asleep on this resource (wake it first: "
               "memres_resource_wake())",
               _memres_tag_name (tag));
  return FALSE;
}

gboolean
_memres_sleep_track (MemresResource *mr, MemresBuffer *buf, GError **error)
{
  MemresSleepState *state = mr->sleep;
  MemresSleepTag *t = &state->tags[buf->tag];

  g_mutex_lock (&state->lock);
  if (_memres_sleep_tag_asleep (state, buf->tag))
    {
      g_mutex_unlock (&state->lock);
      return _memres_sleep_tag_asleep_error (error, buf->tag);
    }
  if (G_UNLIKELY (t->buffers == NULL))
    t->buffers = g_hash_table_new (NULL, NULL);
  g_hash_table_add (t->buffers, buf);
  g_mutex_unlock (&state->lock);
  return TRUE;
}

GHashTable *
_memres_sleep_entries_new (void)
{
  return g_hash_table_new_full (NULL, NULL, NULL, entry_free);
}

gboolean
_memres_sleep_untrack_begin (MemresResource *mr, MemresBuffer *buf, MemresSleepEntry **entry,
                             GError **error)
{
  MemresSleepState *state = mr->sleep;
  MemresSleepTag *t = &state->tags[buf->tag];
  gpointer found = NULL;

  g_mutex_lock (&state->lock);
  while ((state->busy >> buf->tag) & 1)
    {
      if (state->busy_owner[buf->tag] == g_thread_self ())
        {
          g_mutex_unlock (&state->lock);
          g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_BUSY,
                       "cannot close a buffer of tag \"%s\" (%" G_GSIZE_FORMAT
                       " bytes at 0x%" G_GINT64_MODIFIER "x) from inside the sleep or wake of "
                       "that tag on the same thread (a segment event callback): the buffer stays "
                       "open; close it after memres_resource_sleep() or _wake() returns",
                       _memres_tag_name (buf->tag), buf->alloc.size, buf->alloc.address);
          return FALSE;
        }
      g_cond_wait (&state->cond, &state->lock);
    }
  if (t->buffers != NULL)
    g_hash_table_remove (t->buffers, buf);
  if (G_UNLIKELY (t->entries != NULL))
    g_hash_table_steal_extended (t->entries, buf, NULL, &found);
  g_mutex_unlock (&state->lock);
  *entry = found;
  return TRUE;
}

void
_memres_sleep_untrack_end (MemresResource *mr, MemresBuffer *buf, MemresSleepEntry *entry)
{
  MemresSleepState *state = mr->sleep;
  MemresSleepTag *t = &state->tags[buf->tag];

  g_mutex_lock (&state->lock);
  if (t->buffers == NULL)
    t->buffers = g_hash_table_new (NULL, NULL);
  g_hash_table_add (t->buffers, buf);
  if (entry != NULL)
    {
      if (t->entries == NULL)
        t->entries = _memres_sleep_entries_new ();
      g_hash_table_insert (t->entries, buf, entry);
    }
  g_mutex_unlock (&state->lock);
}

gboolean
_memres_buffer_asleep_slow (MemresBuffer *buf)
{
  return buf->mr != NULL && buf->mr->sleep != NULL && buf->tag != 0 && buf->alloc.size > 0
         && _memres_sleep_tag_asleep (buf->mr->sleep, buf->tag);
}

gboolean
_memres_buffer_check_awake (MemresBuffer *buf, const char *what, GError **error)
{
  if (G_LIKELY (!_memres_buffer_asleep_slow (buf)))
    return TRUE;
  g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP,
               "cannot %s a sleeping buffer (tag \"%s\", %" G_GSIZE_FORMAT
               " bytes at 0x%" G_GINT64_MODIFIER "x): wake its tag first",
               what, _memres_tag_name (buf->tag), buf->alloc.size, buf->alloc.address);
  return FALSE;
}

/* memres - CUDA memory resources
 * sleep-state.c: a resource's sleep state (sleep.h): the lists of the tagged buffers of a stack
 * that can sleep, by stripe and tag, where the lock-free inline halves of sleep.h leave them (the
 * shared stripe, a tag asleep or busy, a buffer closed on another thread than its list's, the
 * dead buffers a list unlinks, those left at finalize); which tags sleep; the refusals of a
 * sleeping tag or buffer; the state's lock around a fork(). The lowest file of sleep and wake: it
 * calls no other file of the core but tags.c (the names in its messages) and fork.c (its part,
 * handed over once), and frees what sleep.c made through the functions sleep.c gave it. */
#include "memres-private.h"

#include <stdlib.h>
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

  /* aligned as its lists ask (MemresSleepList), which malloc() does not promise */
  if (posix_memalign ((gpointer *) &state, 64, sizeof *state) != 0)
    g_error ("out of memory: a sleep state of %" G_GSIZE_FORMAT " bytes", sizeof *state);
  memset (state, 0, sizeof *state);
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
_memres_sleep_entry_clear (MemresSleepEntry *entry)
{
  if (entry->backup != NULL)
    frees.free_backup (g_steal_pointer (&entry->backup));
}

static void
stray_free (gpointer data)
{
  _memres_sleep_entry_clear (data);
  g_free (data);
}

void
_memres_sleep_entries_steal (MemresSleepEntries *e, MemresSleepEntries *out)
{
  for (gsize i = 0; i < e->n_slots; i++)
    if (e->slots[i].buf != NULL)
      MEMRES_SLEEP_LINK (e->slots[i].buf)->entry = NULL;
  for (guint i = 0; e->strays != NULL && i < e->strays->len; i++)
    MEMRES_SLEEP_LINK (((MemresSleepEntry *) e->strays->pdata[i])->buf)->entry = NULL;
  *out = *e;
  memset (e, 0, sizeof *e);
}

void
_memres_sleep_entries_clear (MemresSleepEntries *e)
{
  for (gsize i = 0; i < e->n_slots; i++)
    _memres_sleep_entry_clear (&e->slots[i]);
  g_clear_pointer (&e->slots, g_free);
  g_clear_pointer (&e->strays, g_ptr_array_unref);
  e->n_slots = 0;
}

/* @buf's entry (state's lock held) out of its tag's entries into *@copy (zeroed when it has
 * none): a slot emptied, a stray freed. */
static void
entry_take (MemresSleepEntries *e, MemresBuffer *buf, MemresSleepEntry *copy)
{
  MemresSleepLink *l = MEMRES_SLEEP_LINK (buf);
  MemresSleepEntry *entry = l->entry;

  memset (copy, 0, sizeof *copy);
  if (G_LIKELY (entry == NULL))
    return;
  *copy = *entry;
  l->entry = NULL;
  if (entry >= e->slots && entry < e->slots + e->n_slots)
    memset (entry, 0, sizeof *entry);
  else
    {
      guint index;

      if (g_ptr_array_find (e->strays, entry, &index))
        g_ptr_array_steal_index_fast (e->strays, index);
      g_free (entry);
    }
}

/* Unlinks the dead buffers of @list (under the lock, or at finalize; @list is the caller's to
 * change) and returns them as a chain through MemresSleepLink.remote_next, for drop_dead() once
 * the lock is released. */
static MemresBuffer *
unlink_dead (MemresSleepList *list)
{
  MemresBuffer *dead = __atomic_exchange_n (&list->remote, NULL, __ATOMIC_ACQUIRE);

  for (MemresBuffer *b = dead; b != NULL; b = MEMRES_SLEEP_LINK (b)->remote_next)
    {
      _memres_sleep_unlink_from (list, b);
      MEMRES_SLEEP_LINK (b)->dead = 0;
    }
  return dead;
}

/* The references of the lists on the buffers unlink_dead() returned, dropped: a structure that
 * nobody else holds is freed (closed: what memres_buffer_unref() does of a closed buffer, but
 * to the heap rather than a thread's spare structures, so that this file calls nothing of
 * buffer.c's) */
static void
drop_dead (MemresBuffer *dead)
{
  while (dead != NULL)
    {
      MemresBuffer *next = MEMRES_SLEEP_LINK (dead)->remote_next;

      MEMRES_SLEEP_LINK (dead)->remote_next = NULL;
      if (g_atomic_int_get (&dead->ref) == 1 || g_atomic_ref_count_dec (&dead->ref))
        g_free (dead);
      dead = next;
    }
}

void
_memres_sleep_state_free (MemresSleepState *state, gboolean inherited)
{
  if (state == NULL)
    return;
  /* what is left on the lists at finalize (no buffer is open): the dead, closed on other threads
   * than their lists' since those last allocated their tag (pushed or not yet unlinked) */
  for (guint s = 0; s < MEMRES_BUFFER_STRIPES && !inherited; s++)
    for (guint i = 0; i <= MEMRES_TAGS_MAX; i++)
      {
        MemresSleepList *list = &state->lists[s][i];
        MemresBuffer *dead = unlink_dead (list);

        drop_dead (dead);
        for (MemresBuffer *b = list->head, *next; b != NULL; b = next)
          {
            next = MEMRES_SLEEP_LINK (b)->next;
            g_warn_if_reached (); /* an open buffer of a finalized resource */
            MEMRES_SLEEP_LINK (b)->list = NULL;
          }
      }
  for (guint i = 0; i <= MEMRES_TAGS_MAX; i++)
    {
      _memres_sleep_entries_clear (&state->tags[i].entries);
      if (state->tags[i].policy != NULL)
        frees.free_policy (state->tags[i].policy);
      if (state->tags[i].file_fd >= 0)
        close (state->tags[i].file_fd);
    }
  if (state->host_mr != NULL)
    frees.free_resource (state->host_mr);
  g_mutex_clear (&state->lock);
  g_cond_clear (&state->cond);
  free (state);
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

/* @buf at the head of @list (the caller's to change) */
static void
link_head (MemresSleepList *list, MemresBuffer *buf)
{
  MemresSleepLink *l = MEMRES_SLEEP_LINK (buf);

  l->prev = NULL;
  l->next = list->head;
  l->list = list;
  if (list->head != NULL)
    MEMRES_SLEEP_LINK (list->head)->prev = buf;
  list->head = buf;
}

/* @buf pushed on the remote stack of its list (MemresSleepList.remote) */
static void
push_remote (MemresBuffer *buf)
{
  MemresSleepLink *l = MEMRES_SLEEP_LINK (buf);
  MemresBuffer *head = __atomic_load_n (&l->list->remote, __ATOMIC_RELAXED);

  do
    l->remote_next = head;
  while (!__atomic_compare_exchange_n (&l->list->remote, &head, buf, TRUE, __ATOMIC_RELEASE,
                                       __ATOMIC_RELAXED));
}

/* Whether @list, @buf's (of tag @tag), is one the calling thread may change under the lock: the
 * tag asleep (no thread changes its lists without the lock then, sleep.c's begin()), the shared
 * stripe's, or the calling thread's own */
static gboolean
may_change (MemresSleepState *state, MemresSleepList *list, guint tag)
{
  guint i = _memres_thread.stripe_index;

  return _memres_sleep_tag_asleep (state, tag)
         || list == _memres_sleep_list (state, MEMRES_STRIPE_SHARED, tag)
         || (i != 0 && list == _memres_sleep_list (state, i, tag));
}

gboolean
_memres_sleep_link (MemresResource *mr, MemresBuffer *buf, GError **error)
{
  MemresSleepState *state = mr->sleep;
  MemresSleepList *list = _memres_sleep_list (state, _memres_stripe_current (), buf->tag);
  MemresBuffer *dead;

  g_mutex_lock (&state->lock);
  if (_memres_sleep_tag_asleep (state, buf->tag))
    {
      g_mutex_unlock (&state->lock);
      return _memres_sleep_tag_asleep_error (error, buf->tag);
    }
  /* the calling thread's own list (or the shared one): the dead that others closed unlinked */
  dead = unlink_dead (list);
  link_head (list, buf);
  g_mutex_unlock (&state->lock);
  drop_dead (dead);
  return TRUE;
}

void
_memres_sleep_push_dead (MemresBuffer *buf)
{
  g_atomic_ref_count_inc (&buf->ref); /* the list's */
  push_remote (buf);
}

gboolean
_memres_sleep_forget (MemresResource *mr, MemresBuffer *buf)
{
  MemresSleepState *state = mr->sleep;
  MemresSleepLink *l = MEMRES_SLEEP_LINK (buf);
  MemresSleepEntry entry;
  gboolean dead = FALSE;

  g_mutex_lock (&state->lock);
  entry_take (&state->tags[buf->tag].entries, buf, &entry);
  if (l->list != NULL && may_change (state, l->list, buf->tag))
    _memres_sleep_unlink_from (l->list, buf);
  else if (l->list != NULL)
    {
      l->dead = 1; /* the caller's reference is the list's now */
      push_remote (buf);
      dead = TRUE;
    }
  g_mutex_unlock (&state->lock);
  _memres_sleep_entry_clear (&entry);
  return dead;
}

MemresSleepUntrack
_memres_sleep_untrack_begin (MemresResource *mr, MemresBuffer *buf, MemresSleepEntry *entry,
                             GError **error)
{
  MemresSleepState *state = mr->sleep;
  MemresSleepTag *t = &state->tags[buf->tag];
  MemresSleepLink *l = MEMRES_SLEEP_LINK (buf);
  MemresSleepUntrack how = MEMRES_SLEEP_UNLINKED;

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
          return 0;
        }
      g_cond_wait (&state->cond, &state->lock);
    }
  /* out of its list where this thread may change it; else (another thread's, the tag awake)
   * marked dead there, so that no sleep finds it, and pushed for that thread once closed */
  if (l->list != NULL && may_change (state, l->list, buf->tag))
    _memres_sleep_unlink_from (l->list, buf);
  else if (l->list != NULL)
    {
      l->dead = 1;
      how = MEMRES_SLEEP_MARKED;
    }
  entry_take (&t->entries, buf, entry);
  g_mutex_unlock (&state->lock);
  return how;
}

void
_memres_sleep_untrack_end (MemresResource *mr, MemresBuffer *buf, MemresSleepUntrack how,
                           const MemresSleepEntry *entry)
{
  MemresSleepState *state = mr->sleep;
  MemresSleepTag *t = &state->tags[buf->tag];
  MemresSleepList *own = _memres_sleep_list (state, _memres_stripe_current (), buf->tag);
  MemresSleepEntry dropped = { 0 };

  g_mutex_lock (&state->lock);
  if (how == MEMRES_SLEEP_MARKED)
    MEMRES_SLEEP_LINK (buf)->dead = 0; /* still on its list */
  else
    link_head (own, buf);
  /* back as a stray while its tag sleeps (the wake restores it); a wake that ran meanwhile
   * passed it by: its backup is freed, as that wake freed the others' */
  if (entry != NULL && entry->buf != NULL && _memres_sleep_tag_asleep (state, buf->tag))
    {
      MemresSleepEntry *stray = g_memdup2 (entry, sizeof *entry);

      if (t->entries.strays == NULL)
        t->entries.strays = g_ptr_array_new_with_free_func (stray_free);
      g_ptr_array_add (t->entries.strays, stray);
      MEMRES_SLEEP_LINK (buf)->entry = stray;
    }
  else if (entry != NULL)
    dropped = *entry;
  g_mutex_unlock (&state->lock);
  _memres_sleep_entry_clear (&dropped);
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

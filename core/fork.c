/* memres - CUDA memory resources
 * fork.c: what memres does in the child of a fork().
 *
 * The CUDA driver does not survive fork(): a child inherits the parent's address space (the
 * driver's state, memres's resources and buffers, the driver-backed mappings) but not its
 * device contexts, and a driver call there fails or, worse, acts on state shared with the
 * parent (the fake driver's pool memory is a MAP_SHARED memfd: a free in the child zeroed the
 * parent's bytes). So once the driver was initialized in this process and the process forks:
 *
 * - every object the child inherited that memres would release through the driver (buffers of
 *   a driver kind, imported buffers and their mappings, VMM buffers, the resources themselves)
 *   is released without any call of its kind's slots: closing such a buffer, dropping the last
 *   reference of such a resource, succeeds and only frees memres's own bookkeeping; what the
 *   kind holds (driver handles, its private allocations) is left to the child's exit;
 * - every new operation that needs the driver fails with %MEMRES_ERROR_FORKED: loading the
 *   driver (memres_cuda_get_driver() and every function built on it, so also creating any
 *   resource of a driver kind) and every slot call on an inherited resource (allocate, resize,
 *   export, import, statistics, trim, access);
 * - device-accessible memory wrapped before the fork (memres_buffer_new_for_pointer(), DLPack
 *   tensors) is released without calling its release function, which would free it through
 *   the driver; the release function of wrapped host-only memory runs as usual;
 * - the embedded `host` kind keeps working, inherited or new: it never calls the driver.
 *   Resources of any other kind made in the child itself (a kind that does not use the driver)
 *   work too; only what was made before the fork is treated as dead.
 *
 * A child of a parent that never initialized the driver is not affected: it may load the driver
 * itself (nothing was inherited that holds driver state).
 *
 * Locks. Another thread of the parent may be inside a memres call at the fork, holding a lock
 * (the registry's, the loader's, a `log` or `cache` layer's...) or halfway through a lock-free
 * update (a stripe or a cache front marked busy). The child is a copy with one
 * thread, so nobody would ever release that lock or finish that update, and the child's first
 * call that needs it would wait forever. So libmemres registers pthread_atfork() handlers when it
 * is loaded, and around every fork():
 *
 * - prepare takes every lock a call path can hold, in one fixed order: the loader's token (it
 *   waits until no plugin is loading), the IPC layer's import lock, the lists below, the
 *   mapping tables of imported pools, then each kind's and each live resource's locks through
 *   their at_fork slot (#MemresResourceOps.at_fork: kinds in registration order, then resources
 *   newest first, so that an adaptor locks before the layers below it), and last the core's
 *   inner locks (the registry, the IPC pool table, the counted layers' reset bases, each
 *   resource's sleep state, the primary contexts);
 * - parent releases them in the reverse order;
 * - child releases them in the reverse order too (the registry's GRWLock, whose owner the child
 *   does not know, is initialized again) and forgets the updates the vanished threads left
 *   half done: every stripe is no longer busy (a buffer such a thread was counting stays
 *   counted, and its resource is then never finalized in the child: a leak, never a hang).
 *
 * The rule that makes the order safe, for the core and for every kind with an at_fork slot: a
 * lock that prepare takes is never held while calling into another resource or creating or
 * releasing one (the core's inner locks are leaves; the outer ones, the loader's token, the IPC
 * import lock and the mapping tables, are held across slot calls and are taken first). fork()
 * from inside a slot, while the slot holds its own lock, deadlocks: fork outside memres calls.
 * The hot path pays nothing for this: the lists change only when a resource is made or
 * finalized and when a kind is registered or freed. tests/test-fork-threads.c forks while
 * threads allocate through every shipped layer.
 *
 * Detection: the child handler increments the process's fork generation once the driver is
 * loaded. Each resource records the generation it was made in; the driver records the
 * generation it was initialized in. */
#include "memres-private.h"

#include <pthread.h>
#include <string.h>

gint _memres_fork_generation_ = 0;
static gint driver_generation = -1; /* the generation cuInit ran in; -1: not yet */

static GMutex lists_lock; /* live and kinds */
/* every resource made and not yet finalized, oldest first (MemresResource.fork_link) */
static GQueue live = G_QUEUE_INIT;
/* the kinds whose ops have an at_fork slot, in registration order (not references: a kind
 * leaves the list when it is freed) */
static GQueue kinds = G_QUEUE_INIT;

void
_memres_fork_add_resource (MemresResource *mr)
{
  g_mutex_lock (&lists_lock);
  g_queue_push_tail (&live, mr);
  mr->fork_link = live.tail;
  g_mutex_unlock (&lists_lock);
}

void
_memres_fork_remove_resource (MemresResource *mr)
{
  if (mr->fork_link == NULL)
    return;
  g_mutex_lock (&lists_lock);
  g_queue_delete_link (&live, mr->fork_link);
  mr->fork_link = NULL;
  g_mutex_unlock (&lists_lock);
}

void
_memres_fork_add_kind (MemresKind *kind)
{
  g_mutex_lock (&lists_lock);
  g_queue_push_tail (&kinds, kind);
  g_mutex_unlock (&lists_lock);
}

void
_memres_fork_remove_kind (MemresKind *kind)
{
  g_mutex_lock (&lists_lock);
  g_queue_remove (&kinds, kind);
  g_mutex_unlock (&lists_lock);
}

/* The kinds' and the resources' slots: in prepare the kinds (registration order), then the
 * resources newest first; in parent and child the reverse. lists_lock held. */
static void
call_slots (MemresForkPhase phase)
{
  if (phase == MEMRES_FORK_PREPARE)
    {
      for (GList *l = kinds.head; l != NULL; l = l->next)
        ((MemresKind *) l->data)->ops.at_fork (NULL, phase);
      for (GList *l = live.tail; l != NULL; l = l->prev)
        {
          MemresResource *mr = l->data;
          if (mr->ops->at_fork != NULL)
            mr->ops->at_fork (mr, phase);
        }
      return;
    }
  for (GList *l = live.head; l != NULL; l = l->next)
    {
      MemresResource *mr = l->data;
      if (mr->ops->at_fork != NULL)
        mr->ops->at_fork (mr, phase);
    }
  for (GList *l = kinds.tail; l != NULL; l = l->prev)
    ((MemresKind *) l->data)->ops.at_fork (NULL, phase);
}

static void (*parts[MEMRES_FORK_N_PARTS]) (MemresResource *mr, MemresForkPhase phase);

void
_memres_fork_add_part (MemresForkPart part,
                       void (*func) (MemresResource *mr, MemresForkPhase phase))
{
  g_atomic_pointer_set (&parts[part], func);
}

/* The parts of ranks @from to @to (inclusive; @from > @to runs them in reverse). The IPC tables'
 * part and the sleep states' are called with each live resource (lists_lock held then). */
static void
call_parts (MemresForkPart from, MemresForkPart to, MemresForkPhase phase)
{
  gint step = from <= to ? 1 : -1;

  for (gint p = from;; p += step)
    {
      void (*func) (MemresResource *, MemresForkPhase) = g_atomic_pointer_get (&parts[p]);

      if (func != NULL && (p == MEMRES_FORK_IPC_TABLES || p == MEMRES_FORK_SLEEP))
        for (GList *l = live.head; l != NULL; l = l->next)
          func (l->data, phase);
      else if (func != NULL)
        func (NULL, phase);
      if (p == (gint) to)
        break;
    }
}

static void
on_prepare (void)
{
  call_parts (MEMRES_FORK_LOADER, MEMRES_FORK_IPC_IMPORT, MEMRES_FORK_PREPARE);
  g_mutex_lock (&lists_lock);
  call_parts (MEMRES_FORK_IPC_TABLES, MEMRES_FORK_IPC_TABLES, MEMRES_FORK_PREPARE);
  call_slots (MEMRES_FORK_PREPARE);
  call_parts (MEMRES_FORK_REGISTRY, MEMRES_FORK_CONTEXTS, MEMRES_FORK_PREPARE);
}

static void
after_fork (MemresForkPhase phase)
{
  call_parts (MEMRES_FORK_CONTEXTS, MEMRES_FORK_REGISTRY, phase);
  if (phase == MEMRES_FORK_CHILD)
    for (GList *l = live.head; l != NULL; l = l->next)
      {
        MemresResource *mr = l->data;
        /* the threads that were counting on them are gone */
        for (guint i = 0; i < MEMRES_BUFFER_STRIPES; i++)
          __atomic_store_n (&mr->stripes[i].busy, 0, __ATOMIC_RELAXED);
      }
  call_slots (phase);
  call_parts (MEMRES_FORK_IPC_TABLES, MEMRES_FORK_IPC_TABLES, phase);
  g_mutex_unlock (&lists_lock);
  call_parts (MEMRES_FORK_IPC_IMPORT, MEMRES_FORK_LOADER, phase);
}

static void
on_parent (void)
{
  after_fork (MEMRES_FORK_PARENT);
}

static void
on_child (void)
{
  /* the child has one thread: this one */
  if (g_atomic_int_get (&driver_generation) >= 0)
    g_atomic_int_inc (&_memres_fork_generation_);
  after_fork (MEMRES_FORK_CHILD);
}

/* When libmemres is loaded (a dlclose() of it removes the handlers: glibc registers them with
 * the library's handle). */
__attribute__ ((constructor)) static void
fork_register (void)
{
  pthread_atfork (on_prepare, on_parent, on_child);
}

/* Called when the driver's cuInit runs (once per process: the driver's load is a g_once()):
 * from now on a fork matters to the driver. */
void
_memres_fork_note_driver_init (void)
{
  g_atomic_int_set (&driver_generation, g_atomic_int_get (&_memres_fork_generation_));
}

gboolean
_memres_fork_driver_lost (void)
{
  gint loaded = g_atomic_int_get (&driver_generation);

  return loaded >= 0 && loaded != g_atomic_int_get (&_memres_fork_generation_);
}

gboolean
_memres_fork_set_error (GError **error, const char *what)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FORKED,
               "%s: this process is a child of fork() and the CUDA driver was initialized "
               "before the fork: the driver cannot be used here (start the child with exec, "
               "e.g. g_spawn or posix_spawn, or fork before the first CUDA use); host memory "
               "still works",
               what);
  return FALSE;
}

gboolean
_memres_resource_is_inherited_slow (MemresResource *mr)
{
  /* made in this process after the fork, or no driver state can have been inherited */
  if (mr->generation == g_atomic_int_get (&_memres_fork_generation_)
      || !_memres_fork_driver_lost ())
    return FALSE;
  /* the kinds of the embedded host plugin (path NULL) never call the driver */
  return mr->kind->plugin == NULL || mr->kind->plugin->path != NULL
         || strcmp (mr->kind->plugin->name, "host") != 0;
}

gboolean
_memres_fork_skips_release (gint generation, MemresMemoryFlags flags)
{
  return generation != g_atomic_int_get (&_memres_fork_generation_)
         && (flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE) && _memres_fork_driver_lost ();
}

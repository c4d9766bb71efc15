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
 * itself (nothing was inherited that holds driver state). As after any fork() of a threaded
 * process, a lock another thread of the parent held at the fork stays held in the child: fork
 * while no other thread is inside a memres call.
 *
 * Detection: a pthread_atfork() child handler, registered when the driver is loaded, increments
 * the process's fork generation. Each resource records the generation it was made in; the
 * driver records the generation it was initialized in. */
#include "memres-private.h"

#include <pthread.h>
#include <string.h>

gint _memres_fork_generation_ = 0;
static gint driver_generation = -1; /* the generation cuInit ran in; -1: not yet */

static void
on_fork_child (void)
{
  /* the child has one thread: this one */
  g_atomic_int_inc (&_memres_fork_generation_);
}

/* Called when the driver's cuInit runs (once per process: the driver's load is a g_once()):
 * from now on a fork matters. */
void
_memres_fork_note_driver_init (void)
{
  pthread_atfork (NULL, NULL, on_fork_child);
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

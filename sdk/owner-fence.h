/* memres - CUDA memory resources
 * owner-fence.h: the asymmetric barrier behind an owner's lock-free fast path (the cache's
 * front caches, the core's buffer stripes). Part of the SDK (sdk/): what plugins and the core
 * may share beside the installed headers. The owner marks itself busy and
 * checks a stop flag with only a compiler barrier between (owner_try_enter()); a thread that takes
 * the object from its owner sets the flag, then makes every running thread pass a memory
 * barrier with membarrier() (owner_heavy_barrier()), after which the owner either is seen busy
 * (wait for it) or sees the flag. Where membarrier() cannot be used, the owner fences for real
 * (a locked instruction). Header-only: each module that includes it has its own state;
 * owner_fence_init() before the first fast path. The core's buffer stripes use it too
 * (core/hot-path.h). */
#pragma once

#include <glib.h>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The state: one per module that includes this header, or, where the module defines
 * OWNER_FENCE_SHARED first, one for all its files, defined by one of them with OWNER_FENCE_DEFINE
 * (libmemres: its stripes in core/hot-path.h). */
#if defined(OWNER_FENCE_SHARED)
G_GNUC_INTERNAL extern gboolean owner_use_fence;
G_GNUC_INTERNAL extern GOnce owner_fence_once;
#define OWNER_FENCE_DEFINE                                                                         \
  gboolean owner_use_fence;                                                                        \
  GOnce owner_fence_once = G_ONCE_INIT
#else
static gboolean owner_use_fence;
static GOnce owner_fence_once = G_ONCE_INIT;
#endif

static inline gpointer
owner_fence_register (gpointer data)
{
  owner_use_fence = syscall (__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0;
  return NULL;
}

/* Once per process, before any owner enters a fast path. */
static inline void
owner_fence_init (void)
{
  g_once (&owner_fence_once, owner_fence_register, NULL);
}

/* The taker's side: after its store of the stop flag, before it reads the owner's busy flag.
 * A memory barrier on every thread of the process that runs now (the others pass one when
 * they are scheduled again). */
static inline void
owner_heavy_barrier (void)
{
  if (owner_use_fence || syscall (__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
    __atomic_thread_fence (__ATOMIC_SEQ_CST);
}

/* Whether owner_heavy_barrier() is membarrier() (after owner_fence_init()): then the owner's
 * side needs no fence of its own, and owner_try_enter_light() may be used. */
static inline gboolean
owner_fence_is_light (void)
{
  return !owner_use_fence;
}

static inline gboolean
owner_try_enter_with (gint *busy, const gint *stop, gboolean fence)
{
  __atomic_store_n (busy, 1, __ATOMIC_RELAXED);
  if (G_UNLIKELY (fence))
    __atomic_thread_fence (__ATOMIC_SEQ_CST);
  else
    __atomic_signal_fence (__ATOMIC_SEQ_CST);
  if (G_LIKELY (__atomic_load_n (stop, __ATOMIC_ACQUIRE) == 0))
    return TRUE;
  __atomic_store_n (busy, 0, __ATOMIC_RELEASE);
  return FALSE;
}

/* The owner enters its fast path: marks itself @busy, then reads @stop; FALSE (and not busy)
 * when another thread has taken the object (take the slow path). */
static inline gboolean
owner_try_enter (gint *busy, const gint *stop)
{
  return owner_try_enter_with (busy, stop, owner_use_fence);
}

/* owner_try_enter() without the load of the process-wide flag, for an owner that never uses its
 * fast path unless owner_fence_is_light() (checked once, say when the object is made). */
static inline gboolean
owner_try_enter_light (gint *busy, const gint *stop)
{
  return owner_try_enter_with (busy, stop, FALSE);
}

/* The owner leaves its fast path. */
static inline void
owner_leave_busy (gint *busy)
{
  __atomic_store_n (busy, 0, __ATOMIC_RELEASE);
}

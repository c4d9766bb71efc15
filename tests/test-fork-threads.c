/* test-fork-threads.c: fork() while other threads allocate (core/fork.c, "Locks"). Threads
 * allocate, write and free in a loop through one resource while the main thread forks again and
 * again; each child allocates, writes and reads back bytes through the same resource (and a new
 * one of the same spec) and exits 0. A child that blocks on a lock another thread of the parent
 * held at the fork is killed after a timeout and fails the test instead of hanging it.
 *
 * Also the at_fork slot itself (#MemresResourceOps.at_fork), through two kinds registered from
 * this binary as an out-of-tree plugin would: `forkprobe`, an adaptor with a lock and the slot,
 * whose calls are recorded in order (kind first, then the instances newest first in prepare;
 * the reverse in parent and child), and `forkprobe_v1`, whose ops table says version 1: the core
 * must not read its at_fork.
 *
 * Suite core (host stacks, no driver) and fake (also cache>dmr: in the child the inherited
 * resource fails with MEMRES_ERROR_FORKED rather than hanging). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#include "testutil.h"

/* AddressSanitizer's allocator (GCC 12's libsanitizer) takes no lock around fork(): a child forked
 * while another thread is inside malloc() blocks in the sanitizer's own allocator, before any
 * memres code runs (seen: SizeClassAllocator64::GetFromAllocator in the child). The threaded
 * forks are skipped there; the plain and valgrind runs keep them. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* every shipped layer that runs without a driver, each with its lock or lock-free state */
#define DEEP_STACK "log:path=/dev/null>track>retry>limit:max=1GiB>stats>cache>host"

/* Forks of the deep stack and of the slot's test (a layer alone: a quarter). Bounded under
 * valgrind, which runs one thread at a time and forks slowly. */
static guint
n_forks (void)
{
  return RUNNING_ON_VALGRIND ? 3 : 20;
}

static guint
n_threads (void)
{
  return RUNNING_ON_VALGRIND ? 2 : 4;
}

/* Waits for @pid at most @seconds; kills it when it is still running. Returns its wait status,
 * or -1 when it had to be killed. */
static int
wait_bounded (pid_t pid, guint seconds)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) seconds * G_USEC_PER_SEC;
  int status;

  for (;;)
    {
      pid_t r = waitpid (pid, &status, WNOHANG);

      if (r == pid)
        return status;
      g_assert_true (r == 0 || (r < 0 && errno == EINTR));
      if (g_get_monotonic_time () > deadline)
        {
          kill (pid, SIGKILL);
          waitpid (pid, &status, 0);
          return -1;
        }
      g_usleep (2000);
    }
}

/* Forks once and checks the child: the callback runs in it and returns its exit status, which
 * it also writes to a pipe. Under valgrind the child then kills itself: memcheck's leak check at
 * its exit would count what the parent's other threads were allocating at the fork (objects
 * only their stacks pointed to, threads the child does not have) as lost, and fail it. */
static void
fork_and_check (int (*child) (gpointer), gpointer data)
{
  pid_t pid;
  int status, fds[2];
  guint8 code = 0xff;

  g_assert_cmpint (pipe (fds), ==, 0);
  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      code = (guint8) child (data);
      if (write (fds[1], &code, 1) != 1)
        _exit (2);
      if (RUNNING_ON_VALGRIND)
        kill (getpid (), SIGKILL);
      _exit (code);
    }
  close (fds[1]);
  status = wait_bounded (pid, RUNNING_ON_VALGRIND ? 120 : 20);
  if (status == -1)
    g_error ("the child of fork() hung (killed after the timeout): a lock held at the fork");
  /* a failed CHILD_CHECK exits with 1 before it writes */
  g_assert_cmpint (read (fds[0], &code, 1), ==, 1);
  close (fds[0]);
  g_assert_cmpint (code, ==, 0);
  if (!RUNNING_ON_VALGRIND)
    g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
}

/* ---- threads allocating while the parent forks ---------------------------------------------- */

typedef struct
{
  MemresResource *mr;
  const char *spec;
  gint stop;
  gint rounds;
} Workload;

static gpointer
worker (gpointer data)
{
  Workload *w = data;
  guint i = 0;

  while (!g_atomic_int_get (&w->stop))
    {
      g_autoptr (GError) error = NULL;
      gsize size = 64 << (i++ % 7);
      MemresBuffer *buf = memres_resource_allocate (w->mr, size, NULL, &error);

      g_assert_no_error (error);
      if (memres_buffer_is_host_accessible (buf))
        memset (memres_buffer_get_pointer (buf), 0x5a, size);
      else
        g_assert_true (memres_buffer_fill (buf, 0x5a, 1, NULL, &error));
      g_assert_true (memres_buffer_close (buf, NULL, &error));
      memres_buffer_unref (buf);
      g_atomic_int_inc (&w->rounds);
    }
  return NULL;
}

/* Allocates @size bytes from @mr, writes a pattern, reads it back, frees; the statistics too
 * (the core's counts and the counted layers' lock). 0 when every check held. */
static int
child_use (MemresResource *mr, gsize size)
{
  g_autoptr (GError) error = NULL;
  MemresStats stats;
  MemresBuffer *buf = memres_resource_allocate (mr, size, NULL, &error);
  guint8 *p;

  CHILD_CHECK (buf != NULL && error == NULL);
  p = memres_buffer_get_pointer (buf);
  CHILD_CHECK (p != NULL);
  for (gsize i = 0; i < size; i++)
    p[i] = (guint8) (i * 7 + 3);
  for (gsize i = 0; i < size; i++)
    CHILD_CHECK (p[i] == (guint8) (i * 7 + 3));
  CHILD_CHECK (memres_resource_get_stats (mr, &stats, &error));
  CHILD_CHECK (stats.used_current >= size);
  CHILD_CHECK (memres_buffer_close (buf, NULL, &error));
  memres_buffer_unref (buf);
  (void) memres_resource_trim (mr, 0, NULL); /* takes the layers' locks (or is not supported) */
  return 0;
}

static int
child_workload (gpointer data)
{
  Workload *w = data;
  g_autoptr (GError) error = NULL;
  MemresResource *fresh;

  CHILD_CHECK (child_use (w->mr, 4096) == 0);
  CHILD_CHECK (child_use (w->mr, 100) == 0);
  /* a new resource of the same spec: the registry and the loader */
  fresh = memres_resource_new (w->spec, &error);
  CHILD_CHECK (fresh != NULL && error == NULL);
  CHILD_CHECK (child_use (fresh, 1000) == 0);
  memres_resource_unref (fresh);
  return 0;
}

/* Starts the threads on @w->mr, forks @forks times between their calls (running @child with
 * @data in each child, and @parent, when not NULL, in the parent after each fork), then stops
 * the threads. */
static void
fork_while_allocating (Workload *w, guint forks, int (*child) (gpointer), void (*parent) (gpointer),
                       gpointer data)
{
  GThread *threads[8];
  guint n = n_threads ();

  if (UNDER_ASAN)
    {
      g_test_skip ("AddressSanitizer's allocator holds its own lock across fork()");
      return;
    }
  for (guint i = 0; i < n; i++)
    threads[i] = g_thread_new ("allocator", worker, w);
  for (guint f = 0; f < forks; f++)
    {
      /* let the threads run between forks, so that forks meet them inside calls */
      gint before = g_atomic_int_get (&w->rounds);
      while (g_atomic_int_get (&w->rounds) < before + 4)
        g_thread_yield ();
      fork_and_check (child, data);
      if (parent != NULL)
        parent (data);
    }
  g_atomic_int_set (&w->stop, 1);
  for (guint i = 0; i < n; i++)
    g_thread_join (threads[i]);
  g_assert_cmpint (g_atomic_int_get (&w->rounds), >, 0);
}

static void
run_workload (const char *spec, guint forks)
{
  g_autoptr (GError) error = NULL;
  Workload w = { .spec = spec };

  w.mr = memres_resource_new (spec, &error);
  g_assert_no_error (error);
  fork_while_allocating (&w, forks, child_workload, NULL, &w);
  memres_resource_unref (w.mr);
}

/* one layer: fewer forks than the deep stack, which has every layer */
static void
test_layer (gconstpointer data)
{
  run_workload (data, MAX (n_forks () / 4, 3));
}

static void
test_deep_stack (void)
{
  run_workload (DEEP_STACK, n_forks ());
}

/* ---- a device stack (the fake): the child gets MEMRES_ERROR_FORKED, never a hang --------------
 */

static int
child_device (gpointer data)
{
  g_autoptr (GError) error = NULL;
  MemresResource *host;

  CHILD_CHECK (memres_resource_allocate (((Workload *) data)->mr, 4096, NULL, &error) == NULL);
  CHILD_CHECK (g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_FORKED));
  host = memres_resource_new ("cache>host", NULL);
  CHILD_CHECK (host != NULL && child_use (host, 4096) == 0);
  memres_resource_unref (host);
  return 0;
}

static void
test_device_stack (void)
{
  g_autoptr (GError) error = NULL;
  Workload w = { .spec = "log:path=/dev/null>cache>dmr" };

  if (!mt_require_fake ("a device stack needs the fake driver"))
    return;
  w.mr = memres_resource_new (w.spec, &error);
  g_assert_no_error (error);
  fork_while_allocating (&w, MAX (n_forks () / 4, 3), child_device, NULL, &w);
  memres_resource_unref (w.mr);
}

/* ---- the at_fork slot of a kind from outside the library ------------------------------------- */

typedef struct
{
  GMutex lock;
  guint64 allocated; /* bytes handed out, under the lock */
} Probe;

typedef struct
{
  MemresResource *mr; /* NULL: the kind's call */
  MemresForkPhase phase;
} ProbeCall;

/* written by the forking thread only (the slot runs in its atfork handlers) */
static ProbeCall probe_calls[64];
static guint n_probe_calls;
static gint v1_calls;

static void
probe_record (MemresResource *mr, MemresForkPhase phase)
{
  if (n_probe_calls < G_N_ELEMENTS (probe_calls))
    probe_calls[n_probe_calls] = (ProbeCall){ mr, phase };
  n_probe_calls++;
}

static gboolean
probe_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  g_mutex_init (&((Probe *) memres_resource_get_private (mr))->lock);
  return TRUE;
}

static void
probe_finalize (MemresResource *mr)
{
  g_mutex_clear (&((Probe *) memres_resource_get_private (mr))->lock);
}

static gboolean
probe_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  Probe *self = memres_resource_get_private (mr);

  if (!memres_upstream_allocate (mr, size, stream, alloc, error))
    return FALSE;
  /* the lock is held a while, never across the upstream call (the at_fork rule) */
  g_mutex_lock (&self->lock);
  self->allocated += alloc->size;
  for (volatile guint i = 0; i < 200; i++)
    ;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
probe_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  Probe *self = memres_resource_get_private (mr);
  gsize size = alloc->size;

  if (!memres_upstream_deallocate (mr, alloc, stream, error))
    return FALSE;
  g_mutex_lock (&self->lock);
  self->allocated -= size;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static void
probe_at_fork (MemresResource *mr, MemresForkPhase phase)
{
  probe_record (mr, phase);
  if (mr != NULL)
    memres_fork_mutex (&((Probe *) memres_resource_get_private (mr))->lock, phase);
}

/* forkprobe_v1 takes no lock (it has no at_fork the core would call) */
static gboolean
probe_v1_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                   GError **error)
{
  return memres_upstream_allocate (mr, size, stream, alloc, error);
}

static gboolean
probe_v1_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                     GError **error)
{
  return memres_upstream_deallocate (mr, alloc, stream, error);
}

static void
probe_v1_at_fork (MemresResource *mr, MemresForkPhase phase)
{
  g_atomic_int_inc (&v1_calls);
}

static const MemresResourceOps probe_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = probe_init,
  .finalize = probe_finalize,
  .allocate = probe_allocate,
  .deallocate = probe_deallocate,
  .at_fork = probe_at_fork,
};

/* a plugin built against version 1 of the table, which ends before at_fork: the core copies
 * no further, so the function below (a stray pointer, for such a plugin) is never called */
static const MemresResourceOps probe_v1_ops = {
  .version = 1,
  .init = probe_init,
  .finalize = probe_finalize,
  .allocate = probe_v1_allocate,
  .deallocate = probe_v1_deallocate,
  .at_fork = probe_v1_at_fork,
};

static void
register_probes (void)
{
  static const MemresKindInfo probe = {
    .struct_size = sizeof probe,
    .name = "forkprobe",
    .description = "adaptor with a lock and an at_fork slot",
    .ops = &probe_ops,
    .instance_size = sizeof (Probe),
    .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
  };
  static const MemresKindInfo probe_v1 = {
    .struct_size = sizeof probe_v1,
    .name = "forkprobe_v1",
    .description = "the same with an ops table of version 1",
    .ops = &probe_v1_ops,
    .instance_size = sizeof (Probe),
    .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
  };
  GError *error = NULL;

  if (!memres_registry_register_kind (&probe, &error)
      || !memres_registry_register_kind (&probe_v1, &error))
    g_error ("%s", error->message);
}

typedef struct
{
  MemresResource *top;   /* forkprobe>forkprobe_v1>forkprobe>host: the upper forkprobe */
  MemresResource *lower; /* the lower forkprobe */
} ProbeFork;

/* The calls of one fork, in the parent after it or in the child, are: prepare (kind,
 * top, lower), then @phase (lower, top, kind). Other resources may be alive (the ones other
 * tests leaked none), so only calls on these and the kind's are counted. */
static gboolean
probe_sequence_ok (const ProbeFork *pf, MemresForkPhase phase)
{
  const ProbeCall want[] = {
    { NULL, MEMRES_FORK_PREPARE },
    { pf->top, MEMRES_FORK_PREPARE },
    { pf->lower, MEMRES_FORK_PREPARE },
    { pf->lower, phase },
    { pf->top, phase },
    { NULL, phase },
  };
  guint k = 0;

  if (n_probe_calls > G_N_ELEMENTS (probe_calls))
    return FALSE;

  for (guint i = 0; i < n_probe_calls; i++)
    {
      if (probe_calls[i].mr != NULL && probe_calls[i].mr != pf->top
          && probe_calls[i].mr != pf->lower)
        continue;
      if (k == G_N_ELEMENTS (want) || probe_calls[i].mr != want[k].mr
          || probe_calls[i].phase != want[k].phase)
        return FALSE;
      k++;
    }
  return k == G_N_ELEMENTS (want);
}

static int
child_probe (gpointer data)
{
  const ProbeFork *pf = data;
  Probe *top = memres_resource_get_private (pf->top);

  CHILD_CHECK (probe_sequence_ok (pf, MEMRES_FORK_CHILD));
  CHILD_CHECK (g_atomic_int_get (&v1_calls) == 0);
  /* released in the child: free to take */
  CHILD_CHECK (g_mutex_trylock (&top->lock));
  g_mutex_unlock (&top->lock);
  CHILD_CHECK (child_use (pf->top, 512) == 0);
  return 0;
}

/* In the parent after each fork: the calls of that fork, then a clean record for the next. */
static void
parent_probe (gpointer data)
{
  g_assert_true (probe_sequence_ok (data, MEMRES_FORK_PARENT));
  n_probe_calls = 0; /* the slot runs in the forking thread only: this one */
}

static void
test_slot (void)
{
  g_autoptr (GError) error = NULL;
  Workload w = { .spec = "forkprobe>forkprobe_v1>forkprobe>host" };
  ProbeFork pf = { 0 };

  w.mr = memres_resource_new (w.spec, &error);
  g_assert_no_error (error);
  pf.top = w.mr;
  pf.lower = memres_resource_get_upstream (memres_resource_get_upstream (w.mr));
  g_assert_nonnull (pf.lower);
  n_probe_calls = 0;
  fork_while_allocating (&w, n_forks (), child_probe, parent_probe, &pf);
  g_assert_cmpint (g_atomic_int_get (&v1_calls), ==, 0);
  /* every byte given back, under the lock the forks took and released */
  g_assert_cmpuint (((Probe *) memres_resource_get_private (pf.top))->allocated, ==, 0);
  g_assert_cmpuint (((Probe *) memres_resource_get_private (pf.lower))->allocated, ==, 0);
  memres_resource_unref (w.mr);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  register_probes ();
  g_test_add_func ("/fork-threads/slot", test_slot);
  g_test_add_data_func ("/fork-threads/log", "log:path=/dev/null>host", test_layer);
  g_test_add_data_func ("/fork-threads/track", "track>host", test_layer);
  g_test_add_data_func ("/fork-threads/cache", "cache>host", test_layer);
  g_test_add_data_func ("/fork-threads/stats", "stats>host", test_layer);
  g_test_add_data_func ("/fork-threads/limit", "limit:max=1GiB>host", test_layer);
  g_test_add_data_func ("/fork-threads/retry", "retry>host", test_layer);
  g_test_add_func ("/fork-threads/deep-stack", test_deep_stack);
  g_test_add_func ("/fork-threads/device-stack", test_device_stack);
  return g_test_run ();
}

/* fakecuda-stream.c: streams, events, stream capture (what it records: fakecuda-graph.c), stream
 * memory operations and host functions, in two modes.
 *
 * Synchronous (the default): work runs inside the call that submits it, in order; events
 * complete when recorded.
 *
 * Asynchronous (FAKECUDA_ASYNC=1 or fakecuda_set_async): every stream, and the legacy default
 * stream of each device, has a queue that a worker thread of its own runs in order: copies,
 * fills, stream-ordered frees, event records, event waits, value waits and writes, host
 * functions. Event records and cross-stream dependencies are "marks": a mark is done when the
 * stream that carries it reaches it; a wait on a mark holds its stream until then. Work on the
 * legacy stream first waits for marks queued behind the pending work of every blocking stream of
 * its device, and work on a blocking stream for a mark behind the legacy stream's pending work:
 * the legacy stream's implicit synchronization. Every piece of state is under fk.lock; threads
 * that wait (workers, synchronizing callers) wait on fk_async_cond with it. Queued copies and
 * fills are checked when submitted (the error is the call's) and again when they run: memory
 * freed since then that a pool still holds is written anyway (as a device would: a stream bug
 * then shows as wrong bytes), memory gone altogether makes the stream's error sticky
 * (CUDA_ERROR_ILLEGAL_ADDRESS, returned by its later synchronizations and queries). */
#include "fakecuda-private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A point in a stream's queue: done once the stream ran everything before it. */
typedef struct
{
  int refs;
  bool done;
  double time_ms; /* when it was reached */
  CUresult error; /* the stream's sticky error then */
} FkMark;

typedef enum
{
  FK_Q_WORK,        /* an FkWork: copy, fill, free */
  FK_Q_MARK,        /* reaching it completes .mark */
  FK_Q_WAIT_MARK,   /* holds the stream until .mark is done */
  FK_Q_WAIT_VALUE,  /* holds the stream until the 32-bit word at .addr satisfies .flags */
  FK_Q_WRITE_VALUE, /* writes .value to the word at .addr */
  FK_Q_HOST_FN,     /* calls .fn (.data), without the lock */
} FkQKind;

typedef struct FkOp FkOp;
struct FkOp
{
  FkOp *next;
  FkQKind kind;
  FkWork work;
  FkMark *mark;
  uintptr_t addr;
  uint32_t value;
  unsigned flags;
  CUhostFn fn;
  void *data;
};

struct CUstream_st
{
  uint32_t magic;
  struct CUstream_st *next;
  int device;
  unsigned flags;
  CUstreamCaptureStatus capture;
  bool legacy;    /* a device's legacy default stream (never in fk_streams) */
  bool destroyed; /* cuStreamDestroy ran: the worker drains the queue, then frees the stream */
  bool worker;    /* a worker thread runs the queue */
  FkOp *head, *tail;
  CUresult error;           /* sticky: queued work that met memory gone (asynchronous mode) */
  struct CUgraph_st *graph; /* what the capture records into (fakecuda-graph.c) */
};

struct CUevent_st
{
  uint32_t magic;
  struct CUevent_st *next;
  int device;
  unsigned flags;
  FkMark *mark; /* the last record, or NULL */
};

/* Streams made with cuStreamCreate, destroyed ones still draining included (flag destroyed). */
static struct CUstream_st *fk_streams;
static struct CUevent_st *fk_events;
static pthread_cond_t fk_async_cond = PTHREAD_COND_INITIALIZER;

/* The workers' lifetimes (under fk.lock): how many run, the exited ones not joined yet (each
 * adds itself before it lets the lock go, so that a thread holding the lock joins it without
 * waiting for anything but its return), and whether the library is being unloaded (the process
 * exits): workers then end once their queue is empty, and no new one starts (work runs in the
 * call instead). */
static int fk_live_workers;
static pthread_t *fk_exited_workers;
static size_t fk_n_exited, fk_exited_room;
static bool fk_unloading;

static double
fk_now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void
fk_sync_point (void)
{
  fk_pools_release_above_threshold ();
}

/* Marks */

static FkMark *
fk_mark_new (void)
{
  FkMark *m = calloc (1, sizeof *m);
  if (m == NULL)
    abort ();
  m->refs = 1;
  return m;
}

static FkMark *
fk_mark_ref (FkMark *m)
{
  m->refs++;
  return m;
}

static void
fk_mark_unref (FkMark *m)
{
  if (m != NULL && --m->refs == 0)
    free (m);
}

static void
fk_mark_reach (FkMark *m)
{
  m->done = true;
  m->time_ms = fk_now_ms ();
}

/* Waits (dropping the lock) until @m is done. */
static void
fk_mark_wait (FkMark *m)
{
  while (!m->done)
    pthread_cond_wait (&fk_async_cond, &fk.lock);
}

/* Stream lookup */

static bool
fk_stream_special (CUstream stream)
{
  return stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

static struct CUstream_st *
fk_stream_lookup (CUstream stream)
{
  for (struct CUstream_st *s = fk_streams; s; s = s->next)
    if (s == stream && !s->destroyed)
      return s;
  return NULL;
}

CUresult
fk_stream_device (CUstream stream, int *device)
{
  struct CUstream_st *s;

  if (fk_stream_special (stream))
    {
      CUcontext ctx = fk_current_context ();
      if (ctx == NULL)
        return CUDA_ERROR_INVALID_CONTEXT;
      *device = ctx->device;
      return CUDA_SUCCESS;
    }
  s = fk_stream_lookup (stream);
  if (s == NULL)
    return CUDA_ERROR_INVALID_HANDLE;
  *device = s->device;
  return CUDA_SUCCESS;
}

CUresult
fk_stream_for_work (CUstream stream, int *device)
{
  CUresult r = fk_stream_device (stream, device);
  if (r == CUDA_SUCCESS && !fk_stream_special (stream)
      && ((struct CUstream_st *) stream)->capture != CU_STREAM_CAPTURE_STATUS_NONE)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return r;
}

/* The queue of @stream, a handle fk_stream_device accepted. The per-thread default stream shares
 * the legacy stream's queue (stricter than the driver: see README.md). */
static struct CUstream_st *
fk_stream_queue (CUstream stream, int device)
{
  FkDevice *d = &fk.devices[device];

  if (!fk_stream_special (stream))
    return stream;
  if (d->legacy == NULL)
    {
      d->legacy = calloc (1, sizeof *d->legacy);
      if (d->legacy == NULL)
        abort ();
      d->legacy->magic = FK_MAGIC_STREAM;
      d->legacy->device = device;
      d->legacy->legacy = true;
    }
  return d->legacy;
}

static bool
fk_stream_pending (const struct CUstream_st *s)
{
  return s != NULL && s->head != NULL;
}

/* Queues and workers */

static bool
fk_op_ready (const FkOp *op)
{
  uint32_t word;

  switch (op->kind)
    {
    case FK_Q_WAIT_MARK:
      return op->mark->done;
    case FK_Q_WAIT_VALUE:
      word = __atomic_load_n ((const uint32_t *) op->addr, __ATOMIC_ACQUIRE);
      switch (op->flags & 3u)
        {
        case CU_STREAM_WAIT_VALUE_GEQ:
          return (int32_t) (word - op->value) >= 0;
        case CU_STREAM_WAIT_VALUE_EQ:
          return word == op->value;
        case CU_STREAM_WAIT_VALUE_AND:
          return (word & op->value) != 0;
        default:
          return ~(word | op->value) != 0;
        }
    default:
      return true;
    }
}

/* Whether queued work may still touch its memory when it runs (see the top of this file). */
static bool
fk_memory_usable (uintptr_t addr, size_t size)
{
  return !fk_arena_contains (addr, size) || fk_pools_backed (addr, size);
}

static CUresult
fk_work_recheck (const FkWork *w)
{
  int device = w->device;

  switch (w->kind)
    {
    case FK_OP_COPY:
      if (fk_copy_check (w->dst, w->src, w->n, &device) == CUDA_SUCCESS
          || (fk_memory_usable (w->src, w->n) && fk_memory_usable (w->dst, w->n)))
        return CUDA_SUCCESS;
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    case FK_OP_FILL:
      if (fk_fill_check (w->dst, w->width, w->n, device) == CUDA_SUCCESS
          || fk_memory_usable (w->dst, w->n * w->width))
        return CUDA_SUCCESS;
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    default:
      return CUDA_SUCCESS;
    }
}

/* Runs @op, at the head of @s's queue or not queued at all (synchronous mode); called with the
 * lock, which a host function drops while it runs. */
static CUresult
fk_op_run (struct CUstream_st *s, FkOp *op)
{
  CUresult r = CUDA_SUCCESS;

  switch (op->kind)
    {
    case FK_Q_WORK:
      if (s != NULL)
        r = fk_work_recheck (&op->work);
      if (r == CUDA_SUCCESS)
        fk_work_execute (&op->work);
      else if (s != NULL && s->error == CUDA_SUCCESS)
        s->error = r;
      break;
    case FK_Q_MARK:
      if (s != NULL)
        op->mark->error = s->error;
      fk_mark_reach (op->mark);
      break;
    case FK_Q_WAIT_MARK:
    case FK_Q_WAIT_VALUE:
      break;
    case FK_Q_WRITE_VALUE:
      __atomic_store_n ((uint32_t *) op->addr, op->value, __ATOMIC_RELEASE);
      break;
    case FK_Q_HOST_FN:
      pthread_mutex_unlock (&fk.lock);
      op->fn (op->data);
      pthread_mutex_lock (&fk.lock);
      break;
    }
  return r;
}

static void
fk_op_free (FkOp *op)
{
  if (op->kind == FK_Q_MARK || op->kind == FK_Q_WAIT_MARK)
    fk_mark_unref (op->mark);
  free (op);
}

static void
fk_stream_unlink (struct CUstream_st *s)
{
  for (struct CUstream_st **p = &fk_streams; *p; p = &(*p)->next)
    if (*p == s)
      {
        *p = s->next;
        return;
      }
}

/* Joins the workers that exited (called with the lock: each let it go before it returned). */
static void
fk_join_exited_workers (void)
{
  for (size_t i = 0; i < fk_n_exited; i++)
    pthread_join (fk_exited_workers[i], NULL);
  fk_n_exited = 0;
}

/* The calling worker ends (with the lock): counted out and left to be joined (detached where no
 * room can be had for it). */
static void
fk_worker_exiting (void)
{
  if (fk_n_exited == fk_exited_room)
    {
      size_t room = fk_exited_room ? 2 * fk_exited_room : 8;
      pthread_t *more = realloc (fk_exited_workers, room * sizeof *more);

      if (more != NULL)
        {
          fk_exited_workers = more;
          fk_exited_room = room;
        }
    }
  if (fk_n_exited < fk_exited_room)
    fk_exited_workers[fk_n_exited++] = pthread_self ();
  else
    pthread_detach (pthread_self ());
  fk_live_workers--;
  pthread_cond_broadcast (&fk_async_cond);
}

static void *
fk_worker (void *data)
{
  struct CUstream_st *s = data;

  pthread_mutex_lock (&fk.lock);
  for (;;)
    {
      FkOp *op = s->head;

      if (op == NULL)
        {
          if (s->destroyed || fk_unloading)
            break;
          pthread_cond_wait (&fk_async_cond, &fk.lock);
          continue;
        }
      if (!fk_op_ready (op))
        {
          if (op->kind == FK_Q_WAIT_VALUE)
            {
              /* The host writes the word without calling the driver: look again soon. */
              struct timespec ts;
              clock_gettime (CLOCK_REALTIME, &ts);
              ts.tv_nsec += 200 * 1000;
              if (ts.tv_nsec >= 1000000000)
                {
                  ts.tv_sec++;
                  ts.tv_nsec -= 1000000000;
                }
              pthread_cond_timedwait (&fk_async_cond, &fk.lock, &ts);
            }
          else
            pthread_cond_wait (&fk_async_cond, &fk.lock);
          continue;
        }
      fk_op_run (s, op);
      s->head = op->next;
      if (s->head == NULL)
        s->tail = NULL;
      fk_op_free (op);
      pthread_cond_broadcast (&fk_async_cond);
    }
  fk_worker_exiting ();
  if (s->destroyed)
    {
      fk_stream_unlink (s);
      s->magic = 0;
      free (s);
    }
  else
    s->worker = false; /* unloading: a later submission runs in the call */
  pthread_mutex_unlock (&fk.lock);
  return NULL;
}

/* Appends a copy of @op to @s's queue, starting its worker the first time. FALSE (nothing
 * queued) when no memory or thread can be had: the caller runs it at once instead. */
static bool
fk_queue (struct CUstream_st *s, const FkOp *op)
{
  FkOp *copy = malloc (sizeof *copy);

  if (copy == NULL)
    return false;
  if (!s->worker)
    {
      pthread_t thread;

      /* the workers of destroyed streams, joined as new ones start (and at unloading) */
      fk_join_exited_workers ();
      if (fk_unloading || pthread_create (&thread, NULL, fk_worker, s) != 0)
        {
          free (copy);
          return false;
        }
      fk_live_workers++;
      s->worker = true;
    }
  *copy = *op;
  copy->next = NULL;
  if (s->tail != NULL)
    s->tail->next = copy;
  else
    s->head = copy;
  s->tail = copy;
  pthread_cond_broadcast (&fk_async_cond);
  return true;
}

/* Queues a new mark on @s (behind its pending work) and returns it (the caller's reference). */
static FkMark *
fk_queue_mark (struct CUstream_st *s)
{
  FkMark *m = fk_mark_new ();
  FkOp op = { .kind = FK_Q_MARK, .mark = fk_mark_ref (m) };

  if (!fk_queue (s, &op))
    {
      fk_mark_reach (m);
      fk_mark_unref (m);
    }
  return m;
}

/* Makes @s wait, before what is queued next, for everything now pending on @other. */
static void
fk_queue_dependency (struct CUstream_st *s, struct CUstream_st *other)
{
  FkMark *m;
  FkOp op = { .kind = FK_Q_WAIT_MARK };

  if (!fk_stream_pending (other))
    return;
  m = fk_queue_mark (other);
  op.mark = m;
  if (!fk_queue (s, &op))
    {
      /* No room to wait in the queue: wait here. */
      fk_mark_wait (m);
      fk_mark_unref (m);
    }
}

/* The legacy stream's implicit synchronization, before new work on @s. */
static void
fk_order_with_legacy (struct CUstream_st *s)
{
  if (s->legacy)
    {
      for (struct CUstream_st *t = fk_streams; t; t = t->next)
        if (t->device == s->device && !(t->flags & CU_STREAM_NON_BLOCKING))
          fk_queue_dependency (s, t);
    }
  else if (!(s->flags & CU_STREAM_NON_BLOCKING))
    fk_queue_dependency (s, fk.devices[s->device].legacy);
}

/* Submits @op to the stream @stream (checked by the caller; @device its device). */
static CUresult
fk_submit_op (CUstream stream, int device, FkOp *op)
{
  struct CUstream_st *s;
  CUresult r;

  if (fk.async)
    {
      s = fk_stream_queue (stream, device);
      fk_order_with_legacy (s);
      if (fk_queue (s, op))
        return CUDA_SUCCESS;
      /* Could not queue: wait for the stream, then run it here. */
      fk_mark_unref (fk_queue_mark (s));
      while (fk_stream_pending (s))
        pthread_cond_wait (&fk_async_cond, &fk.lock);
      r = fk_op_run (s, op);
    }
  else
    r = fk_op_run (NULL, op);
  if (op->kind == FK_Q_MARK || op->kind == FK_Q_WAIT_MARK)
    fk_mark_unref (op->mark);
  return fk.async ? CUDA_SUCCESS : r;
}

CUresult
fk_stream_submit (CUstream stream, int device, const FkWork *work)
{
  FkOp op = { .kind = FK_Q_WORK, .work = *work };
  return fk_submit_op (stream, device, &op);
}

/* Waits until everything submitted to @s so far ran (to the legacy stream: what it is ordered
 * after too, as an empty piece of work there would be); returns @s's sticky error. */
static CUresult
fk_stream_drain (struct CUstream_st *s)
{
  FkMark *m;
  CUresult r;

  if (s->legacy)
    fk_order_with_legacy (s);
  if (!fk_stream_pending (s))
    return s->error;
  /* (The stream may be destroyed and freed while this waits: the mark keeps its error.) */
  m = fk_queue_mark (s);
  fk_mark_wait (m);
  r = m->error;
  fk_mark_unref (m);
  return r;
}

CUresult
fk_legacy_drain (void)
{
  CUcontext ctx = fk_current_context ();

  if (!fk.async || ctx == NULL)
    return CUDA_SUCCESS;
  return fk_stream_drain (fk_stream_queue (NULL, ctx->device));
}

/* Waits until every queue is empty, also of destroyed streams. */
static void
fk_wait_all_idle (void)
{
  bool busy = true;

  while (busy)
    {
      busy = false;
      for (struct CUstream_st *s = fk_streams; s; s = s->next)
        busy |= fk_stream_pending (s);
      for (int i = 0; i < fk.n_devices; i++)
        busy |= fk_stream_pending (fk.devices[i].legacy);
      if (busy)
        pthread_cond_wait (&fk_async_cond, &fk.lock);
    }
}

/* Control */

FK_EXPORT void
fakecuda_set_async (int on)
{
  pthread_mutex_lock (&fk.lock);
  if (fk.async && !on)
    fk_wait_all_idle ();
  fk.async = on != 0;
  pthread_mutex_unlock (&fk.lock);
}

FK_EXPORT int
fakecuda_get_async (void)
{
  int on;

  pthread_mutex_lock (&fk.lock);
  on = fk.async;
  pthread_mutex_unlock (&fk.lock);
  return on;
}

FK_EXPORT void
fakecuda_wait_idle (void)
{
  pthread_mutex_lock (&fk.lock);
  fk_wait_all_idle ();
  pthread_mutex_unlock (&fk.lock);
}

/* fork(): the child has none of the workers. The lock is taken around the fork so that the child
 * gets it in a known state; in the child every queue gets a new worker at its next work (what was
 * queued at the fork runs then). */
static void
fk_fork_prepare (void)
{
  pthread_mutex_lock (&fk.lock);
}

static void
fk_fork_parent (void)
{
  pthread_mutex_unlock (&fk.lock);
}

static void
fk_fork_child (void)
{
  pthread_cond_init (&fk_async_cond, NULL);
  fk_live_workers = 0;
  fk_n_exited = 0; /* the parent's threads: none of them is the child's to join */
  for (struct CUstream_st *s = fk_streams; s; s = s->next)
    s->worker = false;
  for (int i = 0; i < FK_MAX_DEVICES; i++)
    if (fk.devices[i].legacy != NULL)
      fk.devices[i].legacy->worker = false;
  pthread_mutex_unlock (&fk.lock);
}

__attribute__ ((constructor)) static void
fk_stream_load (void)
{
  const char *v = getenv ("FAKECUDA_ASYNC");
  fk.async = v != NULL && *v != '\0' && strcmp (v, "0") != 0;
  pthread_atfork (fk_fork_prepare, fk_fork_parent, fk_fork_child);
}

/* Unloading (the process exits, or the library is closed): every worker ends once its queue is
 * empty and is joined, so that no thread of the fake outlives it (valgrind counted a live
 * worker's thread block as possibly lost). A queue that cannot empty (a stream held by a wait
 * that is never released) is waited for 5 s at most; its worker is left running then. */
__attribute__ ((destructor)) static void
fk_stream_unload (void)
{
  struct timespec deadline;

  clock_gettime (CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 5;
  pthread_mutex_lock (&fk.lock);
  fk_unloading = true;
  pthread_cond_broadcast (&fk_async_cond);
  while (fk_live_workers > 0)
    if (pthread_cond_timedwait (&fk_async_cond, &fk.lock, &deadline) == ETIMEDOUT)
      break;
  fk_join_exited_workers ();
  free (fk_exited_workers);
  fk_exited_workers = NULL;
  fk_exited_room = 0;
  pthread_mutex_unlock (&fk.lock);
}

/* Context */

CUresult
fk_cuCtxSynchronize (void)
{
  CUcontext ctx;
  CUresult r = CUDA_SUCCESS;

  FK_ENTER (cuCtxSynchronize);
  ctx = fk_current_context ();
  if (ctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  for (struct CUstream_st *s = fk_streams; s; s = s->next)
    if (!s->destroyed && s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
      FK_RETURN (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  if (fk.async)
    {
      /* Every stream of the context, non-blocking ones included. */
      struct CUstream_st *legacy = fk_stream_queue (NULL, ctx->device);
      for (struct CUstream_st *s = fk_streams; s; s = s->next)
        if (s->device == ctx->device)
          fk_queue_dependency (legacy, s);
      r = fk_stream_drain (legacy);
      for (struct CUstream_st *s = fk_streams; s; s = s->next)
        if (s->device == ctx->device && !s->destroyed && r == CUDA_SUCCESS)
          r = s->error;
    }
  fk_sync_point ();
  FK_RETURN (r);
}

/* Streams */

CUresult
fk_cuStreamCreate (CUstream *phStream, unsigned int Flags)
{
  CUcontext ctx;
  struct CUstream_st *s;

  FK_ENTER (cuStreamCreate);
  if (phStream == NULL || (Flags & ~(unsigned) CU_STREAM_NON_BLOCKING) != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  ctx = fk_current_context ();
  if (ctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  s = calloc (1, sizeof *s);
  if (s == NULL)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  s->magic = FK_MAGIC_STREAM;
  s->next = fk_streams;
  s->device = ctx->device;
  s->flags = Flags;
  s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
  fk_streams = s;
  fk.counts.streams++;
  *phStream = s;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuStreamDestroy (CUstream hStream)
{
  struct CUstream_st *s;

  FK_ENTER (cuStreamDestroy);
  s = fk_stream_special (hStream) ? NULL : fk_stream_lookup (hStream);
  if (s == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
  fk.counts.streams--;
  if (s->graph != NULL)
    {
      fk_graph_free (s->graph); /* a capture never ended */
      s->graph = NULL;
    }
  /* The handle is gone at once; queued work still runs, then the worker frees the stream. */
  s->destroyed = true;
  if (s->worker)
    pthread_cond_broadcast (&fk_async_cond);
  else
    {
      fk_stream_unlink (s);
      s->magic = 0;
      free (s);
    }
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuStreamSynchronize (CUstream hStream)
{
  int device;
  CUresult r;

  FK_ENTER (cuStreamSynchronize);
  r = fk_stream_for_work (hStream, &device);
  if (r == CUDA_SUCCESS && fk.async)
    r = fk_stream_drain (fk_stream_queue (hStream, device));
  if (r == CUDA_SUCCESS)
    fk_sync_point ();
  FK_RETURN (r);
}

CUresult
fk_cuStreamGetCtx (CUstream hStream, CUcontext *pctx)
{
  int device;
  CUresult r;

  FK_ENTER (cuStreamGetCtx);
  if (pctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  r = fk_stream_device (hStream, &device);
  if (r == CUDA_SUCCESS)
    *pctx = &fk.devices[device].ctx;
  FK_RETURN (r);
}

CUresult
fk_cuStreamQuery (CUstream hStream)
{
  int device;
  CUresult r;
  struct CUstream_st *s;

  FK_ENTER (cuStreamQuery);
  r = fk_stream_device (hStream, &device);
  if (r != CUDA_SUCCESS || !fk.async)
    FK_RETURN (r);
  s = fk_stream_queue (hStream, device);
  FK_RETURN (fk_stream_pending (s) ? CUDA_ERROR_NOT_READY : s->error);
}

static struct CUevent_st *
fk_event_lookup (CUevent event)
{
  for (struct CUevent_st *e = fk_events; e; e = e->next)
    if (e == event)
      return e;
  return NULL;
}

CUresult
fk_cuStreamWaitEvent (CUstream hStream, CUevent hEvent, unsigned int Flags)
{
  int device;
  CUresult r;
  struct CUevent_st *e;
  FkOp op = { .kind = FK_Q_WAIT_MARK };

  FK_ENTER (cuStreamWaitEvent);
  r = fk_stream_device (hStream, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  e = fk_event_lookup (hEvent);
  if (e == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
  if ((Flags & ~(unsigned) CU_EVENT_WAIT_EXTERNAL) != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  /* An event never recorded, or already reached, holds nothing. */
  if (e->mark == NULL || e->mark->done)
    FK_RETURN (CUDA_SUCCESS);
  op.mark = fk_mark_ref (e->mark);
  FK_RETURN (fk_submit_op (hStream, device, &op));
}

/* cuStreamWaitValue32 / cuStreamWriteValue32: the word's address, checked. */
static CUresult
fk_value_check (CUstream stream, CUdeviceptr addr, int *device)
{
  CUresult r = fk_stream_for_work (stream, device);

  if (r != CUDA_SUCCESS)
    return r;
  if (addr % 4 != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return fk_check_access (addr, 4, *device, false);
}

CUresult
fk_cuStreamWaitValue32 (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
  int device;
  CUresult r;
  FkOp op = { .kind = FK_Q_WAIT_VALUE, .addr = addr, .value = value, .flags = flags };

  FK_ENTER (cuStreamWaitValue32);
  r = fk_value_check (stream, addr, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  if ((flags & ~(3u | (unsigned) CU_STREAM_WAIT_VALUE_FLUSH)) != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  /* The synchronous mode cannot hold a stream: a wait that is not satisfied now would hang. */
  if (!fk.async && !fk_op_ready (&op))
    FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
  FK_RETURN (fk_submit_op (stream, device, &op));
}

CUresult
fk_cuStreamWriteValue32 (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
  int device;
  CUresult r;
  FkOp op = { .kind = FK_Q_WRITE_VALUE, .addr = addr, .value = value };

  FK_ENTER (cuStreamWriteValue32);
  r = fk_value_check (stream, addr, &device);
  if (r == CUDA_SUCCESS)
    r = fk_check_access (addr, 4, device, true);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  if ((flags & ~(unsigned) CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  FK_RETURN (fk_submit_op (stream, device, &op));
}

CUresult
fk_cuLaunchHostFunc (CUstream hStream, CUhostFn fn, void *userData)
{
  int device;
  CUresult r;
  FkOp op = { .kind = FK_Q_HOST_FN, .fn = fn, .data = userData };

  FK_ENTER (cuLaunchHostFunc);
  if (fn == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  r = fk_stream_for_work (hStream, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  FK_RETURN (fk_submit_op (hStream, device, &op));
}

CUresult
fk_cuStreamIsCapturing (CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
  int device;
  CUresult r;

  FK_ENTER (cuStreamIsCapturing);
  if (captureStatus == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  r = fk_stream_device (hStream, &device);
  if (r == CUDA_SUCCESS)
    *captureStatus = fk_stream_special (hStream) ? CU_STREAM_CAPTURE_STATUS_NONE
                                                 : ((struct CUstream_st *) hStream)->capture;
  FK_RETURN (r);
}

CUresult
fk_cuStreamBeginCapture (CUstream hStream, CUstreamCaptureMode mode)
{
  int device;
  CUresult r;
  struct CUstream_st *s;

  FK_ENTER (cuStreamBeginCapture);
  r = fk_stream_device (hStream, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  if (fk_stream_special (hStream))
    FK_RETURN (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
      && mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  s = hStream;
  if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
    FK_RETURN (CUDA_ERROR_ILLEGAL_STATE);
  s->graph = fk_graph_new (device);
  if (s->graph == NULL)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuStreamEndCapture (CUstream hStream, CUgraph *phGraph)
{
  int device;
  CUresult r;
  struct CUstream_st *s;

  FK_ENTER (cuStreamEndCapture);
  if (phGraph == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  r = fk_stream_device (hStream, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  s = fk_stream_special (hStream) ? NULL : hStream;
  if (s == NULL || s->capture == CU_STREAM_CAPTURE_STATUS_NONE)
    FK_RETURN (CUDA_ERROR_ILLEGAL_STATE);
  s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
  *phGraph = s->graph;
  s->graph = NULL;
  FK_RETURN (CUDA_SUCCESS);
}

struct CUgraph_st *
fk_stream_capture_graph (CUstream stream)
{
  struct CUstream_st *s = fk_stream_special (stream) ? NULL : fk_stream_lookup (stream);

  return s != NULL && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE ? s->graph : NULL;
}

CUresult
fk_stream_wait_queue (CUstream stream, int device)
{
  if (!fk.async)
    return CUDA_SUCCESS;
  return fk_stream_drain (fk_stream_queue (stream, device));
}

/* Events */

CUresult
fk_cuEventCreate (CUevent *phEvent, unsigned int Flags)
{
  CUcontext ctx;
  struct CUevent_st *e;
  unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;

  FK_ENTER (cuEventCreate);
  if (phEvent == NULL || (Flags & ~known) != 0
      || ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  ctx = fk_current_context ();
  if (ctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  e = calloc (1, sizeof *e);
  if (e == NULL)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  *e = (struct CUevent_st){ FK_MAGIC_EVENT, fk_events, ctx->device, Flags, NULL };
  fk_events = e;
  fk.counts.events++;
  *phEvent = e;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuEventRecord (CUevent hEvent, CUstream hStream)
{
  struct CUevent_st *e;
  int device;
  CUresult r;
  FkOp op = { .kind = FK_Q_MARK };

  FK_ENTER (cuEventRecord);
  e = fk_event_lookup (hEvent);
  if (e == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
  r = fk_stream_device (hStream, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  if (device != e->device)
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
  fk_mark_unref (e->mark);
  e->mark = fk_mark_new ();
  op.mark = fk_mark_ref (e->mark);
  FK_RETURN (fk_submit_op (hStream, device, &op));
}

CUresult
fk_cuEventQuery (CUevent hEvent)
{
  struct CUevent_st *e;

  FK_ENTER (cuEventQuery);
  e = fk_event_lookup (hEvent);
  if (e == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
  FK_RETURN (e->mark == NULL || e->mark->done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
}

CUresult
fk_cuEventSynchronize (CUevent hEvent)
{
  struct CUevent_st *e;

  FK_ENTER (cuEventSynchronize);
  e = fk_event_lookup (hEvent);
  if (e == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
  if (e->mark != NULL)
    {
      FkMark *m = fk_mark_ref (e->mark);
      fk_mark_wait (m);
      fk_mark_unref (m);
    }
  fk_sync_point ();
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuEventElapsedTime (float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
  struct CUevent_st *s, *e;

  FK_ENTER (cuEventElapsedTime);
  if (pMilliseconds == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  s = fk_event_lookup (hStart);
  e = fk_event_lookup (hEnd);
  if (s == NULL || e == NULL || s->mark == NULL || e->mark == NULL
      || (s->flags & CU_EVENT_DISABLE_TIMING) || (e->flags & CU_EVENT_DISABLE_TIMING))
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
  if (!s->mark->done || !e->mark->done)
    FK_RETURN (CUDA_ERROR_NOT_READY);
  *pMilliseconds = (float) (e->mark->time_ms - s->mark->time_ms);
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuEventDestroy (CUevent hEvent)
{
  FK_ENTER (cuEventDestroy);
  for (struct CUevent_st **p = &fk_events; *p; p = &(*p)->next)
    if (*p == hEvent)
      {
        struct CUevent_st *e = *p;
        *p = e->next;
        /* A queued record or wait keeps its mark. */
        fk_mark_unref (e->mark);
        e->magic = 0;
        free (e);
        fk.counts.events--;
        FK_RETURN (CUDA_SUCCESS);
      }
  FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
}

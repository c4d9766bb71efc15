/* fakenccl.c: a stand-in for libnccl.so.2 in tests (tests/test-nccl.c): ncclCommRegister,
 * ncclCommDeregister, ncclCommWindowRegister, ncclCommWindowDeregister, ncclGetErrorString,
 * ncclGetLastError and ncclGetVersion with NCCL's signatures (types spelled out: no NCCL header).
 * Each call is counted by name and may be made to fail (fakenccl_fail); registrations and
 * windows are tracked so that a test can see what is left (fakenccl_live), and a handle that is
 * not live is refused as NCCL refuses it (ncclInvalidArgument); a hook runs inside each call. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__ ((visibility ("default")))

enum
{
  OK = 0,
  INVALID_ARGUMENT = 4
};
enum
{
  MAX_LIVE = 4096
};

typedef void (*FakeNcclHook) (const char *call, void *base, size_t size, void *data);

typedef struct
{
  int window; /* 0 a registration, 1 a window */
  void *base;
  size_t size;
  int flags;
} Live;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Live *live[MAX_LIVE];
static long calls[4];
static const char *names[4] = { "ncclCommRegister", "ncclCommDeregister", "ncclCommWindowRegister",
                                "ncclCommWindowDeregister" };
static int fail_entry = -1;
static long fail_nth;
static int fail_code;
static FakeNcclHook hook;
static void *hook_data;

/* The call's index, its count bumped; its result: the failure asked for, or OK. lock held. */
static int
enter (int entry)
{
  calls[entry]++;
  if (entry == fail_entry && calls[entry] == fail_nth)
    {
      fail_entry = -1;
      return fail_code;
    }
  return OK;
}

static int
add_live (int window, void *base, size_t size, int flags, void **out)
{
  for (int i = 0; i < MAX_LIVE; i++)
    if (live[i] == NULL)
      {
        live[i] = calloc (1, sizeof (Live));
        if (live[i] == NULL)
          return 2;
        *live[i] = (Live){ window, base, size, flags };
        *out = live[i];
        return OK;
      }
  return 2; /* ncclSystemError */
}

static int
remove_live (int window, void *handle)
{
  for (int i = 0; i < MAX_LIVE; i++)
    if (live[i] != NULL && live[i] == handle && live[i]->window == window)
      {
        free (live[i]);
        live[i] = NULL;
        return OK;
      }
  return INVALID_ARGUMENT;
}

static void
run_hook (const char *call, void *base, size_t size)
{
  FakeNcclHook h = hook;

  if (h != NULL)
    h (call, base, size, hook_data);
}

static int
do_register (int window, void *comm, void *buff, size_t size, void **out, int flags)
{
  int r;

  if (comm == NULL || buff == NULL || size == 0 || out == NULL)
    return INVALID_ARGUMENT;
  pthread_mutex_lock (&lock);
  r = enter (window ? 2 : 0);
  if (r == OK)
    r = add_live (window, buff, size, flags, out);
  pthread_mutex_unlock (&lock);
  run_hook (names[window ? 2 : 0], buff, size);
  return r;
}

static int
do_deregister (int window, void *comm, void *handle)
{
  Live copy = { 0 };
  int r;

  if (comm == NULL)
    return INVALID_ARGUMENT;
  pthread_mutex_lock (&lock);
  for (int i = 0; i < MAX_LIVE; i++)
    if (live[i] == handle)
      copy = *live[i];
  r = enter (window ? 3 : 1);
  if (r == OK)
    r = remove_live (window, handle);
  pthread_mutex_unlock (&lock);
  run_hook (names[window ? 3 : 1], copy.base, copy.size);
  return r;
}

EXPORT int
ncclCommRegister (void *comm, void *buff, size_t size, void **handle)
{
  return do_register (0, comm, buff, size, handle, 0);
}

EXPORT int
ncclCommDeregister (void *comm, void *handle)
{
  return do_deregister (0, comm, handle);
}

EXPORT int
ncclCommWindowRegister (void *comm, void *buff, size_t size, void **win, int flags)
{
  if (flags & ~1)
    return INVALID_ARGUMENT;
  return do_register (1, comm, buff, size, win, flags);
}

EXPORT int
ncclCommWindowDeregister (void *comm, void *win)
{
  return do_deregister (1, comm, win);
}

EXPORT const char *
ncclGetErrorString (int result)
{
  switch (result)
    {
    case 0:
      return "no error";
    case 1:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case 2:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case 3:
      return "internal error - please report this issue to the NCCL developers";
    case 4:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case 5:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    default:
      return "unknown result code";
    }
}

EXPORT const char *
ncclGetLastError (void *comm)
{
  return "fakenccl: failed on demand";
}

EXPORT int
ncclGetVersion (int *version)
{
  *version = 22809;
  return OK;
}

/* ---- control, for the tests ------------------------------------------------------------------ */

/* The @nth call (1-based, counting from now) of @entry returns @code. */
EXPORT void
fakenccl_fail (const char *entry, long nth, int code)
{
  pthread_mutex_lock (&lock);
  for (int i = 0; i < 4; i++)
    if (strcmp (entry, names[i]) == 0)
      {
        fail_entry = i;
        fail_nth = calls[i] + nth;
        fail_code = code;
      }
  pthread_mutex_unlock (&lock);
}

/* How many times @entry was called (failed calls included). */
EXPORT long
fakenccl_calls (const char *entry)
{
  long n = -1;

  pthread_mutex_lock (&lock);
  for (int i = 0; i < 4; i++)
    if (strcmp (entry, names[i]) == 0)
      n = calls[i];
  pthread_mutex_unlock (&lock);
  return n;
}

/* Registrations (@window 0) or windows (1) live now; their bytes in *@bytes when not NULL; the
 * flags of the last live window found in *@flags when not NULL. */
EXPORT long
fakenccl_live (int window, size_t *bytes, int *flags)
{
  long n = 0;

  pthread_mutex_lock (&lock);
  if (bytes != NULL)
    *bytes = 0;
  for (int i = 0; i < MAX_LIVE; i++)
    if (live[i] != NULL && live[i]->window == window)
      {
        n++;
        if (bytes != NULL)
          *bytes += live[i]->size;
        if (flags != NULL)
          *flags = live[i]->flags;
      }
  pthread_mutex_unlock (&lock);
  return n;
}

/* @h runs at the end of every call, outside the fake's lock (NULL: none). */
EXPORT void
fakenccl_set_hook (FakeNcclHook h, void *data)
{
  hook_data = data;
  hook = h;
}

/* Forgets every live registration and window (those NCCL refused to deregister in a test). */
EXPORT void
fakenccl_forget_all (void)
{
  pthread_mutex_lock (&lock);
  for (int i = 0; i < MAX_LIVE; i++)
    {
      free (live[i]);
      live[i] = NULL;
    }
  pthread_mutex_unlock (&lock);
}

/* fakecuda.c: libfakecuda.so's entry: cuGetProcAddress, cuInit, the environment, call counting,
 * tracing, fault injection, leak counts and the fakecuda_* control functions. */
#include "fakecuda-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

FkState fk = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *const fk_entry_names[FK_N_ENTRIES] = {
#define FK_NAME_(name) [FK_E_##name] = #name,
  FK_FOREACH_ENTRY (FK_NAME_)
#undef FK_NAME_
      [FK_E_cuGetProcAddress]
  = "cuGetProcAddress",
};

typedef struct
{
  const char *name;
  void *fn;
} FkProc;

/* The fk_ function of each name must have the type cuda.h gives the name. */
#define FK_CHECK_TYPE_(name)                                                                       \
  _Static_assert(__builtin_types_compatible_p (__typeof__ (name), __typeof__ (fk_##name)),         \
                 "fk_" #name " does not have the type of " #name);
FK_FOREACH_ENTRY (FK_CHECK_TYPE_)
#undef FK_CHECK_TYPE_

static const FkProc fk_procs[] = {
#define FK_PROC_(name) { #name, (void *) fk_##name },
  FK_FOREACH_ENTRY (FK_PROC_)
#undef FK_PROC_
};

/* Armed faults: call number (absolute, 1-based, per entry) → result. */
#define FK_MAX_FAULTS 64
typedef struct
{
  FkEntry entry;
  long call;
  CUresult result;
} FkFault;

static FkFault fk_faults[FK_MAX_FAULTS];
static int fk_n_faults;
static long fk_calls[FK_N_ENTRIES];
/* Calls that returned an error (CUDA_ERROR_NOT_READY, a status, not counted). */
static long fk_failed_calls;

static bool fk_tracing;
static const char **fk_trace;
static int fk_trace_len, fk_trace_cap;

/* Exported fds (for the exported_fds count): identity of the file each one named. */
typedef struct
{
  int fd;
  dev_t dev;
  ino_t ino;
} FkExportedFd;
static FkExportedFd *fk_exported;
static int fk_n_exported, fk_cap_exported;

const char *
fk_entry_name (FkEntry entry)
{
  return fk_entry_names[entry];
}

static int
fk_entry_lookup (const char *name)
{
  if (name == NULL)
    return -1;
  for (int i = 0; i < FK_N_ENTRIES; i++)
    if (strcmp (fk_entry_names[i], name) == 0)
      return i;
  return -1;
}

static void
fk_arm (int entry, long call, CUresult result)
{
  if (fk_n_faults == FK_MAX_FAULTS)
    {
      fprintf (stderr, "fakecuda: more than %d armed faults\n", FK_MAX_FAULTS);
      abort ();
    }
  fk_faults[fk_n_faults++] = (FkFault){ entry, call, result };
}

/* FAKECUDA_FAIL=ENTRY:N:CODE[,ENTRY:N:CODE...] */
static void
fk_parse_fail_env (void)
{
  const char *env = getenv ("FAKECUDA_FAIL");
  char *copy, *save = NULL;

  if (env == NULL || *env == '\0')
    return;
  copy = strdup (env);
  for (char *item = strtok_r (copy, ",", &save); item; item = strtok_r (NULL, ",", &save))
    {
      char *c1 = strchr (item, ':'), *c2 = c1 ? strchr (c1 + 1, ':') : NULL;
      int entry;
      long nth;
      bool ok = false;
      CUresult result = CUDA_SUCCESS;

      if (c2 != NULL)
        {
          *c1 = *c2 = '\0';
          result = fk_parse_result (c2 + 1, &ok);
        }
      entry = fk_entry_lookup (item);
      nth = c2 ? strtol (c1 + 1, NULL, 10) : 0;
      if (!ok || entry < 0 || nth <= 0)
        {
          fprintf (stderr, "fakecuda: bad FAKECUDA_FAIL item '%s' (want ENTRY:N:CODE)\n", item);
          abort ();
        }
      fk_arm (entry, nth, result);
    }
  free (copy);
}

__attribute__ ((constructor)) static void
fk_load (void)
{
  pthread_mutex_lock (&fk.lock);
  if (!fk.loaded)
    {
      fk.loaded = true;
      fk_parse_fail_env ();
    }
  pthread_mutex_unlock (&fk.lock);
}

CUresult
fk_enter (FkEntry entry, bool needs_init)
{
  long call;

  pthread_mutex_lock (&fk.lock);
  call = ++fk_calls[entry];
  if (fk_tracing)
    {
      if (fk_trace_len == fk_trace_cap)
        {
          fk_trace_cap = fk_trace_cap ? 2 * fk_trace_cap : 64;
          fk_trace = realloc (fk_trace, fk_trace_cap * sizeof *fk_trace);
        }
      fk_trace[fk_trace_len++] = fk_entry_names[entry];
    }
  for (int i = 0; i < fk_n_faults; i++)
    if (fk_faults[i].entry == entry && fk_faults[i].call == call)
      {
        CUresult result = fk_faults[i].result;
        fk_faults[i] = fk_faults[--fk_n_faults];
        fk_failed_calls += result != CUDA_SUCCESS;
        pthread_mutex_unlock (&fk.lock);
        return result;
      }
  if (needs_init && !fk.initialized)
    {
      fk_failed_calls++;
      pthread_mutex_unlock (&fk.lock);
      return CUDA_ERROR_NOT_INITIALIZED;
    }
  return CUDA_SUCCESS;
}

CUresult
fk_leave (CUresult result)
{
  fk_failed_calls += result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_READY;
  pthread_mutex_unlock (&fk.lock);
  return result;
}

static size_t
fk_env_size (const char *name, size_t fallback)
{
  const char *env = getenv (name);
  char *end;
  unsigned long long v;

  if (env == NULL || *env == '\0')
    return fallback;
  v = strtoull (env, &end, 0);
  switch (*end)
    {
    case 'k':
    case 'K':
      v <<= 10;
      end++;
      break;
    case 'm':
    case 'M':
      v <<= 20;
      end++;
      break;
    case 'g':
    case 'G':
      v <<= 30;
      end++;
      break;
    case 't':
    case 'T':
      v <<= 40;
      end++;
      break;
    default:
      break;
    }
  if (*end == 'i')
    end++;
  if (*end == 'B')
    end++;
  if (*end != '\0' || v == 0)
    {
      fprintf (stderr, "fakecuda: bad size in %s='%s'\n", name, env);
      abort ();
    }
  return v;
}

CUresult
fk_cuInit (unsigned int Flags)
{
  FK_ENTER_NO_INIT (cuInit);
  if (Flags != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (!fk.initialized)
    {
      size_t page = fk_page_size ();

      if (fk.granularity == 0)
        fk.granularity = fk_env_size ("FAKECUDA_GRANULARITY", 2 * FK_MIB);
      if (fk.recommended_granularity == 0)
        fk.recommended_granularity
            = fk_env_size ("FAKECUDA_RECOMMENDED_GRANULARITY", fk.granularity);
      if (fk.granularity % page || fk.recommended_granularity % fk.granularity
          || !fk_is_power_of_two (fk.granularity))
        {
          fprintf (stderr, "fakecuda: granularities must be powers of two, multiples of the "
                           "page size, the recommended one a multiple of the minimum\n");
          abort ();
        }
      fk.host_total = fk_env_size ("FAKECUDA_HOST_MEMORY", 64 * FK_GIB);
      fk.pool_spread = fk_env_size ("FAKECUDA_POOL_SPREAD", 0);
      if (fk.pool_spread % (2 * FK_MIB) != 0)
        {
          fprintf (stderr, "fakecuda: FAKECUDA_POOL_SPREAD must be a multiple of 2 MiB\n");
          abort ();
        }
      if (!fk_arena_init ())
        FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
      fk_devices_init ();
      fk_pools_init ();
      fk.initialized = true;
    }
  /* Like the real driver, a machine without devices fails cuInit. */
  FK_RETURN (fk.n_devices == 0 ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS);
}

CUresult
fk_cuDriverGetVersion (int *driverVersion)
{
  FK_ENTER_NO_INIT (cuDriverGetVersion);
  if (driverVersion == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  *driverVersion = FK_DRIVER_VERSION;
  FK_RETURN (CUDA_SUCCESS);
}

static CUresult
fk_get_proc_address (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                     CUdriverProcAddressQueryResult *symbolStatus)
{
  CUresult r = fk_enter (FK_E_cuGetProcAddress, false);

  if (r != CUDA_SUCCESS)
    return r;
  if (symbol == NULL || pfn == NULL
      || (flags
          & ~(cuuint64_t) (CU_GET_PROC_ADDRESS_LEGACY_STREAM
                           | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
             != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  *pfn = NULL;
  for (size_t i = 0; i < sizeof fk_procs / sizeof fk_procs[0]; i++)
    if (strcmp (fk_procs[i].name, symbol) == 0)
      {
        /* The fake only serves the CUDA 12+ ABI of each entry point. */
        if (cudaVersion < 12000)
          {
            if (symbolStatus)
              *symbolStatus = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
            FK_RETURN (CUDA_ERROR_NOT_FOUND);
          }
        *pfn = fk_procs[i].fn;
        if (symbolStatus)
          *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
        FK_RETURN (CUDA_SUCCESS);
      }
  /* The real driver (580, CUDA 13.0) answers an unknown name with CUDA_SUCCESS, a NULL
   * pointer and the status SYMBOL_NOT_FOUND (seen on the H200 machine). */
  if (symbolStatus)
    *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  FK_RETURN (CUDA_SUCCESS);
}

FK_EXPORT CUresult
cuGetProcAddress_v2 (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                     CUdriverProcAddressQueryResult *symbolStatus)
{
  return fk_get_proc_address (symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* The CUDA 11.3 symbol, without the status. */
#undef cuGetProcAddress
FK_EXPORT CUresult cuGetProcAddress (const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags);
CUresult
cuGetProcAddress (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
  return fk_get_proc_address (symbol, pfn, cudaVersion, flags, NULL);
}

/* Exported fds */

void
fk_track_exported_fd (int fd)
{
  struct stat st;

  if (fstat (fd, &st) != 0)
    return;
  if (fk_n_exported == fk_cap_exported)
    {
      fk_cap_exported = fk_cap_exported ? 2 * fk_cap_exported : 16;
      fk_exported = realloc (fk_exported, fk_cap_exported * sizeof *fk_exported);
    }
  fk_exported[fk_n_exported++] = (FkExportedFd){ fd, st.st_dev, st.st_ino };
}

/* Drops exported fds the application closed (or whose number now names another file). */
static void
fk_prune_exported_fds (void)
{
  int j = 0;

  for (int i = 0; i < fk_n_exported; i++)
    {
      struct stat st;
      /* (An fd number the fake reuses for a memfd of its own is not the exported one.) */
      if (fstat (fk_exported[i].fd, &st) == 0 && st.st_dev == fk_exported[i].dev
          && st.st_ino == fk_exported[i].ino && !fk_pools_own_fd (fk_exported[i].fd)
          && !fk_handles_own_fd (fk_exported[i].fd))
        fk_exported[j++] = fk_exported[i];
    }
  fk_n_exported = j;
  fk.counts.exported_fds = j;
}

/* Control interface */

FK_EXPORT void
fakecuda_get_counts (FakeCudaCounts *counts)
{
  pthread_mutex_lock (&fk.lock);
  fk_prune_exported_fds ();
  *counts = fk.counts;
  pthread_mutex_unlock (&fk.lock);
}

static int
fk_entry_lookup_or_die (const char *entry)
{
  int e = fk_entry_lookup (entry);
  if (e < 0)
    {
      fprintf (stderr, "fakecuda: no entry point named '%s'\n", entry ? entry : "(null)");
      abort ();
    }
  return e;
}

FK_EXPORT void
fakecuda_fail_call (const char *entry, int nth, CUresult result)
{
  int e = fk_entry_lookup_or_die (entry);

  pthread_mutex_lock (&fk.lock);
  if (nth <= 0)
    {
      for (int i = 0; i < fk_n_faults;)
        if (fk_faults[i].entry == (FkEntry) e)
          fk_faults[i] = fk_faults[--fk_n_faults];
        else
          i++;
    }
  else
    fk_arm (e, fk_calls[e] + nth, result);
  pthread_mutex_unlock (&fk.lock);
}

FK_EXPORT void
fakecuda_reset_faults (void)
{
  pthread_mutex_lock (&fk.lock);
  fk_n_faults = 0;
  pthread_mutex_unlock (&fk.lock);
}

FK_EXPORT void
fakecuda_trace_begin (void)
{
  pthread_mutex_lock (&fk.lock);
  fk_trace_len = 0;
  fk_tracing = true;
  pthread_mutex_unlock (&fk.lock);
}

FK_EXPORT int
fakecuda_trace_end (const char ***names)
{
  int n;

  pthread_mutex_lock (&fk.lock);
  fk_tracing = false;
  n = fk_trace_len;
  if (names)
    *names = fk_trace;
  pthread_mutex_unlock (&fk.lock);
  return n;
}

FK_EXPORT void
fakecuda_set_attribute (int device, CUdevice_attribute attr, int value)
{
  pthread_mutex_lock (&fk.lock);
  if (device < 0 || device >= FK_MAX_DEVICES || (int) attr <= 0 || attr >= FK_MAX_ATTRIBUTE)
    {
      fprintf (stderr, "fakecuda_set_attribute: bad device %d or attribute %d\n", device, attr);
      abort ();
    }
  fk.devices[device].attr_set[attr] = true;
  fk.devices[device].attr_value[attr] = value;
  pthread_mutex_unlock (&fk.lock);
}

FK_EXPORT long
fakecuda_call_count (const char *entry)
{
  int e = fk_entry_lookup_or_die (entry);
  long n;

  pthread_mutex_lock (&fk.lock);
  n = fk_calls[e];
  pthread_mutex_unlock (&fk.lock);
  return n;
}

FK_EXPORT long
fakecuda_failed_call_count (void)
{
  long n;

  pthread_mutex_lock (&fk.lock);
  n = fk_failed_calls;
  pthread_mutex_unlock (&fk.lock);
  return n;
}

FK_EXPORT void
fakecuda_set_granularity (size_t minimum, size_t recommended)
{
  pthread_mutex_lock (&fk.lock);
  if (minimum == 0 || !fk_is_power_of_two (minimum) || minimum % fk_page_size ()
      || recommended % minimum)
    {
      fprintf (stderr, "fakecuda_set_granularity: bad granularity %zu/%zu\n", minimum, recommended);
      abort ();
    }
  fk.granularity = minimum;
  fk.recommended_granularity = recommended;
  pthread_mutex_unlock (&fk.lock);
}

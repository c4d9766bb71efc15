/* fakecuda-device.c: devices, attributes, primary contexts, the thread's context stack, streams
 * (work runs at once, in order), stream capture (what it records: fakecuda-graph.c) and events. */
#include "fakecuda-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct CUstream_st
{
  uint32_t magic;
  struct CUstream_st *next;
  int device;
  unsigned flags;
  CUstreamCaptureStatus capture;
  struct CUgraph_st *graph; /* what the capture records into (fakecuda-graph.c) */
};

struct CUevent_st
{
  uint32_t magic;
  struct CUevent_st *next;
  int device;
  unsigned flags;
  bool recorded;
  double time_ms;
};

static struct CUstream_st *fk_streams;
static struct CUevent_st *fk_events;

#define FK_CTX_STACK 16
static __thread CUcontext fk_ctx_stack[FK_CTX_STACK];
static __thread int fk_ctx_depth;

static int
fk_env_flag (const char *name)
{
  const char *v = getenv (name);
  return v != NULL && *v != '\0' && strcmp (v, "0") != 0;
}

void
fk_devices_init (void)
{
  const char *env = getenv ("FAKECUDA_DEVICES");
  const char *mem = getenv ("FAKECUDA_DEVICE_MEMORY");
  int n = env ? atoi (env) : 1;
  size_t total = 4 * FK_GIB;

  if (n < 0 || n > FK_MAX_DEVICES)
    {
      fprintf (stderr, "fakecuda: FAKECUDA_DEVICES must be 0..%d\n", FK_MAX_DEVICES);
      abort ();
    }
  if (mem != NULL && *mem != '\0')
    {
      char *end;
      unsigned long long v = strtoull (mem, &end, 0);
      if (*end == 'G' || *end == 'g')
        v <<= 30;
      else if (*end == 'M' || *end == 'm')
        v <<= 20;
      else if (*end == 'K' || *end == 'k')
        v <<= 10;
      if (v == 0)
        {
          fprintf (stderr, "fakecuda: bad FAKECUDA_DEVICE_MEMORY\n");
          abort ();
        }
      total = v;
    }
  fk.n_devices = n;
  fk.no_peer = fk_env_flag ("FAKECUDA_NO_PEER");
  for (int i = 0; i < n; i++)
    {
      FkDevice *d = &fk.devices[i];
      snprintf (d->name, sizeof d->name, "memres fake CUDA device %d", i);
      /* Stable and distinct: the same in every process, so that imports find their device. */
      memcpy (d->uuid.bytes, "fakecuda-gpu-", 13);
      d->uuid.bytes[13] = 0x5a;
      d->uuid.bytes[14] = 0xa5;
      d->uuid.bytes[15] = (char) i;
      d->total = total;
      d->used = 0;
      d->ctx = (struct CUctx_st){ FK_MAGIC_CTX, i, 0 };
    }
}

/* Attribute values of every fake device unless overridden. */
static int
fk_default_attribute (int device, int attr)
{
  bool no_pools = fk_env_flag ("FAKECUDA_NO_MEMPOOLS");
  bool no_host_pools = fk_env_flag ("FAKECUDA_NO_HOST_POOLS");
  bool no_vmm = fk_env_flag ("FAKECUDA_NO_VMM");
  bool no_ipc = fk_env_flag ("FAKECUDA_NO_IPC");

  switch (attr)
    {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      return 132;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      return device + 1;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      return 0;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      return 0;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
      return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      return !no_pools;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
      return no_pools || no_ipc ? 0 : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      return !no_vmm;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
      return !no_ipc;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
      return !no_ipc;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
      return !no_ipc;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
      return !no_vmm;
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG:
      return CU_DEVICE_NUMA_CONFIG_NONE;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
      return -1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
      return 0;
    case CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED:
      return !no_pools && !no_host_pools;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED:
      return !no_pools && !no_host_pools;
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      return !no_vmm;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      return !no_vmm;
    default:
      return 0;
    }
}

int
fk_device_attribute (int device, int attr)
{
  if (attr > 0 && attr < FK_MAX_ATTRIBUTE && fk.devices[device].attr_set[attr])
    return fk.devices[device].attr_value[attr];
  return fk_default_attribute (device, attr);
}

bool
fk_device_valid (int device)
{
  return device >= 0 && device < fk.n_devices;
}

bool
fk_can_access_peer (int device, int peer)
{
  return fk_device_valid (device) && fk_device_valid (peer) && device != peer && !fk.no_peer;
}

CUresult
fk_cuDeviceGet (CUdevice *device, int ordinal)
{
  FK_ENTER (cuDeviceGet);
  if (device == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (!fk_device_valid (ordinal))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  *device = ordinal;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceGetCount (int *count)
{
  FK_ENTER (cuDeviceGetCount);
  if (count == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  *count = fk.n_devices;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceGetName (char *name, int len, CUdevice dev)
{
  FK_ENTER (cuDeviceGetName);
  if (name == NULL || len <= 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (!fk_device_valid (dev))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  snprintf (name, (size_t) len, "%s", fk.devices[dev].name);
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceGetUuid (CUuuid *uuid, CUdevice dev)
{
  FK_ENTER (cuDeviceGetUuid);
  if (uuid == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (!fk_device_valid (dev))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  *uuid = fk.devices[dev].uuid;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceGetAttribute (int *pi, CUdevice_attribute attrib, CUdevice dev)
{
  FK_ENTER (cuDeviceGetAttribute);
  if (pi == NULL || (int) attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (!fk_device_valid (dev))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  *pi = fk_device_attribute (dev, attrib);
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceTotalMem (size_t *bytes, CUdevice dev)
{
  FK_ENTER (cuDeviceTotalMem);
  if (bytes == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (!fk_device_valid (dev))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  *bytes = fk.devices[dev].total;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceCanAccessPeer (int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
  FK_ENTER (cuDeviceCanAccessPeer);
  if (canAccessPeer == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (!fk_device_valid (dev) || !fk_device_valid (peerDev))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  *canAccessPeer = fk_can_access_peer (dev, peerDev);
  FK_RETURN (CUDA_SUCCESS);
}

/* Contexts */

static bool
fk_context_valid (CUcontext ctx)
{
  for (int i = 0; i < fk.n_devices; i++)
    if (ctx == &fk.devices[i].ctx)
      return true;
  return false;
}

CUcontext
fk_current_context (void)
{
  return fk_ctx_depth > 0 ? fk_ctx_stack[fk_ctx_depth - 1] : NULL;
}

CUresult
fk_cuDevicePrimaryCtxRetain (CUcontext *pctx, CUdevice dev)
{
  FK_ENTER (cuDevicePrimaryCtxRetain);
  if (pctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (!fk_device_valid (dev))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  fk.devices[dev].ctx.primary_refs++;
  *pctx = &fk.devices[dev].ctx;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDevicePrimaryCtxRelease (CUdevice dev)
{
  FK_ENTER (cuDevicePrimaryCtxRelease);
  if (!fk_device_valid (dev))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  if (fk.devices[dev].ctx.primary_refs == 0)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  fk.devices[dev].ctx.primary_refs--;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuCtxGetCurrent (CUcontext *pctx)
{
  FK_ENTER (cuCtxGetCurrent);
  if (pctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  *pctx = fk_current_context ();
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuCtxSetCurrent (CUcontext ctx)
{
  FK_ENTER (cuCtxSetCurrent);
  if (ctx != NULL && !fk_context_valid (ctx))
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  if (ctx == NULL)
    {
      if (fk_ctx_depth > 0)
        fk_ctx_depth--;
    }
  else if (fk_ctx_depth == 0)
    fk_ctx_stack[fk_ctx_depth++] = ctx;
  else
    fk_ctx_stack[fk_ctx_depth - 1] = ctx;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuCtxPushCurrent (CUcontext ctx)
{
  FK_ENTER (cuCtxPushCurrent);
  if (ctx == NULL || !fk_context_valid (ctx))
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  if (fk_ctx_depth == FK_CTX_STACK)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  fk_ctx_stack[fk_ctx_depth++] = ctx;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuCtxPopCurrent (CUcontext *pctx)
{
  FK_ENTER (cuCtxPopCurrent);
  if (fk_ctx_depth == 0)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  fk_ctx_depth--;
  if (pctx)
    *pctx = fk_ctx_stack[fk_ctx_depth];
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuCtxGetDevice (CUdevice *device)
{
  CUcontext ctx;

  FK_ENTER (cuCtxGetDevice);
  if (device == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  ctx = fk_current_context ();
  if (ctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  *device = ctx->device;
  FK_RETURN (CUDA_SUCCESS);
}

void
fk_sync_point (void)
{
  fk_pools_release_above_threshold ();
}

CUresult
fk_cuCtxSynchronize (void)
{
  FK_ENTER (cuCtxSynchronize);
  if (fk_current_context () == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  for (struct CUstream_st *s = fk_streams; s; s = s->next)
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE)
      FK_RETURN (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  fk_sync_point ();
  FK_RETURN (CUDA_SUCCESS);
}

/* Streams */

static bool
fk_stream_special (CUstream stream)
{
  return stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

static struct CUstream_st *
fk_stream_lookup (CUstream stream)
{
  for (struct CUstream_st *s = fk_streams; s; s = s->next)
    if (s == stream)
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
  *s = (struct CUstream_st){
    FK_MAGIC_STREAM, fk_streams, ctx->device, Flags, CU_STREAM_CAPTURE_STATUS_NONE, NULL
  };
  fk_streams = s;
  fk.counts.streams++;
  *phStream = s;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuStreamDestroy (CUstream hStream)
{
  FK_ENTER (cuStreamDestroy);
  for (struct CUstream_st **p = &fk_streams; *p; p = &(*p)->next)
    if (*p == hStream)
      {
        struct CUstream_st *s = *p;
        *p = s->next;
        if (s->graph != NULL)
          fk_graph_free (s->graph); /* a capture never ended */
        s->magic = 0;
        free (s);
        fk.counts.streams--;
        FK_RETURN (CUDA_SUCCESS);
      }
  FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
}

CUresult
fk_cuStreamSynchronize (CUstream hStream)
{
  int device;
  CUresult r;

  FK_ENTER (cuStreamSynchronize);
  r = fk_stream_for_work (hStream, &device);
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

  FK_ENTER (cuStreamQuery);
  FK_RETURN (fk_stream_device (hStream, &device));
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

  FK_ENTER (cuStreamWaitEvent);
  r = fk_stream_device (hStream, &device);
  if (r == CUDA_SUCCESS && fk_event_lookup (hEvent) == NULL)
    r = CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS && (Flags & ~(unsigned) CU_EVENT_WAIT_EXTERNAL) != 0)
    r = CUDA_ERROR_INVALID_VALUE;
  FK_RETURN (r);
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

/* Events */

static double
fk_now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

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
  *e = (struct CUevent_st){ FK_MAGIC_EVENT, fk_events, ctx->device, Flags, false, 0 };
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

  FK_ENTER (cuEventRecord);
  e = fk_event_lookup (hEvent);
  if (e == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
  r = fk_stream_device (hStream, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  if (device != e->device)
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
  e->recorded = true;
  e->time_ms = fk_now_ms ();
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuEventQuery (CUevent hEvent)
{
  FK_ENTER (cuEventQuery);
  FK_RETURN (fk_event_lookup (hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

CUresult
fk_cuEventSynchronize (CUevent hEvent)
{
  FK_ENTER (cuEventSynchronize);
  if (fk_event_lookup (hEvent) == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
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
  if (s == NULL || e == NULL || !s->recorded || !e->recorded || (s->flags & CU_EVENT_DISABLE_TIMING)
      || (e->flags & CU_EVENT_DISABLE_TIMING))
    FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
  *pMilliseconds = (float) (e->time_ms - s->time_ms);
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
        e->magic = 0;
        free (e);
        fk.counts.events--;
        FK_RETURN (CUDA_SUCCESS);
      }
  FK_RETURN (CUDA_ERROR_INVALID_HANDLE);
}

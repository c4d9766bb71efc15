/* fakecuda-device.c: devices, attributes, primary contexts and the thread's context stack.
 * (Streams, events, graphs and the asynchronous mode: fakecuda-stream.c.) */
#include "fakecuda-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
      return no_pools || no_ipc
                 ? 0
                 : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
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

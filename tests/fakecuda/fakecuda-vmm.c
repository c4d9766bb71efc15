/* fakecuda-vmm.c: virtual memory management (cuMemCreate, cuMemAddressReserve, cuMemMap, ...).
 *
 * A physical allocation handle is a memfd of its size; a reservation is a range of the fake's
 * address space; a mapping is the memfd mapped MAP_SHARED|MAP_FIXED into the reservation, so the
 * bytes are real and another process that imports the handle's fd sees them. Mappings start
 * inaccessible (PROT_NONE) until cuMemSetAccess grants some location access. */
#include "fakecuda-private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct FkHandle FkHandle;
typedef struct FkMapping FkMapping;

struct FkHandle
{
  FkHandle *next;
  unsigned long long id;
  size_t size;
  CUmemAllocationProp prop;
  int device; /* -1: host memory */
  int memfd;
  int refs;       /* create/import + retains - releases */
  int mappings;   /* live mappings */
  bool accounted; /* counted in the device's (or host's) used memory */
};

struct FkMapping
{
  FkMapping *next; /* sorted by base */
  uintptr_t base;
  size_t size;
  FkHandle *handle;
  CUmemAccess_flags access[FK_MAX_DEVICES];
  CUmemAccess_flags host_access;
};

typedef struct
{
  uintptr_t base;
  size_t size;
  FkMapping *maps;
} FkReservation;

/* A fabric handle: the exporting process, its memfd and that memfd's inode. Any process of the
 * host (of the same user) opens /proc/PID/fd/FD: the namespace is the host's processes, so that
 * tests running at once never meet. An export whose memory was freed (its memfd closed, the fd
 * number gone or reused) is refused: CUDA_ERROR_INVALID_VALUE. */
typedef struct
{
  char magic[8];
  int32_t pid;
  int32_t fd;
  uint64_t id;
  uint64_t ino;
  uint8_t zero[32];
} FkFabric;
_Static_assert(sizeof (FkFabric) == sizeof (CUmemFabricHandle), "fabric handle size");
#define FK_FABRIC_MAGIC "FKFABRC1"

static FkHandle *fk_handles;
static unsigned long long fk_next_handle = 0x7a000;

static bool
fk_vmm_supported (const CUmemLocation *location)
{
  int attr = CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
  int device = location->type == CU_MEM_LOCATION_TYPE_DEVICE ? location->id : 0;

  if (location->type == CU_MEM_LOCATION_TYPE_HOST)
    attr = CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
  else if (location->type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
    attr = CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
  return fk.n_devices > 0 && fk_device_attribute (device, attr) != 0;
}

/* Validates an allocation's location; @device is -1 for host memory. */
static CUresult
fk_check_location (const CUmemLocation *location, int *device)
{
  switch (location->type)
    {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (!fk_device_valid (location->id))
        return CUDA_ERROR_INVALID_DEVICE;
      *device = location->id;
      break;
    case CU_MEM_LOCATION_TYPE_HOST:
      *device = -1;
      break;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      if (location->id < 0 || location->id >= FK_N_NUMA_NODES)
        return CUDA_ERROR_INVALID_VALUE;
      *device = -1;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
  return fk_vmm_supported (location) ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult
fk_check_prop (const CUmemAllocationProp *prop, int *device)
{
  CUresult r;
  unsigned types;

  if (prop == NULL || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED
      || prop->win32HandleMetaData != NULL)
    return CUDA_ERROR_INVALID_VALUE;
  r = fk_check_location (&prop->location, device);
  if (r != CUDA_SUCCESS)
    return r;
  types = prop->requestedHandleTypes;
  if ((types & ~(unsigned) (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC)))
    return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST && types != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (types != 0)
    {
      int d = *device >= 0 ? *device : 0;
      if ((types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
          && !fk_device_attribute (d,
                                   CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED))
        return CUDA_ERROR_NOT_SUPPORTED;
      if ((types & CU_MEM_HANDLE_TYPE_FABRIC)
          && !fk_device_attribute (d, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED))
        return CUDA_ERROR_NOT_SUPPORTED;
    }
  return CUDA_SUCCESS;
}

static FkHandle *
fk_handle_lookup (unsigned long long id)
{
  for (FkHandle *h = fk_handles; h; h = h->next)
    if (h->id == id)
      return h;
  return NULL;
}

bool
fk_handles_own_fd (int fd)
{
  for (FkHandle *h = fk_handles; h; h = h->next)
    if (h->memfd == fd)
      return true;
  return false;
}

static size_t *
fk_handle_used (FkHandle *h, size_t *total)
{
  if (h->device >= 0)
    {
      *total = fk.devices[h->device].total;
      return &fk.devices[h->device].used;
    }
  *total = fk.host_total;
  return &fk.host_used;
}

/* Frees the physical memory once no handle reference and no mapping is left. */
static void
fk_handle_maybe_free (FkHandle *h)
{
  size_t total;

  if (h->refs > 0 || h->mappings > 0)
    return;
  for (FkHandle **p = &fk_handles; *p; p = &(*p)->next)
    if (*p == h)
      {
        *p = h->next;
        break;
      }
  if (h->accounted)
    *fk_handle_used (h, &total) -= h->size;
  close (h->memfd);
  free (h);
}

static FkHandle *
fk_handle_new (int memfd, size_t size, const CUmemAllocationProp *prop, int device, bool accounted)
{
  FkHandle *h = calloc (1, sizeof *h);
  size_t total;

  if (h == NULL)
    return NULL;
  h->id = fk_next_handle += 0x10;
  h->size = size;
  h->prop = *prop;
  h->device = device;
  h->memfd = memfd;
  h->refs = 1;
  h->accounted = accounted;
  if (accounted)
    *fk_handle_used (h, &total) += size;
  h->next = fk_handles;
  fk_handles = h;
  fk.counts.physical_handles++;
  return h;
}

CUresult
fk_cuMemGetAllocationGranularity (size_t *granularity, const CUmemAllocationProp *prop,
                                  CUmemAllocationGranularity_flags option)
{
  int device;
  CUresult r;

  FK_ENTER (cuMemGetAllocationGranularity);
  if (granularity == NULL
      || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM
          && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  r = fk_check_prop (prop, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  *granularity
      = option == CU_MEM_ALLOC_GRANULARITY_MINIMUM ? fk.granularity : fk.recommended_granularity;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemCreate (CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                unsigned long long flags)
{
  int device, fd;
  CUresult r;
  size_t total, *used;
  char name[128], uuid[33] = "host";
  FkHandle *h, probe;

  FK_ENTER (cuMemCreate);
  if (handle == NULL || flags != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  r = fk_check_prop (prop, &device);
  /* a machine without an IMEX channel (the H200 one): supported (the granularity is answered),
   * but the creation is not permitted */
  if (r == CUDA_SUCCESS && (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC)
      && getenv ("FAKECUDA_NO_IMEX") != NULL)
    r = CUDA_ERROR_NOT_PERMITTED;
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  if (size == 0 || size % fk.granularity != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  probe.device = device;
  used = fk_handle_used (&probe, &total);
  if (size > total - *used)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  if (device >= 0)
    for (int i = 0; i < 16; i++)
      sprintf (uuid + 2 * i, "%02x", (uint8_t) fk.devices[device].uuid.bytes[i]);
  snprintf (name, sizeof name, "fakecuda-vmm:%s:%d:%d:%u", uuid, (int) prop->location.type,
            prop->location.id, (unsigned) prop->requestedHandleTypes);
  fd = memfd_create (name, MFD_CLOEXEC);
  if (fd < 0)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  if (ftruncate (fd, (off_t) size) != 0)
    {
      close (fd);
      FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  h = fk_handle_new (fd, size, prop, device, true);
  if (h == NULL)
    {
      close (fd);
      FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  *handle = h->id;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemRelease (CUmemGenericAllocationHandle handle)
{
  FkHandle *h;

  FK_ENTER (cuMemRelease);
  h = fk_handle_lookup (handle);
  if (h == NULL || h->refs == 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  h->refs--;
  fk.counts.physical_handles--;
  fk_handle_maybe_free (h);
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemAddressReserve (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                        unsigned long long flags)
{
  size_t page = fk_page_size (), align;
  FkReservation *res;
  uintptr_t base;

  FK_ENTER (cuMemAddressReserve);
  if (ptr == NULL || flags != 0 || size == 0 || size % page != 0 || addr % page != 0
      || (alignment != 0 && !fk_is_power_of_two (alignment)))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (fk.n_devices == 0
      || !fk_device_attribute (0, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED))
    FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
  align = alignment > fk.granularity ? alignment : fk.granularity;
  /* A hint is honoured when that range is free (at the alignment asked for, if any). */
  if (addr % (alignment > page ? alignment : page) != 0)
    addr = 0;
  base = fk_va_alloc (size, align, addr, true);
  if (base == 0)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  res = calloc (1, sizeof *res);
  if (res == NULL || !fk_range_add (base, size, FK_RANGE_RESERVATION, res))
    {
      free (res);
      fk_va_free (base, size);
      FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  res->base = base;
  res->size = size;
  fk.counts.reservations++;
  *ptr = base;
  FK_RETURN (CUDA_SUCCESS);
}

static FkReservation *
fk_reservation_at (uintptr_t addr)
{
  FkRange *r = fk_range_find (addr);
  return r != NULL && r->kind == FK_RANGE_RESERVATION ? r->obj : NULL;
}

CUresult
fk_cuMemAddressFree (CUdeviceptr ptr, size_t size)
{
  FkReservation *res;

  FK_ENTER (cuMemAddressFree);
  res = fk_reservation_at (ptr);
  /* Only exactly one whole reservation, with nothing mapped in it. */
  if (res == NULL || res->base != ptr || res->size != size || res->maps != NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  fk_range_remove (res->base);
  fk_va_free (res->base, res->size);
  free (res);
  fk.counts.reservations--;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemMap (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
             unsigned long long flags)
{
  FkReservation *res;
  FkHandle *h;
  FkMapping *m, **link;

  FK_ENTER (cuMemMap);
  h = fk_handle_lookup (handle);
  if (flags != 0 || h == NULL || h->refs == 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (offset != 0 || size == 0 || ptr % fk.granularity != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  /* A size that is no multiple of the granularity, or beyond the handle: the real driver (580,
   * H200) answers CUDA_ERROR_NOT_SUPPORTED. */
  if (size % fk.granularity != 0 || size > h->size)
    FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
  res = fk_reservation_at (ptr);
  if (res == NULL || size > res->base + res->size - ptr)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  for (link = &res->maps; *link && (*link)->base + (*link)->size <= ptr; link = &(*link)->next)
    ;
  if (*link != NULL && (*link)->base < ptr + size)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE); /* already mapped */
  m = calloc (1, sizeof *m);
  if (m == NULL)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  if (!fk_va_back_fd (ptr, size, h->memfd, 0, false))
    {
      free (m);
      FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  m->base = ptr;
  m->size = size;
  m->handle = h;
  m->next = *link;
  *link = m;
  h->mappings++;
  fk.counts.mappings++;
  FK_RETURN (CUDA_SUCCESS);
}

static FkMapping *
fk_mapping_at (FkReservation *res, uintptr_t addr)
{
  for (FkMapping *m = res ? res->maps : NULL; m; m = m->next)
    if (addr >= m->base && addr - m->base < m->size)
      return m;
  return NULL;
}

typedef struct
{
  FkReservation *res;
  FkMapping *map;
} FkSpan;

/* The whole mappings that cover [ptr, ptr+size) exactly, in address order, possibly over
 * adjacent reservations (as after growing in place); NULL when a byte is not mapped or a mapping
 * reaches outside the range. Free with free(). */
static FkSpan *
fk_spans (uintptr_t ptr, size_t size, size_t *n_spans)
{
  uintptr_t cur = ptr, end = ptr + size;
  FkSpan *spans = NULL;
  size_t n = 0, cap = 0;

  if (size == 0 || end < ptr)
    return NULL;
  while (cur < end)
    {
      FkReservation *res = fk_reservation_at (cur);
      FkMapping *m = fk_mapping_at (res, cur);

      if (m == NULL || m->base != cur || m->size > end - cur)
        {
          free (spans);
          return NULL;
        }
      if (n == cap)
        {
          FkSpan *more = realloc (spans, (cap = cap ? 2 * cap : 4) * sizeof *spans);
          if (more == NULL)
            {
              free (spans);
              return NULL;
            }
          spans = more;
        }
      spans[n++] = (FkSpan){ res, m };
      cur += m->size;
    }
  *n_spans = n;
  return spans;
}

CUresult
fk_cuMemUnmap (CUdeviceptr ptr, size_t size)
{
  FkSpan *spans;
  size_t n;

  FK_ENTER (cuMemUnmap);
  spans = fk_spans (ptr, size, &n);
  if (spans == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < n; i++)
    {
      FkMapping *m = spans[i].map;
      for (FkMapping **p = &spans[i].res->maps; *p; p = &(*p)->next)
        if (*p == m)
          {
            *p = m->next;
            break;
          }
      fk_va_unback (m->base, m->size);
      m->handle->mappings--;
      fk_handle_maybe_free (m->handle);
      free (m);
      fk.counts.mappings--;
    }
  free (spans);
  FK_RETURN (CUDA_SUCCESS);
}

static bool
fk_access_valid (CUmemAccess_flags flags)
{
  return flags == CU_MEM_ACCESS_FLAGS_PROT_NONE || flags == CU_MEM_ACCESS_FLAGS_PROT_READ
         || flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

static void
fk_mapping_protect (FkMapping *m)
{
  CUmemAccess_flags most = m->host_access;
  int prot = PROT_NONE;

  for (int i = 0; i < FK_MAX_DEVICES; i++)
    most |= m->access[i];
  if (most & CU_MEM_ACCESS_FLAGS_PROT_READ)
    prot |= PROT_READ;
  if ((most & CU_MEM_ACCESS_FLAGS_PROT_READWRITE) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
    prot |= PROT_WRITE;
  mprotect ((void *) m->base, m->size, prot);
}

/* Whether @d may be applied to memory of @owner (-1: host memory). */
static CUresult
fk_check_access_desc (const CUmemAccessDesc *d, int owner)
{
  if (!fk_access_valid (d->flags))
    return CUDA_ERROR_INVALID_VALUE;
  switch (d->location.type)
    {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (!fk_device_valid (d->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
      if (owner >= 0 && d->location.id != owner && d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE
          && !fk_can_access_peer (owner, d->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      /* Host access only to host memory. */
      return owner >= 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult
fk_cuMemSetAccess (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
  FkSpan *spans;
  size_t n;

  FK_ENTER (cuMemSetAccess);
  if (desc == NULL || count == 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  spans = fk_spans (ptr, size, &n);
  if (spans == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  /* Validate everything first: a failed call changes nothing. */
  for (size_t j = 0; j < n; j++)
    for (size_t i = 0; i < count; i++)
      {
        CUresult r = fk_check_access_desc (&desc[i], spans[j].map->handle->device);
        if (r != CUDA_SUCCESS)
          {
            free (spans);
            FK_RETURN (r);
          }
      }
  for (size_t j = 0; j < n; j++)
    {
      FkMapping *m = spans[j].map;
      for (size_t i = 0; i < count; i++)
        if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE)
          m->access[desc[i].location.id] = desc[i].flags;
        else
          m->host_access = desc[i].flags;
      fk_mapping_protect (m);
    }
  free (spans);
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemGetAccess (unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
  FkMapping *m;

  FK_ENTER (cuMemGetAccess);
  if (flags == NULL || location == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  m = fk_mapping_at (fk_reservation_at (ptr), ptr);
  if (m == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  switch (location->type)
    {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (!fk_device_valid (location->id))
        FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
      *flags = m->access[location->id];
      break;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      *flags = m->host_access;
      break;
    default:
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
    }
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_reservation_check (void *reservation, uintptr_t addr, size_t size, int device, bool write)
{
  FkReservation *res = reservation;
  CUmemAccess_flags need
      = write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
  uintptr_t cur = addr, end = addr + size;

  for (FkMapping *m = res->maps; m && cur < end; m = m->next)
    {
      CUmemAccess_flags have;
      if (m->base + m->size <= cur)
        continue;
      if (m->base > cur)
        return CUDA_ERROR_INVALID_VALUE; /* not mapped */
      have = device < 0 ? m->host_access : m->access[device];
      if ((have & need) != need)
        return CUDA_ERROR_INVALID_VALUE; /* no access from there */
      cur = m->base + m->size;
    }
  return cur >= end ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

bool
fk_reservation_lookup (void *reservation, uintptr_t addr, int *device, bool *host,
                       uintptr_t *map_base, size_t *map_size)
{
  FkMapping *m = fk_mapping_at (reservation, addr);
  if (m == NULL)
    return false;
  *device = m->handle->device;
  *host = m->handle->device < 0;
  if (map_base)
    *map_base = m->base;
  if (map_size)
    *map_size = m->size;
  return true;
}

/* Shareable handles */

CUresult
fk_cuMemExportToShareableHandle (void *shareableHandle, CUmemGenericAllocationHandle handle,
                                 CUmemAllocationHandleType handleType, unsigned long long flags)
{
  FkHandle *h;

  FK_ENTER (cuMemExportToShareableHandle);
  h = fk_handle_lookup (handle);
  if (shareableHandle == NULL || flags != 0 || h == NULL || h->refs == 0
      || (h->prop.requestedHandleTypes & handleType) == 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (handleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    {
      int fd = fcntl (h->memfd, F_DUPFD_CLOEXEC, 0);
      if (fd < 0)
        FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
      fk_track_exported_fd (fd);
      fk.counts.exported_fds++;
      *(int *) shareableHandle = fd;
      FK_RETURN (CUDA_SUCCESS);
    }
  if (handleType == CU_MEM_HANDLE_TYPE_FABRIC)
    {
      FkFabric f = { 0 };
      struct stat st;
      if (fstat (h->memfd, &st) != 0)
        FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
      memcpy (f.magic, FK_FABRIC_MAGIC, 8);
      f.pid = (int32_t) getpid ();
      f.fd = h->memfd;
      f.id = h->id;
      f.ino = (uint64_t) st.st_ino;
      memcpy (shareableHandle, &f, sizeof f);
      FK_RETURN (CUDA_SUCCESS);
    }
  FK_RETURN (CUDA_ERROR_INVALID_VALUE);
}

/* Reads an allocation's description from the name of its memfd. */
static bool
fk_parse_vmm_fd (int fd, CUmemAllocationProp *prop, int *device)
{
  char path[64], link[256], uuid[33];
  ssize_t n;
  const char *p;
  int type, id;
  unsigned types;

  snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  n = readlink (path, link, sizeof link - 1);
  if (n <= 0)
    return false;
  link[n] = '\0';
  p = strstr (link, "memfd:fakecuda-vmm:");
  if (p == NULL
      || sscanf (p + strlen ("memfd:fakecuda-vmm:"), "%32[0-9a-z]:%d:%d:%u", uuid, &type, &id,
                 &types)
             != 4)
    return false;
  memset (prop, 0, sizeof *prop);
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = (CUmemLocationType) type;
  prop->location.id = id;
  prop->requestedHandleTypes = (CUmemAllocationHandleType) types;
  *device = -1;
  if (type == CU_MEM_LOCATION_TYPE_DEVICE)
    {
      for (int i = 0; i < fk.n_devices; i++)
        {
          char hex[33];
          for (int j = 0; j < 16; j++)
            sprintf (hex + 2 * j, "%02x", (uint8_t) fk.devices[i].uuid.bytes[j]);
          if (strcmp (hex, uuid) == 0)
            {
              *device = i;
              prop->location.id = i;
            }
        }
      return *device >= 0;
    }
  return true;
}

CUresult
fk_cuMemImportFromShareableHandle (CUmemGenericAllocationHandle *handle, void *osHandle,
                                   CUmemAllocationHandleType shHandleType)
{
  CUmemAllocationProp prop;
  int device, own = -1;
  struct stat st;
  FkHandle *h;

  FK_ENTER (cuMemImportFromShareableHandle);
  if (handle == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (shHandleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    {
      int fd = (int) (intptr_t) osHandle;
      if (fd < 0 || fstat (fd, &st) != 0 || !fk_parse_vmm_fd (fd, &prop, &device))
        FK_RETURN (CUDA_ERROR_INVALID_VALUE);
      own = fcntl (fd, F_DUPFD_CLOEXEC, 0);
    }
  else if (shHandleType == CU_MEM_HANDLE_TYPE_FABRIC)
    {
      FkFabric f;
      char path[64];
      if (osHandle == NULL)
        FK_RETURN (CUDA_ERROR_INVALID_VALUE);
      memcpy (&f, osHandle, sizeof f);
      if (memcmp (f.magic, FK_FABRIC_MAGIC, 8) != 0)
        FK_RETURN (CUDA_ERROR_INVALID_VALUE);
      snprintf (path, sizeof path, "/proc/%d/fd/%d", (int) f.pid, (int) f.fd);
      own = open (path, O_RDWR | O_CLOEXEC);
      if (own < 0)
        FK_RETURN (errno == EACCES || errno == EPERM ? CUDA_ERROR_NOT_PERMITTED
                                                     : CUDA_ERROR_INVALID_VALUE);
      if (fstat (own, &st) != 0 || (uint64_t) st.st_ino != f.ino
          || !fk_parse_vmm_fd (own, &prop, &device))
        {
          close (own);
          FK_RETURN (CUDA_ERROR_INVALID_VALUE);
        }
    }
  else
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (own < 0)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  /* Memory created by this process is already counted; memory of another is not ours. */
  h = fk_handle_new (own, (size_t) st.st_size, &prop, device, false);
  if (h == NULL)
    {
      close (own);
      FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  *handle = h->id;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemRetainAllocationHandle (CUmemGenericAllocationHandle *handle, void *addr)
{
  FkMapping *m;

  FK_ENTER (cuMemRetainAllocationHandle);
  if (handle == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  m = fk_mapping_at (fk_reservation_at ((uintptr_t) addr), (uintptr_t) addr);
  if (m == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  m->handle->refs++;
  fk.counts.physical_handles++;
  *handle = m->handle->id;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemGetAllocationPropertiesFromHandle (CUmemAllocationProp *prop,
                                           CUmemGenericAllocationHandle handle)
{
  FkHandle *h;

  FK_ENTER (cuMemGetAllocationPropertiesFromHandle);
  h = fk_handle_lookup (handle);
  if (prop == NULL || h == NULL || h->refs == 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  *prop = h->prop;
  FK_RETURN (CUDA_SUCCESS);
}

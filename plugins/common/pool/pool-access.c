/* memres - CUDA memory resources
 * pool-access.c: the access of devices to a pool's memory (cuMemPoolSetAccess,
 * cuMemPoolGetAccess): the set_access and get_access slots of the pool kinds. */
#include "pool-private.h"

static gboolean
read_access (PoolRecord *pool, gint device, MemresAccess *access, GError **error)
{
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  CUmemLocation location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device };
  CUresult r;

  if (!memres_cuda_check_device (device, error))
    return FALSE;
  r = pool->drv->cuMemPoolGetAccess (&flags, pool->handle, &location);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolGetAccess");
  *access = (MemresAccess) flags;
  return TRUE;
}

static gboolean
access_is_valid (MemresAccess access)
{
  return access == MEMRES_ACCESS_NONE || access == MEMRES_ACCESS_READ
         || access == MEMRES_ACCESS_READWRITE;
}

/* Whether @device is the device the pool's memory lives on (always has access). */
static gboolean
is_owner (PoolRecord *pool, gint device)
{
  return pool->location.type == CU_MEM_LOCATION_TYPE_DEVICE && pool->location.id == device;
}

/**
 * pool_grant_access:
 * @pool: a pool
 * @descs: (array length=n_descs): the access each device gets
 * @n_descs: entries in @descs
 * @error: return location for a #GError
 *
 * Grants or revokes access of devices to the pool's memory, all in ONE cuMemPoolSetAccess call
 * (each change updates every mapping of the pool and can take long). A device that already
 * has the access asked for (cuMemPoolGetAccess) is left out of that call, and when every
 * device already has it no cuMemPoolSetAccess is made at all. Every entry is checked
 * before the call: the device exists (memres_cuda_check_device()), the access is a
 * #MemresAccess value, a device named twice gets the same access both times, and a device
 * being granted access to a device pool can reach the owner (memres_cuda_check_peer_access():
 * cuDeviceCanAccessPeer; every device may be granted access to host memory). The owner's own
 * entry is ignored: it always has read-write access. Nothing changes when a check fails.
 * Thread-safe (calls are serialized).
 *
 * Returns: %TRUE on success; %FALSE with @error set: %MEMRES_ERROR_NO_DEVICE (no such device),
 *   %MEMRES_ERROR_INVALID_ARGUMENT (bad access value, conflicting duplicates),
 *   %MEMRES_ERROR_NOT_SUPPORTED (no peer access between the devices), %MEMRES_CUDA_ERROR.
 */
gboolean
pool_grant_access (PoolRecord *pool, const MemresAccessDesc *descs, guint n_descs, GError **error)
{
  g_autofree CUmemAccessDesc *map = g_new0 (CUmemAccessDesc, MAX (n_descs, 1));
  g_autofree MemresAccessDesc *seen = g_new0 (MemresAccessDesc, MAX (n_descs, 1));
  guint64 granted = 0, revoked = 0;
  g_autoptr (GMutexLocker) locker = NULL;
  guint n = 0, n_seen = 0;
  CUresult r;

  g_return_val_if_fail (descs != NULL || n_descs == 0, FALSE);

  /* held across the reads of the current access too, so that two callers cannot both skip */
  locker = g_mutex_locker_new (&pool->access_lock);
  for (guint i = 0; i < n_descs; i++)
    {
      gint device = descs[i].device;
      MemresAccess current = MEMRES_ACCESS_NONE;
      gboolean dup = FALSE;

      if (!memres_cuda_check_device (device, error))
        return FALSE;
      if (!access_is_valid (descs[i].access))
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "invalid access %d for device %d (valid: none 0, read 1, "
                       "readwrite 3)",
                       (int) descs[i].access, device);
          return FALSE;
        }
      if (is_owner (pool, device))
        continue;
      for (guint j = 0; j < n_seen; j++)
        if (seen[j].device == device)
          {
            if (seen[j].access != descs[i].access)
              {
                g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                             "device %d is given two different accesses", device);
                return FALSE;
              }
            dup = TRUE;
          }
      if (dup)
        continue;
      seen[n_seen++] = descs[i];
      if (descs[i].access != MEMRES_ACCESS_NONE
          && pool->location.type == CU_MEM_LOCATION_TYPE_DEVICE
          && !memres_cuda_check_peer_access (pool->location.id, device, error))
        return FALSE;
      /* An access the device already has is left out of the call: each cuMemPoolSetAccess
       * remaps every mapping of the pool, and granting again what is granted must cost
       * nothing (cuMemPoolGetAccess only reads). */
      if (!read_access (pool, device, &current, error))
        return FALSE;
      if (current == descs[i].access)
        continue;

      map[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      map[n].location.id = device;
      map[n].flags = (CUmemAccess_flags) descs[i].access;
      n++;
      if (device < 64)
        {
          if (descs[i].access == MEMRES_ACCESS_NONE)
            revoked |= G_GUINT64_CONSTANT (1) << device;
          else
            granted |= G_GUINT64_CONSTANT (1) << device;
        }
    }

  if (n == 0)
    return TRUE;

  r = pool->drv->cuMemPoolSetAccess (pool->handle, map, n);
  if (r == CUDA_SUCCESS)
    pool->peers_granted = (pool->peers_granted & ~revoked) | granted;
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolSetAccess");
  return TRUE;
}

/**
 * pool_set_access:
 * @mr: an instance of a pool kind
 * @descs: (array length=n_descs): the access each device gets
 * @n_descs: entries in @descs
 * @error: return location for a #GError
 *
 * The set_access slot: pool_grant_access() on the instance's pool; %MEMRES_ERROR_NOT_SUPPORTED
 * for an instance without one (pool_use_other()).
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pool_set_access (MemresResource *mr, const MemresAccessDesc *descs, guint n_descs, GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);

  if (pool->other != NULL)
    return pool_refuse_without_pool (pool, error);
  return pool_grant_access (pool, descs, n_descs, error);
}

/**
 * pool_get_access:
 * @mr: an instance of a pool kind
 * @device: a device ordinal
 * @access: (out): the access @device has to the pool's memory
 * @error: return location for a #GError
 *
 * The get_access slot. Reads the access of @device with cuMemPoolGetAccess (the owner of a device
 * pool always has read-write access). Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_NO_DEVICE (no such device),
 * %MEMRES_ERROR_NOT_SUPPORTED (an instance without a pool, pool_use_other()) or a
 * %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
pool_get_access (MemresResource *mr, gint device, MemresAccess *access, GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);

  if (pool->other != NULL)
    return pool_refuse_without_pool (pool, error);
  return read_access (pool, device, access, error);
}

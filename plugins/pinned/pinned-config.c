/* memres - CUDA memory resources
 * pinned-config.c: checks the options of the pinned kind and resolves the mode and the pool's
 * location against what the device reports; the host's physical memory, the most a buffer can
 * page-lock. */
#include "pinned-config.h"

#include <string.h>
#include <unistd.h>

/* Options that only one mode reads (pool mode also the pool options,
 * PINNED_POOL_OPTIONS). Naming one of them with the other mode is an error. */
static const char *const pool_only_options[] = {
  "fallback", "numa_id", "devices", "ipc", NULL,
};
static const char *const legacy_only_options[] = {
  "portable",
  "devicemap",
  "writecombined",
  NULL,
};

static const char *
mode_name (PinnedMode mode)
{
  return mode == PINNED_MODE_POOL ? "pool" : "legacy";
}

static gboolean
check_mode_options (const MemresOptions *options, PinnedMode mode, GError **error)
{
  const char *const *other = mode == PINNED_MODE_POOL ? legacy_only_options : pool_only_options;
  const char *wrong = NULL;

  for (guint i = 0; wrong == NULL && other[i] != NULL; i++)
    if (memres_options_is_set (options, other[i]))
      wrong = other[i];
  if (wrong == NULL && mode == PINNED_MODE_LEGACY)
    wrong = pool_options_first_set (options, PINNED_POOL_OPTIONS);
  if (wrong == NULL)
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "pinned: option '%s' applies to mode=%s only, not to mode=%s", wrong,
               mode_name (mode == PINNED_MODE_POOL ? PINNED_MODE_LEGACY : PINNED_MODE_POOL),
               mode_name (mode));
  return FALSE;
}

/* Whether @node is in a sysfs node list such as "0-3,5". */
static gboolean
node_list_contains (const char *list, gint node)
{
  g_auto (GStrv) ranges = g_strsplit (list, ",", -1);

  for (guint i = 0; ranges[i] != NULL; i++)
    {
      char *end = NULL;
      gint64 first = g_ascii_strtoll (ranges[i], &end, 10);
      gint64 last = first;

      if (end == ranges[i])
        continue;
      if (*end == '-')
        last = g_ascii_strtoll (end + 1, NULL, 10);
      if (node >= first && node <= last)
        return TRUE;
    }
  return FALSE;
}

/* Reads a sysfs node list, stripped; NULL where the file is missing. */
static char *
read_node_list (const char *name)
{
  g_autofree char *path = g_build_filename ("/sys/devices/system/node", name, NULL);
  char *contents = NULL;

  if (!g_file_get_contents (path, &contents, NULL, NULL))
    return NULL;
  return g_strstrip (contents);
}

/* A host NUMA node can hold a pool when sysfs lists it among the nodes with memory. Without
 * sysfs NUMA information (a kernel built without NUMA) the driver judges. */
static gboolean
check_numa_node (gint node, GError **error)
{
  g_autofree char *online = read_node_list ("online");
  g_autofree char *has_memory = read_node_list ("has_memory");

  if (online != NULL && !node_list_contains (online, node))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "pinned: numa_id=%d: the host has no NUMA node %d (online nodes: %s)", node,
                   node, online);
      return FALSE;
    }
  if (has_memory != NULL && !node_list_contains (has_memory, node))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "pinned: numa_id=%d: host NUMA node %d has no memory (nodes with memory: %s)",
                   node, node, has_memory);
      return FALSE;
    }
  return TRUE;
}

static gboolean
read_devices (PinnedConfig *config, const MemresOptions *options, GError **error)
{
  const gint64 *list;
  gsize n = 0;
  gboolean has_device = FALSE;

  if (!memres_options_is_set (options, "devices"))
    {
      config->devices = g_new (gint, 1);
      config->devices[0] = config->device;
      config->n_devices = 1;
      return TRUE;
    }

  list = memres_options_get_int_list (options, "devices", &n);
  config->devices = g_new (gint, MAX (n, 1));
  for (gsize i = 0; i < n; i++)
    {
      gboolean seen = FALSE;

      for (gsize j = 0; j < config->n_devices; j++)
        seen |= config->devices[j] == (gint) list[i];
      if (!seen)
        config->devices[config->n_devices++] = (gint) list[i];
      has_device |= list[i] == config->device;
    }
  if (!has_device)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "pinned: devices must include device=%d, the device of the buffers",
                   config->device);
      return FALSE;
    }
  return TRUE;
}

/**
 * pinned_config_init:
 * @config: (out caller-allocates): the configuration to fill; clear it with
 *   pinned_config_clear() whatever this returns
 * @options: the validated options of the resource (transfer none)
 * @error: return location for a #GError
 *
 * Reads the options and checks the ones that need no driver: options of the other mode
 * (%MEMRES_ERROR_INVALID_ARGUMENT naming the option), a `devices` list without `device`, and a
 * `numa_id` the host does not have or that has no memory (%MEMRES_ERROR_INVALID_ARGUMENT,
 * judged by /sys/devices/system/node/online and has_memory). Makes no driver call.
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_config_init (PinnedConfig *config, const MemresOptions *options, GError **error)
{
  memset (config, 0, sizeof *config);
  config->device = (gint) memres_options_get_int (options, "device");
  config->mode = g_strcmp0 (memres_options_get_string (options, "mode"), "legacy") == 0
                     ? PINNED_MODE_LEGACY
                     : PINNED_MODE_POOL;
  config->numa_id = PINNED_NUMA_AUTO;

  if (!check_mode_options (options, config->mode, error))
    return FALSE;

  if (config->mode == PINNED_MODE_LEGACY)
    {
      if (memres_options_get_bool (options, "portable"))
        config->host_alloc_flags |= CU_MEMHOSTALLOC_PORTABLE;
      if (memres_options_get_bool (options, "devicemap"))
        config->host_alloc_flags |= CU_MEMHOSTALLOC_DEVICEMAP;
      if (memres_options_get_bool (options, "writecombined"))
        config->host_alloc_flags |= CU_MEMHOSTALLOC_WRITECOMBINED;
      return TRUE;
    }

  config->fallback = memres_options_get_bool (options, "fallback");
  config->ipc = memres_options_get_bool (options, "ipc");
  pool_config_init_host (&config->pool, CU_MEM_LOCATION_TYPE_HOST, 0, config->device);
  config->pool.create = TRUE;
  if (config->ipc)
    config->pool.handle_type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  if (!pool_config_set_options (&config->pool, options, PINNED_POOL_OPTIONS, error))
    return FALSE;
  /* Page-locking memory is slow: unless told otherwise, the pool keeps what it got until it
   * is trimmed (the driver's default threshold, 0, would release it at every synchronization
   * and page-lock it again at the next allocation). */
  if (!config->pool.release_threshold_set)
    {
      config->pool.release_threshold_set = TRUE;
      config->pool.release_threshold = G_MAXUINT64;
    }
  if (memres_options_is_set (options, "numa_id"))
    config->numa_id = (gint) memres_options_get_int (options, "numa_id");
  config->numa_id_given = config->numa_id != PINNED_NUMA_AUTO;
  if (config->numa_id_given && !check_numa_node (config->numa_id, error))
    return FALSE;
  return read_devices (config, options, error);
}

/* Reads a device attribute (memres_cuda_get_device_attribute()). A driver older than the
 * attribute answers CUDA_ERROR_INVALID_VALUE: that reads as @unknown. Another error names the
 * attribute (@what). */
static gboolean
get_attribute (gint device, CUdevice_attribute attr, int unknown, int *value, const char *what,
               GError **error)
{
  GError *local = NULL;

  if (memres_cuda_get_device_attribute (device, attr, value, &local))
    return TRUE;
  if (g_error_matches (local, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_VALUE))
    {
      g_error_free (local);
      *value = unknown;
      return TRUE;
    }
  g_propagate_prefixed_error (error, local, "pinned: device attribute %s: ", what);
  return FALSE;
}

/* Pool mode cannot be done: fall back when asked to, otherwise name the mode that works. */
static gboolean
unsupported (PinnedConfig *config, const char *reason, GError **error)
{
  if (config->ipc)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "pinned: ipc=true needs a host NUMA memory pool, but %s; no mode of the "
                   "pinned kind can share memory on this device",
                   reason);
      return FALSE;
    }
  if (config->fallback)
    {
      g_debug ("pinned: device %d: %s: falling back to mode=legacy", config->device, reason);
      config->mode = PINNED_MODE_LEGACY;
      return TRUE;
    }
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "pinned: mode=pool is not supported: %s; use mode=legacy (cuMemHostAlloc), or "
               "add fallback=true to fall back to it",
               reason);
  return FALSE;
}

static void
set_location (PinnedConfig *config, CUmemLocationType type, gint numa_id)
{
  config->pool.location.type = type;
  config->pool.location.id = type == CU_MEM_LOCATION_TYPE_HOST_NUMA ? numa_id : 0;
}

/* With ipc=true, the device must support POSIX file descriptor handles for the pool
 * (CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, read by the pool code). */
static gboolean
check_shareable (PinnedConfig *config, GError **error)
{
  g_autofree char *reason = NULL;
  gboolean supported = FALSE;

  if (!config->ipc)
    return TRUE;
  if (!pool_check_supported (&config->pool, &supported, error))
    return FALSE;
  if (supported)
    return TRUE;
  reason = g_strdup_printf ("device %d has no POSIX file descriptor handles for host NUMA pools "
                            "(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)",
                            config->device);
  return unsupported (config, reason, error);
}

static gboolean
resolve_pool (PinnedConfig *config, GError **error)
{
  g_autofree char *reason = NULL;
  int host_pools = 0, numa_pools = 0, closest = -1;

  if (!get_attribute (config->device, CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, 0,
                      &host_pools, "HOST_MEMORY_POOLS_SUPPORTED", error)
      || !get_attribute (config->device, CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0,
                         &numa_pools, "HOST_NUMA_MEMORY_POOLS_SUPPORTED", error))
    return FALSE;

  if (config->numa_id_given)
    {
      if (numa_pools)
        {
          set_location (config, CU_MEM_LOCATION_TYPE_HOST_NUMA, config->numa_id);
          return check_shareable (config, error);
        }
      reason = g_strdup_printf ("device %d has no host NUMA memory pools "
                                "(CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED is 0)",
                                config->device);
      return unsupported (config, reason, error);
    }

  if (numa_pools
      && !get_attribute (config->device, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, -1, &closest,
                         "HOST_NUMA_ID", error))
    return FALSE;
  if (numa_pools && closest >= 0)
    {
      set_location (config, CU_MEM_LOCATION_TYPE_HOST_NUMA, closest);
      return check_shareable (config, error);
    }
  if (config->ipc)
    {
      reason = g_strdup_printf (numa_pools ? "device %d reports no closest host NUMA node "
                                             "(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID is -1): name one "
                                             "with numa_id"
                                           : "device %d has no host NUMA memory pools "
                                             "(CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_"
                                             "SUPPORTED is 0)",
                                config->device);
      return unsupported (config, reason, error);
    }
  if (host_pools)
    {
      set_location (config, CU_MEM_LOCATION_TYPE_HOST, 0);
      return TRUE;
    }
  reason = g_strdup_printf ("device %d has no host memory pools "
                            "(CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED is 0)",
                            config->device);
  return unsupported (config, reason, error);
}

/**
 * pinned_config_resolve:
 * @config: a configuration filled by pinned_config_init()
 * @error: return location for a #GError
 *
 * Checks the devices and decides what the resource will be. Pool mode: reads
 * `CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED`, `..._HOST_NUMA_MEMORY_POOLS_SUPPORTED` and,
 * where a host NUMA node is to be found, `..._HOST_NUMA_ID`, then sets @config's location
 * (HOST_NUMA on the named or the closest node, else HOST); with `ipc=true` also checks the
 * pool handle types (pool_check_supported()). Where the device cannot do pool
 * mode, switches @config to legacy mode if it asked for fallback (not with `ipc=true`), else
 * fails with %MEMRES_ERROR_NOT_SUPPORTED naming the mode that works.
 *
 * Errors: %MEMRES_ERROR_NO_DRIVER, %MEMRES_ERROR_NO_DEVICE (from memres_cuda_check_device() for
 * `device` and every entry of `devices`), %MEMRES_ERROR_NOT_SUPPORTED, %MEMRES_CUDA_ERROR of
 * cuDeviceGet or cuDeviceGetAttribute (prefixed with the attribute's name). Driver calls:
 * cuDeviceGet, cuDeviceGetAttribute (memres_cuda_get_device_attribute()).
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_config_resolve (PinnedConfig *config, GError **error)
{
  if (memres_cuda_get_driver (error) == NULL || !memres_cuda_check_device (config->device, error))
    return FALSE;
  for (gsize i = 0; i < config->n_devices; i++)
    if (config->devices[i] != config->device
        && !memres_cuda_check_device (config->devices[i], error))
      return FALSE;
  if (config->mode == PINNED_MODE_LEGACY)
    return TRUE;
  return resolve_pool (config, error);
}

/**
 * pinned_config_clear:
 * @config: a configuration filled (completely or partly) by pinned_config_init()
 *
 * Frees what @config owns. Safe to call twice.
 */
void
pinned_config_clear (PinnedConfig *config)
{
  g_clear_pointer (&config->devices, g_free);
  config->n_devices = 0;
}

/* Bytes of physical memory of the host (G_MAXUINT64 where unknown), read once. */
guint64
pinned_host_memory (void)
{
  static gsize total = 0;

  if (g_once_init_enter (&total))
    {
      long pages = sysconf (_SC_PHYS_PAGES);
      long page_size = sysconf (_SC_PAGESIZE);
      guint64 bytes
          = pages > 0 && page_size > 0 ? (guint64) pages * (guint64) page_size : G_MAXUINT64;

      g_once_init_leave (&total, (gsize) MIN (bytes, (guint64) G_MAXSIZE));
    }
  return total;
}

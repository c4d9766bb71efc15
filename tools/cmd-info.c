/* cmd-info.c: `memres info [--json]`: the CUDA driver and what each device supports, or a plain
 * statement that no driver is present. */
#include "memres-tool.h"

#include <string.h>

/* Device attributes that newer headers name; by number so that older headers still build. A
 * driver that does not know one reports an error, shown as "unknown". */
#define ATTR_HOST_NUMA_MEMORY_POOLS_SUPPORTED ((CUdevice_attribute) 142)
#define ATTR_HOST_MEMORY_POOLS_SUPPORTED      ((CUdevice_attribute) 144)

typedef struct
{
  int ordinal;
  char name[256];
  size_t total_memory;
  int cc_major, cc_minor;
  int pools;      /* -1: unknown */
  int vmm;        /* -1: unknown */
  int ipc_types;  /* CUmemAllocationHandleType bits of pool IPC; -1: unknown */
  int host_pools; /* -1: unknown */
  int host_numa_pools;
  int managed;       /* managed memory (cuMemAllocManaged); -1: unknown */
  int concurrent;    /* concurrent managed access; -1: unknown */
  int managed_pools; /* managed memory pools: CUDA 13, memory pools, concurrent access */
} DeviceInfo;

/* An attribute of device @ordinal (memres_cuda_get_device_attribute()), -1 where it cannot be
 * read. */
static int
attribute (int ordinal, CUdevice_attribute attr)
{
  int value = -1;

  if (!memres_cuda_get_device_attribute (ordinal, attr, &value, NULL))
    return -1;
  return value;
}

static gboolean
query_device (const MemresCudaDriver *drv, int ordinal, DeviceInfo *info, GError **error)
{
  CUdevice dev;
  CUresult res;

  memset (info, 0, sizeof *info);
  info->ordinal = ordinal;
  res = drv->cuDeviceGet (&dev, ordinal);
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, "cuDeviceGet");
  if (drv->cuDeviceGetName == NULL
      || drv->cuDeviceGetName (info->name, sizeof info->name, dev) != CUDA_SUCCESS)
    g_strlcpy (info->name, "(unknown)", sizeof info->name);
  if (drv->cuDeviceTotalMem == NULL
      || drv->cuDeviceTotalMem (&info->total_memory, dev) != CUDA_SUCCESS)
    info->total_memory = 0;
  info->cc_major = attribute (ordinal, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info->cc_minor = attribute (ordinal, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info->pools = attribute (ordinal, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
  info->vmm = attribute (ordinal, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
  info->ipc_types = attribute (ordinal, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES);
  info->host_pools = attribute (ordinal, ATTR_HOST_MEMORY_POOLS_SUPPORTED);
  info->host_numa_pools = attribute (ordinal, ATTR_HOST_NUMA_MEMORY_POOLS_SUPPORTED);
  info->managed = attribute (ordinal, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
  info->concurrent = attribute (ordinal, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
  /* what the managed kind's pools need (plugins/managed/managed.c) */
  if (drv->driver_version < 13000 || drv->cuMemGetMemPool == NULL || info->pools == 0
      || info->managed == 0 || info->concurrent == 0)
    info->managed_pools = 0;
  else if (info->pools < 0 || info->managed < 0 || info->concurrent < 0)
    info->managed_pools = -1;
  else
    info->managed_pools = 1;
  return TRUE;
}

static const char *
yes_no (int value)
{
  return value < 0 ? "unknown" : value ? "yes" : "no";
}

static char *
ipc_types_text (int types)
{
  GPtrArray *names;

  if (types < 0)
    return g_strdup ("unknown");
  if ((types & (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC)) == 0)
    return g_strdup ("none");
  names = g_ptr_array_new ();
  if (types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    g_ptr_array_add (names, (gpointer) "POSIX fd");
  if (types & CU_MEM_HANDLE_TYPE_FABRIC)
    g_ptr_array_add (names, (gpointer) "fabric");
  g_ptr_array_add (names, NULL);
  {
    char *text = g_strjoinv (", ", (char **) names->pdata);
    g_ptr_array_unref (names);
    return text;
  }
}

static void
json_tristate (MemresJson *json, const char *key, int value)
{
  if (value < 0)
    memres_json_string (json, key, NULL);
  else
    memres_json_bool (json, key, value != 0);
}

static void
print_json (const MemresCudaDriver *drv, const GError *driver_error, GArray *devices)
{
  MemresJson json;
  g_autofree char *out = NULL;
  guint i;

  memres_json_init (&json);
  memres_json_begin_object (&json, NULL);
  memres_json_string (&json, "memres_version", memres_get_version ());
  memres_json_int (&json, "cuda_headers_version", MEMRES_CUDA_VERSION);
  if (drv == NULL)
    {
      memres_json_string (&json, "driver", NULL);
      /* "absent": no library could be opened; "failed": one opened but cannot be used */
      memres_json_string (&json, "driver_state",
                          memres_error_is_driver_absent (driver_error) ? "absent" : "failed");
      memres_json_string (&json, "driver_error", driver_error->message);
    }
  else
    {
      memres_json_begin_object (&json, "driver");
      memres_json_string (&json, "state", "loaded");
      memres_json_string (&json, "path", drv->path);
      memres_json_int (&json, "version", drv->driver_version);
      memres_json_end_object (&json);
    }
  memres_json_begin_array (&json, "devices");
  for (i = 0; devices != NULL && i < devices->len; i++)
    {
      const DeviceInfo *d = &g_array_index (devices, DeviceInfo, i);
      memres_json_begin_object (&json, NULL);
      memres_json_int (&json, "ordinal", d->ordinal);
      memres_json_string (&json, "name", d->name);
      memres_json_uint (&json, "total_memory", d->total_memory);
      if (d->cc_major >= 0 && d->cc_minor >= 0)
        {
          g_autofree char *cc = g_strdup_printf ("%d.%d", d->cc_major, d->cc_minor);
          memres_json_string (&json, "compute_capability", cc);
        }
      json_tristate (&json, "memory_pools", d->pools);
      json_tristate (&json, "virtual_memory_management", d->vmm);
      memres_json_begin_array (&json, "ipc_handle_types");
      if (d->ipc_types > 0 && (d->ipc_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        memres_json_string (&json, NULL, "posix_fd");
      if (d->ipc_types > 0 && (d->ipc_types & CU_MEM_HANDLE_TYPE_FABRIC))
        memres_json_string (&json, NULL, "fabric");
      memres_json_end_array (&json);
      json_tristate (&json, "host_memory_pools", d->host_pools);
      json_tristate (&json, "host_numa_memory_pools", d->host_numa_pools);
      json_tristate (&json, "managed_memory", d->managed);
      json_tristate (&json, "concurrent_managed_access", d->concurrent);
      json_tristate (&json, "managed_memory_pools", d->managed_pools);
      memres_json_end_object (&json);
    }
  memres_json_end_array (&json);
  memres_json_end_object (&json);
  out = memres_json_finish (&json);
  g_print ("%s", out);
}

static void
print_text (const MemresCudaDriver *drv, const GError *driver_error, GArray *devices)
{
  guint i;

  g_print ("memres %s (built against CUDA %d.%d headers)\n", memres_get_version (),
           MEMRES_CUDA_VERSION / 1000, (MEMRES_CUDA_VERSION % 1000) / 10);
  if (drv == NULL)
    {
      g_autofree char *message = memres_tool_one_line (driver_error->message);

      /* the message says what happened; the line after it, what it means */
      g_print ("%s\n%s: only host memory is available (the default resource is \"host\").\n",
               message,
               memres_error_is_driver_absent (driver_error)
                   ? "No CUDA driver is present"
                   : "A CUDA driver library loaded but cannot be used");
      return;
    }
  g_print ("CUDA driver %d.%d (%s)\n", drv->driver_version / 1000,
           (drv->driver_version % 1000) / 10, drv->path);
  g_print ("%u CUDA device%s\n", devices->len, devices->len == 1 ? "" : "s");
  for (i = 0; i < devices->len; i++)
    {
      const DeviceInfo *d = &g_array_index (devices, DeviceInfo, i);
      g_autofree char *memory = memres_tool_format_size (d->total_memory);
      g_autofree char *ipc = ipc_types_text (d->ipc_types);

      g_print ("\ndevice %d: %s\n", d->ordinal, d->name);
      g_print ("  memory                      %s\n", memory);
      if (d->cc_major >= 0 && d->cc_minor >= 0)
        g_print ("  compute capability          %d.%d\n", d->cc_major, d->cc_minor);
      g_print ("  memory pools                %s\n", yes_no (d->pools));
      g_print ("  virtual memory management   %s\n", yes_no (d->vmm));
      g_print ("  pool IPC handle types       %s\n", ipc);
      g_print ("  host memory pools           %s\n", yes_no (d->host_pools));
      g_print ("  host NUMA memory pools      %s\n", yes_no (d->host_numa_pools));
      g_print ("  managed memory              %s\n", yes_no (d->managed));
      g_print ("  concurrent managed access   %s\n", yes_no (d->concurrent));
      g_print ("  managed memory pools        %s\n", yes_no (d->managed_pools));
    }
}

int
memres_tool_info (int argc, char **argv)
{
  gboolean json_output = FALSE;
  GOptionEntry entries[] = {
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json_output, "Print JSON", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GError) driver_error = NULL;
  g_autoptr (GArray) devices = NULL;
  const MemresCudaDriver *drv;
  gint count = 0, i;

  context = g_option_context_new ("- show the CUDA driver and devices");
  g_option_context_set_summary (context,
                                "Shows the CUDA driver memres loads (MEMRES_CUDA_DRIVER or "
                                "libcuda.so.1) and what each device supports.");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("info", error->message);
  if (argc > 1)
    return memres_tool_usage_error ("info", "takes no arguments");

  drv = memres_cuda_get_driver (&driver_error);
  devices = g_array_new (FALSE, TRUE, sizeof (DeviceInfo));
  if (drv != NULL)
    {
      if (!memres_cuda_get_device_count (&count, &error))
        return memres_tool_fail (error);
      for (i = 0; i < count; i++)
        {
          DeviceInfo info;
          if (!query_device (drv, i, &info, &error))
            return memres_tool_fail (error);
          g_array_append_val (devices, info);
        }
    }

  if (json_output)
    print_json (drv, driver_error, devices);
  else
    print_text (drv, driver_error, devices);
  return 0;
}

/* memres - CUDA memory resources
 * host.c: the `host` kind, pageable host memory from posix_memalign(). It needs no driver and
 * is embedded in libmemres: the default where there is no GPU. It goes through the same
 * descriptor and init path as a plugin file, on the installed headers alone; only its entry is
 * MEMRES_PLUGIN_DEFINE_EMBEDDED (a descriptor the loader finds in libmemres's `memres_embedded`
 * section) rather than an exported symbol. */
#include <memres/memres-plugin.h>

#include <stdlib.h>

#define HOST_DEFAULT_ALIGNMENT 256

/* The statistics are the core's count of the buffers' bytes (reserved = used): every byte in
 * use is a byte held from the system, and nothing more. */
typedef struct
{
  gsize alignment;
} HostResource;

static gboolean
host_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  HostResource *self = memres_resource_get_private (mr);
  guint64 alignment = memres_options_get_size (options, "alignment");

  if (alignment == 0 || alignment > ((guint64) 1 << 30))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "option \"alignment\" of kind \"host\": %" G_GUINT64_FORMAT
                   " is not between 1 byte and 1 GiB",
                   alignment);
      return FALSE;
    }
  if ((alignment & (alignment - 1)) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "option \"alignment\" of kind \"host\": %" G_GUINT64_FORMAT
                   " is not a power of two",
                   alignment);
      return FALSE;
    }
  /* posix_memalign() wants a multiple of sizeof (void *). */
  self->alignment = MAX ((gsize) alignment, sizeof (gpointer));
  return TRUE;
}

static void
host_finalize (MemresResource *mr)
{
}

static gboolean
host_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
               GError **error)
{
  HostResource *self = memres_resource_get_private (mr);
  gpointer mem = NULL;

  if (size > G_MAXSIZE - (self->alignment - 1) || posix_memalign (&mem, self->alignment, size) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "cannot allocate %" G_GSIZE_FORMAT " bytes of host memory", size);
      return FALSE;
    }
  alloc->address = (guint64) (guintptr) mem;
  alloc->size = size;
  alloc->plugin_data = NULL;
  return TRUE;
}

static gboolean
host_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  free ((gpointer) (guintptr) alloc->address);
  return TRUE;
}

static void
host_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
}

static const MemresResourceOps host_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = host_init,
  .finalize = host_finalize,
  .allocate = host_allocate,
  .deallocate = host_deallocate,
  .query = host_query,
};

static const MemresOptionSpec host_options[] = {
  { "alignment", MEMRES_OPTION_SIZE, G_STRINGIFY (HOST_DEFAULT_ALIGNMENT),
    "alignment of every buffer in bytes, a power of two", NULL, 0, 0 },
};

static const MemresKindInfo host_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "host",
  .description = "Pageable host memory (posix_memalign); needs no GPU",
  .options = host_options,
  .n_options = G_N_ELEMENTS (host_options),
  .ops = &host_ops,
  .instance_size = sizeof (HostResource),
};

static gboolean
host_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &host_kind, error);
}

MEMRES_PLUGIN_DEFINE_EMBEDDED (host, "Pageable host memory, embedded in libmemres",
                               host_plugin_init);

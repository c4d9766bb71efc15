/* testkind.h: "tk", a kind registered from inside the test program (no plugin file), with one
 * option of every type, counting its slot calls and recording the options its init saw. */
#pragma once

#include <memres/memres-plugin.h>
#include <stdlib.h>
#include <string.h>

typedef struct
{
  gint inits, finalizes, allocates, deallocates; /* atomic */
  gboolean fail_init;
  CUresult dealloc_fail_code; /* non-zero: deallocate frees nothing and fails with this code */
  /* what the last init saw */
  gboolean flag;
  gint64 count;
  guint64 limit;
  gint64 mode;
  char *mode_text;
  char *label; /* NULL when unset */
  gboolean label_set;
  gint64 peers[8];
  gsize n_peers;
  char *peers_text;
} TkState;

static TkState tk;

static const char *const tk_modes[] = { "fast", "safe", NULL };

static const MemresOptionSpec tk_options[] = {
  { "flag", MEMRES_OPTION_BOOL, "false", "a boolean", NULL, 0, 0 },
  { "count", MEMRES_OPTION_INT, "4", "an integer from -10 to 100", NULL, -10, 100 },
  { "limit", MEMRES_OPTION_SIZE, "1MiB", "a size", NULL, 0, 0 },
  { "mode", MEMRES_OPTION_ENUM, "safe", "fast or safe", tk_modes, 0, 0 },
  { "label", MEMRES_OPTION_STRING, NULL, "a string, unset by default", NULL, 0, 0 },
  { "peers", MEMRES_OPTION_INT_LIST, "", "devices 0 to 7 joined by +", NULL, 0, 7 },
};

static gboolean
tk_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  const gint64 *peers;

  if (tk.fail_init)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "tk init fails on request");
      return FALSE;
    }
  g_atomic_int_inc (&tk.inits);
  tk.flag = memres_options_get_bool (options, "flag");
  tk.count = memres_options_get_int (options, "count");
  tk.limit = memres_options_get_size (options, "limit");
  tk.mode = memres_options_get_int (options, "mode");
  g_free (tk.mode_text);
  tk.mode_text = g_strdup (memres_options_get_string (options, "mode"));
  tk.label_set = memres_options_is_set (options, "label");
  g_free (tk.label);
  tk.label = g_strdup (memres_options_get_string (options, "label"));
  peers = memres_options_get_int_list (options, "peers", &tk.n_peers);
  g_assert_cmpuint (tk.n_peers, <=, G_N_ELEMENTS (tk.peers));
  if (tk.n_peers > 0)
    memcpy (tk.peers, peers, tk.n_peers * sizeof (gint64));
  g_free (tk.peers_text);
  tk.peers_text = g_strdup (memres_options_get_string (options, "peers"));
  /* private data is zeroed and 16-byte aligned */
  g_assert_cmpuint ((guintptr) memres_resource_get_private (mr) % 16, ==, 0);
  g_assert_cmpint (((const guint8 *) memres_resource_get_private (mr))[0], ==, 0);
  return TRUE;
}

static void
tk_finalize (MemresResource *mr)
{
  g_atomic_int_inc (&tk.finalizes);
}

static gboolean
tk_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
             GError **error)
{
  gpointer p = malloc (size);

  g_assert_cmpuint (size, >, 0);
  if (p == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY, "tk: out of memory");
      return FALSE;
    }
  g_atomic_int_inc (&tk.allocates);
  alloc->address = (guint64) (guintptr) p;
  alloc->size = size;
  return TRUE;
}

static gboolean
tk_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  g_atomic_int_inc (&tk.deallocates);
  if (tk.dealloc_fail_code != 0)
    return memres_cuda_set_error (error, tk.dealloc_fail_code, "cuMemFreeAsync");
  free ((gpointer) (guintptr) alloc->address);
  return TRUE;
}

static void
tk_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
}

static const MemresResourceOps tk_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = tk_init,
  .finalize = tk_finalize,
  .allocate = tk_allocate,
  .deallocate = tk_deallocate,
  .query = tk_query,
};

static const MemresKindInfo tk_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "tk",
  .description = "test kind with one option of every type",
  .options = tk_options,
  .n_options = G_N_ELEMENTS (tk_options),
  .ops = &tk_ops,
  .instance_size = 40,
};

/* Registers "tk" once per process. */
G_GNUC_UNUSED static void
tk_register (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      g_autoptr (GError) error = NULL;
      g_assert_true (memres_registry_register_kind (&tk_info, &error));
      g_assert_no_error (error);
      g_once_init_leave (&once, 1);
    }
}

/* Resets the counters and requests (not the registration). */
G_GNUC_UNUSED static void
tk_reset (void)
{
  g_clear_pointer (&tk.mode_text, g_free);
  g_clear_pointer (&tk.label, g_free);
  g_clear_pointer (&tk.peers_text, g_free);
  memset (&tk, 0, sizeof tk);
}

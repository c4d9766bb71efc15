/* test-stack.c: stacks of resources (`a>b>c`) and the adaptor ABI, through in-test kinds:
 * "pt", a pass-through adaptor (MEMRES_KIND_PASSES_ALLOCATIONS, no optional slot, no query)
 * counting its calls; "np", an adaptor that does not pass allocations through; "liar", a base
 * kind whose allocate lies. Over the embedded host kind: no driver needed. */
#include "testutil.h"

#include <fcntl.h>
#include <string.h>

typedef struct
{
  MemresResource *upstream_at_init;
  char *label;
  gint allocs; /* atomic */
  gint frees;  /* atomic */
} PtResource;

static gint pt_finalized;      /* atomic */
static gint pt_upstream_alive; /* what finalize saw: the upstream still valid */

static gboolean
pt_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  PtResource *self = memres_resource_get_private (mr);

  if (memres_options_get_bool (options, "fail"))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "pt fails on purpose");
      return FALSE;
    }
  self->upstream_at_init = memres_resource_get_upstream (mr);
  self->label = g_strdup (memres_options_get_string (options, "label"));
  return TRUE;
}

static void
pt_finalize (MemresResource *mr)
{
  PtResource *self = memres_resource_get_private (mr);
  MemresResource *up = memres_resource_get_upstream (mr);

  /* the upstream is released after the adaptor's finalize */
  if (up != NULL && memres_resource_get_kind_name (up) != NULL)
    g_atomic_int_inc (&pt_upstream_alive);
  g_free (self->label);
  g_atomic_int_inc (&pt_finalized);
}

static gboolean
pt_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
             GError **error)
{
  PtResource *self = memres_resource_get_private (mr);

  if (!memres_upstream_allocate (mr, size, stream, alloc, error))
    return FALSE;
  g_atomic_int_inc (&self->allocs);
  return TRUE;
}

static gboolean
pt_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  PtResource *self = memres_resource_get_private (mr);

  g_atomic_int_inc (&self->frees);
  return memres_upstream_deallocate (mr, alloc, stream, error);
}

static const MemresResourceOps pt_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = pt_init,
  .finalize = pt_finalize,
  .allocate = pt_allocate,
  .deallocate = pt_deallocate,
};

static const MemresOptionSpec pt_options[] = {
  { "label", MEMRES_OPTION_STRING, NULL, "any text", NULL, 0, 0 },
  { "fail", MEMRES_OPTION_BOOL, "false", "init fails", NULL, 0, 0 },
};

/* np: an adaptor that does not pass allocations through, with a query that changes flags */
static void
np_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->flags |= MEMRES_MEMORY_STREAM_ORDERED;
}

static const MemresResourceOps np_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = pt_init,
  .finalize = pt_finalize,
  .allocate = pt_allocate,
  .deallocate = pt_deallocate,
  .query = np_query,
};

/* liar: a base kind whose allocate lies as its "mode" says */
typedef enum
{
  LIAR_ZERO_ADDRESS,
  LIAR_SHORT,
  LIAR_NO_ERROR,
} LiarMode;

static const char *const liar_modes[] = { "zero_address", "short", "no_error", NULL };

typedef struct
{
  LiarMode mode;
  gint freed; /* atomic */
} LiarResource;

static gboolean
liar_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  LiarResource *self = memres_resource_get_private (mr);

  self->mode = (LiarMode) memres_options_get_int (options, "mode");
  return TRUE;
}

static void
liar_finalize (MemresResource *mr)
{
}

static guint8 liar_memory[64];

static gboolean
liar_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
               GError **error)
{
  LiarResource *self = memres_resource_get_private (mr);

  switch (self->mode)
    {
    case LIAR_ZERO_ADDRESS:
      alloc->size = size;
      return TRUE;
    case LIAR_SHORT:
      alloc->address = (guint64) (guintptr) liar_memory;
      alloc->size = size - 1;
      return TRUE;
    case LIAR_NO_ERROR:
    default:
      return FALSE;
    }
}

static gboolean
liar_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  LiarResource *self = memres_resource_get_private (mr);

  g_atomic_int_inc (&self->freed);
  return TRUE;
}

static void
liar_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
}

static const MemresResourceOps liar_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = liar_init,
  .finalize = liar_finalize,
  .allocate = liar_allocate,
  .deallocate = liar_deallocate,
  .query = liar_query,
};

static const MemresOptionSpec liar_options[] = {
  { "mode", MEMRES_OPTION_ENUM, "zero_address", "how it lies", liar_modes, 0, 0 },
};

static void
register_kinds (void)
{
  const MemresKindInfo pt = {
    .struct_size = sizeof pt,
    .name = "pt",
    .description = "pass-through adaptor",
    .options = pt_options,
    .n_options = G_N_ELEMENTS (pt_options),
    .ops = &pt_ops,
    .instance_size = sizeof (PtResource),
    .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
  };
  const MemresKindInfo np = {
    .struct_size = sizeof np,
    .name = "np",
    .description = "adaptor that keeps allocations to itself",
    .options = pt_options,
    .n_options = G_N_ELEMENTS (pt_options),
    .ops = &np_ops,
    .instance_size = sizeof (PtResource),
    .flags = MEMRES_KIND_ADAPTOR,
  };
  const MemresKindInfo liar = {
    .struct_size = sizeof liar,
    .name = "liar",
    .description = "base kind whose allocate lies",
    .options = liar_options,
    .n_options = G_N_ELEMENTS (liar_options),
    .ops = &liar_ops,
    .instance_size = sizeof (LiarResource),
  };
  GError *error = NULL;

  if (!memres_registry_register_kind (&pt, &error) || !memres_registry_register_kind (&np, &error)
      || !memres_registry_register_kind (&liar, &error))
    g_error ("%s", error->message);
}

static void
assert_invalid (const char *spec, const char *needle)
{
  mt_new_fails (spec, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, needle);
}

static void
test_bad_stacks (void)
{
  g_autofree char *seventeen = mt_repeat ("", "pt>", 16, "host");
  g_autofree char *sixteen = mt_repeat ("", "pt>", 15, "host");
  g_autoptr (MemresResource) mr = NULL;

  /* an adaptor last, alone or under another */
  assert_invalid ("pt", "kind \"pt\" is an adaptor: it needs a resource below it");
  assert_invalid ("pt>np", "layer 2 of 2 (kind \"np\"): kind \"np\" is an adaptor: it cannot be "
                           "the last layer");
  /* a base kind in the middle, or first */
  assert_invalid ("pt>host>host", "layer 2 of 3 (kind \"host\"): kind \"host\" is a base kind");
  assert_invalid ("host>pt", "layer 1 of 2 (kind \"host\")");
  /* empty layers */
  assert_invalid (">host", "layer 1 of 2 is empty");
  assert_invalid ("pt>>host", "layer 2 of 3 is empty");
  assert_invalid ("pt>host>", "layer 3 of 3 is empty (a trailing '>'");
  assert_invalid (">", "layer 1 of 2 is empty");
  assert_invalid ("", "it names no kind");
  /* too many layers */
  assert_invalid (seventeen, "more than 16 layers");
  /* a lone backslash escapes nothing */
  assert_invalid ("pt:label=x\\", "ends with a lone '\\'");
  /* a layer's own errors name the layer */
  assert_invalid ("pt:label=a,nope=1>host", "layer 1 of 2 (kind \"pt\"): kind \"pt\" has no "
                                            "option \"nope\"");
  assert_invalid ("pt>host:alignment=3", "layer 2 of 2 (kind \"host\")");
  assert_invalid ("pt>Host", "layer 2 of 2 (\"Host\"): invalid kind name");
  mt_new_fails ("pt>nosuchkind", MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                "layer 2 of 2 (kind \"nosuchkind\")");
  /* an undefined name */
  g_setenv ("MEMRES_CONFIG", "", TRUE);
  g_setenv ("XDG_CONFIG_HOME", "/nonexistent/memres-test", TRUE);
  g_setenv ("XDG_CONFIG_DIRS", "/nonexistent/memres-test", TRUE);
  mt_new_fails ("pt>@nothing", MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND, "no resource named @nothing");

  /* nothing was created for any of those */
  g_assert_cmpint (g_atomic_int_get (&pt_finalized), ==, 0);

  mr = mt_new_ok (sixteen);
  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "pt");
}

static void
test_pass_through (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autofree char *text = NULL;
  MemresResource *up, *host;
  PtResource *top, *mid;
  MemresStats stats;
  GError *error = NULL;
  MemresBuffer *buf, *buf2;
  guint8 data[100];
  gint finalized = g_atomic_int_get (&pt_finalized);

  mr = mt_new_ok ("pt:label=top>pt>host:alignment=64");
  up = memres_resource_get_upstream (mr);
  g_assert_nonnull (up);
  host = memres_resource_get_upstream (up);
  g_assert_nonnull (host);
  g_assert_null (memres_resource_get_upstream (host));
  g_assert_cmpstr (memres_resource_get_kind_name (up), ==, "pt");
  g_assert_cmpstr (memres_resource_get_kind_name (host), ==, "host");
  top = memres_resource_get_private (mr);
  mid = memres_resource_get_private (up);
  /* each adaptor saw its upstream in init */
  g_assert_true (top->upstream_at_init == up);
  g_assert_true (mid->upstream_at_init == host);
  g_assert_cmpstr (top->label, ==, "top");
  /* device and flags are the upstream's */
  g_assert_cmpint (memres_resource_get_device (mr), ==, -1);
  g_assert_cmpint (memres_resource_get_flags (mr), ==, MEMRES_MEMORY_HOST_ACCESSIBLE);
  g_assert_true (memres_resource_is_host_accessible (mr));

  text = memres_resource_to_string (mr);
  g_assert_cmpstr (text, ==, "pt:label=top,fail=false>pt:fail=false>host:alignment=64");

  buf = mt_alloc_ok (mr, 100, NULL);
  buf2 = mt_alloc_ok (mr, 1000, NULL);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 100);
  g_assert_cmpuint (memres_buffer_get_address (buf) % 64, ==, 0);
  g_assert_true (memres_buffer_get_resource (buf) == mr);
  memset (memres_buffer_get_pointer (buf), 0x5a, 100);
  g_assert_true (memres_buffer_read (buf, 0, data, sizeof data, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (data[0], ==, 0x5a);
  g_assert_cmpint (data[99], ==, 0x5a);
  g_assert_cmpint (top->allocs, ==, 2);
  g_assert_cmpint (mid->allocs, ==, 2);

  /* stats pass through to host's, n_buffers is each layer's own */
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.used_current, ==, 1100);
  g_assert_cmpuint (stats.n_buffers, ==, 2);
  g_assert_true (memres_resource_get_stats (host, &stats, &error));
  g_assert_cmpuint (stats.used_current, ==, 1100);
  g_assert_cmpuint (stats.n_buffers, ==, 0);
  mt_close_ok (buf, NULL); /* drops the reference too */
  g_assert_true (memres_resource_reset_stats (mr, &error));
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_cmpuint (stats.used_high, ==, 1000);
  g_assert_cmpint (top->frees, ==, 1);
  g_assert_cmpint (mid->frees, ==, 1);

  /* host has no trim, no peer access, no IPC, no resize: neither has the stack */
  g_assert_false (memres_resource_trim (mr, 0, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_null (memres_resource_export_handle (mr, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_resize (buf2, 10, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);

  /* the stack lives while a buffer does; finalized top down, each upstream after its adaptor */
  g_clear_pointer (&mr, memres_resource_unref);
  g_assert_cmpint (g_atomic_int_get (&pt_finalized), ==, finalized);
  mt_close_ok (buf2, NULL); /* drops the reference too */
  g_assert_cmpint (g_atomic_int_get (&pt_finalized), ==, finalized + 2);
  g_assert_cmpint (g_atomic_int_get (&pt_upstream_alive), >=, 2);
}

/* A value holds any text when its `\`, `,` and `>` are escaped; to_string writes it back so. */
static void
test_escapes (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("pt:label=/tmp/a\\,b\\>c\\\\d=e:f>host");
  g_autoptr (MemresResource) again = NULL;
  g_autofree char *text = memres_resource_to_string (mr);
  g_autofree char *text2 = NULL;
  PtResource *self = memres_resource_get_private (mr);

  g_assert_cmpstr (self->label, ==, "/tmp/a,b>c\\d=e:f");
  g_assert_cmpstr (text, ==, "pt:label=/tmp/a\\,b\\>c\\\\d=e:f,fail=false>host:alignment=256");
  again = mt_new_ok (text);
  text2 = memres_resource_to_string (again);
  g_assert_cmpstr (text2, ==, text);
  self = memres_resource_get_private (again);
  g_assert_cmpstr (self->label, ==, "/tmp/a,b>c\\d=e:f");
}

/* A layer whose init fails releases what was created below it; the error names the layer. */
static void
test_init_fails (void)
{
  gint finalized = g_atomic_int_get (&pt_finalized);

  mt_new_fails ("pt>pt:fail=true>pt>host", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "layer 2 of 4 (kind \"pt\"): pt fails on purpose");
  /* the third layer was created, then released */
  g_assert_cmpint (g_atomic_int_get (&pt_finalized), ==, finalized + 1);
}

/* An adaptor without MEMRES_KIND_PASSES_ALLOCATIONS: no pass-through of per-buffer slots;
 * its query changes the flags it started from (the upstream's). */
static void
test_not_passing (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("np>host");
  g_autoptr (GError) error = NULL;
  MemresStats stats;

  g_assert_cmpint (memres_resource_get_flags (mr), ==,
                   MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED);
  /* statistics pass through whatever the flags */
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.n_buffers, ==, 0);
}

/* A handle (from another process, say) that names an adaptor kind: imports go to base kinds. */
static void
test_import_adaptor (void)
{
  static const guint8 id[MEMRES_IPC_ID_SIZE] = { 1 };
  g_autoptr (GError) error = NULL;
  MemresIpcHandle *handle
      = memres_ipc_handle_new ("pt", open ("/dev/null", O_RDONLY), id, id, &error);
  MemresResource *mr;

  g_assert_no_error (error);
  g_assert_nonnull (handle);
  mr = memres_resource_import_handle (handle, &error);
  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  memres_ipc_handle_free (handle);
}

/* memres_upstream_allocate() checks the upstream's record as the core checks its own calls;
 * through `stats`, which passes its upstream's records unchecked and counts them before that
 * check, the caller's check judges the liar's record, names the liar, releases the record there
 * and takes the counts back to 0, no peak kept: untagged, and tagged (the tag's counts too). */
static void
test_lying_upstream (void)
{
  static const char *const stacks[]
      = { "pt>liar", "stats>liar", "stats>stats>liar", "pt>stats>liar" };
  static const struct
  {
    const char *mode;
    const char *needle;
  } cases[] = {
    { "zero_address", "returned address 0" },
    { "short", "returned fewer bytes than asked for" },
    { "no_error", "allocate failed without saying why" },
  };

  for (gsize n = 0; n < 2 * G_N_ELEMENTS (stacks) * G_N_ELEMENTS (cases); n++)
    {
      gboolean tagged = n >= G_N_ELEMENTS (stacks) * G_N_ELEMENTS (cases);
      gsize k = n / G_N_ELEMENTS (cases) % G_N_ELEMENTS (stacks);
      gsize i = n % G_N_ELEMENTS (cases);
      g_autofree char *spec = g_strdup_printf ("%s:mode=%s", stacks[k], cases[i].mode);
      g_autoptr (MemresResource) mr = mt_new_ok (spec);
      g_autoptr (GError) error = NULL;
      MemresResource *bottom = mr;
      LiarResource *liar;
      MemresBuffer *buf;
      MemresStatsCounters counters;
      g_autofree char *log = NULL;
      g_autoptr (GVariant) core_counters = NULL;
      guint64 breaches = 0;
      guint criticals;

      while (memres_resource_get_upstream (bottom) != NULL)
        bottom = memres_resource_get_upstream (bottom);
      liar = memres_resource_get_private (bottom);
      if (tagged)
        g_assert_true (memres_tag_push ("lies", NULL));
      mt_log_capture_begin ();
      buf = memres_resource_allocate (mr, 16, NULL, &error);
      log = mt_log_capture_end (&criticals);
      if (tagged)
        g_assert_true (memres_tag_pop ("lies", NULL));
      /* a failure without an error breaks the contract: one critical naming the liar */
      g_assert_cmpuint (criticals, ==, i == 2 ? 1 : 0);
      if (i == 2)
        g_assert_true (g_str_has_prefix (log, "CRITICAL: kind \"liar\": allocate returned "
                                              "FALSE without setting an error"));
      g_assert_null (buf);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
      if (strstr (error->message, cases[i].needle) == NULL
          || !g_str_has_prefix (error->message, "kind \"liar\""))
        g_error ("%s: %s", spec, error->message);
      /* both lying records went back through the liar's deallocate once (a record of address
       * 0 may still own plugin_data); a failed allocate returned nothing to release */
      g_assert_cmpint (liar->freed, ==, i < 2 ? 1 : 0);
      g_clear_error (&error);
      core_counters = memres_resource_get_counters (mr, &error);
      g_assert_no_error (error);
      g_assert_true (g_variant_lookup (core_counters, "contract_breaches", "t", &breaches));
      g_assert_cmpuint (breaches, ==, i == 2 ? 1 : 0);
      if (strstr (spec, "stats") != NULL)
        {
          g_clear_error (&error);
          g_assert_true (memres_stats_get_counters (mr, &counters, &error));
          g_assert_no_error (error);
          g_assert_cmpuint (counters.count_total, ==, 0);
          g_assert_cmpuint (counters.count_current, ==, 0);
          g_assert_cmpuint (counters.bytes_current, ==, 0);
          g_assert_cmpuint (counters.bytes_peak, ==, 0);
        }
      if (tagged && strstr (spec, "stats") != NULL)
        {
          /* the counted layer: pt> counts nothing */
          MemresResource *counted
              = g_str_has_prefix (spec, "pt>") ? memres_resource_get_upstream (mr) : mr;
          MemresTagCounts c;

          g_assert_true (memres_resource_get_tag_counts (counted, "lies", &c, &error));
          g_assert_no_error (error);
          g_assert_cmpuint (c.count_total, ==, 0);
          g_assert_cmpuint (c.bytes_total, ==, 0);
          g_assert_cmpuint (c.count_current, ==, 0);
          g_assert_cmpuint (c.bytes_current, ==, 0);
          g_assert_cmpuint (c.bytes_peak, ==, 0);
          g_assert_cmpuint (c.count_peak, ==, 0);
        }
    }
}

static gboolean noop_init (MemresResource *mr, const MemresOptions *options, GError **error);

/* Registers adaptor kind @name with @ops and a PtResource of private data (pt_allocate and
 * pt_deallocate count in it). */
static void
register_test_adaptor (const char *name, const MemresResourceOps *ops, MemresKindFlags flags)
{
  const MemresKindInfo info = {
    .struct_size = sizeof info,
    .name = name,
    .ops = ops,
    .instance_size = sizeof (PtResource),
    .flags = flags,
  };
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_registry_register_kind (&info, &error));
  g_assert_no_error (error);
}

/* An adaptor that reports more bytes than its upstream gave (G_MAXSIZE). */
static gboolean
grower_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                 GError **error)
{
  if (!memres_upstream_allocate (mr, size, stream, alloc, error))
    return FALSE;
  alloc->size = G_MAXSIZE;
  return TRUE;
}

/* The refused record of an over-reporting adaptor goes back down at the size asked for: the
 * cache below takes it as the class block it is (it took a size above max_block for a direct
 * allocation of its own, and freed the wrong record), and nothing stays reserved. */
static void
test_over_reporting_adaptor (void)
{
  static const MemresResourceOps grower_ops = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = noop_init,
    .finalize = pt_finalize,
    .allocate = grower_allocate,
    .deallocate = pt_deallocate,
  };
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresStats st;

  register_test_adaptor ("grower", &grower_ops,
                         MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS);
  mr = mt_new_ok ("grower>cache>host");
  g_assert_null (memres_resource_allocate (mr, 100, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "above G_MAXSSIZE bytes"));
  /* the cache's block is back in the cache: nothing in use, and trim returns all */
  g_assert_true (memres_resource_get_stats (memres_resource_get_upstream (mr), &st, NULL));
  g_assert_cmpuint (st.used_current, ==, 0);
  g_assert_true (memres_resource_trim (memres_resource_get_upstream (mr), 0, NULL));
  g_assert_true (memres_resource_get_stats (memres_resource_get_upstream (mr), &st, NULL));
  g_assert_cmpuint (st.reserved_current, ==, 0);
}

/* An adaptor that gives its record back twice. */
static gboolean
twice_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  g_assert_true (memres_upstream_deallocate (mr, alloc, stream, NULL));
  return memres_upstream_deallocate (mr, alloc, stream, error);
}

/* The second memres_upstream_deallocate() of one record is refused (the first zeroed it): no
 * double free below, over host (free()) or a cache (its block list). */
static void
test_double_upstream_free (void)
{
  static const MemresResourceOps twice_ops = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = noop_init,
    .finalize = pt_finalize,
    .allocate = pt_allocate,
    .deallocate = twice_deallocate,
  };
  const char *const specs[] = { "twice>host", "twice>cache>host" };

  register_test_adaptor ("twice", &twice_ops, MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS);
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[i]);
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf = mt_alloc_ok (mr, 100, NULL);
      MemresStats st;

      g_assert_false (memres_buffer_close (buf, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, "a record already freed"));
      /* released all the same: the buffer is closed, nothing in use below */
      g_assert_true (memres_buffer_is_closed (buf));
      memres_buffer_unref (buf);
      g_assert_true (memres_resource_get_stats (memres_resource_get_upstream (mr), &st, NULL));
      g_assert_cmpuint (st.used_current, ==, 0);
    }
}

/* memres_upstream_allocate() on a base kind's instance, and bad sizes. */
static void
test_upstream_calls (void)
{
  g_autoptr (MemresResource) host = mt_new_ok ("host");
  g_autoptr (MemresResource) mr = mt_new_ok ("pt>host");
  MemresAllocation alloc = { 0 };
  GError *error = NULL;

  g_assert_false (memres_upstream_allocate (host, 16, NULL, &alloc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_upstream_deallocate (host, &alloc, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_upstream_allocate (mr, 0, NULL, &alloc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_upstream_allocate (mr, G_MAXSIZE, NULL, &alloc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_true (memres_upstream_allocate (mr, 48, NULL, &alloc, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (alloc.size, ==, 48);
  g_assert_cmpuint (alloc.address, !=, 0);
  g_assert_true (memres_upstream_deallocate (mr, &alloc, NULL, &error));
  g_assert_no_error (error);
}

static gboolean
noop_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

/* Registration checks the flags. */
static void
test_register_flags (void)
{
  static const MemresResourceOps ops_no_query = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = noop_init,
    .finalize = pt_finalize,
    .allocate = pt_allocate,
    .deallocate = pt_deallocate,
  };
  static const struct
  {
    const char *name;
    MemresKindFlags flags;
  } bad[] = {
    { "bad_passes", MEMRES_KIND_PASSES_ALLOCATIONS },
    { "bad_unknown", MEMRES_KIND_ADAPTOR | (1 << 7) },
    { "bad_noquery", 0 }, /* a base kind needs query */
    /* counting its own usage needs a get_stats slot to report it */
    { "bad_own_usage", MEMRES_KIND_ADAPTOR | MEMRES_KIND_OWN_USAGE },
  };
  g_autoptr (MemresKind) kind = NULL;
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      MemresKindInfo info = {
        .struct_size = sizeof info,
        .name = bad[i].name,
        .ops = &ops_no_query,
        .flags = bad[i].flags,
      };
      g_autoptr (GError) error = NULL;

      g_assert_false (memres_registry_register_kind (&info, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    }
  kind = memres_registry_lookup ("pt", NULL);
  g_assert_cmpint (memres_kind_get_flags (kind), ==,
                   MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS);
  g_clear_pointer (&kind, memres_kind_unref);
  /* host keeps no count of its own: the core's (of buffers and of upstream allocations) */
  kind = memres_registry_lookup ("host", NULL);
  g_assert_cmpint (memres_kind_get_flags (kind), ==, 0);
}

/* A get_stats slot that knows only a reserved figure: the used bytes are the core's count. */
static gboolean
usage_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  stats->reserved_current = 7;
  return TRUE;
}

/* The core counts the used bytes of a kind with get_stats unless it says it counts its own
 * (MEMRES_KIND_OWN_USAGE); then its slot's figures are all there is. */
static void
test_own_usage (void)
{
  static const MemresResourceOps usage_ops = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = noop_init,
    .finalize = pt_finalize,
    .allocate = pt_allocate,
    .deallocate = pt_deallocate,
    .get_stats = usage_get_stats,
  };
  static const struct
  {
    const char *name;
    MemresKindFlags flags;
    guint64 used; /* what get_stats reports with one 1000-byte buffer open */
  } kinds[] = {
    { "usage_core", MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS, 1000 },
    { "usage_own", MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS | MEMRES_KIND_OWN_USAGE,
      0 },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (kinds); i++)
    {
      g_autofree char *spec = g_strdup_printf ("%s>host", kinds[i].name);
      g_autoptr (MemresResource) mr = NULL;
      MemresBuffer *buf;
      MemresStats st;

      register_test_adaptor (kinds[i].name, &usage_ops, kinds[i].flags);
      mr = mt_new_ok (spec);
      buf = mt_alloc_ok (mr, 1000, NULL);
      g_assert_true (memres_resource_get_stats (mr, &st, NULL));
      g_assert_cmpuint (st.reserved_current, ==, 7);
      g_assert_cmpuint (st.used_current, ==, kinds[i].used);
      g_assert_cmpuint (st.used_high, ==, kinds[i].used);
      g_assert_cmpuint (st.n_buffers, ==, 1); /* the buffers are counted either way */
      g_assert_true (memres_buffer_close (buf, NULL, NULL));
      memres_buffer_unref (buf);
      g_assert_true (memres_resource_get_stats (mr, &st, NULL));
      g_assert_cmpuint (st.used_current, ==, 0);
      g_assert_cmpuint (st.used_high, ==, kinds[i].used);
      g_assert_cmpuint (st.n_buffers, ==, 0);
    }
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  mt_log_capture_init ();
  register_kinds ();
  g_test_add_func ("/stack/bad-stacks", test_bad_stacks);
  g_test_add_func ("/stack/pass-through", test_pass_through);
  g_test_add_func ("/stack/escapes", test_escapes);
  g_test_add_func ("/stack/init-fails", test_init_fails);
  g_test_add_func ("/stack/not-passing", test_not_passing);
  g_test_add_func ("/stack/import-adaptor", test_import_adaptor);
  g_test_add_func ("/stack/lying-upstream", test_lying_upstream);
  g_test_add_func ("/stack/upstream-calls", test_upstream_calls);
  g_test_add_func ("/stack/register-flags", test_register_flags);
  g_test_add_func ("/stack/own-usage", test_own_usage);
  g_test_add_func ("/stack/over-reporting-adaptor", test_over_reporting_adaptor);
  g_test_add_func ("/stack/double-upstream-free", test_double_upstream_free);
  return g_test_run ();
}

/* memres - CUDA memory resources
 * test-snapshot.c: memres_resource_snapshot() (core/snapshot.c) without a driver: a kind of
 * this program with the snapshot slot (blocks in every state, holes, imports, figures, what it
 * cannot see) and the figures the core derives from them; the call stacks a slot adds
 * (memres_snapshot_add_block_stack(): libmemres's frames cut, a stack kept to its first 64
 * frames, a stack without a used block dropped, frames and stacks stored once); a kind without the
 * slot; a kind built against ops version 3, whose table the core reads no snapshot slot from; an
 * adaptor over them. The JSON is checked through the strings it must hold (tests/check-snapshot.py
 * validates the whole document against its schema). */
#define _GNU_SOURCE /* dladdr */
#include "testutil.h"
#include "plugins/common.h"

#include <dlfcn.h>
#include <string.h>

static void
assert_contains (const char *text, const char *needle)
{
  if (strstr (text, needle) == NULL)
    g_error ("\"%s\" not found in: %s", needle, text);
}

/* A fixed picture: 4 KiB used, free blocks of 1 KiB and 3 KiB, 2 KiB pending on stream 0x1234
 * (added out of order: the core sorts), a hole, an import, two figures, something unseen. */
static void
sk_snapshot (MemresResource *mr, MemresSnapshotLayer *layer)
{
  memres_snapshot_add_block (layer, 0x20000, 3072, MEMRES_STREAM_LEGACY, MEMRES_BLOCK_FREE);
  memres_snapshot_add_block (layer, 0x10000, 4096, NULL, MEMRES_BLOCK_USED);
  memres_snapshot_add_block (layer, 0x11000, 1024, CU_STREAM_PER_THREAD, MEMRES_BLOCK_FREE);
  memres_snapshot_add_block (layer, 0x30000, 2048, (MemresStream) 0x1234, MEMRES_BLOCK_PENDING);
  memres_snapshot_add_hole (layer, 0x40000, 65536);
  memres_snapshot_add_import (layer, 0x90000, 8192);
  memres_snapshot_add_figure (layer, "granularity", 4096);
  memres_snapshot_add_figure (layer, "odd \"name\"", 7);
  memres_snapshot_set_unseen (layer, "first words");
  memres_snapshot_set_unseen (layer, "what the test kind hides");
}

/* The kind's own counters: a number, a boolean, a string, and an array the snapshot leaves out. */
static gboolean
sk_get_counters (MemresResource *mr, GVariantDict *counters, GError **error)
{
  guint64 pairs[2] = { 1, 2 };

  g_variant_dict_insert (counters, "granules_remapped", "t", (guint64) 17);
  g_variant_dict_insert (counters, "degraded", "b", TRUE);
  g_variant_dict_insert (counters, "write_error", "s", "disk \"full\"");
  g_variant_dict_insert_value (counters, "classes",
                               g_variant_new_fixed_array (G_VARIANT_TYPE_UINT64, pairs,
                                                          G_N_ELEMENTS (pairs), sizeof (guint64)));
  return TRUE;
}

/* The call stacks a slot adds: frames of this program (the address of a function of it) and of
 * libmemres (the address of memres_resource_snapshot). */
G_GNUC_NO_INLINE void stack_test_site (void);
void
stack_test_site (void)
{
}

static void
sk_stack_snapshot (MemresResource *mr, MemresSnapshotLayer *layer)
{
  gpointer mine = (gpointer) stack_test_site, memres = (gpointer) memres_resource_snapshot;
  gpointer deep[70];
  gpointer cut[3] = { memres, memres, mine };   /* libmemres's frames, then the caller's */
  gpointer inner[2] = { mine, memres };         /* nothing outside libmemres: no stack */
  gpointer again[3] = { memres, memres, mine }; /* the same stack as @cut */

  for (guint i = 0; i < G_N_ELEMENTS (deep); i++)
    deep[i] = mine;
  memres_snapshot_add_block (layer, 0x10000, 4096, NULL, MEMRES_BLOCK_USED);
  memres_snapshot_add_block_stack (layer, 0x10000, deep, G_N_ELEMENTS (deep));
  memres_snapshot_add_block_stack (layer, 0x20000, cut, G_N_ELEMENTS (cut)); /* block after */
  memres_snapshot_add_block (layer, 0x20000, 4096, NULL, MEMRES_BLOCK_USED);
  memres_snapshot_add_block (layer, 0x30000, 4096, NULL, MEMRES_BLOCK_USED);
  memres_snapshot_add_block_stack (layer, 0x30000, inner, G_N_ELEMENTS (inner));
  memres_snapshot_add_block (layer, 0x40000, 4096, NULL, MEMRES_BLOCK_USED);
  memres_snapshot_add_block_stack (layer, 0x40000, again, G_N_ELEMENTS (again));
  memres_snapshot_add_block (layer, 0x50000, 4096, NULL, MEMRES_BLOCK_FREE);
  memres_snapshot_add_block_stack (layer, 0x50000, cut, G_N_ELEMENTS (cut)); /* a free block */
  memres_snapshot_add_block_stack (layer, 0x60000, cut, G_N_ELEMENTS (cut)); /* no block */
  memres_snapshot_add_block (layer, 0x70000, 4096, NULL, MEMRES_BLOCK_USED);
  memres_snapshot_add_block_stack (layer, 0x70000, cut, 0); /* no frame */
}

static void
register_kinds (void)
{
  static gsize once;
  static MemresResourceOps with_slot = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = tp_init,
    .finalize = tp_finalize,
    .allocate = tp_allocate,
    .deallocate = tp_deallocate,
    .query = tp_query,
    .get_counters = sk_get_counters,
    .snapshot = sk_snapshot,
  };
  static MemresResourceOps without_slot = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = tp_init,
    .finalize = tp_finalize,
    .allocate = tp_allocate,
    .deallocate = tp_deallocate,
    .query = tp_query,
  };
  /* built against ops version 3: the slot past its version is never read */
  static MemresResourceOps version3 = {
    .version = 3,
    .init = tp_init,
    .finalize = tp_finalize,
    .allocate = tp_allocate,
    .deallocate = tp_deallocate,
    .query = tp_query,
    .snapshot = sk_snapshot,
  };
  static MemresResourceOps with_stacks = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = tp_init,
    .finalize = tp_finalize,
    .allocate = tp_allocate,
    .deallocate = tp_deallocate,
    .query = tp_query,
    .snapshot = sk_stack_snapshot,
  };
  static const MemresKindInfo kinds[] = {
    { sizeof (MemresKindInfo), "snapstacks", "stacks", NULL, 0, &with_stacks, NULL, 0, 0 },
    { sizeof (MemresKindInfo), "snapkind", "described", NULL, 0, &with_slot, NULL, 0, 0 },
    { sizeof (MemresKindInfo), "snapnone", "not described", NULL, 0, &without_slot, NULL, 0, 0 },
    { sizeof (MemresKindInfo), "snapold", "ops version 3", NULL, 0, &version3, NULL, 0, 0 },
  };

  if (g_once_init_enter (&once))
    {
      for (guint i = 0; i < G_N_ELEMENTS (kinds); i++)
        {
          GError *error = NULL;

          g_assert_true (memres_registry_register_kind (&kinds[i], &error));
          g_assert_no_error (error);
        }
      g_once_init_leave (&once, 1);
    }
}

static char *
snapshot_ok (MemresResource *mr)
{
  GError *error = NULL;
  char *doc = memres_resource_snapshot (mr, &error);

  g_assert_no_error (error);
  g_assert_nonnull (doc);
  g_assert_true (g_str_has_suffix (doc, "}\n"));
  g_test_message ("%s", doc);
  return doc;
}

static void
test_described (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autofree char *doc = NULL;

  register_kinds ();
  mr = mt_new_ok ("snapkind");
  doc = snapshot_ok (mr);
  assert_contains (doc, "\"memres_snapshot\": 1");
  assert_contains (doc, "\"spec\": \"snapkind\"");
  assert_contains (doc, "\"driver\": null");
  assert_contains (doc, "\"kind\": \"snapkind\"");
  assert_contains (doc, "\"described\": true");
  assert_contains (doc, "\"complete\": false");
  assert_contains (doc, "\"unseen\": \"what the test kind hides\"");
  /* free bytes 1 KiB + 3 KiB + 2 KiB pending; the largest 3 KiB; 1 - 3072 / 6144 */
  assert_contains (doc, "\"cached\": 6144");
  assert_contains (doc, "\"largest_free\": 3072");
  assert_contains (doc, "\"fragmentation\": 0.5");
  /* sorted by address, each with its stream and state */
  assert_contains (doc, "\"address\": \"0x10000\",\n"
                        "          \"size\": 4096,\n"
                        "          \"stream\": \"default\",\n"
                        "          \"tag\": \"\",\n"
                        "          \"state\": \"used\"");
  assert_contains (doc, "\"address\": \"0x11000\",\n"
                        "          \"size\": 1024,\n"
                        "          \"stream\": \"per-thread\"");
  assert_contains (doc, "\"stream\": \"legacy\",\n          \"tag\": \"\",\n"
                        "          \"state\": \"free\"");
  assert_contains (doc, "\"stream\": \"0x1234\",\n          \"tag\": \"\",\n"
                        "          \"state\": \"pending\"");
  g_assert_true (strstr (doc, "0x11000") < strstr (doc, "0x20000"));
  g_assert_true (strstr (doc, "0x20000") < strstr (doc, "0x30000"));
  assert_contains (doc, "\"holes\": [\n        {\n          \"address\": \"0x40000\",\n"
                        "          \"size\": 65536");
  assert_contains (doc, "\"imports\": [\n        {\n          \"address\": \"0x90000\",\n"
                        "          \"size\": 8192");
  assert_contains (doc, "\"granularity\": 4096");
  assert_contains (doc, "\"odd \\\"name\\\"\": 7");
  /* the kind's counters after its figures, the array left out, the core's own among them */
  assert_contains (doc, "\"counters\": {");
  assert_contains (doc, "\"granules_remapped\": 17");
  assert_contains (doc, "\"degraded\": true");
  assert_contains (doc, "\"write_error\": \"disk \\\"full\\\"\"");
  assert_contains (doc, "\"contract_breaches\": 0");
  g_assert_null (strstr (doc, "\"classes\""));
  g_assert_true (strstr (doc, "\"figures\"") < strstr (doc, "\"counters\""));
}

/* Without the slot (and with a table too old to have it): what the core knows, and that the
 * kind cannot say more. */
static void
test_not_described (void)
{
  const char *specs[] = { "snapnone", "snapold" };

  register_kinds ();
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[i]);
      g_autoptr (GError) error = NULL;
      g_autofree char *doc = NULL;
      MemresBuffer *buf = memres_resource_allocate (mr, 1000, NULL, &error);

      g_assert_no_error (error);
      doc = snapshot_ok (mr);
      assert_contains (doc, "\"described\": false");
      assert_contains (doc, "\"complete\": false");
      assert_contains (doc, "\"unseen\": \"the kind does not describe its memory\"");
      assert_contains (doc, "\"used\": 1000");
      assert_contains (doc, "\"largest_free\": null");
      assert_contains (doc, "\"blocks\": []");
      g_assert_null (strstr (doc, "0x10000"));
      g_assert_null (strstr (doc, "\"counters\"")); /* no counters slot: no member */
      mt_close_ok (buf, NULL);
    }
}

/* A stack: every layer, top first; the summary's reserved is the lowest layer's, used the
 * highest layer's own (stats counts its own). */
static void
test_stack (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *doc = NULL;
  MemresBuffer *buf;

  register_kinds ();
  mr = mt_new_ok ("stats>limit:max=1MiB>snapkind");
  buf = memres_resource_allocate (mr, 4096, NULL, &error);
  g_assert_no_error (error);
  doc = snapshot_ok (mr);
  assert_contains (doc, "\"spec\": \"stats>limit:max=1MiB>snapkind\"");
  g_assert_true (strstr (doc, "\"kind\": \"stats\"") < strstr (doc, "\"kind\": \"limit\""));
  g_assert_true (strstr (doc, "\"kind\": \"limit\"") < strstr (doc, "\"kind\": \"snapkind\""));
  assert_contains (doc, "\"limit\": 1048576");
  assert_contains (doc, "\"limit_used\": 4096");
  assert_contains (doc, "\"position\": 2");
  mt_close_ok (buf, NULL);
}

/* A layer of a stack alone: it and the layers below it. */
static void
test_layer (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autofree char *doc = NULL;

  register_kinds ();
  mr = mt_new_ok ("limit:max=1MiB>snapkind");
  doc = snapshot_ok (memres_resource_get_upstream (mr));
  assert_contains (doc, "\"spec\": \"snapkind\"");
  g_assert_null (strstr (doc, "\"kind\": \"limit\""));
  /* no out-of-memory yet: no snapshot of one */
  g_assert_null (memres_resource_get_oom_snapshot (mr));
}

static guint
count_of (const char *text, const char *needle)
{
  guint n = 0;

  for (const char *p = text; (p = strstr (p, needle)) != NULL; p += strlen (needle))
    n++;
  return n;
}

/* Block tags: track records each buffer's tag (memres_snapshot_add_tagged_block()), and the
 * cache's used block of the same buffer shows it too; a buffer without a tag has none. */
static void
test_block_tags (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("track>cache:chunk=64KiB>host");
  g_autoptr (GError) error = NULL;
  g_autofree char *doc = NULL;
  MemresBuffer *a, *b, *c;

  g_assert_true (memres_tag_push ("weights", &error));
  a = memres_resource_allocate (mr, 4096, NULL, &error);
  b = memres_resource_allocate (mr, 4096, NULL, &error);
  g_assert_true (memres_tag_pop ("weights", &error));
  c = memres_resource_allocate (mr, 4096, NULL, &error);
  g_assert_no_error (error);
  doc = snapshot_ok (mr);
  /* two buffers, each a used block of track and of the cache */
  g_assert_cmpuint (count_of (doc, "\"tag\": \"weights\",\n          \"state\": \"used\""), ==, 4);
  g_assert_cmpuint (count_of (doc, "\"tag\": \"\",\n          \"state\": \"used\""), ==, 2);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  mt_close_ok (c, NULL);
}

/* The text between "KEY": [ and its closing ], blanks removed. */
static char *
array_text (const char *doc, const char *key)
{
  g_autofree char *start = g_strdup_printf ("\"%s\": [", key);
  const char *p = strstr (doc, start);
  GString *out = g_string_new (NULL);
  int depth = 0;

  g_assert_nonnull (p);
  for (p += strlen (start) - 1; *p != '\0'; p++)
    {
      if (*p == '"')
        {
          const char *end = strchr (p + 1, '"');
          g_assert_nonnull (end);
          g_string_append_len (out, p, end - p + 1);
          p = end;
          continue;
        }
      if (!g_ascii_isspace (*p))
        g_string_append_c (out, *p);
      depth += *p == '[' ? 1 : *p == ']' ? -1 : 0;
      if (depth == 0)
        break;
    }
  return g_string_free (out, FALSE);
}

/* memres_snapshot_add_block_stack(): each stack on its used block, libmemres's frames up to its
 * outermost cut (a stack with nothing outside it dropped), kept to its 64 innermost frames; a
 * stack for a free block, for no block or of no frame dropped; each frame and each stack once. */
static void
test_block_stacks (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autofree char *doc = NULL, *frames = NULL, *stacks = NULL, *want = NULL;
  g_autoptr (GString) deep = g_string_new ("[64");
  Dl_info mine, memres;

  /* the premise: the two addresses are in two objects, libmemres the second */
  g_assert_true (dladdr ((gpointer) stack_test_site, &mine) != 0);
  g_assert_true (dladdr ((gpointer) memres_resource_snapshot, &memres) != 0);
  g_assert_nonnull (strstr (memres.dli_fname, "libmemres"));
  g_assert_true (mine.dli_fbase != memres.dli_fbase);

  register_kinds ();
  mr = mt_new_ok ("snapstacks");
  doc = snapshot_ok (mr);
  frames = array_text (doc, "frames");
  stacks = array_text (doc, "stacks");
  /* one frame: this program's function, as backtrace_symbols() writes it */
  g_assert_cmpuint (count_of (frames, "\""), ==, 2);
  g_assert_nonnull (strstr (frames, "[0x"));
  for (guint i = 0; i < 64; i++)
    g_string_append (deep, ",0");
  want = g_strdup_printf ("[%s],[1,0]]", deep->str);
  g_assert_cmpstr (stacks, ==, want);
  /* 0x10000 the deep stack, 0x20000 and 0x40000 the cut one; none on the others */
  g_assert_cmpuint (count_of (doc, "\"stack\": 0"), ==, 1);
  g_assert_cmpuint (count_of (doc, "\"stack\": 1"), ==, 2);
  g_assert_cmpuint (count_of (doc, "\"stack\": "), ==, 3);
  assert_contains (doc, "\"address\": \"0x10000\",\n          \"size\": 4096,\n          "
                        "\"stream\": \"default\",\n          \"tag\": \"\",\n          "
                        "\"state\": \"used\",\n          \"stack\": 0");
  assert_contains (doc, "\"address\": \"0x40000\",\n          \"size\": 4096,\n          "
                        "\"stream\": \"default\",\n          \"tag\": \"\",\n          "
                        "\"state\": \"used\",\n          \"stack\": 1");
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/snapshot/described", test_described);
  g_test_add_func ("/snapshot/not-described", test_not_described);
  g_test_add_func ("/snapshot/stack", test_stack);
  g_test_add_func ("/snapshot/layer", test_layer);
  g_test_add_func ("/snapshot/block-tags", test_block_tags);
  g_test_add_func ("/snapshot/block-stacks", test_block_stacks);
  return g_test_run ();
}

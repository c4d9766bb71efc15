/* memres - CUDA memory resources
 * test-snapshot.c: memres_resource_snapshot() (core/snapshot.c) without a driver: a kind of
 * this program with the snapshot slot (blocks in every state, holes, imports, figures, what it
 * cannot see) and the figures the core derives from them; a kind without the slot; a kind built
 * against ops version 3, whose table the core reads no snapshot slot from; an adaptor over them.
 * The JSON is checked through the strings it must hold (tests/check-snapshot.py validates the
 * whole document against its schema). */
#include "testutil.h"

#include <string.h>

static void
assert_contains (const char *text, const char *needle)
{
  if (strstr (text, needle) == NULL)
    g_error ("\"%s\" not found in: %s", needle, text);
}

static gboolean
sk_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

static void
sk_finalize (MemresResource *mr)
{
}

static gboolean
sk_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
             GError **error)
{
  alloc->address = (guint64) (guintptr) g_malloc (size);
  alloc->size = size;
  return TRUE;
}

static gboolean
sk_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  g_free ((gpointer) (guintptr) alloc->address);
  return TRUE;
}

static void
sk_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
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

static void
register_kinds (void)
{
  static gsize once;
  static MemresResourceOps with_slot = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = sk_init,
    .finalize = sk_finalize,
    .allocate = sk_allocate,
    .deallocate = sk_deallocate,
    .query = sk_query,
    .snapshot = sk_snapshot,
  };
  static MemresResourceOps without_slot = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = sk_init,
    .finalize = sk_finalize,
    .allocate = sk_allocate,
    .deallocate = sk_deallocate,
    .query = sk_query,
  };
  /* built against ops version 3: the slot past its version is never read */
  static MemresResourceOps version3 = {
    .version = 3,
    .init = sk_init,
    .finalize = sk_finalize,
    .allocate = sk_allocate,
    .deallocate = sk_deallocate,
    .query = sk_query,
    .snapshot = sk_snapshot,
  };
  static const MemresKindInfo kinds[] = {
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

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/snapshot/described", test_described);
  g_test_add_func ("/snapshot/not-described", test_not_described);
  g_test_add_func ("/snapshot/stack", test_stack);
  g_test_add_func ("/snapshot/layer", test_layer);
  g_test_add_func ("/snapshot/block-tags", test_block_tags);
  return g_test_run ();
}

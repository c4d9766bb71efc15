/* test-sleep.c: sleep and wake (memres-sleep.h, docs/sleep.md) on `vmm` and the stacks above it:
 * addresses kept, physical memory given back (the fake's live handles), contents restored by
 * the backup and file policies, the refusals of a sleeping buffer or tag with their codes,
 * closing a sleeping buffer, segment events, every driver call of a sleep and of a wake failing
 * in turn (all or nothing), and two threads sleeping different tags at once. Runs against the
 * fake driver (suite fake) and the real one (suite gpu; the fault sweeps skip there). */
#include <memres/memres.h>

#include "testutil.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((gsize) 1 << 20)

static gboolean
require_device (void)
{
  return mt_require_devices (1);
}

static MemresResource *
new_ok (const char *spec)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr = memres_resource_new (spec, &error);

  g_assert_no_error (error);
  g_assert_nonnull (mr);
  return mr;
}

static MemresBuffer *
alloc_tagged (MemresResource *mr, const char *tag, gsize size)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  if (tag != NULL)
    g_assert_true (memres_tag_push (tag, NULL));
  buf = memres_resource_allocate (mr, size, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (buf);
  g_assert_cmpuint (memres_buffer_get_size (buf), >=, size);
  if (tag != NULL)
    {
      g_assert_true (memres_tag_pop (tag, &error));
      g_assert_no_error (error);
    }
  return buf;
}

static int
live_handles (void)
{
  FakeCudaCounts c = { 0 };

  if (mt_driver_is_fake ())
    mt_fake_get_counts (&c);
  return c.physical_handles;
}

static void
sleep_ok (MemresResource *mr, const char *tag, MemresSleepPolicy *policy)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_sleep (mr, tag, policy, NULL, &error));
  g_assert_no_error (error);
}

static void
wake_ok (MemresResource *mr, const char *tag)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_wake (mr, tag, NULL, &error));
  g_assert_no_error (error);
}

static MemresSleepPolicy *
policy_new (MemresSleepMode mode)
{
  g_autoptr (GError) error = NULL;
  MemresSleepPolicy *p = memres_sleep_policy_new (mode, &error);

  g_assert_no_error (error);
  return p;
}

/* --- addresses, handles, contents ----------------------------------------------------------- */

static void
test_addresses_and_handles (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *kv[3], *w, *plain;
  guint64 addr[3];
  int before, asleep;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("vmm:chunk=2MiB");
  kv[0] = alloc_tagged (mr, "sl-kv", 2 * MiB);
  kv[1] = alloc_tagged (mr, "sl-kv", 6 * MiB);
  kv[2] = alloc_tagged (mr, "sl-kv", 1);
  w = alloc_tagged (mr, "sl-w", 4 * MiB);
  plain = alloc_tagged (mr, NULL, 2 * MiB);
  mt_fill_byte_ok (w, 0x5a, NULL);
  mt_fill_byte_ok (plain, 0xa5, NULL);
  for (int i = 0; i < 3; i++)
    addr[i] = memres_buffer_get_address (kv[i]);

  before = live_handles ();
  g_assert_false (memres_resource_is_asleep (mr, "sl-kv"));
  sleep_ok (mr, "sl-kv", NULL);
  asleep = live_handles ();
  if (mt_driver_is_fake ())
    g_assert_cmpint (asleep, ==, before - 5); /* 1 + 3 + 1 chunks of 2 MiB */
  g_assert_true (memres_resource_is_asleep (mr, "sl-kv"));
  g_assert_false (memres_resource_is_asleep (mr, "sl-w"));
  for (int i = 0; i < 3; i++)
    {
      g_assert_true (memres_buffer_is_asleep (kv[i]));
      g_assert_cmpuint (memres_buffer_get_address (kv[i]), ==, addr[i]);
    }
  g_assert_false (memres_buffer_is_asleep (w));
  g_assert_false (memres_buffer_is_asleep (plain));
  mt_assert_bytes (w, 0x5a, NULL);
  mt_assert_bytes (plain, 0xa5, NULL);

  wake_ok (mr, "sl-kv");
  g_assert_cmpint (live_handles (), ==, before);
  for (int i = 0; i < 3; i++)
    {
      g_assert_false (memres_buffer_is_asleep (kv[i]));
      g_assert_cmpuint (memres_buffer_get_address (kv[i]), ==, addr[i]);
      mt_fill_byte_ok (kv[i], (guint8) (i + 1), NULL);
      mt_assert_bytes (kv[i], (guint8) (i + 1), NULL);
    }
  /* asleep and awake again, twice */
  sleep_ok (mr, "sl-kv", NULL);
  wake_ok (mr, "sl-kv");
  for (int i = 0; i < 3; i++)
    mt_close_ok (kv[i], NULL);
  mt_close_ok (w, NULL);
  mt_close_ok (plain, NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* backup: the bytes read back after the wake are those written before the sleep */
static void
test_backup_round_trip (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresSleepPolicy) policy = NULL;
  MemresBuffer *a, *b;
  guint64 addr_a, addr_b;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("stats>vmm");
  a = alloc_tagged (mr, "sl-weights", 3 * MiB);
  b = alloc_tagged (mr, "sl-weights", 64 * 1024);
  addr_a = memres_buffer_get_address (a);
  addr_b = memres_buffer_get_address (b);
  mt_write_pattern (a, 0, 3 * MiB, 11, NULL);
  mt_write_pattern (b, 0, 64 * 1024, 12, NULL);
  policy = policy_new (MEMRES_SLEEP_BACKUP);
  g_assert_cmpint (memres_sleep_policy_get_mode (policy), ==, MEMRES_SLEEP_BACKUP);
  sleep_ok (mr, "sl-weights", policy);
  wake_ok (mr, "sl-weights");
  g_assert_cmpuint (memres_buffer_get_address (a), ==, addr_a);
  g_assert_cmpuint (memres_buffer_get_address (b), ==, addr_b);
  mt_check_pattern (a, 0, 3 * MiB, 11, NULL);
  mt_check_pattern (b, 0, 64 * 1024, 12, NULL);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  g_clear_pointer (&mr, memres_resource_unref);
}

/* file: a round trip in a temporary directory; a missing or truncated file at the wake, and a
 * file that cannot be written at the sleep */
static void
test_file_policy (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresSleepPolicy) policy = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *path = NULL;
  g_autofree char *moved = NULL;
  MemresBuffer *a, *b;
  int handles;

  if (!require_device ())
    return;
  dir = g_dir_make_tmp ("memres-sleep-XXXXXX", &error);
  g_assert_no_error (error);
  path = g_build_filename (dir, "weights.bin", NULL);
  moved = g_build_filename (dir, "moved.bin", NULL);
  mr = new_ok ("vmm");
  a = alloc_tagged (mr, "sl-file", 6 * MiB);
  b = alloc_tagged (mr, "sl-file", 2 * MiB);
  mt_write_pattern (a, 0, 6 * MiB, 21, NULL);
  mt_write_pattern (b, 0, 2 * MiB, 22, NULL);

  policy = policy_new (MEMRES_SLEEP_FILE);
  /* no path yet */
  g_assert_false (memres_resource_sleep (mr, "sl-file", policy, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  /* a file that cannot be opened, then one whose writes fail (a full disk): still awake */
  g_assert_true (memres_sleep_policy_set_path (policy, "/nonexistent-dir/x/weights.bin", NULL));
  g_assert_false (memres_resource_sleep (mr, "sl-file", policy, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE);
  g_assert_nonnull (strstr (error->message, "/nonexistent-dir/x/weights.bin"));
  g_clear_error (&error);
  g_assert_false (memres_buffer_is_asleep (a));
  if (g_file_test ("/dev/full", G_FILE_TEST_EXISTS))
    {
      g_assert_true (memres_sleep_policy_set_path (policy, "/dev/full", NULL));
      g_assert_false (memres_resource_sleep (mr, "sl-file", policy, NULL, &error));
      g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE);
      g_clear_error (&error);
    }
  g_assert_false (memres_buffer_is_asleep (a));
  mt_check_pattern (a, 0, 6 * MiB, 21, NULL);
  mt_check_pattern (b, 0, 2 * MiB, 22, NULL);

  g_assert_true (memres_sleep_policy_set_path (policy, path, NULL));
  sleep_ok (mr, "sl-file", policy);
  handles = live_handles ();

  /* missing at the wake: still asleep, nothing held */
  g_assert_cmpint (g_rename (path, moved), ==, 0);
  g_assert_false (memres_resource_wake (mr, "sl-file", NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE);
  g_assert_nonnull (strstr (error->message, path));
  g_clear_error (&error);
  g_assert_true (memres_buffer_is_asleep (a));
  g_assert_cmpint (live_handles (), ==, handles);

  /* truncated: the same */
  g_assert_cmpint (g_rename (moved, path), ==, 0);
  {
    g_autofree char *copy = g_build_filename (dir, "copy.bin", NULL);
    g_autofree char *bytes = NULL;
    gsize len = 0;

    g_assert_true (g_file_get_contents (path, &bytes, &len, NULL));
    g_assert_cmpuint (len, ==, 8 * MiB);
    g_assert_true (g_file_set_contents (copy, bytes, len, NULL));
    g_assert_cmpint (truncate (path, 3 * MiB), ==, 0);
    g_assert_false (memres_resource_wake (mr, "sl-file", NULL, &error));
    g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE);
    g_clear_error (&error);
    g_assert_true (memres_buffer_is_asleep (b));
    g_assert_cmpint (live_handles (), ==, handles);
    g_assert_cmpint (g_rename (copy, path), ==, 0);
  }

  wake_ok (mr, "sl-file");
  mt_check_pattern (a, 0, 6 * MiB, 21, NULL);
  mt_check_pattern (b, 0, 2 * MiB, 22, NULL);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  g_unlink (path);
  g_rmdir (dir);
}

/* A sleep of @tag on @mr with a file policy of @path that must be refused with
 * MEMRES_SLEEP_ERROR_FILE, the message holding @why; the tag stays awake. */
static void
assert_file_refused (MemresResource *mr, const char *tag, const char *path, const char *why)
{
  g_autoptr (MemresSleepPolicy) policy = policy_new (MEMRES_SLEEP_FILE);
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_sleep_policy_set_path (policy, path, NULL));
  g_assert_false (memres_resource_sleep (mr, tag, policy, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE);
  if (strstr (error->message, why) == NULL)
    g_error ("\"%s\" not in: %s", why, error->message);
  g_assert_false (memres_resource_is_asleep (mr, tag));
}

/* The file of a file policy: a FIFO, a device (/dev/null), a directory are refused untouched (a
 * FIFO never waited on), and so is a file that holds another sleep's contents until its wake,
 * by any name (a link), of another tag or resource: the other sleep's bytes are kept and its
 * wake restores them. After that wake the file serves again. A write that fails midway (the
 * file size limit, standing for a full disk) leaves everything awake. */
static void
test_file_refusals (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) other_mr = NULL;
  g_autoptr (MemresSleepPolicy) policy = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *path = NULL, *link = NULL, *fifo = NULL, *small = NULL;
  g_autofree char *saved = NULL, *after = NULL;
  gsize saved_len = 0, after_len = 0;
  MemresBuffer *a, *b, *c;
  struct rlimit old_limit, limit;
  struct stat st;

  if (!require_device ())
    return;
  dir = g_dir_make_tmp ("memres-sleep-XXXXXX", &error);
  g_assert_no_error (error);
  path = g_build_filename (dir, "a.bin", NULL);
  link = g_build_filename (dir, "link.bin", NULL);
  fifo = g_build_filename (dir, "fifo", NULL);
  small = g_build_filename (dir, "small.bin", NULL);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_cmpint (symlink ("a.bin", link), ==, 0);
  mr = new_ok ("vmm");
  other_mr = new_ok ("vmm");
  a = alloc_tagged (mr, "sl-fa", 2 * MiB);
  b = alloc_tagged (mr, "sl-fb", 2 * MiB);
  c = alloc_tagged (other_mr, "sl-fc", 2 * MiB);
  mt_write_pattern (a, 0, 2 * MiB, 31, NULL);
  mt_write_pattern (b, 0, 2 * MiB, 32, NULL);

  assert_file_refused (mr, "sl-fa", fifo, "not a regular file (a FIFO)");
  g_assert_cmpint (lstat (fifo, &st), ==, 0);
  g_assert_true (S_ISFIFO (st.st_mode));
  assert_file_refused (mr, "sl-fa", "/dev/null", "not a regular file (a device)");
  g_assert_cmpint (stat ("/dev/null", &st), ==, 0);
  g_assert_true (S_ISCHR (st.st_mode));
  assert_file_refused (mr, "sl-fa", dir, "not a regular file (a directory)");
  g_assert_true (g_file_test (dir, G_FILE_TEST_IS_DIR));

  /* tag sl-fa asleep in a.bin: a.bin is no other sleep's file, under any name */
  policy = policy_new (MEMRES_SLEEP_FILE);
  g_assert_true (memres_sleep_policy_set_path (policy, path, NULL));
  sleep_ok (mr, "sl-fa", policy);
  g_assert_true (g_file_get_contents (path, &saved, &saved_len, NULL));
  g_assert_cmpuint (saved_len, ==, 2 * MiB);
  assert_file_refused (mr, "sl-fb", path, "holds the contents of another sleep");
  assert_file_refused (mr, "sl-fb", link, "holds the contents of another sleep");
  assert_file_refused (other_mr, "sl-fc", path, "holds the contents of another sleep");
  g_assert_true (g_file_get_contents (path, &after, &after_len, NULL));
  g_assert_cmpuint (after_len, ==, saved_len);
  g_assert_cmpint (memcmp (saved, after, saved_len), ==, 0);
  g_assert_false (memres_buffer_is_asleep (b));
  mt_check_pattern (b, 0, 2 * MiB, 32, NULL);
  wake_ok (mr, "sl-fa");
  mt_check_pattern (a, 0, 2 * MiB, 31, NULL);

  /* woken, the file serves another sleep */
  sleep_ok (mr, "sl-fb", policy);
  wake_ok (mr, "sl-fb");
  mt_check_pattern (b, 0, 2 * MiB, 32, NULL);

  /* a write that fails midway: a 1 MiB file size limit (SIGXFSZ ignored, EFBIG) */
  g_assert_cmpint (getrlimit (RLIMIT_FSIZE, &old_limit), ==, 0);
  limit = old_limit;
  limit.rlim_cur = MiB;
  signal (SIGXFSZ, SIG_IGN);
  g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &limit), ==, 0);
  assert_file_refused (mr, "sl-fa", small, "cannot write the sleep file");
  g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &old_limit), ==, 0);
  signal (SIGXFSZ, SIG_DFL);
  mt_check_pattern (a, 0, 2 * MiB, 31, NULL);

  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  mt_close_ok (c, NULL);
  g_unlink (small);
  g_unlink (link);
  g_unlink (fifo);
  g_unlink (path);
  g_rmdir (dir);
}

/* --- refusals -------------------------------------------------------------------------------- */

static void
test_refusals (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) host = NULL;
  g_autoptr (MemresSleepPolicy) policy = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf, *other, *empty;
  const MemresDLDataType dl_u8 = { MEMRES_DL_UINT, 8, 1 };
  gint64 shape[1] = { 2 * MiB };
  MemresDLManagedTensorVersioned *before;
  guint8 byte = 0;

  if (!require_device ())
    return;
  mr = new_ok ("vmm");
  buf = alloc_tagged (mr, "sl-ref", 2 * MiB);
  other = alloc_tagged (mr, "sl-ref-other", 2 * MiB);

  /* a tag never used; a wake of a tag that is awake */
  g_assert_false (memres_resource_sleep (mr, "sl-never-used", NULL, NULL, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_UNKNOWN);
  g_clear_error (&error);
  g_assert_false (memres_resource_wake (mr, "sl-ref", NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_NOT_ASLEEP);
  g_clear_error (&error);

  /* a DLPack tensor exported before the sleep: the buffer sleeps all the same (the tensor keeps
   * its address, deleted after the wake) */
  before = memres_buffer_export_dlpack (buf, dl_u8, 1, shape, NULL, 0, &error);
  g_assert_no_error (error);
  g_assert_nonnull (before);
  sleep_ok (mr, "sl-ref", NULL);
  g_assert_true ((guintptr) before->dl_tensor.data == memres_buffer_get_address (buf));
  /* a new DLPack export of a sleeping buffer is refused, both layouts (it was made) */
  g_assert_null (memres_buffer_export_dlpack (buf, dl_u8, 1, shape, NULL, 0, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
  g_assert_nonnull (strstr (error->message, "sl-ref"));
  g_clear_error (&error);
  g_assert_null (memres_buffer_export_dlpack_unversioned (buf, dl_u8, 1, shape, NULL, 0, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
  g_clear_error (&error);
  g_assert_false (memres_resource_sleep (mr, "sl-ref", NULL, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ALREADY_ASLEEP);
  g_clear_error (&error);

  g_assert_false (memres_buffer_fill (buf, 0, 1, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
  g_assert_nonnull (strstr (error->message, "sl-ref"));
  g_clear_error (&error);
  g_assert_false (memres_buffer_copy_to (buf, other, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
  g_clear_error (&error);
  g_assert_false (memres_buffer_copy_to (other, buf, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
  g_clear_error (&error);
  g_assert_false (memres_buffer_read (buf, 0, &byte, 1, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
  g_clear_error (&error);
  g_assert_false (memres_buffer_write (buf, 0, &byte, 1, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
  g_clear_error (&error);
  g_assert_false (memres_buffer_resize (buf, 4 * MiB, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
  g_clear_error (&error);
  {
    MemresBufferDescriptor desc;

    g_assert_false (memres_buffer_export (buf, &desc, &error));
    g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
    g_clear_error (&error);
  }
  /* allocating under the sleeping tag; another tag and no tag are fine */
  g_assert_true (memres_tag_push ("sl-ref", NULL));
  g_assert_null (memres_resource_allocate (mr, 4096, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_TAG_ASLEEP);
  g_clear_error (&error);
  /* an empty buffer too: every allocation under a sleeping tag is refused (0 bytes was
   * allowed); by the tag's default on the device as well */
  g_assert_null (memres_resource_allocate (mr, 0, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_TAG_ASLEEP);
  g_clear_error (&error);
  g_assert_true (memres_tag_pop ("sl-ref", NULL));
  g_assert_true (memres_tag_set_device_default (memres_resource_get_device (mr), "sl-ref", NULL));
  g_assert_null (memres_resource_allocate (mr, 0, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_TAG_ASLEEP);
  g_clear_error (&error);
  g_assert_true (memres_tag_set_device_default (memres_resource_get_device (mr), NULL, NULL));
  /* an empty buffer of another tag, or of none, is made */
  empty = alloc_tagged (mr, "sl-ref-other", 0);
  g_assert_cmpstr (memres_buffer_get_tag (empty), ==, "sl-ref-other");
  mt_close_ok (empty, NULL);
  empty = memres_resource_allocate (mr, 0, NULL, &error);
  g_assert_no_error (error);
  mt_close_ok (empty, NULL);
  mt_close_ok (alloc_tagged (mr, "sl-ref-other", 4096), NULL);
  mt_close_ok (alloc_tagged (mr, NULL, 4096), NULL);
  g_assert_true (memres_tag_push ("sl-ref", NULL));
  g_assert_true (memres_tag_pop ("sl-ref", NULL));

  wake_ok (mr, "sl-ref");
  g_assert_true (memres_buffer_fill (buf, 7, 1, NULL, &error));
  g_assert_no_error (error);
  before->deleter (before);
  before = memres_buffer_export_dlpack (buf, dl_u8, 1, shape, NULL, 0, &error);
  g_assert_no_error (error);
  before->deleter (before);
  mt_close_ok (buf, NULL);
  mt_close_ok (other, NULL);

  /* a stack that cannot sleep names the kinds that can */
  host = new_ok ("host");
  mt_close_ok (alloc_tagged (host, "sl-ref", 64), NULL);
  g_assert_false (memres_resource_sleep (host, "sl-ref", NULL, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "vmm"));
  g_assert_nonnull (strstr (error->message, "cache"));
  g_clear_error (&error);
  g_assert_false (memres_resource_wake (host, "sl-ref", NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_false (memres_resource_is_asleep (host, "sl-ref"));

  /* policies */
  g_assert_null (memres_sleep_policy_new ((MemresSleepMode) 7, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  policy = policy_new (MEMRES_SLEEP_DISCARD);
  g_assert_false (memres_sleep_policy_set_path (policy, "/tmp/x", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_sleep_policy_set_host_resource (policy, host, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_clear_pointer (&policy, memres_sleep_policy_unref);
  policy = policy_new (MEMRES_SLEEP_BACKUP);
  g_assert_false (memres_sleep_policy_set_host_resource (policy, host, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
}

/* A buffer exported over IPC cannot sleep: the sleep fails naming it and nothing sleeps. */
static void
test_refuse_exported (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) bytes = NULL;
  g_autofree gint *fds = NULL;
  guint n_fds = 0;
  MemresBuffer *shared, *mine;
  g_autofree char *where = NULL;
  int handles;

  if (!require_device ())
    return;
  mr = memres_resource_new ("vmm:handle_type=posix_fd", &error);
  if (mr == NULL)
    {
      g_test_skip (error->message);
      return;
    }
  mine = alloc_tagged (mr, "sl-ipc", 2 * MiB);
  shared = alloc_tagged (mr, "sl-ipc", 4 * MiB);
  mt_write_pattern (mine, 0, 2 * MiB, 31, NULL);
  g_assert_true (memres_buffer_export_message (shared, &bytes, &fds, &n_fds, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < n_fds; i++)
    close (fds[i]);
  handles = live_handles ();
  g_assert_false (memres_resource_sleep (mr, "sl-ipc", NULL, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_SHARED);
  where = g_strdup_printf ("0x%" G_GINT64_MODIFIER "x", memres_buffer_get_address (shared));
  g_assert_nonnull (strstr (error->message, where));
  g_clear_error (&error);
  g_assert_false (memres_buffer_is_asleep (mine));
  g_assert_false (memres_resource_is_asleep (mr, "sl-ipc"));
  g_assert_cmpint (live_handles (), ==, handles);
  mt_check_pattern (mine, 0, 2 * MiB, 31, NULL);
  mt_close_ok (shared, NULL);
  /* without it, the tag sleeps */
  sleep_ok (mr, "sl-ipc", NULL);
  wake_ok (mr, "sl-ipc");
  mt_close_ok (mine, NULL);
}

/* --- closing while asleep --------------------------------------------------------------------- */

static void
test_close_asleep (void)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  MemresResource *mr;
  MemresBuffer *a, *b, *c;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("vmm");
  policy = policy_new (MEMRES_SLEEP_BACKUP);
  a = alloc_tagged (mr, "sl-close", 2 * MiB);
  b = alloc_tagged (mr, "sl-close", 2 * MiB);
  c = alloc_tagged (mr, "sl-close", 2 * MiB);
  mt_write_pattern (b, 0, 2 * MiB, 41, NULL);
  sleep_ok (mr, "sl-close", policy);
  /* closed while asleep: its range released, nothing restored for it */
  mt_close_ok (a, NULL);
  wake_ok (mr, "sl-close");
  mt_check_pattern (b, 0, 2 * MiB, 41, NULL);
  /* the resource's last reference dropped while its buffers sleep: closing them later loses
   * nothing else and leaks nothing */
  sleep_ok (mr, "sl-close", policy);
  memres_resource_unref (mr);
  mt_close_ok (b, NULL);
  mt_close_ok (c, NULL);
  mt_assert_fake_counts_equal (&base);
}

/* --- through cache ---------------------------------------------------------------------------- */

/* cache>vmm: a request above max_block and a block of its own sleep; a block carved from a
 * chunk stays mapped (its chunk is shared); the free cached blocks go back to vmm at the sleep;
 * contents restored by backup; sleeping buffers closed give their memory back. */
static void
test_cache (void)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  MemresResource *mr;
  MemresBuffer *direct, *own, *small, *spare, *c2;
  guint64 addr_direct, addr_own;
  int awake, asleep, before_spare, spare_handles;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("cache:max_block=4MiB,chunk=2MiB>vmm:chunk=2MiB");
  direct = alloc_tagged (mr, "sl-cache", 8 * MiB);
  own = alloc_tagged (mr, "sl-cache", 1 * MiB);
  small = alloc_tagged (mr, "sl-cache", 4096);
  before_spare = live_handles ();
  spare = alloc_tagged (mr, "sl-cache", 3 * MiB);
  spare_handles = live_handles () - before_spare;
  mt_close_ok (spare, NULL); /* a free cached block */
  addr_direct = memres_buffer_get_address (direct);
  addr_own = memres_buffer_get_address (own);
  mt_write_pattern (direct, 0, 8 * MiB, 61, NULL);
  mt_write_pattern (own, 0, 1 * MiB, 62, NULL);
  mt_write_pattern (small, 0, 4096, 63, NULL);
  policy = policy_new (MEMRES_SLEEP_BACKUP);

  awake = live_handles ();
  sleep_ok (mr, "sl-cache", policy);
  asleep = live_handles ();
  if (mt_driver_is_fake ())
    g_assert_cmpint (asleep, ==, base.physical_handles + 1); /* the chunk of the small one */
  g_assert_true (memres_buffer_is_asleep (small));
  wake_ok (mr, "sl-cache");
  if (mt_driver_is_fake ())
    g_assert_cmpint (live_handles (), ==, awake - spare_handles);
  g_assert_cmpuint (memres_buffer_get_address (direct), ==, addr_direct);
  g_assert_cmpuint (memres_buffer_get_address (own), ==, addr_own);
  mt_check_pattern (direct, 0, 8 * MiB, 61, NULL);
  mt_check_pattern (own, 0, 1 * MiB, 62, NULL);
  mt_check_pattern (small, 0, 4096, 63, NULL);

  /* closed while asleep: given back, not cached; the cache goes on */
  sleep_ok (mr, "sl-cache", NULL);
  mt_close_ok (direct, NULL);
  mt_close_ok (own, NULL);
  c2 = alloc_tagged (mr, "sl-cache-other", 1 * MiB);
  mt_fill_byte_ok (c2, 9, NULL);
  mt_assert_bytes (c2, 9, NULL);
  mt_close_ok (c2, NULL);
  wake_ok (mr, "sl-cache");
  mt_check_pattern (small, 0, 4096, 63, NULL);
  mt_close_ok (small, NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* --- segment events -------------------------------------------------------------------------- */

typedef struct
{
  guint mapped, unmapping;
  guint64 bytes_mapped, bytes_unmapping;
  const char *tag; /* the slept tag: each event's segment must carry it */
  guint32 tag_id;  /* the id they carry (the same each time, not 0) */
  guint tagged;    /* events whose segment carries it */
} Events;

static void
on_segment (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
            guint64 previous_length, gpointer user_data)
{
  Events *e = user_data;

  if (e->tag != NULL && segment->tag != NULL && g_str_equal (segment->tag, e->tag)
      && segment->tag_id != 0 && (e->tag_id == 0 || e->tag_id == segment->tag_id))
    {
      e->tag_id = segment->tag_id;
      e->tagged++;
    }
  if (event == MEMRES_SEGMENT_MAPPED)
    {
      e->mapped++;
      e->bytes_mapped += segment->length;
    }
  else if (event == MEMRES_SEGMENT_UNMAPPING)
    {
      e->unmapping++;
      e->bytes_unmapping += segment->length;
    }
}

/* Puts @tag of @mr to sleep and wakes it, subscribed to its segment events: the sleep tells
 * @n_segments segments of @bytes in all as about to be unmapped and none mapped, and
 * memres_lookup() finds none of @bufs meanwhile; the wake tells the same as mapped, and all of
 * @bufs are found again. Every segment event and lookup carries @tag (MemresSegment.tag, and
 * one tag_id that is not 0). */
static void
assert_sleep_segment_events (MemresResource *mr, const char *tag, MemresBuffer *const *bufs,
                             guint n_bufs, guint n_segments, guint64 bytes)
{
  g_autoptr (GError) error = NULL;
  Events e = { 0 };
  MemresLookupInfo info;
  guint id;

  for (guint i = 0; i < n_bufs; i++)
    {
      g_assert_true (memres_lookup (memres_buffer_get_pointer (bufs[i]), &info));
      g_assert_cmpstr (info.segment.tag, ==, tag);
      g_assert_cmpuint (info.segment.tag_id, !=, 0);
    }
  id = memres_resource_subscribe_segments (mr, on_segment, &e, NULL, &error);
  g_assert_no_error (error);
  memset (&e, 0, sizeof e); /* the replay of what exists */
  e.tag = tag;
  sleep_ok (mr, tag, NULL);
  g_assert_cmpuint (e.unmapping, ==, n_segments);
  g_assert_cmpuint (e.bytes_unmapping, ==, bytes);
  g_assert_cmpuint (e.mapped, ==, 0);
  for (guint i = 0; i < n_bufs; i++)
    g_assert_false (memres_lookup (memres_buffer_get_pointer (bufs[i]), &info));
  wake_ok (mr, tag);
  g_assert_cmpuint (e.mapped, ==, n_segments);
  g_assert_cmpuint (e.bytes_mapped, ==, bytes);
  g_assert_cmpuint (e.tagged, ==, 2 * n_segments);
  for (guint i = 0; i < n_bufs; i++)
    {
      g_assert_true (memres_lookup (memres_buffer_get_pointer (bufs[i]), &info));
      g_assert_cmpstr (info.segment.tag, ==, tag);
      g_assert_cmpuint (info.segment.tag_id, ==, e.tag_id);
    }
  g_assert_true (memres_resource_unsubscribe_segments (mr, id, NULL));
}

static void
test_segments (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *bufs[2];

  if (!require_device ())
    return;
  mr = new_ok ("vmm");
  bufs[0] = alloc_tagged (mr, "sl-seg", 2 * MiB);
  bufs[1] = alloc_tagged (mr, "sl-seg", 4 * MiB);
  assert_sleep_segment_events (mr, "sl-seg", bufs, 2, 2, 6 * MiB);
  mt_close_ok (bufs[0], NULL);
  mt_close_ok (bufs[1], NULL);
}

/* --- faults ----------------------------------------------------------------------------------- */

typedef struct
{
  MemresResource *mr;
  MemresBuffer *bufs[3];
  MemresSleepPolicy *policy;
} Sweep;

static void
sweep_setup (Sweep *s, MemresResource *host, const char *spec)
{
  static const gsize sizes[3] = { 2 * MiB, 6 * MiB, 4 * MiB };

  s->mr = new_ok (spec);
  for (int i = 0; i < 3; i++)
    {
      s->bufs[i] = alloc_tagged (s->mr, "sl-fault", sizes[i]);
      mt_write_pattern (s->bufs[i], 0, sizes[i], 50 + i, NULL);
    }
  s->policy = policy_new (MEMRES_SLEEP_BACKUP);
  g_assert_true (memres_sleep_policy_set_host_resource (s->policy, host, NULL));
}

static void
sweep_check (Sweep *s, gboolean asleep)
{
  for (int i = 0; i < 3; i++)
    {
      g_assert_cmpint (memres_buffer_is_asleep (s->bufs[i]), ==, asleep);
      if (!asleep)
        mt_check_pattern (s->bufs[i], 0, memres_buffer_get_size (s->bufs[i]), 50 + i, NULL);
    }
}

static void
sweep_teardown (Sweep *s)
{
  for (int i = 0; i < 3; i++)
    mt_close_ok (s->bufs[i], NULL);
  memres_resource_unref (s->mr);
  memres_sleep_policy_unref (s->policy);
}

/* The @k-th call of a successful @phase (sleep or wake), as "entry" and its occurrence. */
static char **
trace_phase (MemresResource *host, const char *spec, gboolean wake)
{
  Sweep s;
  g_autoptr (GError) error = NULL;
  const char **names = NULL;
  GPtrArray *calls = g_ptr_array_new ();
  int n;

  sweep_setup (&s, host, spec);
  if (wake)
    g_assert_true (memres_resource_sleep (s.mr, "sl-fault", s.policy, NULL, NULL));
  mt_fake_trace_begin ();
  if (wake)
    g_assert_true (memres_resource_wake (s.mr, "sl-fault", NULL, &error));
  else
    g_assert_true (memres_resource_sleep (s.mr, "sl-fault", s.policy, NULL, &error));
  n = mt_fake_trace_end (&names);
  g_assert_no_error (error);
  for (int i = 0; i < n; i++)
    g_ptr_array_add (calls, g_strdup (names[i]));
  g_ptr_array_add (calls, NULL);
  if (!wake)
    g_assert_true (memres_resource_wake (s.mr, "sl-fault", NULL, NULL));
  sweep_teardown (&s);
  return (char **) g_ptr_array_free (calls, FALSE);
}

static void
run_fault_sweep (const char *spec, gboolean wake)
{
  g_autoptr (MemresResource) host = NULL;
  g_auto (GStrv) calls = NULL;
  guint n_failed = 0;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault injection needs the fake driver");
      return;
    }
  host = new_ok ("pinned:fallback=true");
  calls = trace_phase (host, spec, wake);
  g_assert_cmpuint (g_strv_length (calls), >, 10);
  for (guint k = 0; calls[k] != NULL; k++)
    {
      g_autoptr (GError) error = NULL;
      FakeCudaCounts base, asleep;
      Sweep s;
      int nth = 0;
      gboolean ok;

      for (guint j = 0; j <= k; j++)
        nth += g_str_equal (calls[j], calls[k]);
      mt_counts_snapshot (&base);
      sweep_setup (&s, host, spec);
      if (wake)
        g_assert_true (memres_resource_sleep (s.mr, "sl-fault", s.policy, NULL, NULL));
      mt_counts_snapshot (&asleep);
      mt_fake_fail_call (calls[k], nth, CUDA_ERROR_UNKNOWN);
      /* after the wake succeeded, the backups are freed: a failure there is a warning */
      if (wake && g_str_equal (calls[k], "cuMemFreeAsync"))
        mt_log_capture_begin ();
      ok = wake ? memres_resource_wake (s.mr, "sl-fault", NULL, &error)
                : memres_resource_sleep (s.mr, "sl-fault", s.policy, NULL, &error);
      mt_fake_reset_faults ();
      if (!wake && g_str_equal (calls[k], "cuMemRelease") && ok)
        {
          /* past the point of return: the chunk the driver kept stays held, and is mapped again
           * at the wake (vmm-sleep.c; arena-granules.c keeps it as a spare) */
          g_assert_no_error (error);
          sweep_check (&s, TRUE);
          g_assert_true (memres_resource_wake (s.mr, "sl-fault", NULL, NULL));
          sweep_check (&s, FALSE);
          sweep_teardown (&s);
          continue;
        }
      if (wake && g_str_equal (calls[k], "cuMemFreeAsync") && ok)
        {
          guint n_criticals = 0;
          g_autofree char *logged = mt_log_capture_end (&n_criticals);

          g_assert_nonnull (strstr (logged, "freeing the backup"));
          sweep_check (&s, FALSE);
          sweep_teardown (&s);
          continue;
        }
      if (ok)
        g_error ("%s: call %u (%s #%d) failed and the %s succeeded", wake ? "wake" : "sleep", k,
                 calls[k], nth, wake ? "wake" : "sleep");
      n_failed++;
      g_assert_nonnull (error);
      /* the error names the step: the driver call */
      if (error->domain == MEMRES_CUDA_ERROR && strstr (error->message, calls[k]) == NULL)
        g_error ("%s with %s #%d failing: \"%s\" does not name it", wake ? "wake" : "sleep",
                 calls[k], nth, error->message);
      if (wake)
        {
          /* still asleep as it was: nothing more held than asleep */
          FakeCudaCounts now;

          sweep_check (&s, TRUE);
          mt_fake_get_counts (&now);
          g_assert_cmpint (now.physical_handles, ==, asleep.physical_handles);
          g_assert_cmpint (now.mappings, ==, asleep.mappings);
          g_assert_true (memres_resource_wake (s.mr, "sl-fault", NULL, NULL));
        }
      else
        mt_assert_fake_counts_equal (&asleep); /* every buffer awake, nothing else held */
      sweep_check (&s, FALSE);
      sweep_teardown (&s);
      mt_assert_fake_counts_equal (&base);
    }
  g_assert_cmpuint (n_failed, >, 5);
}

static void
test_faults_sleep (gconstpointer spec)
{
  run_fault_sweep (spec, FALSE);
}

static void
test_faults_wake (gconstpointer spec)
{
  run_fault_sweep (spec, TRUE);
}

/* --- arena ------------------------------------------------------------------------------------ */

/* arena: the granules of the tag's buffers are released (the fake's live handles), its block of
 * the size classes too (its slab and granule serve that tag alone), addresses kept, contents
 * restored by backup; another tag's buffers are untouched. */
static void
test_arena_addresses (void)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  MemresResource *mr;
  MemresBuffer *kv[3], *w;
  guint64 addr[3];
  int before, asleep;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("arena");
  policy = policy_new (MEMRES_SLEEP_BACKUP);
  w = alloc_tagged (mr, "sl-aw", 4 * MiB);
  kv[0] = alloc_tagged (mr, "sl-akv", 4 * MiB);
  kv[1] = alloc_tagged (mr, "sl-akv", 6 * MiB);
  kv[2] = alloc_tagged (mr, "sl-akv", 4096);
  for (int i = 0; i < 3; i++)
    {
      addr[i] = memres_buffer_get_address (kv[i]);
      mt_write_pattern (kv[i], 0, memres_buffer_get_size (kv[i]), 70 + i, NULL);
    }
  mt_fill_byte_ok (w, 0x3c, NULL);
  before = live_handles ();
  sleep_ok (mr, "sl-akv", policy);
  asleep = live_handles ();
  if (mt_driver_is_fake ())
    g_assert_cmpint (asleep, ==, before - 6); /* 2 + 3 granules of 2 MiB, the slab's 1 */
  for (int i = 0; i < 3; i++)
    {
      g_assert_true (memres_buffer_is_asleep (kv[i]));
      g_assert_cmpuint (memres_buffer_get_address (kv[i]), ==, addr[i]);
    }
  g_assert_false (memres_buffer_is_asleep (w));
  mt_assert_bytes (w, 0x3c, NULL);
  wake_ok (mr, "sl-akv");
  g_assert_cmpint (live_handles (), ==, before);
  for (int i = 0; i < 3; i++)
    {
      g_assert_cmpuint (memres_buffer_get_address (kv[i]), ==, addr[i]);
      mt_check_pattern (kv[i], 0, memres_buffer_get_size (kv[i]), 70 + i, NULL);
    }
  /* twice, discarding */
  sleep_ok (mr, "sl-akv", NULL);
  wake_ok (mr, "sl-akv");
  mt_fill_byte_ok (kv[1], 9, NULL);
  mt_assert_bytes (kv[1], 9, NULL);
  for (int i = 0; i < 3; i++)
    mt_close_ok (kv[i], NULL);
  mt_close_ok (w, NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* arena: the free bytes of a granule a sleep released are not handed out to another tag while
 * asleep (a granule serves one tag: the other tag's buffers go elsewhere, and the granule stays
 * without memory); the wake restores the sleeping buffer's bytes and leaves the other buffers'
 * untouched. */
static void
test_arena_shared_granule (void)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  MemresResource *mr;
  MemresBuffer *a, *others[8];
  guint64 last_granule;
  guint in_last = 0;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("arena");
  policy = policy_new (MEMRES_SLEEP_BACKUP);
  a = alloc_tagged (mr, "sl-ash", 3 * MiB); /* a granule and a half */
  mt_write_pattern (a, 0, 3 * MiB, 81, NULL);
  last_granule = (memres_buffer_get_address (a) + 3 * MiB - 1) & ~(guint64) (2 * MiB - 1);
  sleep_ok (mr, "sl-ash", policy);
  /* enough of the other tag's buffers that some would fit in the free half granule */
  for (int i = 0; i < 8; i++)
    {
      guint64 at;

      others[i] = alloc_tagged (mr, "sl-ash-other", 256 * 1024);
      mt_write_pattern (others[i], 0, 256 * 1024, 90 + i, NULL);
      at = memres_buffer_get_address (others[i]);
      in_last += at >= last_granule && at < last_granule + 2 * MiB;
    }
  if (mt_driver_is_fake ()) /* the fake's granules are 2 MiB */
    g_assert_cmpuint (in_last, ==, 0);
  wake_ok (mr, "sl-ash");
  mt_check_pattern (a, 0, 3 * MiB, 81, NULL);
  for (int i = 0; i < 8; i++)
    {
      mt_check_pattern (others[i], 0, 256 * 1024, 90 + i, NULL);
      mt_close_ok (others[i], NULL);
    }
  /* asleep again with its neighbours gone, woken, closed */
  sleep_ok (mr, "sl-ash", policy);
  wake_ok (mr, "sl-ash");
  mt_check_pattern (a, 0, 3 * MiB, 81, NULL);
  mt_close_ok (a, NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* arena and cache>arena: a sleeping buffer closed gives its address range back and nothing is
 * restored for it; the others wake with their bytes; the range is reused afterwards. */
static void
test_arena_close_asleep (void)
{
  static const char *const specs[] = { "arena", "cache:max_block=4MiB>arena" };
  g_autoptr (MemresSleepPolicy) policy = policy_new (MEMRES_SLEEP_BACKUP);

  if (!require_device ())
    return;
  for (guint k = 0; k < G_N_ELEMENTS (specs); k++)
    {
      MemresResource *mr;
      MemresBuffer *a, *b, *c, *d;
      FakeCudaCounts base;

      mt_counts_snapshot (&base);
      mr = new_ok (specs[k]);
      a = alloc_tagged (mr, "sl-aclose", 2 * MiB);
      b = alloc_tagged (mr, "sl-aclose", 6 * MiB);
      c = alloc_tagged (mr, "sl-aclose", 1 * MiB);
      mt_write_pattern (b, 0, 6 * MiB, 43, NULL);
      mt_write_pattern (c, 0, 1 * MiB, 44, NULL);
      sleep_ok (mr, "sl-aclose", policy);
      mt_close_ok (a, NULL);
      d = alloc_tagged (mr, "sl-aclose-other", 2 * MiB);
      mt_fill_byte_ok (d, 5, NULL);
      wake_ok (mr, "sl-aclose");
      mt_check_pattern (b, 0, 6 * MiB, 43, NULL);
      mt_check_pattern (c, 0, 1 * MiB, 44, NULL);
      mt_assert_bytes (d, 5, NULL);
      /* the resource's last reference dropped while its buffers sleep */
      sleep_ok (mr, "sl-aclose", policy);
      memres_resource_unref (mr);
      mt_close_ok (b, NULL);
      mt_close_ok (c, NULL);
      mt_close_ok (d, NULL);
      mt_assert_fake_counts_equal (&base);
    }
}

/* arena: "about to be unmapped" for each granule a sleep releases, "mapped" for each the wake
 * maps, each with the tag its granule serves; memres_lookup() finds nothing there meanwhile. An
 * untagged buffer's granule has no tag; so has a cache's chunk, and a tagged request over an
 * arena is the cache's segment of the buffer's tag (cache>arena). */
static void
test_arena_segments (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) cached = NULL;
  MemresBuffer *a, *plain, *c, *small;
  MemresLookupInfo info;

  if (!require_device ())
    return;
  mr = new_ok ("arena");
  a = alloc_tagged (mr, "sl-aseg", 6 * MiB);
  plain = alloc_tagged (mr, NULL, 3 * MiB);
  assert_sleep_segment_events (mr, "sl-aseg", &a, 1, 3, 6 * MiB);
  g_assert_true (memres_lookup (memres_buffer_get_pointer (plain), &info));
  g_assert_null (info.segment.tag);
  g_assert_cmpuint (info.segment.tag_id, ==, 0);
  mt_close_ok (a, NULL);
  mt_close_ok (plain, NULL);

  cached = new_ok ("cache>arena");
  c = alloc_tagged (cached, "sl-aseg", 6 * MiB);
  small = alloc_tagged (cached, NULL, 4096);
  assert_sleep_segment_events (cached, "sl-aseg", &c, 1, 1, 6 * MiB);
  g_assert_true (memres_lookup (memres_buffer_get_pointer (small), &info));
  g_assert_true (info.resource == cached); /* the cache's chunk */
  g_assert_null (info.segment.tag);
  mt_close_ok (c, NULL);
  mt_close_ok (small, NULL);
}

/* The device's free bytes (cuMemGetInfo, device 0's primary context). */
static guint64
device_free_bytes (void)
{
  g_autoptr (GError) error = NULL;
  size_t free_b = 0, total = 0;
  gboolean pushed;

  g_assert_true (memres_cuda_push_context (0, &pushed, &error));
  g_assert_cmpint (mt_driver ()->cuMemGetInfo (&free_b, &total), ==, CUDA_SUCCESS);
  memres_cuda_pop_context (pushed);
  return free_b;
}

/* arena and cache>arena: a mixed workload (sizes 4 KiB to 64 MiB drawn log-uniformly from a fixed
 * seed, every other buffer tagged, interleaved with the untagged ones): its tag's sleep gives at
 * least 99 % of the slept bytes back (cuMemGetInfo), since its granules and slabs serve it alone;
 * the wake keeps the addresses and the bytes, and nothing is left over at the end. */
static void
test_arena_given_back (gconstpointer spec)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (3438);
  MemresBuffer *bufs[240];
  guint64 addr[G_N_ELEMENTS (bufs)], slept = 0, before, given;
  MemresResource *mr;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok (spec);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    {
      /* an octave of 4 KiB to 32 MiB, then a size in it: log-uniform by octaves */
      gsize octave = (gsize) 4096 << g_rand_int_range (rand, 0, 14);
      gsize size = octave + (gsize) g_rand_int_range (rand, 0, (gint32) octave);

      bufs[i] = alloc_tagged (mr, i % 2 ? "sl-gb" : NULL, size);
      addr[i] = memres_buffer_get_address (bufs[i]);
      if (i % 2)
        {
          slept += memres_buffer_get_size (bufs[i]);
          mt_write_pattern (bufs[i], 0, MIN (memres_buffer_get_size (bufs[i]), 64 * 1024), i, NULL);
        }
    }
  before = device_free_bytes ();
  sleep_ok (mr, "sl-gb", NULL);
  given = device_free_bytes () - before;
  g_test_message ("%s: slept %" G_GUINT64_FORMAT " bytes, given back %" G_GUINT64_FORMAT " (%.4f)",
                  (const char *) spec, slept, given, (double) given / (double) slept);
  if (mt_driver_is_fake ())
    g_assert_cmpfloat ((double) given / (double) slept, >=, 0.99);
  wake_ok (mr, "sl-gb");
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    {
      g_assert_cmpuint (memres_buffer_get_address (bufs[i]), ==, addr[i]);
      mt_close_ok (bufs[i], NULL);
    }
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* arena: a tag's blocks of the size classes sleep with their slab (its granule released); closed
 * while asleep, the tag's last one gives its slabs back, so that after a wake that finds no
 * buffer, the tag's next blocks have memory under them (written and read back); a block of
 * another tag keeps its bytes throughout. */
static void
test_arena_slabs (void)
{
  MemresResource *mr;
  MemresBuffer *small[6], *other, *again;
  int before;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("arena");
  other = alloc_tagged (mr, "sl-slab-other", 8192);
  mt_write_pattern (other, 0, 8192, 7, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (small); i++)
    {
      small[i] = alloc_tagged (mr, "sl-slab", 8192);
      mt_write_pattern (small[i], 0, 8192, 20 + i, NULL);
    }
  before = live_handles ();
  sleep_ok (mr, "sl-slab", NULL);
  if (mt_driver_is_fake ())
    g_assert_cmpint (live_handles (), ==, before - 1); /* the tag's slab, one granule */
  mt_check_pattern (other, 0, 8192, 7, NULL);
  wake_ok (mr, "sl-slab");
  g_assert_cmpint (live_handles (), ==, before);
  sleep_ok (mr, "sl-slab", NULL);
  for (guint i = 0; i < G_N_ELEMENTS (small); i++)
    mt_close_ok (small[i], NULL);
  wake_ok (mr, "sl-slab"); /* no buffer left: nothing to map */
  again = alloc_tagged (mr, "sl-slab", 8192);
  mt_write_pattern (again, 0, 8192, 33, NULL);
  mt_check_pattern (again, 0, 8192, 33, NULL);
  mt_check_pattern (other, 0, 8192, 7, NULL);
  mt_close_ok (again, NULL);
  mt_close_ok (other, NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static MemresStats
stats_of (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  MemresStats st;

  g_assert_true (memres_resource_get_stats (mr, &st, &error));
  g_assert_no_error (error);
  return st;
}

static void
assert_alloc_tag_asleep (MemresResource *mr, const char *tag)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  g_assert_true (memres_tag_push (tag, NULL));
  buf = memres_resource_allocate (mr, 8192, NULL, &error);
  g_assert_true (memres_tag_pop (tag, NULL));
  g_assert_null (buf);
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_TAG_ASLEEP);
}

/* A tag without an open buffer sleeps too, and releases the free memory its buffers left cached:
 * on `arena` its slabs (one granule here), through `cache>vmm` the cache's free blocks; the tag
 * refuses allocations until its wake, after which its blocks have memory again (written and read
 * back). A tag that exists in the process but never went through the resource sleeps and wakes
 * too; one never used in the process is MEMRES_TAG_ERROR_UNKNOWN. */
static void
test_no_open_buffer (gconstpointer spec)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr;
  MemresBuffer *bufs[6], *again;
  int before;
  FakeCudaCounts base;
  gboolean cache = g_str_has_prefix (spec, "cache");
  gsize size = cache ? 3 * MiB : 8192; /* a cached block of its own upstream allocation */

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok (spec);
  before = live_handles ();
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    bufs[i] = alloc_tagged (mr, "sl-none", size);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    mt_close_ok (bufs[i], NULL); /* free blocks, kept by the layer */
  g_assert_cmpint (live_handles (), >, before);
  sleep_ok (mr, "sl-none", NULL);
  if (mt_driver_is_fake ())
    g_assert_cmpint (live_handles (), ==, before); /* every free block of the tag released */
  assert_alloc_tag_asleep (mr, "sl-none");
  /* sleeping again is refused as for a tag with buffers */
  g_assert_false (memres_resource_sleep (mr, "sl-none", NULL, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ALREADY_ASLEEP);
  g_clear_error (&error);
  wake_ok (mr, "sl-none");
  again = alloc_tagged (mr, "sl-none", size);
  mt_write_pattern (again, 0, 8192, 34, NULL);
  mt_check_pattern (again, 0, 8192, 34, NULL);
  mt_close_ok (again, NULL);

  /* a tag of the process that this resource never saw: asleep all the same (the kinds give
   * their free memory back first, as at every sleep) */
  g_assert_true (memres_tag_push ("sl-none-elsewhere", NULL));
  g_assert_true (memres_tag_pop ("sl-none-elsewhere", NULL));
  sleep_ok (mr, "sl-none-elsewhere", NULL);
  assert_alloc_tag_asleep (mr, "sl-none-elsewhere");
  wake_ok (mr, "sl-none-elsewhere");
  g_assert_false (memres_resource_wake (mr, "sl-none-elsewhere", NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_NOT_ASLEEP);
  g_clear_error (&error);
  /* never used in the process: an error, nothing asleep */
  g_assert_false (memres_resource_sleep (mr, "sl-never-used-anywhere", NULL, NULL, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_UNKNOWN);
  g_clear_error (&error);
  g_assert_false (memres_resource_wake (mr, "sl-never-used-anywhere", NULL, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_UNKNOWN);
  g_clear_error (&error);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* arena: the used bytes are exact while a tag sleeps: its free blocks, parked in their sleeping
 * slab, are not in use (before, during and after the sleep: the open blocks alone); one closed
 * while asleep leaves the used bytes at once; a large buffer stays used throughout. */
static void
test_arena_stats_asleep (void)
{
  MemresResource *mr;
  MemresBuffer *small[6], *large;
  FakeCudaCounts base;
  guint64 open_bytes;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("arena");
  for (guint i = 0; i < G_N_ELEMENTS (small); i++)
    small[i] = alloc_tagged (mr, "sl-stats", 8192);
  large = alloc_tagged (mr, "sl-stats", 96 * MiB);
  for (guint i = 3; i < G_N_ELEMENTS (small); i++)
    mt_close_ok (small[i], NULL); /* three free blocks in the tag's slab */
  open_bytes = 3 * memres_buffer_get_size (small[0]) + memres_buffer_get_size (large);
  g_assert_cmpuint (memres_buffer_get_size (small[0]), ==, 8192);
  g_assert_cmpuint (stats_of (mr).used_current, ==, open_bytes);
  sleep_ok (mr, "sl-stats", NULL);
  g_assert_cmpuint (stats_of (mr).used_current, ==, open_bytes);
  mt_close_ok (small[2], NULL); /* closed asleep: parked */
  open_bytes -= 8192;
  g_assert_cmpuint (stats_of (mr).used_current, ==, open_bytes);
  wake_ok (mr, "sl-stats");
  g_assert_cmpuint (stats_of (mr).used_current, ==, open_bytes);
  for (guint i = 0; i < 2; i++)
    mt_close_ok (small[i], NULL);
  mt_close_ok (large, NULL);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 0);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* arena:handle_type=posix_fd: a buffer with memory of its own is refused, exported or not */
static void
test_arena_refuse_own (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) bytes = NULL;
  g_autofree gint *fds = NULL;
  guint n_fds = 0;
  MemresBuffer *own, *large;

  if (!require_device ())
    return;
  mr = new_ok ("arena:handle_type=posix_fd,export_min=4MiB");
  own = alloc_tagged (mr, "sl-aown", 4 * MiB);
  large = alloc_tagged (mr, "sl-aown", 2 * MiB);
  mt_write_pattern (large, 0, 2 * MiB, 12, NULL);
  g_assert_false (memres_resource_sleep (mr, "sl-aown", NULL, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "handle_type=posix_fd"));
  g_clear_error (&error);
  g_assert_true (memres_buffer_export_message (own, &bytes, &fds, &n_fds, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < n_fds; i++)
    close (fds[i]);
  g_assert_false (memres_resource_sleep (mr, "sl-aown", NULL, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_SHARED);
  g_assert_nonnull (strstr (error->message, "exported to"));
  g_clear_error (&error);
  g_assert_false (memres_buffer_is_asleep (own));
  g_assert_false (memres_buffer_is_asleep (large));
  mt_check_pattern (large, 0, 2 * MiB, 12, NULL);
  mt_close_ok (own, NULL);
  mt_close_ok (large, NULL);
}

/* --- threads -----------------------------------------------------------------------------------
 */

typedef struct
{
  MemresResource *mr;
  const char *tag;
  guint32 seed;
} ThreadData;

static gpointer
sleeper (gpointer data)
{
  ThreadData *t = data;
  g_autoptr (MemresSleepPolicy) policy = policy_new (MEMRES_SLEEP_BACKUP);
  MemresBuffer *bufs[4];

  for (int i = 0; i < 4; i++)
    {
      bufs[i] = alloc_tagged (t->mr, t->tag, (gsize) (i + 1) * MiB);
      mt_write_pattern (bufs[i], 0, (gsize) (i + 1) * MiB, t->seed + i, NULL);
    }
  for (int round = 0; round < 20; round++)
    {
      sleep_ok (t->mr, t->tag, round % 2 == 0 ? policy : NULL);
      g_assert_true (memres_buffer_is_asleep (bufs[round % 4]));
      wake_ok (t->mr, t->tag);
      if (round % 2 == 0)
        for (int i = 0; i < 4; i++)
          mt_check_pattern (bufs[i], 0, (gsize) (i + 1) * MiB, t->seed + i, NULL);
      else
        for (int i = 0; i < 4; i++)
          mt_write_pattern (bufs[i], 0, (gsize) (i + 1) * MiB, t->seed + i, NULL);
    }
  for (int i = 0; i < 4; i++)
    mt_close_ok (bufs[i], NULL);
  return NULL;
}

static void
test_two_threads (void)
{
  g_autoptr (MemresResource) mr = NULL;
  ThreadData a, b;
  GThread *ta, *tb;

  if (!require_device ())
    return;
  mr = new_ok ("vmm");
  a = (ThreadData){ mr, "sl-thread-a", 100 };
  b = (ThreadData){ mr, "sl-thread-b", 200 };
  ta = g_thread_new ("sleeper-a", sleeper, &a);
  tb = g_thread_new ("sleeper-b", sleeper, &b);
  g_thread_join (ta);
  g_thread_join (tb);
}

/* --- calls back into memres from a segment callback, and fork ----------------------------------
 */

typedef struct
{
  MemresResource *mr;
  MemresBuffer *victim;
  const char *tag;
  guint calls;
  gint close_code, wake_code, alloc_code;
  gboolean closed;
} Reentry;

/* inside the sleep (or wake) of Reentry.tag, on its thread: nothing may wait for that sleep */
static void
on_segment_reenter (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
                    guint64 previous_length, gpointer user_data)
{
  Reentry *r = user_data;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  if (r->victim == NULL || r->calls++ > 0)
    return;
  r->closed = memres_buffer_close (r->victim, NULL, &error);
  r->close_code = error != NULL && error->domain == MEMRES_SLEEP_ERROR ? error->code : -1;
  g_clear_error (&error);
  g_assert_false (memres_resource_wake (r->mr, r->tag, NULL, &error));
  r->wake_code = error != NULL && error->domain == MEMRES_SLEEP_ERROR ? error->code : -1;
  g_clear_error (&error);
  g_assert_true (memres_tag_push (r->tag, NULL));
  buf = memres_resource_allocate (r->mr, 4096, NULL, &error);
  g_assert_true (memres_tag_pop (r->tag, NULL));
  g_assert_null (buf);
  r->alloc_code = error != NULL && error->domain == MEMRES_SLEEP_ERROR ? error->code : -1;
}

/* A segment callback that calls back into memres on the thread of a sleep (and of a wake) of
 * the tag: closing a buffer of the tag is refused (MEMRES_SLEEP_ERROR_BUSY, the buffer stays
 * open) instead of waiting for the sleep it runs inside; so is a wake of the tag, and
 * allocating under it (TAG_ASLEEP). Nothing hangs; the buffer closes after. vmm and arena. */
static void
test_reentry (void)
{
  static const char *const specs[] = { "vmm", "arena", "cache:max_block=1MiB>arena" };

  if (!require_device ())
    return;
  for (guint k = 0; k < G_N_ELEMENTS (specs); k++)
    {
      g_autoptr (GError) error = NULL;
      MemresResource *mr = new_ok (specs[k]);
      Reentry r = { mr, NULL, "sl-reenter", 0, -1, -1, -1, FALSE };
      MemresBuffer *keep, *victim;
      guint id;

      keep = alloc_tagged (mr, "sl-reenter", 4 * MiB);
      victim = alloc_tagged (mr, "sl-reenter", 4 * MiB);
      /* the replay of what exists comes first: the callback does nothing then */
      id = memres_resource_subscribe_segments (mr, on_segment_reenter, &r, NULL, &error);
      g_assert_no_error (error);
      r.victim = victim;
      r.calls = 0;
      sleep_ok (mr, "sl-reenter", NULL);
      g_assert_cmpuint (r.calls, >, 0);
      g_assert_false (r.closed);
      g_assert_cmpint (r.close_code, ==, MEMRES_SLEEP_ERROR_BUSY);
      g_assert_cmpint (r.wake_code, ==, MEMRES_SLEEP_ERROR_BUSY);
      g_assert_cmpint (r.alloc_code, ==, MEMRES_SLEEP_ERROR_TAG_ASLEEP);
      g_assert_true (memres_buffer_is_asleep (r.victim));
      /* and inside the wake */
      r.calls = 0;
      r.close_code = r.wake_code = -1;
      wake_ok (mr, "sl-reenter");
      g_assert_cmpuint (r.calls, >, 0);
      g_assert_false (r.closed);
      g_assert_cmpint (r.close_code, ==, MEMRES_SLEEP_ERROR_BUSY);
      g_assert_false (memres_buffer_is_asleep (r.victim));
      g_assert_true (memres_resource_unsubscribe_segments (mr, id, NULL));
      mt_close_ok (g_steal_pointer (&r.victim), NULL);
      mt_close_ok (keep, NULL);
      memres_resource_unref (mr);
    }
}

static gpointer
sleep_waker (gpointer data)
{
  ThreadData *t = data;
  MemresBuffer *buf = alloc_tagged (t->mr, t->tag, 2 * MiB);
  g_autoptr (MemresSleepPolicy) policy = policy_new (MEMRES_SLEEP_BACKUP);

  for (int round = 0; round < 200; round++)
    {
      sleep_ok (t->mr, t->tag, round % 2 == 0 ? policy : NULL);
      wake_ok (t->mr, t->tag);
    }
  mt_close_ok (buf, NULL);
  return NULL;
}

/* fork() while another thread puts a tag to sleep and wakes it over and over: the child never
 * waits for the sleep state's lock of a thread that is gone (fork.c takes it around the fork):
 * it refuses the inherited resource's sleep (MEMRES_ERROR_FORKED), answers is_asleep, and a
 * stack made in the child sleeps and wakes. */
static void
test_fork (void)
{
  g_autoptr (MemresResource) mr = NULL;
  ThreadData t;
  GThread *th;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("the real driver is not usable in the child of a fork");
      return;
    }
  mr = new_ok ("vmm");
  t = (ThreadData){ mr, "sl-fork", 0 };
  th = g_thread_new ("sleep-waker", sleep_waker, &t);
  for (int i = 0; i < 20; i++)
    {
      int status = 0;
      pid_t pid = fork ();

      g_assert_cmpint (pid, >=, 0);
      if (pid == 0)
        {
          GError *error = NULL;
          MemresResource *fresh;
          MemresBuffer *buf;

          alarm (20);
          (void) memres_resource_is_asleep (mr, "sl-fork");
          if (memres_resource_sleep (mr, "sl-fork", NULL, NULL, &error)
              || !g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_FORKED))
            _exit (2);
          g_clear_error (&error);
          fresh = memres_resource_new ("host", &error);
          if (fresh == NULL || !memres_tag_push ("sl-fork-child", NULL))
            _exit (3);
          buf = memres_resource_allocate (fresh, 64, NULL, &error);
          memres_tag_pop ("sl-fork-child", NULL);
          if (buf == NULL || !memres_buffer_close (buf, NULL, &error))
            _exit (4);
          memres_buffer_unref (buf);
          _exit (0);
        }
      g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
      g_assert_true (WIFEXITED (status));
      g_assert_cmpint (WEXITSTATUS (status), ==, 0);
    }
  g_thread_join (th);
}

/* memres_sleep_call_get_tag(): inside the slots of a sleep and a wake (here, in the segment
 * events vmm raises from them, on the same thread) the call's tag and policy mode (the wake's
 * the sleep's); NULL outside, the mode untouched. */
typedef struct
{
  guint calls;
  char *tags[8];
  MemresSleepMode modes[8];
} CallSeen;

static void
on_segment_call (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
                 guint64 previous_length, gpointer user_data)
{
  CallSeen *seen = user_data;
  MemresSleepMode mode = (MemresSleepMode) 99;
  const char *tag = memres_sleep_call_get_tag (&mode);

  if (seen->calls < G_N_ELEMENTS (seen->tags))
    {
      seen->tags[seen->calls] = g_strdup (tag != NULL ? tag : "(none)");
      seen->modes[seen->calls] = mode;
    }
  seen->calls++;
}

static void
test_call_tag (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresSleepPolicy) backup = NULL;
  g_autoptr (GError) error = NULL;
  MemresSleepMode mode = (MemresSleepMode) 99;
  CallSeen seen = { 0 };
  MemresBuffer *buf, *other;
  guint id;

  if (!require_device ())
    return;
  g_assert_null (memres_sleep_call_get_tag (&mode));
  g_assert_cmpint (mode, ==, 99);
  g_assert_null (memres_sleep_call_get_tag (NULL));
  mr = new_ok ("vmm");
  buf = alloc_tagged (mr, "sl-call", 2 * MiB);
  other = alloc_tagged (mr, NULL, 2 * MiB);
  id = memres_resource_subscribe_segments (mr, on_segment_call, &seen, NULL, &error);
  g_assert_no_error (error);
  /* the two segments there now, told at the subscription: outside any sleep */
  g_assert_cmpuint (seen.calls, ==, 2);
  g_assert_cmpstr (seen.tags[0], ==, "(none)");
  g_assert_cmpint (seen.modes[1], ==, 99);
  backup = policy_new (MEMRES_SLEEP_BACKUP);
  sleep_ok (mr, "sl-call", backup);
  wake_ok (mr, "sl-call");
  g_assert_cmpuint (seen.calls, ==, 4);
  g_assert_cmpstr (seen.tags[2], ==, "sl-call");
  g_assert_cmpint (seen.modes[2], ==, MEMRES_SLEEP_BACKUP);
  g_assert_cmpstr (seen.tags[3], ==, "sl-call");
  g_assert_cmpint (seen.modes[3], ==, MEMRES_SLEEP_BACKUP);
  /* a close outside: no call */
  mt_close_ok (other, NULL);
  g_assert_cmpuint (seen.calls, ==, 5);
  g_assert_cmpstr (seen.tags[4], ==, "(none)");
  g_assert_null (memres_sleep_call_get_tag (NULL));
  g_assert_true (memres_resource_unsubscribe_segments (mr, id, &error));
  mt_close_ok (buf, NULL);
  for (guint i = 0; i < MIN (seen.calls, G_N_ELEMENTS (seen.tags)); i++)
    g_free (seen.tags[i]);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  mt_log_capture_init ();
  g_test_add_func ("/sleep/vmm/addresses-and-handles", test_addresses_and_handles);
  g_test_add_func ("/sleep/vmm/backup", test_backup_round_trip);
  g_test_add_func ("/sleep/vmm/file", test_file_policy);
  g_test_add_func ("/sleep/vmm/file-refusals", test_file_refusals);
  g_test_add_func ("/sleep/refusals", test_refusals);
  g_test_add_func ("/sleep/refusals/exported", test_refuse_exported);
  g_test_add_func ("/sleep/close-asleep", test_close_asleep);
  g_test_add_func ("/sleep/segments", test_segments);
  g_test_add_func ("/sleep/call-tag", test_call_tag);
  g_test_add_func ("/sleep/cache", test_cache);
  g_test_add_data_func ("/sleep/faults/sleep", "vmm:chunk=2MiB", test_faults_sleep);
  g_test_add_data_func ("/sleep/faults/wake", "vmm:chunk=2MiB", test_faults_wake);
  g_test_add_data_func ("/sleep/arena/faults/sleep", "arena", test_faults_sleep);
  g_test_add_data_func ("/sleep/arena/faults/wake", "arena", test_faults_wake);
  /* cache>arena's sweeps (they pass) are left out: with them the ASan run on a loaded machine
   * passes the test's 900 s; cache>vmm's cache-sleep.c is the same code over either upstream */
  g_test_add_func ("/sleep/arena/addresses-and-handles", test_arena_addresses);
  g_test_add_func ("/sleep/arena/shared-granule", test_arena_shared_granule);
  g_test_add_func ("/sleep/arena/close-asleep", test_arena_close_asleep);
  g_test_add_data_func ("/sleep/arena/given-back", "arena", test_arena_given_back);
  g_test_add_data_func ("/sleep/arena/given-back-cache", "cache>arena", test_arena_given_back);
  g_test_add_func ("/sleep/arena/slabs", test_arena_slabs);
  g_test_add_func ("/sleep/arena/stats-asleep", test_arena_stats_asleep);
  g_test_add_data_func ("/sleep/arena/no-open-buffer", "arena", test_no_open_buffer);
  g_test_add_data_func ("/sleep/cache/no-open-buffer",
                        "cache:max_block=4MiB,chunk=2MiB>vmm:chunk=2MiB", test_no_open_buffer);
  g_test_add_data_func ("/sleep/cache-arena/no-open-buffer", "cache>arena", test_no_open_buffer);
  g_test_add_func ("/sleep/arena/segments", test_arena_segments);
  g_test_add_func ("/sleep/arena/refuse-exported", test_arena_refuse_own);
  g_test_add_func ("/sleep/threads/two-tags", test_two_threads);
  g_test_add_func ("/sleep/reentry", test_reentry);
  g_test_add_func ("/sleep/fork", test_fork);
  return g_test_run ();
}

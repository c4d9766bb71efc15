/* test-sleep.c: sleep and wake (memres-sleep.h, docs/sleep.md) on `vmm` and the stacks above it:
 * addresses kept, physical memory given back (the fake's live handles), contents restored by
 * the backup and file policies, the refusals of a sleeping buffer or tag with their codes,
 * closing a sleeping buffer, segment events, two threads sleeping different tags at once, the
 * waits for the buffers' streams (not the device), exit with buffers asleep (and their close
 * after the driver's shutdown), and a wake that finds the memory taken (out of memory, still
 * asleep) and succeeds once it is freed.
 * The arena's: test-sleep-arena.c; every driver call failing: test-sleep-faults.c. Runs against
 * the fake driver (suite fake) and the real one (suite gpu). */
#include <memres/memres.h>

#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil-sleep.h"

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

/* That MEMRES_SLEEP_ERROR_FILE @error gives the system's error @errsv: its reason and its
 * number, "REASON (errno N)". */
static void
assert_errno_in (const GError *error, int errsv)
{
  g_autofree char *want = g_strdup_printf ("%s (errno %d)", g_strerror (errsv), errsv);

  if (strstr (error->message, want) == NULL)
    g_error ("\"%s\" not in: %s", want, error->message);
}

/* file: a round trip in a temporary directory; a missing or truncated file at the wake, and a
 * file that cannot be written at the sleep (each system error by its reason and errno) */
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
  assert_errno_in (error, ENOENT); /* the system's error, by its reason and its number */
  g_clear_error (&error);
  g_assert_false (memres_buffer_is_asleep (a));
  if (g_file_test ("/dev/full", G_FILE_TEST_EXISTS))
    {
      g_assert_true (memres_sleep_policy_set_path (policy, "/dev/full", NULL));
      g_assert_false (memres_resource_sleep (mr, "sl-file", policy, NULL, &error));
      g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE);
      g_assert_nonnull (strstr (error->message, "not a regular file (a device)"));
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
  assert_errno_in (error, ENOENT);
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
  {
    /* the lock another sleep holds: flock()'s EWOULDBLOCK, by its reason and its number */
    g_autofree char *why = g_strdup_printf ("%s, errno %d)", g_strerror (EWOULDBLOCK), EWOULDBLOCK);

    assert_file_refused (mr, "sl-fb", path, why);
  }
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
  {
    g_autofree char *why = g_strdup_printf ("cannot write the sleep file \"%s\": %s (errno %d)",
                                            small, g_strerror (EFBIG), EFBIG);

    assert_file_refused (mr, "sl-fa", small, why);
  }
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
  /* ... and names the whole stack, every layer (it named the top layer alone: "stats") */
  {
    g_autoptr (MemresResource) stack = new_ok ("stats>cache>host");
    g_autofree char *spec = memres_resource_to_string (stack);
    g_autofree char *want = g_strdup_printf ("the stack \"%s\" cannot sleep", spec);

    g_assert_false (memres_resource_sleep (stack, "sl-ref", NULL, NULL, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
    g_assert_true (g_str_has_prefix (spec, "stats>cache:")
                   && g_str_has_suffix (spec, ">host:alignment=256"));
    g_assert_nonnull (strstr (error->message, want));
    g_clear_error (&error);
  }

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

/* A buffer exported over IPC cannot sleep: the sleep fails naming it and nothing sleeps. An
 * import carries no tag: the importer's sleep of the tag in scope at the import leaves it. */
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
  /* the importer's side: a buffer imported under a tag scope carries no tag (docs/tags.md), so a
   * sleep of that tag on the importer leaves it mapped (docs/sleep.md: imports never sleep) */
  {
    g_autoptr (MemresResource) importer = new_ok ("vmm:handle_type=posix_fd");
    MemresBuffer *got;

    g_assert_true (memres_tag_push ("sl-ipc-imported", NULL));
    got = memres_buffer_import_message (importer, g_bytes_get_data (bytes, NULL),
                                        g_bytes_get_size (bytes), fds, n_fds, NULL, &error);
    g_assert_true (memres_tag_pop ("sl-ipc-imported", NULL));
    g_assert_no_error (error);
    g_assert_nonnull (got);
    g_assert_null (memres_buffer_get_tag (got));
    sleep_ok (importer, "sl-ipc-imported", NULL);
    g_assert_false (memres_buffer_is_asleep (got));
    mt_write_pattern (got, 0, 4 * MiB, 33, NULL);
    mt_check_pattern (shared, 0, 4 * MiB, 33, NULL);
    wake_ok (importer, "sl-ipc-imported");
    mt_close_ok (got, NULL);
  }
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

/* A close that fails while its tag sleeps (the core's wait for its stream, before anything is
 * released: memory that is not stream-ordered, `vmm` below) leaves the buffer open and asleep with
 * its saved bytes: the wake maps it again at the same address with its bytes, beside the others'
 * (one closed while asleep, restored for none), and a second sleep and wake of the tag keep them
 * too. @data: the spec. */
static void
test_close_fails_asleep (gconstpointer data)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  g_autoptr (GError) error = NULL;
  const char *tag = "sl-close-fails";
  MemresBuffer *a, *b, *c;
  MemresResource *mr;
  FakeCudaCounts base;
  guint64 addr_a, addr_c;

  if (!mt_require_fake ("fails a driver call of the fake") || !require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok (data);
  policy = policy_new (MEMRES_SLEEP_BACKUP);
  a = alloc_tagged (mr, tag, 2 * MiB);
  b = alloc_tagged (mr, tag, 2 * MiB);
  c = alloc_tagged (mr, tag, 64 * 1024);
  addr_a = memres_buffer_get_address (a);
  addr_c = memres_buffer_get_address (c);
  mt_write_pattern (a, 0, 2 * MiB, 81, NULL);
  mt_write_pattern (b, 0, 2 * MiB, 82, NULL);
  mt_write_pattern (c, 0, 64 * 1024, 83, NULL);
  sleep_ok (mr, tag, policy);
  mt_fake_fail_call ("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_buffer_close (c, NULL, &error));
  mt_fake_reset_faults ();
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_buffer_is_closed (c));
  g_assert_true (memres_buffer_is_asleep (c));
  mt_close_ok (b, NULL); /* closed asleep: nothing restored for it */
  wake_ok (mr, tag);
  g_assert_false (memres_buffer_is_asleep (c));
  g_assert_cmpuint (memres_buffer_get_address (a), ==, addr_a);
  g_assert_cmpuint (memres_buffer_get_address (c), ==, addr_c);
  mt_check_pattern (a, 0, 2 * MiB, 81, NULL);
  mt_check_pattern (c, 0, 64 * 1024, 83, NULL);
  sleep_ok (mr, tag, policy);
  wake_ok (mr, tag);
  mt_check_pattern (a, 0, 2 * MiB, 81, NULL);
  mt_check_pattern (c, 0, 64 * 1024, 83, NULL);
  mt_close_ok (a, NULL);
  mt_close_ok (c, NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* --- through cache ---------------------------------------------------------------------------- */

/* cache>vmm: a request above max_block, a block of its own and a block carved from a chunk (the
 * chunk, all of whose other blocks are free, sleeps whole: test-sleep-chunks.c) sleep; the free
 * cached blocks go back to vmm at the sleep;
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
    g_assert_cmpint (asleep, ==, base.physical_handles); /* the small one's chunk too */
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
  /* discard: its chunk slept whole, its bytes are gone; mapped again at its address, usable */
  mt_write_pattern (small, 0, 4096, 64, NULL);
  mt_check_pattern (small, 0, 4096, 64, NULL);
  mt_close_ok (small, NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
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

/* --- exit ------------------------------------------------------------------------------------- */

/* A process that exits with buffers asleep (backed up, discarded) and its resource alive exits
 * with status 0 and no warning; one that closes a sleeping buffer after the driver's shutdown
 * (a static destructor, Python's garbage collector at exit: every call answers
 * CUDA_ERROR_DEINITIALIZED, the fake plays it) closes it without an error or a warning. */
static void
test_exit_asleep (gconstpointer data)
{
  static const char *const shut_down[]
      = { "cuCtxGetCurrent",  "cuCtxSetCurrent", "cuCtxPushCurrent",    "cuCtxPopCurrent",
          "cuCtxGetDevice",   "cuStreamGetCtx",  "cuStreamSynchronize", "cuMemRelease",
          "cuMemAddressFree", "cuMemUnmap",      "cuMemFreeAsync",      "cuMemFreeHost" };

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("plays the driver's shutdown: the fake");
      return;
    }
  if (g_test_subprocess ())
    {
      g_autoptr (MemresSleepPolicy) policy = policy_new (MEMRES_SLEEP_BACKUP);
      g_autoptr (GError) error = NULL;
      MemresResource *mr = new_ok (data);
      MemresBuffer *w = alloc_tagged (mr, "sl-exit-w", 4 * MiB);
      MemresBuffer *kv = alloc_tagged (mr, "sl-exit-kv", 6 * MiB);
      MemresBuffer *closed_late = alloc_tagged (mr, "sl-exit-kv", 2 * MiB);

      mt_fill_byte_ok (w, 0x3c, NULL);
      sleep_ok (mr, "sl-exit-w", policy);
      sleep_ok (mr, "sl-exit-kv", NULL);
      g_assert_true (memres_buffer_is_asleep (kv));
      if (g_str_equal (g_getenv ("SLEEP_EXIT_CASE"), "shutdown"))
        {
          long failed = mt_fake_failed_call_count ();

          for (guint i = 0; i < G_N_ELEMENTS (shut_down); i++)
            for (int nth = 1; nth <= 4; nth++)
              mt_fake_fail_call (shut_down[i], nth, CUDA_ERROR_DEINITIALIZED);
          g_assert_true (memres_buffer_close (closed_late, NULL, &error));
          g_assert_no_error (error);
          g_assert_true (memres_buffer_close (w, NULL, &error));
          g_assert_no_error (error);
          g_assert_true (memres_buffer_is_closed (w));
          g_assert_cmpint (mt_fake_failed_call_count (), >, failed); /* the shutdown was met */
        }
      exit (0);
    }
  g_setenv ("SLEEP_EXIT_CASE", "exit", TRUE);
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDOUT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr_unmatched ("*CRITICAL*");
  g_test_trap_assert_stderr_unmatched ("*WARNING*");
  g_setenv ("SLEEP_EXIT_CASE", "shutdown", TRUE);
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDOUT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr_unmatched ("*CRITICAL*");
  g_test_trap_assert_stderr_unmatched ("*WARNING*");
  g_unsetenv ("SLEEP_EXIT_CASE");
}

/* --- the buffers' streams --------------------------------------------------------------------- */

typedef struct
{
  MemresResource *mr;
  MemresSleepPolicy *policy;
  gint done;
  gboolean ok;
  GError *error;
} SleepThread;

static gpointer
sleep_thread (gpointer data)
{
  SleepThread *t = data;

  t->ok = memres_resource_sleep (t->mr, "sl-streams", t->policy, NULL, &t->error);
  g_atomic_int_set (&t->done, 1);
  return NULL;
}

static MemresBuffer *
alloc_tagged_on (MemresResource *mr, gsize size, CUstream stream)
{
  MemresBuffer *buf;

  g_assert_true (memres_tag_push ("sl-streams", NULL));
  buf = mt_alloc_ok (mr, size, (MemresStream) stream);
  g_assert_true (memres_tag_pop ("sl-streams", NULL));
  return buf;
}

/* A sleep waits for the work queued on each buffer's stream, not for the whole device: buffers of
 * one tag on two streams, a fill queued on each (one behind a hold of its stream); the sleep waits
 * in cuStreamSynchronize until the hold is released, having released nothing yet, and makes no
 * cuCtxSynchronize; the backup then holds both fills, as the wake shows. */
static void
test_streams (gconstpointer data)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  SleepThread t = { 0 };
  MemresResource *mr;
  MemresBuffer *a, *b;
  MtStreamHold *hold;
  CUstream s1, s2;
  long syncs, ctx_syncs, unmaps;
  GThread *thread;
  int handles;

  if (!mt_require_fake ("counts the fake driver's stream waits"))
    return;
  if (!mt_hazard_begin ())
    return;
  s1 = mt_stream_new_on (0);
  s2 = mt_stream_new_on (0);
  mr = new_ok (data);
  policy = policy_new (MEMRES_SLEEP_BACKUP);
  a = alloc_tagged_on (mr, 4 * MiB, s1);
  b = alloc_tagged_on (mr, 2 * MiB, s2);
  mt_fill_byte_ok (a, 0x11, (MemresStream) s1);
  mt_fill_byte_ok (b, 0x22, (MemresStream) s2);
  mt_sync_ok ((MemresStream) s1);
  mt_sync_ok ((MemresStream) s2);

  hold = mt_stream_hold ((MemresStream) s1);
  mt_fill_byte_ok (a, 0x5a, (MemresStream) s1); /* runs once the hold is released */
  mt_fill_byte_ok (b, 0x6b, (MemresStream) s2);
  handles = live_handles ();
  syncs = mt_fake_call_count ("cuStreamSynchronize");
  ctx_syncs = mt_fake_call_count ("cuCtxSynchronize");
  unmaps = mt_fake_call_count ("cuMemUnmap");
  t.mr = mr;
  t.policy = policy;
  thread = g_thread_new ("sleeper", sleep_thread, &t);
  /* the sleep is in its stream waits: nothing released, nothing saved yet */
  while (mt_fake_call_count ("cuStreamSynchronize") == syncs && !g_atomic_int_get (&t.done))
    g_usleep (1000);
  g_assert_cmpint (g_atomic_int_get (&t.done), ==, 0); /* it waits for the held stream */
  g_assert_true (mt_stream_is_held (hold));
  g_assert_true (memres_buffer_is_asleep (a)); /* "being put to sleep" counts as asleep */
  g_assert_cmpint (live_handles (), ==, handles);
  g_assert_cmpint (mt_fake_call_count ("cuMemUnmap"), ==, unmaps);
  mt_stream_release (hold);
  g_thread_join (thread);
  g_assert_no_error (t.error);
  g_assert_true (t.ok);
  g_assert_true (memres_buffer_is_asleep (a));
  g_assert_true (memres_buffer_is_asleep (b));
  g_assert_cmpint (mt_fake_call_count ("cuCtxSynchronize"), ==, ctx_syncs); /* not the device */
  g_assert_cmpint (mt_fake_call_count ("cuStreamSynchronize") - syncs, >=, 2);
  g_assert_cmpint (live_handles (), <, handles);

  wake_ok (mr, "sl-streams");
  mt_assert_bytes (a, 0x5a, (MemresStream) s1);
  mt_assert_bytes (b, 0x6b, (MemresStream) s2);
  mt_close_ok (a, (MemresStream) s1);
  mt_close_ok (b, (MemresStream) s2);
  memres_resource_unref (mr);
  mt_sync_ok ((MemresStream) s1);
  mt_sync_ok ((MemresStream) s2);
  g_assert_cmpint (mt_driver ()->cuStreamDestroy (s1), ==, CUDA_SUCCESS);
  g_assert_cmpint (mt_driver ()->cuStreamDestroy (s2), ==, CUDA_SUCCESS);
  mt_hazard_end ();
}

/* --- the memory given back, taken, and wanted again ------------------------------------------- */

/* vLLM's sleep mode: while the tag sleeps another allocation takes the memory it gave back; the
 * wake then finds the device full and fails (out of memory, naming cuMemCreate) with the tag
 * asleep as it was (no handle more, the buffers still asleep, their addresses kept); once that
 * allocation is freed the same wake succeeds, at the same addresses, with the backup's bytes. */
static void
test_wake_out_of_memory (gconstpointer data)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  g_autoptr (GError) error = NULL;
  MemresResource *mr, *other;
  MemresBuffer *bufs[2], *hog;
  static const gsize sizes[2] = { 6 * MiB, 16 * MiB };
  guint64 addrs[2], free_asleep;
  gsize g;
  int handles;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fills the device's memory: the fake's");
      return;
    }
  g = mt_device_granularity ();
  mr = new_ok (data);
  policy = policy_new (MEMRES_SLEEP_BACKUP);
  for (int i = 0; i < 2; i++)
    {
      bufs[i] = alloc_tagged (mr, "sl-oom", sizes[i]);
      addrs[i] = memres_buffer_get_address (bufs[i]);
      mt_write_pattern (bufs[i], 0, sizes[i], 90 + i, NULL);
    }
  sleep_ok (mr, "sl-oom", policy);
  free_asleep = device_free_bytes ();
  g_assert_cmpuint (free_asleep, >=, sizes[0] + sizes[1]);

  /* another resource takes every free granule */
  other = new_ok ("vmm");
  hog = mt_alloc_ok (other, free_asleep / g * g, NULL);
  g_assert_cmpuint (device_free_bytes (), <, g);
  handles = live_handles ();
  g_assert_false (memres_resource_wake (mr, "sl-oom", NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, "cuMemCreate"));
  g_assert_nonnull (strstr (error->message, "sl-oom"));
  g_test_message ("%s: %s", (const char *) data, error->message);
  g_clear_error (&error);
  g_assert_true (memres_resource_is_asleep (mr, "sl-oom"));
  g_assert_cmpint (live_handles (), ==, handles); /* none of the wake's kept */
  g_assert_cmpuint (device_free_bytes (), <, g);
  for (int i = 0; i < 2; i++)
    {
      g_assert_true (memres_buffer_is_asleep (bufs[i]));
      g_assert_cmphex (memres_buffer_get_address (bufs[i]), ==, addrs[i]);
    }
  /* still asleep: refused as before the failed wake */
  g_assert_false (memres_buffer_fill (bufs[0], 0, 1, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP);
  g_clear_error (&error);

  mt_close_ok (hog, NULL);
  memres_resource_unref (other);
  wake_ok (mr, "sl-oom");
  for (int i = 0; i < 2; i++)
    {
      g_assert_false (memres_buffer_is_asleep (bufs[i]));
      g_assert_cmphex (memres_buffer_get_address (bufs[i]), ==, addrs[i]);
      mt_check_pattern (bufs[i], 0, sizes[i], 90 + i, NULL);
      mt_close_ok (bufs[i], NULL);
    }
  memres_resource_unref (mr);
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
  g_test_add_data_func ("/sleep/close-fails-asleep/vmm", "vmm", test_close_fails_asleep);
  g_test_add_data_func ("/sleep/close-fails-asleep/cache-vmm", "cache>vmm",
                        test_close_fails_asleep);
  g_test_add_func ("/sleep/segments", test_segments);
  g_test_add_func ("/sleep/call-tag", test_call_tag);
  g_test_add_func ("/sleep/cache", test_cache);
  g_test_add_data_func ("/sleep/cache/no-open-buffer",
                        "cache:max_block=4MiB,chunk=2MiB>vmm:chunk=2MiB", test_no_open_buffer);
  g_test_add_func ("/sleep/threads/two-tags", test_two_threads);
  g_test_add_func ("/sleep/reentry", test_reentry);
  g_test_add_func ("/sleep/fork", test_fork);
  g_test_add_data_func ("/sleep/exit-asleep/vmm", "vmm", test_exit_asleep);
  g_test_add_data_func ("/sleep/exit-asleep/arena", "arena", test_exit_asleep);
  g_test_add_data_func ("/sleep/exit-asleep/cache-arena", "cache>arena", test_exit_asleep);
  g_test_add_data_func ("/sleep/streams/vmm", "vmm", test_streams);
  g_test_add_data_func ("/sleep/streams/arena", "arena", test_streams);
  g_test_add_data_func ("/sleep/wake-out-of-memory/vmm", "vmm", test_wake_out_of_memory);
  g_test_add_data_func ("/sleep/wake-out-of-memory/arena", "arena", test_wake_out_of_memory);
  g_test_add_data_func ("/sleep/wake-out-of-memory/cache-arena", "cache>arena",
                        test_wake_out_of_memory);
  return g_test_run ();
}

/* memres - CUDA memory resources
 * module-file.c: what a file about to be dlopen()ed is. dlopen() of a FIFO blocks in open()
 * forever, and its errors for a directory, a symbolic link loop or a dangling link do not say
 * what the file is: the loader and the driver loader look first, without blocking. */
#include "memres-private.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *
file_type_name (mode_t mode)
{
  if (S_ISDIR (mode))
    return "a directory";
  if (S_ISFIFO (mode))
    return "a FIFO";
  if (S_ISSOCK (mode))
    return "a socket";
  if (S_ISCHR (mode))
    return "a character device";
  if (S_ISBLK (mode))
    return "a block device";
  return "not a regular file";
}

/* NULL when @path is a regular file this process can read (or nothing at all: dlopen() then
 * reports the missing file); otherwise, in a new string, what it
 * is instead ("a FIFO", "a directory", "a dangling symbolic link", "a symbolic link loop",
 * "unreadable (Permission denied)", ...). Never blocks: the file is opened with O_NONBLOCK and
 * looked at with fstat(). */
char *
_memres_module_file_problem (const char *path)
{
  struct stat st;
  int fd = open (path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  int saved = errno;

  if (fd >= 0)
    {
      gboolean ok = fstat (fd, &st) == 0;

      saved = errno;
      close (fd);
      if (ok)
        return S_ISREG (st.st_mode) ? NULL : g_strdup (file_type_name (st.st_mode));
    }
  else if (saved == ELOOP)
    return g_strdup ("a symbolic link loop");
  else if (saved == ENOENT) /* nothing there: dlopen() says so in its own words */
    return lstat (path, &st) == 0 && S_ISLNK (st.st_mode) ? g_strdup ("a dangling symbolic link")
                                                          : NULL;
  else if (saved == ENXIO) /* a socket, or a FIFO opened for writing */
    return g_strdup ("not a regular file");
  return g_strdup_printf ("unreadable (%s)", g_strerror (saved));
}

/* Reads @size bytes at @offset of @fd, all of them. */
static gboolean
read_at (int fd, gpointer buf, gsize size, guint64 offset)
{
  gsize done = 0;

  while (done < size)
    {
      ssize_t n = pread (fd, (guint8 *) buf + done, size - done, (off_t) (offset + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      done += (gsize) n;
    }
  return TRUE;
}

/* The #MemresPluginNote in the @size bytes at @data (a note section), if one is there. */
static gboolean
find_note (const guint8 *data, gsize size, MemresPluginNote *note)
{
  gsize at = 0;

  while (size - at >= 12)
    {
      Elf64_Nhdr nh;
      gsize name_room, desc_room;

      memcpy (&nh, data + at, sizeof nh);
      name_room = ((gsize) nh.n_namesz + 3) & ~(gsize) 3;
      desc_room = ((gsize) nh.n_descsz + 3) & ~(gsize) 3;
      if (name_room > size - at - 12 || desc_room > size - at - 12 - name_room)
        return FALSE;
      if (nh.n_type == MEMRES_PLUGIN_NOTE_TYPE && nh.n_namesz == 7
          && memcmp (data + at + 12, "memres", 7) == 0
          && nh.n_descsz == sizeof *note - offsetof (MemresPluginNote, abi_major))
        {
          memcpy (note, data + at, sizeof *note);
          note->name[sizeof note->name - 1] = '\0';
          return TRUE;
        }
      at += 12 + name_room + desc_room;
    }
  return FALSE;
}

/* Fills @note from the `.note.memres` section of the ELF file @path and returns TRUE; FALSE
 * when the file is not a 64-bit ELF object of this machine's byte order or has no such note
 * (dlopen() then says what is wrong with it, or the descriptor is checked after opening).
 * Plain reads: nothing of the file runs. */
gboolean
_memres_module_file_read_note (const char *path, MemresPluginNote *note)
{
  static const char section_name[] = ".note.memres";
  g_autofree Elf64_Shdr *sections = NULL;
  g_autofree char *names = NULL;
  gboolean found = FALSE;
  Elf64_Ehdr eh;
  const Elf64_Shdr *strtab;
  int fd = open (path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

  if (fd < 0)
    return FALSE;
  if (!read_at (fd, &eh, sizeof eh, 0) || memcmp (eh.e_ident, ELFMAG, SELFMAG) != 0
      || eh.e_ident[EI_CLASS] != ELFCLASS64
      || eh.e_ident[EI_DATA] != (G_BYTE_ORDER == G_LITTLE_ENDIAN ? ELFDATA2LSB : ELFDATA2MSB)
      || eh.e_shentsize != sizeof (Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096
      || eh.e_shstrndx >= eh.e_shnum)
    goto out;
  sections = g_new (Elf64_Shdr, eh.e_shnum);
  if (!read_at (fd, sections, sizeof (Elf64_Shdr) * eh.e_shnum, eh.e_shoff))
    goto out;
  strtab = &sections[eh.e_shstrndx];
  if (strtab->sh_size == 0 || strtab->sh_size > 1024 * 1024)
    goto out;
  names = g_malloc (strtab->sh_size);
  if (!read_at (fd, names, strtab->sh_size, strtab->sh_offset))
    goto out;
  for (guint i = 0; i < eh.e_shnum && !found; i++)
    {
      const Elf64_Shdr *sh = &sections[i];
      g_autofree guint8 *data = NULL;

      if (sh->sh_name >= strtab->sh_size || strtab->sh_size - sh->sh_name < sizeof section_name
          || memcmp (names + sh->sh_name, section_name, sizeof section_name) != 0
          || sh->sh_type == SHT_NOBITS || sh->sh_size < sizeof *note || sh->sh_size > 4096)
        continue;
      data = g_malloc (sh->sh_size);
      if (read_at (fd, data, sh->sh_size, sh->sh_offset))
        found = find_note (data, sh->sh_size, note);
    }
out:
  close (fd);
  return found;
}

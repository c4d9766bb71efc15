/* memres tests: runs a test program where membarrier() fails with ENOSYS (a seccomp filter, kept
 * across exec), as on kernels before 4.14 and in sandboxes that filter it. The core's buffer
 * stripes, the stats adaptor and the cache's fronts then take their fallbacks (locked
 * instructions, or the slow paths under their locks): the same tests must pass there.
 * Usage: no-membarrier PROGRAM [ARGS...]. Exits 77 (skip) where no filter can be installed. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define FILTER_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define FILTER_ARCH AUDIT_ARCH_AARCH64
#endif

int
main (int argc, char **argv)
{
#if defined(FILTER_ARCH) && defined(__NR_membarrier)
  struct sock_filter filter[] = {
    /* another architecture's system call numbers: let it through */
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, arch)),
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, FILTER_ARCH, 0, 3),
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, nr)),
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = { .len = sizeof filter / sizeof filter[0], .filter = filter };

  if (argc < 2)
    {
      fprintf (stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
      return 2;
    }
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
      || prctl (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    {
      printf ("1..0 # SKIP no seccomp filter: %s\n", strerror (errno));
      return 77;
    }
  if (syscall (__NR_membarrier, 0, 0, 0) != -1 || errno != ENOSYS)
    {
      fprintf (stderr, "%s: the filter left membarrier() working\n", argv[0]);
      return 1;
    }
  execv (argv[1], argv + 1);
  fprintf (stderr, "%s: cannot run %s: %s\n", argv[0], argv[1], strerror (errno));
  return 1;
#else
  printf ("1..0 # SKIP no seccomp filter for this architecture\n");
  return 77;
#endif
}

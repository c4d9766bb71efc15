#!/bin/sh
# check-uninstalled-pc.sh CC UNINSTALLED_DIR LIBDIR README: what `meson devenv` users get from
# the build tree's memres-2-uninstalled.pc (PKG_CONFIG_PATH=UNINSTALLED_DIR), as a TAP stream
# (Meson test `uninstalled-pc`, suite build): a program including <memres/memres.h> compiles and
# links with its Cflags and Libs and runs against LIBDIR's libmemres, plugindir is not empty, and
# the program of README's "Writing an application" (its first ```c block) compiles, links and
# runs the same way (without a driver: its default resource is host memory).
set -u

cc=$1
PKG_CONFIG_PATH=$2${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
libdir=$3
readme=$4
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

echo "1..3"
cat > "$tmp/app.c" <<'C'
#include <memres/memres.h>
int
main (void)
{
  GError *error = NULL;
  MemresResource *mr = memres_resource_new ("host", &error);
  MemresBuffer *buf = mr != NULL ? memres_resource_allocate (mr, 4096, NULL, &error) : NULL;
  int ok = buf != NULL && memres_buffer_get_size (buf) == 4096;

  g_clear_pointer (&buf, memres_buffer_unref);
  g_clear_pointer (&mr, memres_resource_unref);
  g_clear_error (&error);
  return ok ? 0 : 1;
}
C
# shellcheck disable=SC2046 # the flags are words
if "$cc" "$tmp/app.c" -o "$tmp/app" $(pkg-config --cflags --libs memres-2) 2> "$tmp/err" \
   && LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/app"; then
  echo "ok 1 a program compiles, links and runs with pkg-config memres-2 from the build tree"
else
  sed 's/^/# /' "$tmp/err"
  echo "not ok 1 a program compiles, links and runs with pkg-config memres-2 from the build tree"
fi
dir=$(pkg-config --variable=plugindir memres-2)
if [ -n "$dir" ]; then
  echo "ok 2 plugindir is $dir"
else
  echo "not ok 2 plugindir is empty"
fi
awk '/^## Writing an application/ { on = 1; next }
     on && /^```c$/ { code = 1; next }
     code && /^```$/ { exit }
     code { print }' "$readme" > "$tmp/readme-app.c"
# shellcheck disable=SC2046 # the flags are words
if [ -s "$tmp/readme-app.c" ] \
   && "$cc" -Wall -Werror "$tmp/readme-app.c" -o "$tmp/readme-app" $(pkg-config --cflags --libs memres-2) \
     2> "$tmp/err" \
   && MEMRES_CUDA_DRIVER=/nonexistent/libcuda.so.1 \
     LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/readme-app" 2>> "$tmp/err"; then
  echo "ok 3 README's application compiles, links and runs ($(wc -l < "$tmp/readme-app.c") lines)"
else
  [ -s "$tmp/readme-app.c" ] || echo "# no \`\`\`c block after \"## Writing an application\" in $readme"
  sed 's/^/# /' "$tmp/err"
  echo "not ok 3 README's application compiles, links and runs"
fi

# tap.sh: TAP helpers of the test scripts (sourced: . "$here/tap.sh"). ok and not_ok print a
# numbered result; $n counts the results, $failed the failures (for the plan line, "1..$n").
n=0
failed=0

ok() {
  n=$((n + 1))
  echo "ok $n $1"
}

# not_ok DESCRIPTION [DIAGNOSTIC...]
not_ok() {
  n=$((n + 1))
  failed=$((failed + 1))
  echo "not ok $n $1"
  shift
  for line in "$@"; do
    echo "# $line"
  done
}

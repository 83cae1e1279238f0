# Fetching a Debian source package and installing its build dependencies
# without editing /etc/apt: a private sources list (the system's archive with
# deb-src added) and private apt lists live under a cache directory.
# Sourced by examples/demo.sh and bench/run-trace (bash, set -euo pipefail).
#
#   debsrc_init CACHE          private apt configuration under CACHE/apt
#   debsrc_fetch CACHE SOURCE  prints the unpacked source tree CACHE/src/SOURCE-*,
#                              running `apt-get source` first if it is not there
#   debsrc_build_deps SRC_DIR  installs SRC_DIR's Build-Depends if missing
#                              (as root; otherwise names them and fails)
#   debsrc_install PKG...      installs the named binary packages if missing
#                              (as root; otherwise names them and fails)
#
# Errors go to stderr prefixed with $DEBSRC_PROG (default "kiln") and exit 1.

debsrc_apt_opts=()

debsrc_die() { printf '%s: %s\n' "${DEBSRC_PROG:-kiln}" "$*" >&2; exit 1; }
debsrc_say() { printf '\n== %s\n' "$*" >&2; }

debsrc_init() {
  local cache=$1 sources codename
  mkdir -p "$cache/apt/lists/partial" "$cache/apt/cache/archives/partial" \
           "$cache/apt/sources" "$cache/src"
  sources=$cache/apt/sources/kiln-debsrc.sources
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    # The system's archive entries, each also for source packages.
    sed -E 's/^Types:.*/Types: deb deb-src/' /etc/apt/sources.list.d/debian.sources > "$sources"
  else
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
    printf 'Types: deb deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$codename" > "$sources"
  fi
  # A sources file of an earlier layout would list the archive twice.
  rm -f "$cache/apt/sources/kiln-demo.sources"
  debsrc_apt_opts=(
    -o "Dir::Etc::SourceList=/dev/null"
    -o "Dir::Etc::SourceParts=$cache/apt/sources"
    -o "Dir::State::Lists=$cache/apt/lists"
    -o "Dir::Cache=$cache/apt/cache"
    -o "APT::Sandbox::User=root"
  )
}

debsrc_find() {
  find "$1/src" -mindepth 1 -maxdepth 1 -type d -name "$2-*" 2>/dev/null | sort | head -n1 || true
}

debsrc_fetch() {
  local cache=$1 source=$2 src_dir codename
  src_dir=$(debsrc_find "$cache" "$source")
  if [ -z "$src_dir" ] || [ ! -f "$src_dir/debian/control" ]; then
    debsrc_say "fetching the Debian source package '$source' (apt-get source, private lists in $cache/apt)"
    apt-get "${debsrc_apt_opts[@]}" -qq update >&2 || debsrc_die "apt-get update failed (network, or $cache/apt/sources)"
    # The newest version may come from an archive whose mirror serves no
    # sources (debian-security here): then the release suite's version.
    if ! (cd "$cache/src" && apt-get "${debsrc_apt_opts[@]}" -qq source "$source" >&2); then
      codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
      debsrc_say "apt-get source $source failed; trying $source/$codename (the release's version)"
      (cd "$cache/src" && apt-get "${debsrc_apt_opts[@]}" -qq source "$source/$codename" >&2) \
        || debsrc_die "apt-get source $source failed"
    fi
    src_dir=$(debsrc_find "$cache" "$source")
  fi
  [ -n "$src_dir" ] && [ -f "$src_dir/debian/control" ] \
    || debsrc_die "no unpacked source of $source under $cache/src"
  printf '%s\n' "$src_dir"
}

debsrc_build_deps() {
  local src_dir=$1
  (cd "$src_dir" && dpkg-checkbuilddeps >/dev/null 2>&1) && return 0
  if [ "$(id -u)" -eq 0 ]; then
    debsrc_say "installing the build dependencies of $src_dir"
    apt-get "${debsrc_apt_opts[@]}" -qq update >&2
    DEBIAN_FRONTEND=noninteractive apt-get "${debsrc_apt_opts[@]}" -y -qq --no-install-recommends \
      build-dep "$src_dir" >&2 || debsrc_die "cannot install the build dependencies of $src_dir"
  else
    (cd "$src_dir" && dpkg-checkbuilddeps) || true
    debsrc_die "install the build dependencies above (as root: apt-get build-dep $src_dir)"
  fi
}

debsrc_install() {
  local p st missing=()
  for p in "$@"; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = installed ] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || debsrc_die "missing Debian packages: ${missing[*]} (as root: apt-get install ${missing[*]})"
  debsrc_say "installing ${missing[*]}"
  apt-get "${debsrc_apt_opts[@]}" -qq update >&2
  DEBIAN_FRONTEND=noninteractive apt-get "${debsrc_apt_opts[@]}" -y -qq --no-install-recommends \
    install "${missing[@]}" >&2 || debsrc_die "cannot install ${missing[*]}"
}

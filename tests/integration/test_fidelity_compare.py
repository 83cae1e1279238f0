"""The comparison of `make check-fidelity` (tests/fidelity/compare.py):
cache variables out of a config.log, config.h lines, and what counts as a
difference. The slow suite itself needs a chroot; its arithmetic is tested
here."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fidelity"))
import compare  # noqa: E402

LOG = """\
configure:123: checking for gcc
## ---------------- ##
## Cache variables. ##
## ---------------- ##

ac_cv_build=x86_64-pc-linux-gnu
ac_cv_env_CFLAGS_value='-g -O2'
gl_cv_locale_fr=none
ac_cv_multi='one
two'

## ----------------- ##
## Output variables. ##
## ----------------- ##

CC='gcc'
"""


def test_cache_variables_are_the_section_and_only_it():
    v = compare.cache_vars(LOG)
    assert v == {"ac_cv_build": "x86_64-pc-linux-gnu", "ac_cv_env_CFLAGS_value": "'-g -O2'",
                 "gl_cv_locale_fr": "none", "ac_cv_multi": "'one\ntwo'"}


def test_differences_count_variables_lines_and_files():
    ref = {"config.log": LOG, "config.h": "#define A 1\n/* #undef B */\n\n#define C 3\n"}
    got = {"config.log": LOG.replace("gl_cv_locale_fr=none", "gl_cv_locale_fr=fr_FR")
           .replace("ac_cv_build=x86_64-pc-linux-gnu\n", ""),
           "config.h": "#define A 1\n#define B 1\n#define C 3\n", "sub/config.h": ""}
    d = compare.differences(ref, got)
    assert compare.counts(d) == (2, 2, 1)
    assert ("config.log", "var", ("gl_cv_locale_fr", "none", "fr_FR")) in d
    assert ("config.log", "var", ("ac_cv_build", "x86_64-pc-linux-gnu", None)) in d
    assert ("config.h", "h", ("reference", "/* #undef B */")) in d
    assert ("config.h", "h", ("traced", "#define B 1")) in d
    assert compare.differences(ref, ref) == []

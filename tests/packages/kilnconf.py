"""kilnconf: a minimal `dh $@` package written for these tests, whose
configure step changes its result with an installed package: with zlib's
headers and library it builds against zlib, without them it builds fine
without. Its Build-Depends are debhelper-compat (= 13) and zlib1g-dev."""
import os

CONTROL = """Source: kilnconf
Section: misc
Priority: optional
Maintainer: kiln tests <kiln@example.invalid>
Build-Depends: debhelper-compat (= 13), zlib1g-dev
Standards-Version: 4.6.2
Rules-Requires-Root: no

Package: kilnconf
Architecture: any
Depends: ${shlibs:Depends}, ${misc:Depends}
Description: kiln test package with an optional dependency
 Built by kiln's package tests: uses zlib if configure finds it.
"""

CHANGELOG = """kilnconf (1.0-1) unstable; urgency=medium

  * Test build.

 -- kiln tests <kiln@example.invalid>  Tue, 01 Dec 2026 06:00:00 +0000
"""

RULES = "#!/usr/bin/make -f\n%:\n\tdh $@\n"

# A configure script as autoconf's AC_CHECK_LIB would behave: compile and
# link a program against zlib; record the result.
CONFIGURE = r"""#!/bin/sh
cc=${CC:-cc}
printf '#include <zlib.h>\nint main(void) { return zlibVersion() == 0; }\n' > conftest.c
if $cc $CPPFLAGS $CFLAGS conftest.c -o conftest $LDFLAGS -lz > conftest.log 2>&1; then
  echo "checking for zlib... yes"
  echo "#define HAVE_ZLIB 1" > config.h
  echo "LIBS = -lz" > config.mk
else
  echo "checking for zlib... no"
  echo "/* #undef HAVE_ZLIB */" > config.h
  echo "LIBS =" > config.mk
fi
rm -f conftest conftest.c
"""

MAKEFILE = """-include config.mk
kilnconf: kilnconf.c config.h
\t$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ kilnconf.c $(LIBS)
install: kilnconf
\tinstall -D -m 0755 kilnconf $(DESTDIR)/usr/bin/kilnconf
clean:
\trm -f kilnconf config.h config.mk conftest*
"""

SOURCE = r"""#include <stdio.h>
#include "config.h"
#ifdef HAVE_ZLIB
#include <zlib.h>
#endif
int main(void)
{
#ifdef HAVE_ZLIB
	printf("kilnconf with zlib %s\n", zlibVersion());
#else
	puts("kilnconf without zlib");
#endif
	return 0;
}
"""


def write_tree(parent):
    """Writes kilnconf-1.0/ under parent; returns its path."""
    src = os.path.join(parent, "kilnconf-1.0")
    os.makedirs(os.path.join(src, "debian", "source"))
    files = {"debian/control": CONTROL, "debian/changelog": CHANGELOG, "debian/rules": RULES,
             "debian/source/format": "3.0 (native)\n", "debian/copyright": "Public domain.\n",
             "configure": CONFIGURE, "Makefile": MAKEFILE, "kilnconf.c": SOURCE}
    for name, text in files.items():
        with open(os.path.join(src, name), "w") as f:
            f.write(text)
    for name in ("debian/rules", "configure"):
        os.chmod(os.path.join(src, name), 0o755)
    return src

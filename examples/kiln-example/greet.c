/* kiln's example program: a greeting, compressed when zlib was found. */
#include <stdio.h>
#include <string.h>
#ifdef HAVE_ZLIB
#include <zlib.h>
#endif

struct greeting {
	const char *text;
	unsigned long length;
	unsigned compressed : 1;
	unsigned char level;
};

int main(void)
{
	struct greeting g = { "Hello from kiln's example package", 0, 0, 0 };
	g.length = strlen(g.text);
#ifdef HAVE_ZLIB
	unsigned char buf[128];
	uLongf n = sizeof buf;
	if (compress2(buf, &n, (const Bytef *)g.text, g.length, 9) == Z_OK) {
		g.compressed = 1;
		g.level = 9;
		g.length = n;
	}
#endif
	printf("%s (%lu bytes%s)\n", g.text, g.length, g.compressed ? ", compressed" : "");
	return 0;
}
